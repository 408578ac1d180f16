#include "config/recipe.hpp"

#include "registry/ip_network.hpp"
#include "registry/url.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <variant>

#include <toml.hpp>

extern char** environ;

namespace troupe::config {

namespace {

// ---------------------------------------------------------------------------
// Formatting helpers (every message is one line).

/// `s` in double quotes, control characters escaped, long strings shortened.
std::string quote(const std::string& s) {
  std::string out = "\"";
  std::size_t n = 0;
  for (char c : s) {
    if (++n > 64) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// 30 -> "30", 0.05 -> "0.05", 1e300 -> "1e+300".
std::string number(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15)
    return std::to_string(static_cast<long long>(d));
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, res.ptr);
}

std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ---------------------------------------------------------------------------
// The key table: one entry per setting, with its validation rule. Both the
// parsers (file, env, --set) and validate() read it, so a key exists, parses
// and is checked in exactly one place.

struct rule {
  enum { none, at_least, greater_than } lower = none;
  double lo = 0;
  bool has_hi = false;
  double hi = 0;
  const char* choices = nullptr;  ///< "a|b|c"
  bool nonempty = false;
};

rule at_least(double lo) { rule r; r.lower = rule::at_least; r.lo = lo; return r; }
rule between(double lo, double hi) { rule r = at_least(lo); r.has_hi = true; r.hi = hi; return r; }
rule positive(double hi) { rule r; r.lower = rule::greater_than; r.lo = 0; r.has_hi = true; r.hi = hi; return r; }
rule one_of(const char* choices) { rule r; r.choices = choices; return r; }
rule nonempty() { rule r; r.nonempty = true; return r; }

// Durations are converted to std::chrono by their users; these ceilings keep
// every one of them far inside a nanosecond count's range (~292 years).
constexpr double max_seconds = 1e9;  // ~31 years
constexpr double max_minutes = 1e7;  // ~19 years
constexpr double max_hours = 1e5;    // ~11 years

template <class S>
using member = std::variant<std::string S::*, int S::*, std::uint64_t S::*, double S::*, bool S::*,
                            std::vector<std::string> S::*>;

template <class S>
struct field {
  const char* name;
  member<S> ptr;
  rule check;
};

const std::vector<field<node_settings>>& node_fields() {
  static const std::vector<field<node_settings>> f{
    {"listen", &node_settings::listen, {}},  // checked by split_listen
    {"admin_token", &node_settings::admin_token, {}},
    {"name", &node_settings::name, {}},
    {"log_level", &node_settings::log_level, one_of("trace|debug|info|warn|error|critical|off")},
    {"io_threads", &node_settings::io_threads, between(1, 64)},
    {"actor_scheduler", &node_settings::actor_scheduler, one_of("sharing|stealing")},
    {"actor_threads", &node_settings::actor_threads, between(1, 256)},
    {"shutdown_grace_seconds", &node_settings::shutdown_grace_seconds, between(0, max_seconds)},
    {"shutdown_freeze_seconds", &node_settings::shutdown_freeze_seconds, positive(max_seconds)},
    {"cookie_secret", &node_settings::cookie_secret, {}},
    {"health_probe_seconds", &node_settings::health_probe_seconds, positive(max_seconds)},
    {"health_max_restart_rate", &node_settings::health_max_restart_rate, positive(1e9)},
    {"history_seconds", &node_settings::history_seconds, between(10, 86400)},
    {"cookie_max_age_seconds", &node_settings::cookie_max_age_seconds, between(0, 34560000)},
    {"trusted_proxies", &node_settings::trusted_proxies, {}},  // each checked as a network in validate()
    {"tls_cert", &node_settings::tls_cert, {}},            // read and checked at start (transport/tls_credentials)
    {"tls_key", &node_settings::tls_key, {}},
    {"tls_client_ca", &node_settings::tls_client_ca, {}},
    {"plain_listen", &node_settings::plain_listen, {}},    // checked by split_listen when set
  };
  return f;
}

const std::vector<field<limits_settings>>& limits_fields() {
  using L = limits_settings;
  static const std::vector<field<L>> f{
    {"max_body_bytes", &L::max_body_bytes, at_least(1)},
    // Beast's header limit is a 32-bit count.
    {"max_header_bytes", &L::max_header_bytes, between(1024, 4294967295.0)},
    {"request_timeout_seconds", &L::request_timeout_seconds, positive(max_seconds)},
    {"max_inflight", &L::max_inflight, at_least(1)},
    {"hold_seconds", &L::hold_seconds, positive(max_seconds)},
    {"idle_timeout_seconds", &L::idle_timeout_seconds, positive(max_seconds)},
    {"read_timeout_seconds", &L::read_timeout_seconds, positive(max_seconds)},
    {"user_queue_length", &L::user_queue_length, at_least(1)},
    {"max_pages_per_connection", &L::max_pages_per_connection, at_least(1)},
    {"max_consoles", &L::max_consoles, at_least(1)},
    {"max_unauthenticated_consoles", &L::max_unauthenticated_consoles, at_least(1)},
    {"max_connections", &L::max_connections, at_least(1)},
    {"max_buffered_body_bytes", &L::max_buffered_body_bytes, at_least(1)},
    {"max_live_users", &L::max_live_users, at_least(1)},
    {"max_pages_per_user", &L::max_pages_per_user, at_least(1)},
    {"max_forwarded_requests", &L::max_forwarded_requests, at_least(1)},
    {"max_streams", &L::max_streams, at_least(1)},
    {"max_streams_per_user", &L::max_streams_per_user, at_least(1)},
    {"stream_queue_bytes", &L::stream_queue_bytes, at_least(64)},
    {"stream_credit_bytes", &L::stream_credit_bytes, at_least(64)},
    {"stream_max_event_bytes", &L::stream_max_event_bytes, at_least(16)},
    {"stream_keepalive_seconds", &L::stream_keepalive_seconds, between(0, max_seconds)},
    {"tls_handshake_timeout_seconds", &L::tls_handshake_timeout_seconds, positive(max_seconds)},
    {"max_message_bytes", &L::max_message_bytes, at_least(1)},
    {"gate_max_pending", &L::gate_max_pending, at_least(1)},
    {"gate_handshake_timeout_seconds", &L::gate_handshake_timeout_seconds, positive(max_seconds)},
  };
  return f;
}

const std::vector<field<deposit_settings>>& deposit_fields() {
  static const std::vector<field<deposit_settings>> f{
    {"backend", &deposit_settings::backend, one_of("filesystem|postgres")},
    {"url", &deposit_settings::url, {}},
    {"schema", &deposit_settings::schema, nonempty()},
    {"path", &deposit_settings::path, nonempty()},
    {"fallback_path", &deposit_settings::fallback_path, {}},
  };
  return f;
}

const std::vector<field<commander_settings>>& commander_fields() {
  using C = commander_settings;
  static const std::vector<field<C>> f{
    {"user_expiry_hours", &C::user_expiry_hours, positive(max_hours)},
    {"guest_expiry_hours", &C::guest_expiry_hours, positive(max_hours)},
    {"durability", &C::durability, one_of("freeze|reply")},
    {"global_max_value_bytes", &C::global_max_value_bytes, at_least(1)},
    {"global_max_waiters", &C::global_max_waiters, at_least(1)},
    {"global_max_lease_seconds", &C::global_max_lease_seconds, positive(max_seconds)},
    {"orchestration_log", &C::orchestration_log, {}},
    {"orchestration_log_max_bytes", &C::orchestration_log_max_bytes, at_least(1024)},
    {"orchestration_log_files", &C::orchestration_log_files, at_least(1)},
    {"default_group", &C::default_group, {}},  // checked against the groups in validate()
  };
  return f;
}

const std::vector<field<cluster_settings>>& cluster_fields() {
  using C = cluster_settings;
  static const std::vector<field<C>> f{
    {"listen", &C::listen, {}},  // checked by split_listen when set
    {"name", &C::name, nonempty()},
    {"join", &C::join, {}},      // checked by split_listen when set
    {"heartbeat_interval_ms", &C::heartbeat_interval_ms, between(10, 60000)},
    {"failure_timeout_ms", &C::failure_timeout_ms, between(100, 600000)},
    {"join_timeout_ms", &C::join_timeout_ms, between(100, 600000)},
    {"tls_cert", &C::tls_cert, {}},
    {"tls_key", &C::tls_key, {}},
    {"tls_ca", &C::tls_ca, {}},
    {"allow_plaintext", &C::allow_plaintext, {}},
  };
  return f;
}

const std::vector<field<channel_settings>>& channel_fields() {
  using C = channel_settings;
  static const std::vector<field<C>> f{
    {"overflow", &C::overflow, one_of("close|drop_oldest")},
    {"max_queued_frames", &C::max_queued_frames, at_least(1)},
    {"max_queued_bytes", &C::max_queued_bytes, at_least(1024)},
    {"max_frame_bytes", &C::max_frame_bytes, at_least(256)},
    {"max_sockets", &C::max_sockets, at_least(1)},
    {"max_sockets_per_connection", &C::max_sockets_per_connection, at_least(1)},
    {"max_sockets_per_user", &C::max_sockets_per_user, at_least(1)},
    {"max_calls_per_socket", &C::max_calls_per_socket, at_least(1)},
    {"idle_timeout_seconds", &C::idle_timeout_seconds, positive(max_seconds)},
    {"push_timeout_seconds", &C::push_timeout_seconds, positive(max_seconds)},
    {"max_push_users", &C::max_push_users, at_least(1)},
  };
  return f;
}

const std::vector<field<log_settings>>& log_fields() {
  static const std::vector<field<log_settings>> f{
    {"format", &log_settings::format, one_of("text|json")},
  };
  return f;
}

const std::vector<field<group_settings>>& group_fields() {
  using G = group_settings;
  static const std::vector<field<G>> f{
    {"name", &G::name, {}},  // checked by check_group_name
    {"user_type", &G::user_type, nonempty()},
    {"isolation", &G::isolation, one_of("thread|process")},
    {"workers", &G::workers, between(1, 1024)},
    {"worker_max_number", &G::worker_max_number, between(0, 1024)},
    {"worker_min_life_seconds", &G::worker_min_life_seconds, between(0, max_seconds)},
    {"cpu_retirement_quiet_seconds", &G::cpu_retirement_quiet_seconds, positive(max_seconds)},
    {"user_idle_freeze_minutes", &G::user_idle_freeze_minutes, positive(max_minutes)},
    {"durability", &G::durability, one_of("freeze|interval|reply")},
    {"checkpoint_seconds", &G::checkpoint_seconds, positive(max_seconds)},
    {"max_restarts", &G::max_restarts, at_least(0)},
    {"restart_window_seconds", &G::restart_window_seconds, positive(max_seconds)},
    {"recovery_interval_seconds", &G::recovery_interval_seconds, between(0, max_seconds)},
    {"max_user_restarts", &G::max_user_restarts, at_least(1)},
    {"stuck_timeout_seconds", &G::stuck_timeout_seconds, between(0.1, max_seconds)},
    {"permanent_failure_exitcode", &G::permanent_failure_exitcode, between(0, 255)},
    {"memory_max_percent", &G::memory_max_percent, positive(100)},
    {"worker_memory_admission_percent", &G::worker_memory_admission_percent, positive(1000)},
    {"restart_occupancy_max_percent", &G::restart_occupancy_max_percent, between(0, 1000)},
    {"cpu_admission_close_percent", &G::cpu_admission_close_percent, between(0, 100000)},
    {"cpu_admission_reopen_percent", &G::cpu_admission_reopen_percent, between(0, 100000)},
    {"cpu_offload_percent", &G::cpu_offload_percent, between(0, 100000)},
    {"cpu_heating_seconds", &G::cpu_heating_seconds, positive(max_seconds)},
    {"cpu_cooling_seconds", &G::cpu_cooling_seconds, positive(max_seconds)},
    {"worker_admission_interval_seconds", &G::worker_admission_interval_seconds, between(0, max_seconds)},
    {"guest_idle_seconds", &G::guest_idle_seconds, positive(max_seconds)},
    {"rest_idle_seconds", &G::rest_idle_seconds, between(0, max_seconds)},
  };
  return f;
}

template <class S>
const field<S>* find_field(const std::vector<field<S>>& fields, const std::string& name) {
  for (auto& f : fields)
    if (name == f.name) return &f;
  return nullptr;
}

/// " (did you mean PREFIX.KEY?)" when a known key is close to `name`.
template <class S>
std::string suggestion(const std::vector<field<S>>& fields, const std::string& name,
                       const std::string& prefix) {
  const field<S>* best = nullptr;
  std::size_t best_d = 3;
  for (auto& f : fields) {
    auto d = edit_distance(name, f.name);
    if (d < best_d) best = &f, best_d = d;
  }
  return best ? " (did you mean " + prefix + "." + best->name + "?)" : "";
}

const char* const sections = "node, limits, deposit, commander, cluster, channel, log, group, cors or static";

bool valid_group_name(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

const char* const group_name_rule = "1-32 characters of [a-z0-9_]";

// ---------------------------------------------------------------------------
// Range checks (validate()).

void check_number(const std::string& key, const rule& r, long double v, const std::string& shown) {
  if (r.lower == rule::at_least && v < r.lo)
    throw recipe_error(key, "must be at least " + number(r.lo) + " (got " + shown + ")");
  if (r.lower == rule::greater_than && !(v > r.lo))
    throw recipe_error(key, "must be greater than " + number(r.lo) + " (got " + shown + ")");
  if (r.has_hi && v > r.hi)
    throw recipe_error(key, "must be at most " + number(r.hi) + " (got " + shown + ")");
}

void check_string(const std::string& key, const rule& r, const std::string& v) {
  if (r.nonempty && v.empty()) throw recipe_error(key, "must not be empty");
  if (r.choices) {
    std::string all = r.choices;
    std::size_t pos = 0;
    while (pos <= all.size()) {
      auto bar = all.find('|', pos);
      if (bar == std::string::npos) bar = all.size();
      if (all.compare(pos, bar - pos, v) == 0 && v.size() == bar - pos) return;
      pos = bar + 1;
    }
    throw recipe_error(key, "must be one of " + all + " (got " + quote(v) + ")");
  }
}

template <class S>
void check_fields(const S& s, const std::vector<field<S>>& fields, const std::string& prefix) {
  for (auto& f : fields) {
    std::string key = prefix + "." + f.name;
    std::visit(
      [&](auto ptr) {
        const auto& v = s.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          check_string(key, f.check, v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (auto& each : v)
            check_string(key, f.check, each);
        } else if constexpr (std::is_same_v<T, bool>) {
          // nothing to check
        } else if constexpr (std::is_same_v<T, double>) {
          if (!std::isfinite(v)) throw recipe_error(key, "must be a finite number (got " + number(v) + ")");
          check_number(key, f.check, v, number(v));
        } else {
          check_number(key, f.check, static_cast<long double>(v), std::to_string(v));
        }
      },
      f.ptr);
  }
}

// ---------------------------------------------------------------------------
// Assignment from a TOML value (the file) and from text (env, --set).

/// Raised while assigning; the caller turns it into a recipe_error with its label.
struct bad_value {
  std::string problem;
};

const char* expected(int*) { return "expected an integer"; }
const char* expected(std::uint64_t*) { return "expected an integer"; }
const char* expected(double*) { return "expected a number"; }
const char* expected(std::string*) { return "expected a string"; }
const char* expected(bool*) { return "expected a boolean (true or false)"; }
const char* expected(std::vector<std::string>*) { return "expected an array of strings"; }

std::string toml_type(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean: return "a boolean";
    case toml::value_t::integer: return "an integer";
    case toml::value_t::floating: return "a float";
    case toml::value_t::string: return "a string";
    case toml::value_t::offset_datetime:
    case toml::value_t::local_datetime:
    case toml::value_t::local_date:
    case toml::value_t::local_time: return "a date/time";
    case toml::value_t::array: return "an array";
    case toml::value_t::table: return "a table";
    default: return "nothing";
  }
}

/// Stores the integer `v` into an integer member, refusing what it cannot hold.
template <class T>
void store_integer(T& out, std::int64_t v, const rule& r) {
  if constexpr (std::is_same_v<T, std::uint64_t>) {
    if (v < 0) {
      double lo = r.lower == rule::none ? 0 : r.lo;
      throw bad_value{"must be at least " + number(std::max(lo, 0.0)) + " (got " + std::to_string(v) + ")"};
    }
    out = static_cast<std::uint64_t>(v);
  } else {
    if (v < INT_MIN || v > INT_MAX) {
      std::string bound = v < 0 ? "must be at least " + std::to_string(r.lower == rule::none ? INT_MIN : static_cast<long long>(r.lo))
                                : "must be at most " + std::to_string(r.has_hi ? static_cast<long long>(r.hi) : INT_MAX);
      throw bad_value{bound + " (got " + std::to_string(v) + ")"};
    }
    out = static_cast<int>(v);
  }
}

void store_double(double& out, double v) {
  if (!std::isfinite(v)) throw bad_value{"must be a finite number (got " + number(v) + ")"};
  out = v;
}

template <class S>
void assign_toml(S& s, const field<S>& f, const toml::value& v) {
  std::visit(
    [&](auto ptr) {
      auto& out = s.*ptr;
      using T = std::decay_t<decltype(out)>;
      auto wrong = [&] { return bad_value{std::string(expected(&out)) + ", got " + toml_type(v)}; };
      if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string()) throw wrong();
        out = v.as_string(std::nothrow).str;
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        if (!v.is_array()) throw wrong();
        std::vector<std::string> items;
        for (auto& item : v.as_array(std::nothrow)) {
          if (!item.is_string()) throw bad_value{"expected an array of strings, got " + toml_type(item) + " in it"};
          items.push_back(item.as_string(std::nothrow).str);
        }
        out = std::move(items);
      } else if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) throw wrong();
        out = v.as_boolean(std::nothrow);
      } else if constexpr (std::is_same_v<T, double>) {
        if (v.is_integer()) out = static_cast<double>(v.as_integer(std::nothrow));
        else if (v.is_floating()) store_double(out, v.as_floating(std::nothrow));
        else throw wrong();
      } else {
        if (!v.is_integer()) throw wrong();
        store_integer(out, v.as_integer(std::nothrow), f.check);
      }
    },
    f.ptr);
}

