// Checking a composed recipe (validate): ranges, enumerations, and the rules
// between keys. Reading it is config/recipe.cpp; the key tables both use are
// config/recipe_fields.hpp.
#include "config/recipe.hpp"

#include "config/recipe_fields.hpp"
#include "registry/ip_network.hpp"
#include "registry/url.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace troupe::config {

using namespace detail;

std::pair<std::string, std::uint16_t> split_listen(const std::string& listen, const std::string& key) {
  auto bad = [&](const std::string& why) -> recipe_error {
    return recipe_error(key, why + " (got " + quote(listen) + ")");
  };
  std::string host;
  std::string port;
  if (!listen.empty() && listen.front() == '[') {
    auto close = listen.find(']');
    if (close == std::string::npos) throw bad("expected [IPV6]:PORT, the ']' is missing");
    host = listen.substr(1, close - 1);
    if (close + 1 >= listen.size() || listen[close + 1] != ':') throw bad("expected [IPV6]:PORT");
    port = listen.substr(close + 2);
  } else {
    auto colon = listen.rfind(':');
    if (colon == std::string::npos) throw bad("expected HOST:PORT");
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.find(':') != std::string::npos) throw bad("an IPv6 address needs brackets: [ADDRESS]:PORT");
  }
  if (host.empty()) throw bad("the host is empty");
  for (char c : host)
    if (static_cast<unsigned char>(c) <= ' ' || c == '[' || c == ']' || c == '/')
      throw bad("the host is not a host name or address");
  if (port.empty()) throw bad("the port is missing");
  unsigned value = 0;
  auto res = std::from_chars(port.data(), port.data() + port.size(), value);
  if (res.ec != std::errc() || res.ptr != port.data() + port.size() || port.size() > 5 || value > 65535)
    throw bad("the port must be a number from 0 to 65535");
  return {host, static_cast<std::uint16_t>(value)};
}

namespace {

bool loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// [cluster]: addresses parse, the failure timeout leaves room for heartbeats,
// TLS is all or nothing, and a cluster reachable from other hosts is never
// plaintext unless the operator says so (docs/CLUSTER.md "Security").
void check_cluster(const cluster_settings& c) {
  if (!c.enabled()) {
    if (!c.join.empty()) throw recipe_error("cluster.join", "needs cluster.listen (this node's own cluster address)");
    return;
  }
  auto [host, port] = split_listen(c.listen, "cluster.listen");
  (void)port;
  if (!c.join.empty()) split_listen(c.join, "cluster.join");
  if (c.failure_timeout_ms < 2 * c.heartbeat_interval_ms)
    throw recipe_error("cluster.failure_timeout_ms", "must be at least twice cluster.heartbeat_interval_ms (got "
                                                       + std::to_string(c.failure_timeout_ms) + " and "
                                                       + std::to_string(c.heartbeat_interval_ms) + ")");
  int tls_parts = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_ca.empty();
  if (tls_parts != 0 && tls_parts != 3)
    throw recipe_error(c.tls_cert.empty() ? "cluster.tls_cert" : c.tls_key.empty() ? "cluster.tls_key" : "cluster.tls_ca",
                       "node-to-node TLS needs all of cluster.tls_cert, tls_key and tls_ca");
  if (tls_parts == 0 && !c.allow_plaintext && !loopback_host(host))
    throw recipe_error("cluster.listen", "a cluster on a non-loopback address (" + host
                                           + ") needs TLS (cluster.tls_cert, tls_key, tls_ca) or cluster.allow_plaintext = true");
}

// The keys of one group that bound each other.
void check_group_policies(const group_settings& g, const std::string& prefix) {
  if (g.worker_max_number > 0 && g.worker_max_number < g.workers)
    throw recipe_error(prefix + ".worker_max_number", "must be at least workers (" + std::to_string(g.workers) +
                                                          "; got " + std::to_string(g.worker_max_number) + ")");
  if (g.cpu_admission_close_percent > 0) {
    if (!(g.cpu_admission_reopen_percent > 0 && g.cpu_admission_reopen_percent < g.cpu_admission_close_percent))
      throw recipe_error(prefix + ".cpu_admission_reopen_percent",
                         "must be greater than 0 and less than cpu_admission_close_percent (" +
                           number(g.cpu_admission_close_percent) + "; got " + number(g.cpu_admission_reopen_percent) + ")");
    if (g.cpu_offload_percent > 0 && !(g.cpu_offload_percent > g.cpu_admission_close_percent))
      throw recipe_error(prefix + ".cpu_offload_percent", "must be greater than cpu_admission_close_percent (" +
                                                            number(g.cpu_admission_close_percent) + "; got " +
                                                            number(g.cpu_offload_percent) + ")");
  } else if (g.cpu_offload_percent > 0) {
    throw recipe_error(prefix + ".cpu_offload_percent", "needs cpu_admission_close_percent (CPU admission is off)");
  }
}

}  // namespace

