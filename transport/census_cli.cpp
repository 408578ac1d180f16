#include "transport/census_cli.hpp"

#include "transport/front_stream.hpp"
#include "transport/top_view.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

struct target_url {
  bool tls = false;  // https://
  std::string host;
  std::string port = "80";
  std::string base;  // path prefix, without a trailing '/'
};

std::optional<target_url> parse_url(const std::string& url) {
  target_url t;
  t.tls = url.rfind("https://", 0) == 0;
  std::string_view scheme = t.tls ? "https://" : "http://";
  if (url.rfind(scheme, 0) != 0)
    return std::nullopt;
  if (t.tls)
    t.port = "443";
  std::string rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  t.base = slash == std::string::npos ? "" : rest.substr(slash);
  while (!t.base.empty() && t.base.back() == '/')
    t.base.pop_back();
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    auto close = authority.find(']');
    if (close == std::string::npos)
      return std::nullopt;
    t.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':')
      t.port = authority.substr(close + 2);
  } else {
    auto colon = authority.rfind(':');
    t.host = authority.substr(0, colon);
    if (colon != std::string::npos)
      t.port = authority.substr(colon + 1);
  }
  if (t.host.empty() || t.port.empty())
    return std::nullopt;
  return t;
}

struct fetched {
  unsigned status = 0;
  std::string body;
  std::string error;  // transport failure, "" when a reply came
};

// One GET with a 10 s deadline on everything (Beast's timeouts apply to
// asynchronous operations, so they run to completion on a private io_context).
// Over https://, the node's certificate is verified against `cacert` (PEM;
// "": the system's trust store) and the URL's host.
fetched http_get(const target_url& t, const std::string& token, const std::string& target,
                 const std::string& cacert) {
  fetched out;
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  std::shared_ptr<net::ssl::context> tls;
  if (t.tls) {
    tls = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
    beast::error_code ec;
    cacert.empty() ? tls->set_default_verify_paths(ec) : tls->load_verify_file(cacert, ec);
    if (ec) {
      out.error = "--cacert " + cacert + ": " + ec.message();
      return out;
    }
    tls->set_verify_mode(net::ssl::verify_peer);
    tls->set_verify_callback(net::ssl::host_name_verification(t.host));
  }
  // The front's stream type serves a client too: plain TCP or TLS.
  front_stream stream = tls ? front_stream(beast::tcp_stream(ioc), tls, std::chrono::seconds(10))
                            : front_stream(beast::tcp_stream(ioc));
  beast::error_code not_ip;
  net::ip::make_address(t.host, not_ip);
  if (tls && not_ip && !SSL_set_tlsext_host_name(stream.tls().native_handle(), t.host.c_str())) {
    out.error = "TLS: the host name cannot be sent (SNI)";
    return out;
  }
  beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, t.base + target, 11};
  req.set(http::field::host, t.host);
  req.set(http::field::authorization, "Bearer " + token);
  req.set(http::field::user_agent, "troupe-census");
  http::response<http::string_body> res;
  auto fail = [&](const char* what, beast::error_code ec) { out.error = std::string(what) + ": " + ec.message(); };
  resolver.async_resolve(t.host, t.port, [&](beast::error_code ec, tcp::resolver::results_type results) {
    if (ec)
      return fail("resolve", ec);
    stream.expires_after(std::chrono::seconds(10));
    stream.tcp().async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec)
        return fail("connect", ec);
      auto exchange = [&] {
        http::async_write(stream, req, [&](beast::error_code ec, std::size_t) {
          if (ec)
            return fail("write", ec);
          http::async_read(stream, buffer, res, [&](beast::error_code ec, std::size_t) {
            if (ec)
              return fail("read", ec);
            out.status = res.result_int();
            out.body = std::move(res.body());
          });
        });
      };
      if (!stream.is_tls())
        return exchange();
      stream.tls().async_handshake(net::ssl::stream_base::client, [&, exchange](beast::error_code ec) {
        if (ec)
          return fail("TLS handshake", ec);
        exchange();
      });
    });
  });
  ioc.run();
  return out;
}

std::string counts(const json& users) {
  std::ostringstream o;
  o << users.value("all", 0) << " users (" << users.value("active", 0) << " active, " << users.value("frozen", 0)
    << " frozen, " << users.value("resting", 0) << " resting, " << users.value("unfreezing", 0) << " unfreezing, "
    << users.value("departing", 0) << " departing)";
  return o.str();
}