template <class S>
void assign_text(S& s, const field<S>& f, const std::string& text) {
  std::visit(
    [&](auto ptr) {
      auto& out = s.*ptr;
      using T = std::decay_t<decltype(out)>;
      const char* b = text.data();
      const char* e = b + text.size();
      if constexpr (std::is_same_v<T, std::string>) {
        out = text;
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        // A list in an environment variable or --set: comma-separated, spaces around items ignored.
        std::vector<std::string> items;
        std::string_view rest = text;
        while (!rest.empty()) {
          auto comma = rest.find(',');
          auto item = rest.substr(0, comma);
          while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
          while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
          if (item.empty()) throw bad_value{"an empty item in the list " + quote(text)};
          items.emplace_back(item);
          rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        }
        out = std::move(items);
      } else if constexpr (std::is_same_v<T, bool>) {
        if (text == "true")
          out = true;
        else if (text == "false")
          out = false;
        else
          throw bad_value{"expected true or false (got " + quote(text) + ")"};
      } else if constexpr (std::is_same_v<T, double>) {
        double d = 0;
        auto res = std::from_chars(b, e, d);
        if (text.empty() || res.ec == std::errc::invalid_argument || res.ptr != e)
          throw bad_value{"expected a number (got " + quote(text) + ")"};
        if (res.ec == std::errc::result_out_of_range)
          throw bad_value{"must be a finite number (got " + quote(text) + ")"};
        store_double(out, d);
      } else {
        std::int64_t i = 0;
        auto res = std::from_chars(b, e, i);
        if (text.empty() || res.ec == std::errc::invalid_argument || res.ptr != e)
          throw bad_value{"expected an integer (got " + quote(text) + ")"};
        if (res.ec == std::errc::result_out_of_range)
          throw bad_value{"out of range (got " + quote(text) + ")"};
        store_integer(out, i, f.check);
      }
    },
    f.ptr);
}