namespace {

// An origin as browsers send it: scheme "://" host [":" port], nothing else.
bool is_origin(const std::string& s) {
  auto scheme = s.find("://");
  if (scheme == std::string::npos || scheme == 0) return false;
  auto host = s.substr(scheme + 3);
  if (host.empty() || host.back() == '/' || host.find_first_of("/?#@ \t") != std::string::npos) return false;
  return std::all_of(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(scheme),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'; });
}

void check_cors(const cors_settings& c, const std::string& where) {
  check_fields(c, cors_fields(), where);
  if (c.origins.empty()) throw recipe_error(where + ".origins", "at least one origin (or \"*\") is required");
  for (auto& o : c.origins) {
    if (o == "*") {
      if (c.credentials)
        throw recipe_error(where + ".origins", "\"*\" cannot go with credentials = true (browsers refuse it): name the origins");
    } else if (!is_origin(o)) {
      throw recipe_error(where + ".origins", "not an origin (scheme://host[:port], no path): " + quote(o));
    }
  }
  if (c.methods.empty()) throw recipe_error(where + ".methods", "at least one method is required");
  for (auto& m : c.methods)
    if (!registry::is_http_token(m)) throw recipe_error(where + ".methods", "not a method: " + quote(m));
  for (auto& h : c.headers)
    if (!registry::is_http_token(h)) throw recipe_error(where + ".headers", "not a header name: " + quote(h));
}

void check_static(const static_settings& s, const std::string& where) {
  check_fields(s, static_fields(), where);
  auto& p = s.prefix;
  if (p.front() != '/' || p.back() != '/' || p.find("//") != std::string::npos ||
      p.find_first_of("?#%\\ \t") != std::string::npos || p.find("/../") != std::string::npos ||
      p.find("/./") != std::string::npos)
    throw recipe_error(where + ".prefix", "must be a plain path that starts and ends with '/' (\"/static/\", \"/\"; got " +
                                              quote(p) + ")");
  if (p.rfind("/_troupe/", 0) == 0)
    throw recipe_error(where + ".prefix", "/_troupe/ is the platform's (got " + quote(p) + ")");
  if (s.index.find_first_of("/\\") != std::string::npos || s.index == "." || s.index == "..")
    throw recipe_error(where + ".index", "must be a file name, not a path (got " + quote(s.index) + ")");
  if (std::any_of(s.cache_control.begin(), s.cache_control.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    throw recipe_error(where + ".cache_control", "holds a control character");
}

}  // namespace

namespace {

// Runs each check; what one throws is listed and the next runs.
class violations {
public:
  template <class Check>
  void attempt(Check&& check) {
    try {
      check();
    } catch (const recipe_error& e) {
      list_.push_back(e);
    }
  }

  // Every field of `s` on its own: one bad key does not hide the next.
  template <class S>
  void fields(const S& s, const std::vector<field<S>>& all, const std::string& prefix) {
    for (auto& f : all)
      attempt([&] { check_fields(s, std::vector<field<S>>{f}, prefix); });
  }

  std::vector<recipe_error> take() { return std::move(list_); }

private:
  std::vector<recipe_error> list_;
};

}  // namespace

std::vector<recipe_error> check_recipe(const recipe& r) {
  violations v;
  v.attempt([&] { split_listen(r.node.listen); });
  v.fields(r.node, node_fields(), "node");
  v.attempt([&] {
    if (r.node.tls_cert.empty() != r.node.tls_key.empty())
      throw recipe_error(r.node.tls_cert.empty() ? "node.tls_cert" : "node.tls_key",
                         "node.tls_cert and node.tls_key go together (TLS needs both)");
  });
  v.attempt([&] {
    if (!r.node.tls_client_ca.empty() && r.node.tls_cert.empty())
      throw recipe_error("node.tls_client_ca", "needs node.tls_cert and node.tls_key (TLS is off)");
  });
  for (auto& network : r.node.trusted_proxies)
    v.attempt([&] {
      if (!registry::parse_network(network))
        throw recipe_error("node.trusted_proxies",
                           "not an IP network (CIDR, e.g. 10.0.0.0/8 or ::1/128): " + quote(network));
    });
  v.attempt([&] {
    if (r.node.plain_listen.empty())
      return;
    if (r.node.tls_cert.empty())
      throw recipe_error("node.plain_listen",
                         "needs node.tls_cert and node.tls_key (without TLS, node.listen is plain HTTP already)");
    split_listen(r.node.plain_listen, "node.plain_listen");
  });
  v.fields(r.limits, limits_fields(), "limits");
  // The sink's queue holds what the writer's credit lets it send: credit ≤ queue, and one event fits the credit.
  v.attempt([&] {
    if (r.limits.stream_credit_bytes > r.limits.stream_queue_bytes)
      throw recipe_error("limits.stream_credit_bytes", "must be at most limits.stream_queue_bytes (" +
                                                          std::to_string(r.limits.stream_queue_bytes) + "; got " +
                                                          std::to_string(r.limits.stream_credit_bytes) + ")");
  });
  v.attempt([&] {
    if (r.limits.stream_max_event_bytes > r.limits.stream_credit_bytes)
      throw recipe_error("limits.stream_max_event_bytes", "must be at most limits.stream_credit_bytes (" +
                                                             std::to_string(r.limits.stream_credit_bytes) + "; got " +
                                                             std::to_string(r.limits.stream_max_event_bytes) + ")");
  });
  v.fields(r.deposit, deposit_fields(), "deposit");
  v.fields(r.commander, commander_fields(), "commander");
  v.fields(r.cluster, cluster_fields(), "cluster");
  v.fields(r.channel, channel_fields(), "channel");
  v.fields(r.log, log_fields(), "log");
  v.fields(r.orchestration, orchestration_fields(), "orchestration");
  v.attempt([&] {
    if (!r.orchestration.profile_name.empty() && r.orchestration.profiles_path.empty())
      throw recipe_error("orchestration.profile_name",
                         "names a profile, but orchestration.profiles_path (the folder of profiles) is not set");
  });
  v.attempt([&] { check_cluster(r.cluster); });
  v.attempt([&] {
    if (r.groups.empty())
      throw recipe_error("group", "at least one [[group]] is required");
  });
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    std::string prefix = "group." + g.name;
    v.attempt([&] {
      if (!valid_group_name(g.name))
        throw recipe_error(prefix + ".name", std::string("must be ") + group_name_rule + " (got " + quote(g.name) + ")");
      for (std::size_t j = 0; j < i; ++j)
        if (r.groups[j].name == g.name)
          throw recipe_error(prefix + ".name", "two groups have this name");
    });
    v.fields(g, group_fields(), prefix);
    v.attempt([&] { check_group_policies(g, prefix); });
  }
  for (std::size_t i = 0; i < r.cors.size(); ++i)
    v.attempt([&] { check_cors(r.cors[i], "cors[" + std::to_string(i + 1) + "]"); });
  for (std::size_t i = 0; i < r.statics.size(); ++i)
    v.attempt([&] {
      check_static(r.statics[i], "static[" + std::to_string(i + 1) + "]");
      for (std::size_t j = 0; j < i; ++j)
        if (r.statics[j].prefix == r.statics[i].prefix)
          throw recipe_error("static[" + std::to_string(i + 1) + "].prefix", "two [[static]] mounts have this prefix");
    });
  v.attempt([&] {
    if (!r.commander.default_group.empty() && !r.group(r.commander.default_group)) {
      std::string groups;
      for (auto& g : r.groups) groups += (groups.empty() ? "" : ", ") + g.name;
      throw recipe_error("commander.default_group",
                         quote(r.commander.default_group) + " is not a group (groups: " + groups + ")");
    }
  });
  return v.take();
}

void validate(const recipe& r) {
  auto problems = check_recipe(r);
  if (!problems.empty())
    throw problems.front();
}

}  // namespace troupe::config