std::string cell(const json& row, const char* key) {
  if (!row.contains(key) || row[key].is_null())
    return "-";
  auto& v = row[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

void print_header(std::ostream& o, const json& c) {
  auto& n = c["node"];
  char line[256];
  std::snprintf(line, sizeof line, "node %s  up %.0f s  rss %.1f MiB  cpu %.1f s  health %s",
                n.value("name", "?").c_str(), n.value("uptime_seconds", 0.0),
                static_cast<double>(n.value("rss_bytes", std::uint64_t{0})) / 1048576.0, n.value("cpu_seconds", 0.0),
                c["health"].value("status", "?").c_str());
  o << line << "\n";
  auto& t = c["totals"];
  o << counts(t["users"]) << ", " << t.value("connections", 0) << " connections, " << t.value("pages", 0)
    << " pages, " << t.value("workers", 0) << " workers, " << t.value("groups", 0) << " groups\n";
}

void print_table(std::ostream& o, const json& c) {
  print_header(o, c);
  o << "matched " << c.value("matched", 0) << "\n\n";
  // Aligned by display width (a guest's name ends with "…"), times for people (µs under a millisecond).
  struct column {
    const char* title;
    int width;
    bool right;
  };
  static const column cols[] = {{"NAME", 32, false},   {"STATE", 10, false},  {"PARENT", 24, false},
                                {"CONNS", 5, true},    {"PAGES", 5, true},    {"MAILBOX", 7, true},
                                {"HANDLED", 9, true},  {"SERVICE", 10, true}, {"PER REQ", 9, true}};
  auto print = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i)
      line += (i ? " " : "") + fit_cells(cells[i], cols[i].width, cols[i].right);
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    o << line << "\n";
  };
  std::vector<std::string> head;
  for (auto& col : cols)
    head.push_back(col.title);
  print(head);
  auto number = [](const json& row, const char* key) {
    return row.contains(key) && row[key].is_number() ? row[key].dump() : cell(row, key);
  };
  for (auto& row : c["actors"]) {
    bool timed = row.contains("service_us") && row["service_us"].is_number();
    auto service_us = timed ? row["service_us"].get<double>() : 0.0;
    auto handled = row.contains("handled") && row["handled"].is_number() ? row["handled"].get<double>() : 0.0;
    print({cell(row, "name"), cell(row, "state"), cell(row, "parent"), number(row, "connections"), number(row, "pages"),
           cell(row, "mailbox"), cell(row, "handled"), timed ? human_duration_us(service_us) : "-",
           timed && handled > 0 ? human_duration_us(service_us / handled) : "-"});
  }
}

// A worker as the tree names it: <node>/<name> in a cluster (what drain takes).
std::string worker_label(const json& w) {
  auto name = w.value("name", "?");
  return w.contains("node") && w["node"].is_string() ? w["node"].get<std::string>() + "/" + name : name;
}

void print_node_line(std::ostream& o, const json& n) {
  o << "node " << n.value("name", "?") << " [" << n.value("state", "?") << "]";
  if (n.value("leader", false))
    o << " leader";
  if (n.contains("address") && n["address"].is_string())
    o << " at " << n["address"].get<std::string>();
  if (n.contains("incarnation") && n["incarnation"].is_string())
    o << " incarnation " << n["incarnation"].get<std::string>();
  if (n.contains("heartbeat_age_ms") && n["heartbeat_age_ms"].is_number())
    o << " heartbeat " << n["heartbeat_age_ms"].dump() << " ms ago";
  o << " health " << (n.contains("health") && n["health"].is_object() ? n["health"].value("status", "?") : "?");
  if (n.value("stale", false))
    o << " (not answering: last known facts)";
  if (n.contains("totals") && n["totals"].is_object())
    o << ": " << counts(n["totals"]["users"]);
  o << "\n";
}