// ---------------------------------------------------------------------------
// The file.

std::string at_line(const toml::value& v) {
  auto line = v.location().line();
  return line > 0 ? " (line " + std::to_string(line) + ")" : "";
}

/// A table's entries in the order they appear in the file.
std::vector<const std::pair<const std::string, toml::value>*> in_file_order(const toml::value& table) {
  std::vector<const std::pair<const std::string, toml::value>*> out;
  for (auto& kv : table.as_table(std::nothrow)) out.push_back(&kv);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) {
    auto la = a->second.location(), lb = b->second.location();
    if (la.line() != lb.line()) return la.line() < lb.line();
    if (la.column() != lb.column()) return la.column() < lb.column();
    return a->first < b->first;
  });
  return out;
}

template <class S>
void apply_table(S& s, const std::vector<field<S>>& fields, const toml::value& table,
                 const std::string& prefix, const char* skip = nullptr) {
  for (auto* kv : in_file_order(table)) {
    const std::string& name = kv->first;
    if (skip && name == skip) continue;
    std::string key = prefix + "." + name;
    auto* f = find_field(fields, name);
    if (!f) throw recipe_error(key, "unknown key" + suggestion(fields, name, prefix) + at_line(kv->second));
    try {
      assign_toml(s, *f, kv->second);
    } catch (const bad_value& bad) {
      throw recipe_error(key, bad.problem + at_line(kv->second));
    }
  }
}

template <class S>
void apply_section(S& s, const std::vector<field<S>>& fields, const toml::value& v, const std::string& section) {
  if (!v.is_table())
    throw recipe_error(section, "expected a table ([" + section + "]), got " + toml_type(v) + at_line(v));
  apply_table(s, fields, v, section);
}

std::vector<group_settings> read_groups(const toml::value& v) {
  if (!v.is_array())
    throw recipe_error("group", "expected an array of tables ([[group]]), got " + toml_type(v) + at_line(v));
  const auto& entries = v.as_array(std::nothrow);
  std::vector<group_settings> groups;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& t = entries[i];
    std::string where = "group[" + std::to_string(i + 1) + "]";
    if (!t.is_table()) throw recipe_error(where, "expected a table ([[group]]), got " + toml_type(t) + at_line(t));
    group_settings g;
    const auto& table = t.as_table(std::nothrow);
    auto name = table.find("name");
    if (name == table.end()) {
      if (entries.size() > 1)
        throw recipe_error(where + ".name", "required when there is more than one [[group]]" + at_line(t));
    } else {
      if (!name->second.is_string())
        throw recipe_error(where + ".name", "expected a string, got " + toml_type(name->second) + at_line(name->second));
      g.name = name->second.as_string(std::nothrow).str;
      if (!valid_group_name(g.name))
        throw recipe_error(where + ".name", std::string("must be ") + group_name_rule + " (got " + quote(g.name) + ")" +
                                              at_line(name->second));
      for (auto& other : groups)
        if (other.name == g.name)
          throw recipe_error("group." + g.name + ".name", "two [[group]] entries have this name" + at_line(name->second));
    }
    apply_table(g, group_fields(), t, "group." + g.name, "name");
    groups.push_back(std::move(g));
  }
  return groups;
}