// node(s) → groups → workers → the users on the page.
void print_tree(std::ostream& o, const json& c) {
  print_header(o, c);
  auto users_of = [&](const json& w, const std::string& indent) {
    for (auto& u : c["actors"])
      if (u.value("kind", "") == "user" && u.contains("parent") && u["parent"] == w["id"])
        o << indent << "└─ user " << u.value("name", "?") << " [" << u.value("state", "?") << "]\n";
  };
  auto print_groups = [&](const json& groups, const json& workers) {
    for (auto& g : groups) {
      o << "└─ group " << g.value("name", "?") << " (" << g.value("user_type", "?") << "): " << counts(g["users"])
        << ", " << g.value("connections", 0) << " connections, " << g.value("pages", 0) << " pages\n";
      for (auto& w : workers) {
        if (w.value("group", "") != g.value("name", ""))
          continue;
        o << "   └─ worker " << worker_label(w) << " [" << w.value("state", "?") << "]: " << counts(w["users"])
          << ", " << w.value("connections", 0) << " connections, " << w.value("pages", 0) << " pages, "
          << w.value("restarts", 0) << " restarts\n";
        users_of(w, "      ");
      }
    }
  };
  if (c.contains("nodes") && c["nodes"].is_array() && !c["nodes"].empty()) {
    for (auto& n : c["nodes"]) {
      print_node_line(o, n);
      print_groups(n.value("groups", json::array()), n.value("workers", json::array()));
    }
  } else {  // a node from before the nodes level
    o << "node " << c["node"].value("name", "?") << "\n";
    print_groups(c["groups"], c["workers"]);
  }
  o << "frozen users (no worker): " << c["totals"]["users"].value("frozen", 0) << "\n";
}

volatile std::sig_atomic_t interrupted = 0;

// The keyboard of `--top` when stdin is a terminal: keys one at a time, no
// echo, restored on the way out (Ctrl-C included: it ends the loop).
class raw_keys {
public:
  raw_keys() {
    if (!::isatty(0) || ::tcgetattr(0, &saved_) != 0)
      return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~raw_keys() {
    if (active_)
      ::tcsetattr(0, TCSANOW, &saved_);
  }
  raw_keys(const raw_keys&) = delete;
  raw_keys& operator=(const raw_keys&) = delete;

  // Waits up to `ms` for a key; 0 when none came.
  char wait(int ms) const {
    if (!active_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return 0;
    }
    pollfd p{0, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0)
      return 0;
    char c = 0;
    return ::read(0, &c, 1) == 1 ? c : 0;
  }

private:
  termios saved_{};
  bool active_ = false;
};

// --top: the census redrawn every second, sorted by activity, fitted to the terminal.
int run_top(const census_flags& f, const target_url& url, const std::string& query) {
  top_view::order order{};
  if (!top_view::parse_order(f.sort, order)) {
    std::cerr << "troupe census: --sort must be handled, mailbox or service (got \"" << f.sort << "\")" << std::endl;
    return 2;
  }
  auto [w, h] = terminal_size(1);
  top_view view(w, h);
  view.sort_by(order);
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted = 1; };
  ::sigaction(SIGINT, &sa, nullptr);
  raw_keys keys;
  auto last = std::chrono::steady_clock::now();
  bool tty = ::isatty(1);
  for (int round = 0; !interrupted; ++round) {
    auto r = http_get(url, f.token, query, f.cacert);
    auto now = std::chrono::steady_clock::now();
    if (!r.error.empty() || r.status != 200) {
      auto body = json::parse(r.body, nullptr, false);
      std::cerr << "troupe census: " << (r.error.empty() ? "HTTP " + std::to_string(r.status) + ": " +
                                                             (body.is_object() ? body.value("error", r.body) : r.body)
                                                       : f.url + ": " + r.error)
                << std::endl;
      return 1;
    }
    auto c = json::parse(r.body, nullptr, false);
    if (c.is_discarded()) {
      std::cerr << "troupe census: the node's answer is not JSON" << std::endl;
      return 1;
    }
    auto size = terminal_size(1);
    view.resize(size.first, size.second);
    view.update(c, std::chrono::duration<double>(now - last).count());
    last = now;
    auto draw = [&] {
      std::string out = "\x1b[H\x1b[2J";  // home + clear: redraw in place
      auto lines = view.frame();
      for (std::size_t i = 0; i < lines.size(); ++i)
        out += lines[i] + (i + 1 < lines.size() || !tty ? "\n" : "");
      std::cout << out << std::flush;
    };
    draw();
    if (f.iterations > 0 && round + 1 >= f.iterations)
      break;
    // A key redraws at once in its new order; the next refresh comes a second after the last.
    auto due = now + std::chrono::seconds(1);
    while (!interrupted) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - std::chrono::steady_clock::now()).count();
      if (left <= 0)
        break;
      char k = keys.wait(static_cast<int>(left));
      if (k == 'q')
        return 0;
      if (k && view.key(k))
        draw();
    }
  }
  if (tty)
    std::cout << "\n";
  return 0;
}

}  // namespace