const std::vector<field<cors_settings>>& cors_fields() {
  using C = cors_settings;
  static const std::vector<field<C>> f{
    {"origins", &C::origins, {}},  // checked in check_cors
    {"methods", &C::methods, {}},
    {"headers", &C::headers, {}},
    {"max_age_seconds", &C::max_age_seconds, between(0, 86400)},
    {"credentials", &C::credentials, {}},
  };
  return f;
}

/// The entries of an array of tables `[[name]]` without names, each addressed as name[N].
template <class S>
std::vector<S> read_entries(const toml::value& v, const std::string& name, const std::vector<field<S>>& fields) {
  if (!v.is_array())
    throw recipe_error(name, "expected an array of tables ([[" + name + "]]), got " + toml_type(v) + at_line(v));
  std::vector<S> entries;
  const auto& tables = v.as_array(std::nothrow);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const auto& t = tables[i];
    std::string where = name + "[" + std::to_string(i + 1) + "]";
    if (!t.is_table())
      throw recipe_error(where, "expected a table ([[" + name + "]]), got " + toml_type(t) + at_line(t));
    S entry;
    apply_table(entry, fields, t, where);
    entries.push_back(std::move(entry));
  }
  return entries;
}

const std::vector<field<static_settings>>& static_fields() {
  using S = static_settings;
  static const std::vector<field<S>> f{
    {"prefix", &S::prefix, nonempty()},  // and its shape: check_static
    {"root", &S::root, nonempty()},
    {"index", &S::index, {}},
    {"spa_fallback", &S::spa_fallback, {}},
    {"cache_control", &S::cache_control, {}},
  };
  return f;
}

// `file`: the recipe's path; a relative root is relative to its directory.
std::vector<static_settings> read_statics(const toml::value& v, const std::string& file) {
  auto mounts = read_entries(v, "static", static_fields());
  for (auto& s : mounts)
    if (!s.root.empty() && s.root.front() != '/') {
      std::error_code ec;
      auto dir = std::filesystem::absolute(file, ec).parent_path();
      s.root = (dir / s.root).lexically_normal().string();
    }
  return mounts;
}

/// toml11's first line without its "[error] " and "toml::function: " prefixes.
std::string first_line(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  if (starts_with(line, "[error] ")) line.erase(0, 8);
  if (starts_with(line, "toml::")) {
    auto colon = line.find(": ");
    if (colon != std::string::npos) line.erase(0, colon + 2);
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line.empty() ? "syntax error" : line;
}

std::string read_whole_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec) throw recipe_error("", path + ": cannot read the recipe file (" + ec.message() + ")");
  if (fs::is_directory(st)) throw recipe_error("", path + ": cannot read the recipe file (it is a directory)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw recipe_error("", path + ": cannot read the recipe file (cannot open it)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw recipe_error("", path + ": cannot read the recipe file (read error)");
  return text.str();
}

/// The offset of the first byte of `text` that is not part of well-formed
/// UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), npos if none.
std::size_t first_invalid_utf8(const std::string& text) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    unsigned char c = byte(i);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || c == 0xC0 || c == 0xC1 || c > 0xF4 || i + n > text.size()) return i;
    for (std::size_t k = 1; k < n; ++k)
      if ((byte(i + k) >> 6) != 0x2) return i;
    if (n >= 3) {
      unsigned char c1 = byte(i + 1);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
        return i;
    }
    i += n;
  }
  return std::string::npos;
}