void add_census_options(CLI::App& cmd, census_flags& f) {
  cmd.add_option("--url", f.url, "the node, e.g. http://127.0.0.1:8080 or https://node.example:8443")->required();
  cmd.add_option("--cacert", f.cacert, "https: PEM CA(s) the node's certificate must chain to (default: the system's)");
  cmd.add_option("--token", f.token, "its admin token (node.admin_token); default: $TROUPE_NODE_ADMIN_TOKEN, as the node")
    ->envname("TROUPE_NODE_ADMIN_TOKEN")
    ->required();
  auto* as_json = cmd.add_flag("--json", f.json, "print the census JSON");
  auto* as_tree = cmd.add_flag("--tree", f.tree, "print nodes → groups → workers → users with their counts");
  auto* as_top = cmd.add_flag("--top", f.top, "redraw the table every second, like top (Ctrl-C leaves)");
  as_json->excludes(as_tree)->excludes(as_top);
  as_tree->excludes(as_top);
  cmd.add_option("--filter", f.filters, "KEY=VALUE with KEY kind, prefix, worker, state or node (repeatable)");
  cmd.add_option("--limit", f.limit, "rows to show, 1-1000 (--top: users to sort, default 1000)")
    ->check(CLI::Range(1, 1000))
    ->each([&f](const std::string&) { f.limit_given = true; });
  cmd.add_option("--sort", f.sort, "--top: the first order, handled (handled/s), mailbox or service (keys h, m, s switch)");
  cmd.add_option("--iterations", f.iterations, "--top: stop after N refreshes (0: never)")->check(CLI::NonNegativeNumber);
}

int run_census(const census_flags& f) {
  auto url = parse_url(f.url);
  if (!url) {
    std::cerr << "troupe census: --url must look like http://HOST:PORT or https://HOST:PORT" << std::endl;
    return 2;
  }
  // --top sorts by activity: it takes as many users as a page holds.
  int limit = f.top && !f.limit_given ? 1000 : f.limit;
  std::string query = "/_troupe/census?limit=" + std::to_string(limit);
  for (auto& filter : f.filters) {
    auto eq = filter.find('=');
    std::string key = filter.substr(0, eq);
    if (eq == std::string::npos ||
        (key != "kind" && key != "prefix" && key != "worker" && key != "state" && key != "node")) {
      std::cerr << "troupe census: --filter must be kind=, prefix=, worker=, state= or node= (got \"" << filter << "\")"
                << std::endl;
      return 2;
    }
    std::string value;
    for (unsigned char ch : filter.substr(eq + 1)) {  // percent-encode the value
      if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
        value += static_cast<char>(ch);
      } else {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", ch);
        value += buf;
      }
    }
    query += "&" + key + "=" + value;
  }
  if (f.top)
    return run_top(f, *url, query);
  auto r = http_get(*url, f.token, query, f.cacert);
  if (!r.error.empty()) {
    std::cerr << "troupe census: " << f.url << ": " << r.error << std::endl;
    return 1;
  }
  if (r.status != 200) {
    auto body = json::parse(r.body, nullptr, false);
    std::cerr << "troupe census: HTTP " << r.status << ": " << (body.is_object() ? body.value("error", r.body) : r.body)
              << std::endl;
    return 1;
  }
  if (f.json) {
    std::cout << r.body << std::endl;
    return 0;
  }
  auto c = json::parse(r.body, nullptr, false);
  if (c.is_discarded()) {
    std::cerr << "troupe census: the node's answer is not JSON" << std::endl;
    return 1;
  }
  std::ostringstream out;
  f.tree ? print_tree(out, c) : print_table(out, c);
  std::cout << out.str() << std::flush;
  return 0;
}

}  // namespace troupe