void apply_file(recipe& r, const std::string& path) {
  std::string text = read_whole_file(path);
  // A TOML file is UTF-8. Checked here because toml11 3.7 reads past the end of
  // its buffer while reporting some invalid UTF-8 (ToruNiina/toml11#199, found
  // by fuzz/recipe_fuzz).
  if (auto bad = first_invalid_utf8(text); bad != std::string::npos) {
    auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    throw recipe_error("", path + ":" + std::to_string(line) + ": not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
  }
  toml::value root;
  try {
    std::istringstream in(text);
    root = toml::parse(in, path);
  } catch (const toml::exception& e) {
    throw recipe_error("", path + ":" + std::to_string(e.location().line()) + ": " + first_line(e.what()));
  } catch (const std::exception& e) {
    throw recipe_error("", path + ": " + first_line(e.what()));
  }
  for (auto* kv : in_file_order(root)) {
    const std::string& name = kv->first;
    const toml::value& v = kv->second;
    if (name == "node") apply_section(r.node, node_fields(), v, name);
    else if (name == "limits") apply_section(r.limits, limits_fields(), v, name);
    else if (name == "deposit") apply_section(r.deposit, deposit_fields(), v, name);
    else if (name == "commander") apply_section(r.commander, commander_fields(), v, name);
    else if (name == "cluster") apply_section(r.cluster, cluster_fields(), v, name);
    else if (name == "channel") apply_section(r.channel, channel_fields(), v, name);
    else if (name == "log") apply_section(r.log, log_fields(), v, name);
    else if (name == "group") r.groups = read_groups(v);
    else if (name == "cors") r.cors = read_entries(v, "cors", cors_fields());
    else if (name == "static") r.statics = read_statics(v, path);
    else throw recipe_error(name, std::string("unknown key (the recipe has ") + sections + ")" + at_line(v));
  }
}

// ---------------------------------------------------------------------------
// --set and the environment.

template <class S>
void assign_labelled(S& s, const field<S>& f, const std::string& text, const std::string& key,
                     const std::string& label) {
  try {
    assign_text(s, f, text);
  } catch (const bad_value& bad) {
    throw recipe_error(key, label, bad.problem);
  }
}

/// Applies `value` to the section key `section.name`; false if there is no such key.
template <class S>
bool set_in(S& s, const std::vector<field<S>>& fields, const std::string& section, const std::string& name,
            const std::string& value, const std::string& label) {
  auto* f = find_field(fields, name);
  if (!f) return false;
  assign_labelled(s, *f, value, section + "." + name, label);
  return true;
}

template <class S>
[[noreturn]] void unknown(const std::vector<field<S>>& fields, const std::string& key, const std::string& name,
                          const std::string& prefix, const std::string& label) {
  throw recipe_error(key, label, "unknown key" + suggestion(fields, name, prefix));
}

void apply_set(recipe& r, const std::string& arg) {
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) throw recipe_error(arg.substr(0, eq), "--set " + arg, "expected KEY=VALUE");
  std::string key = arg.substr(0, eq);
  std::string value = arg.substr(eq + 1);
  std::string label = "--set " + key;

  std::vector<std::string> parts;
  for (std::size_t pos = 0;;) {
    auto dot = key.find('.', pos);
    parts.push_back(key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }

  if (parts.size() == 2) {
    const auto& sec = parts[0];
    const auto& name = parts[1];
    if (sec == "node") {
      if (!set_in(r.node, node_fields(), sec, name, value, label)) unknown(node_fields(), key, name, sec, label);
      return;
    }
    if (sec == "limits") {
      if (!set_in(r.limits, limits_fields(), sec, name, value, label)) unknown(limits_fields(), key, name, sec, label);
      return;
    }
    if (sec == "deposit") {
      if (!set_in(r.deposit, deposit_fields(), sec, name, value, label)) unknown(deposit_fields(), key, name, sec, label);
      return;
    }
    if (sec == "commander") {
      if (!set_in(r.commander, commander_fields(), sec, name, value, label))
        unknown(commander_fields(), key, name, sec, label);
      return;
    }
    if (sec == "cluster") {
      if (!set_in(r.cluster, cluster_fields(), sec, name, value, label)) unknown(cluster_fields(), key, name, sec, label);
      return;
    }
    if (sec == "channel") {
      if (!set_in(r.channel, channel_fields(), sec, name, value, label)) unknown(channel_fields(), key, name, sec, label);
      return;
    }
    if (sec == "log") {
      if (!set_in(r.log, log_fields(), sec, name, value, label)) unknown(log_fields(), key, name, sec, label);
      return;
    }
    if (sec == "group") throw recipe_error(key, label, "unknown key (a group's key is group.NAME.KEY)");
  }
  if (parts.size() == 3 && parts[0] == "group") {
    const auto& gname = parts[1];
    const auto& name = parts[2];
    if (!valid_group_name(gname))
      throw recipe_error(key, label, quote(gname) + " is not a group name (" + group_name_rule + ")");
    auto* f = find_field(group_fields(), name);
    if (!f) unknown(group_fields(), key, name, "group." + gname, label);
    if (name == "name") throw recipe_error(key, label, "a group's name is not settable here; declare the group in the recipe file");
    auto it = std::find_if(r.groups.begin(), r.groups.end(), [&](auto& g) { return g.name == gname; });
    if (it == r.groups.end()) {
      // A --set naming a group that does not exist creates it, with the defaults.
      group_settings g;
      g.name = gname;
      r.groups.push_back(std::move(g));
      it = std::prev(r.groups.end());
    }
    assign_labelled(*it, *f, value, key, label);
    return;
  }
  throw recipe_error(key, label, std::string("unknown key (the recipe has ") + sections + ")");
}

/// Applies `value` if `var` (lowercased, without TROUPE_) is `section_key` for a key of `fields`.
template <class S>
bool env_in(S& s, const std::vector<field<S>>& fields, const std::string& section, const std::string& rest,
            const std::string& value, const std::string& var) {
  if (!starts_with(rest, section + "_")) return false;
  return set_in(s, fields, section, rest.substr(section.size() + 1), value, var);
}

void apply_env(recipe& r, const std::string& var, const std::string& value) {
  static const std::string prefix = "TROUPE_";
  if (!starts_with(var, prefix)) return;
  std::string rest = lower(var.substr(prefix.size()));

  if (env_in(r.node, node_fields(), "node", rest, value, var)) return;
  if (env_in(r.limits, limits_fields(), "limits", rest, value, var)) return;
  if (env_in(r.deposit, deposit_fields(), "deposit", rest, value, var)) return;
  if (env_in(r.commander, commander_fields(), "commander", rest, value, var)) return;
  if (env_in(r.cluster, cluster_fields(), "cluster", rest, value, var)) return;
  if (env_in(r.channel, channel_fields(), "channel", rest, value, var)) return;
  if (env_in(r.log, log_fields(), "log", rest, value, var)) return;

  if (starts_with(rest, "group_")) {
    // group_<name>_<key>: names may contain '_', so try every existing group
    // and take the longest name that leaves a known key.
    group_settings* best = nullptr;
    const field<group_settings>* best_f = nullptr;
    for (auto& g : r.groups) {
      std::string head = "group_" + g.name + "_";
      if (!starts_with(rest, head)) continue;
      auto* f = find_field(group_fields(), rest.substr(head.size()));
      if (f && (!best || g.name.size() > best->name.size())) best = &g, best_f = f;
    }
    if (best) {
      std::string key = "group." + best->name + "." + best_f->name;
      if (std::string(best_f->name) == "name")
        throw recipe_error(key, var, "a group's name is not settable here; declare the group in the recipe file");
      assign_labelled(*best, *best_f, value, key, var);
      return;
    }
  }

  for (const char* sec : {"node_", "limits_", "deposit_", "commander_", "cluster_", "group_"}) {
    if (starts_with(rest, sec)) {
      std::string groups;
      for (auto& g : r.groups) groups += (groups.empty() ? "" : ", ") + g.name;
      throw recipe_error(var, std::string("matches no recipe key") +
                                (std::string(sec) == "group_" ? " (groups: " + groups + ")" : ""));
    }
  }
  // Any other TROUPE_* variable is not the recipe's business.
}

}  // namespace

// ---------------------------------------------------------------------------

const group_settings& recipe::default_group() const {
  if (auto g = commander.default_group.empty() ? nullptr : group(commander.default_group))
    return *g;
  return groups.front();
}

const group_settings* recipe::group(const std::string& name) const {
  for (auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

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

void validate(const recipe& r) {
  split_listen(r.node.listen);
  check_fields(r.node, node_fields(), "node");
  if (r.node.tls_cert.empty() != r.node.tls_key.empty())
    throw recipe_error(r.node.tls_cert.empty() ? "node.tls_cert" : "node.tls_key",
                       "node.tls_cert and node.tls_key go together (TLS needs both)");
  if (!r.node.tls_client_ca.empty() && r.node.tls_cert.empty())
    throw recipe_error("node.tls_client_ca", "needs node.tls_cert and node.tls_key (TLS is off)");
  for (auto& network : r.node.trusted_proxies)
    if (!registry::parse_network(network))
      throw recipe_error("node.trusted_proxies", "not an IP network (CIDR, e.g. 10.0.0.0/8 or ::1/128): " + quote(network));
  if (!r.node.plain_listen.empty()) {
    if (r.node.tls_cert.empty())
      throw recipe_error("node.plain_listen", "needs node.tls_cert and node.tls_key (without TLS, node.listen is plain HTTP already)");
    split_listen(r.node.plain_listen, "node.plain_listen");
  }
  check_fields(r.limits, limits_fields(), "limits");
  // The sink's queue holds what the writer's credit lets it send: credit ≤ queue, and one event fits the credit.
  if (r.limits.stream_credit_bytes > r.limits.stream_queue_bytes)
    throw recipe_error("limits.stream_credit_bytes", "must be at most limits.stream_queue_bytes (" +
                                                        std::to_string(r.limits.stream_queue_bytes) + "; got " +
                                                        std::to_string(r.limits.stream_credit_bytes) + ")");
  if (r.limits.stream_max_event_bytes > r.limits.stream_credit_bytes)
    throw recipe_error("limits.stream_max_event_bytes", "must be at most limits.stream_credit_bytes (" +
                                                           std::to_string(r.limits.stream_credit_bytes) + "; got " +
                                                           std::to_string(r.limits.stream_max_event_bytes) + ")");
  check_fields(r.deposit, deposit_fields(), "deposit");
  check_fields(r.commander, commander_fields(), "commander");
  check_fields(r.cluster, cluster_fields(), "cluster");
  check_fields(r.channel, channel_fields(), "channel");
  check_fields(r.log, log_fields(), "log");
  check_cluster(r.cluster);
  if (r.groups.empty()) throw recipe_error("group", "at least one [[group]] is required");
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    std::string prefix = "group." + g.name;
    if (!valid_group_name(g.name))
      throw recipe_error(prefix + ".name", std::string("must be ") + group_name_rule + " (got " + quote(g.name) + ")");
    for (std::size_t j = 0; j < i; ++j)
      if (r.groups[j].name == g.name) throw recipe_error(prefix + ".name", "two groups have this name");
    check_fields(g, group_fields(), prefix);
    check_group_policies(g, prefix);
  }
  for (std::size_t i = 0; i < r.cors.size(); ++i)
    check_cors(r.cors[i], "cors[" + std::to_string(i + 1) + "]");
  for (std::size_t i = 0; i < r.statics.size(); ++i) {
    check_static(r.statics[i], "static[" + std::to_string(i + 1) + "]");
    for (std::size_t j = 0; j < i; ++j)
      if (r.statics[j].prefix == r.statics[i].prefix)
        throw recipe_error("static[" + std::to_string(i + 1) + "].prefix", "two [[static]] mounts have this prefix");
  }
  if (!r.commander.default_group.empty() && !r.group(r.commander.default_group)) {
    std::string groups;
    for (auto& g : r.groups) groups += (groups.empty() ? "" : ", ") + g.name;
    throw recipe_error("commander.default_group", quote(r.commander.default_group) + " is not a group (groups: " + groups + ")");
  }
}

recipe load_recipe(const recipe_sources& sources) {
  recipe r;
  if (!sources.file.empty()) apply_file(r, sources.file);
  for (auto& [name, value] : sources.env) apply_env(r, name, value);
  for (auto& s : sources.sets) apply_set(r, s);
  // "default" first if present; the others keep their order.
  std::stable_partition(r.groups.begin(), r.groups.end(), [](auto& g) { return g.name == "default"; });
  validate(r);
  return r;
}

std::vector<std::pair<std::string, std::string>> troupe_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    if (!starts_with(entry, "TROUPE_")) continue;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace troupe::config
