// troupe_bench: troupe side by side with its peers, in one run on this machine (issue 6).
// bench/run.sh installs what it needs (wrk, nginx, the Express peer's npm packages),
// builds, and runs it; bench/README.md explains every scenario and figure.
//
//   troupe_bench [--runs N] [--seconds S] [--only S1,S2,...] [--out DIR] [--smoke] [--s5-users N]
//
// Every server runs on 127.0.0.1 and is driven by wrk with bench/sticky.lua: each
// request carries one of 1,000 users' cookies, obtained before the timed runs. Each
// figure is measured --runs times (servers in a rotating order) and reported as the
// median with min and max; what matters is a ratio against a peer of the same run.
// Results: DIR/RESULTS.md (a table) and DIR/RESULTS.json, with machine, date, commit.
// --smoke: a 2-second run of S1 against troupe alone (the test suite runs it so the
// harness cannot rot); it fails when troupe answers anything but 200.
#include "../tests/support/http_client.hpp"
#include "../tests/support/prometheus.hpp"
#include "../tests/support/ws_client.hpp"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using namespace troupe::test;
using nlohmann::json;
using steady = std::chrono::steady_clock;

namespace {

// ---- options -------------------------------------------------------------------------

struct options {
  int runs = 3;
  int seconds = 10;
  std::set<std::string> only;  // empty: every scenario
  std::string out = BENCH_DIR;
  bool smoke = false;
  int users = 1000;
  int s5_users = 100000;  // S5: idle users made (the figure of the goal is at 100,000)
  bool wants(const std::string& s) const { return only.empty() || only.count(s); }
};

[[noreturn]] void usage(const std::string& err) {
  std::cerr << "troupe_bench: " << err
            << "\nusage: troupe_bench [--runs N] [--seconds S] [--only S1,S2,...] [--out DIR] [--smoke] [--s5-users N]\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](int lo) {
      auto v = value();
      try {
        int n = std::stoi(v);
        if (n < lo)
          throw std::out_of_range(v);
        return n;
      } catch (const std::exception&) {
        usage(a + " wants an integer >= " + std::to_string(lo) + ", got \"" + v + "\"");
      }
    };
    if (a == "--runs")
      o.runs = number(1);
    else if (a == "--seconds")
      o.seconds = number(1);
    else if (a == "--out")
      o.out = value();
    else if (a == "--smoke")
      o.smoke = true;
    else if (a == "--s5-users")
      o.s5_users = number(1000);
    else if (a == "--only") {
      std::stringstream ss(value());
      for (std::string s; std::getline(ss, s, ',');)
        o.only.insert(s);
    } else
      usage("unknown argument " + a);
  }
  if (o.smoke) {
    o.runs = 1;
    o.seconds = 2;
    o.users = 100;
    o.only = {"S1"};
  }
  return o;
}

std::string bin(const std::string& name) {
  return std::string(BUILD_BIN) + "/" + name;
}

void say(const std::string& s) {
  std::cout << s << std::endl;
}

std::string fmt(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// ---- processes -------------------------------------------------------------------------

// A server or tool started for the run: its output goes to a file; the destructor
// stops it (SIGTERM, then SIGKILL after 5 s) and reaps it.
class child {
public:
  child(std::vector<std::string> argv, const std::string& log, std::vector<std::string> env = {}) : log_(log) {
    pid_ = ::fork();
    if (pid_ < 0)
      throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::setpgid(0, 0);
      for (auto& e : env)
        ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::perror(args[0]);
      std::_Exit(127);
    }
  }
  ~child() { stop(); }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  // Waits for `pattern`'s first group (a port) in the output.
  std::uint16_t wait_port(const std::string& pattern, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::regex re(pattern);
    auto until = steady::now() + timeout;
    while (steady::now() < until) {
      std::smatch m;
      auto text = output();
      if (std::regex_search(text, m, re))
        return static_cast<std::uint16_t>(std::stoi(m[1]));
      if (!running())
        throw std::runtime_error("exited before it was ready:\n" + text);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error("not ready within the timeout:\n" + output());
  }

  // Waits for the process to exit; its exit code (128 + signal when killed).
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  bool running() {
    if (pid_ < 0)
      return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

  void stop() {
    if (pid_ < 0)
      return;
    ::kill(-pid_, SIGTERM);
    for (int i = 0; i < 250 && running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  std::string output() const {
    std::ifstream f(log_);
    return {std::istreambuf_iterator<char>(f), {}};
  }

  pid_t pid() const { return pid_; }

private:
  pid_t pid_ = -1;
  std::string log_;
};

std::uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

void wait_accepting(std::uint16_t port) {
  for (int i = 0; i < 500; ++i) {
    try {
      http_client c(port);
      c.connect(std::chrono::milliseconds(200));
      return;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  throw std::runtime_error("port " + std::to_string(port) + " never accepted");
}

long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return 0;
}

std::string capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p))
      out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

// ---- the servers -----------------------------------------------------------------------

const std::string admin_token = "bench-" + random_token(16);
const headers_t admin{{"Authorization", "Bearer " + admin_token}};

struct server {
  std::string name;
  std::unique_ptr<child> proc;
  std::uint16_t port = 0;
  std::string cookies;  // a file of "name=value" lines, one user each
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// `n` users of this server: one request each without a cookie; their Set-Cookie pairs.
void mint_cookies(server& s, int n, const std::string& path) {
  http_client c(s.port);
  c.use_cookie_jar(false);
  std::ofstream out(path);
  int got = 0;
  for (int i = 0; i < n; ++i) {
    auto r = c.get("/api/whoami");
    auto cookie = r.get("Set-Cookie");
    if (r.status == 200 && !cookie.empty()) {
      out << cookie.substr(0, cookie.find(';')) << "\n";
      ++got;
    }
  }
  if (got != n)
    throw std::runtime_error(s.name + ": minted " + std::to_string(got) + " of " + std::to_string(n) + " cookies");
  s.cookies = path;
}

server start_troupe(const fs::path& tmp, const std::string& tag, const options& o,
                    std::vector<std::string> extra = {}) {
  server s;
  s.name = "troupe";
  std::vector<std::string> argv{bin("troupe"), "node", "--listen", "127.0.0.1:0", "--deposit",
                                (tmp / (tag + "-deposit")).string(), "--admin-token", admin_token};
  argv.insert(argv.end(), extra.begin(), extra.end());
  s.proc = std::make_unique<child>(argv, (tmp / (tag + ".log")).string());
  s.port = s.proc->wait_port(R"(troupe node listening on http://127\.0\.0\.1:(\d+))");
  mint_cookies(s, o.users, (tmp / (tag + ".cookies")).string());
  return s;
}

server start_beast(const fs::path& tmp, const std::string& troupe_cookies) {
  server s;
  s.name = "minimal Beast";
  s.proc = std::make_unique<child>(std::vector<std::string>{bin("minimal_beast"), "0"}, (tmp / "beast.log").string());
  s.port = s.proc->wait_port(R"(listening on http://127\.0\.0\.1:(\d+))");
  s.cookies = troupe_cookies;  // it ignores them; the same requests are sent
  return s;
}

server start_nginx(const fs::path& tmp, const std::string& troupe_cookies) {
  server s;
  s.name = "nginx";
  s.port = free_port();
  auto dir = tmp / "nginx";
  fs::create_directories(dir / "logs");
  std::ofstream(dir / "nginx.conf")
    << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << (dir / "nginx.pid").string()
    << ";\nerror_log stderr warn;\nevents { worker_connections 4096; }\n"
    << "http {\n  access_log off;\n  client_body_temp_path " << (dir / "body").string() << ";\n"
    << "  proxy_temp_path " << (dir / "proxy").string() << ";\n  fastcgi_temp_path " << (dir / "fastcgi").string()
    << ";\n  uwsgi_temp_path " << (dir / "uwsgi").string() << ";\n  scgi_temp_path " << (dir / "scgi").string()
    << ";\n  keepalive_requests 1000000;\n"
    << "  server {\n    listen 127.0.0.1:" << s.port << ";\n"
    << "    location / { default_type application/json; return 200 '{\"count\":0}'; }\n  }\n}\n";
  s.proc = std::make_unique<child>(
    std::vector<std::string>{"nginx", "-p", dir.string(), "-c", (dir / "nginx.conf").string()},
    (tmp / "nginx.log").string());
  wait_accepting(s.port);
  s.cookies = troupe_cookies;
  return s;
}

server start_express(const fs::path& tmp, const options& o) {
  server s;
  s.name = "Express+session";
  s.proc = std::make_unique<child>(
    std::vector<std::string>{"node", std::string(BENCH_DIR) + "/express/server.js", "0"},
    (tmp / "express.log").string());
  s.port = s.proc->wait_port(R"(express listening on http://127\.0\.0\.1:(\d+))");
  mint_cookies(s, o.users, (tmp / "express.cookies").string());
  return s;
}

// ---- wrk ---------------------------------------------------------------------------------

struct load {
  std::string method = "GET";
  std::string path = "/api/counter";
  std::string body;
  int connections = 64;
};

struct wrk_result {
  double rps = 0;
  double p99_ms = 0;
  std::uint64_t requests = 0;
  std::uint64_t non2xx = 0;
  std::uint64_t socket_errors = 0;
};

double to_ms(const std::string& v) {
  double x = std::stod(v);
  if (v.find("us") != std::string::npos)
    return x / 1000;
  if (v.find("ms") != std::string::npos)
    return x;
  if (v.find('m') != std::string::npos)
    return x * 60000;
  return x * 1000;  // "s"
}

wrk_result run_wrk(const server& s, const load& l, int seconds, const fs::path& tmp) {
  auto out = (tmp / "wrk.out").string();
  child w({"wrk", "-t2", "-c" + std::to_string(l.connections), "-d" + std::to_string(seconds) + "s", "--latency",
           "-s", std::string(BENCH_DIR) + "/sticky.lua", s.url() + l.path},
          out, {"COOKIES=" + s.cookies, "METHOD=" + l.method, "PATH_=" + l.path, "BODY=" + l.body});
  if (w.wait() != 0)
    throw std::runtime_error("wrk failed:\n" + w.output());
  auto text = w.output();
  wrk_result r;
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"(Requests/sec:\s+([\d.]+))")))
    r.rps = std::stod(m[1]);
  if (std::regex_search(text, m, std::regex(R"(\n\s+99%\s+(\S+))")))
    r.p99_ms = to_ms(m[1]);
  if (std::regex_search(text, m, std::regex(R"((\d+) requests in)")))
    r.requests = std::stoull(m[1]);
  if (std::regex_search(text, m, std::regex(R"(Non-2xx or 3xx responses: (\d+))")))
    r.non2xx = std::stoull(m[1]);
  if (std::regex_search(text, m, std::regex(R"(Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+))")))
    r.socket_errors = std::stoull(m[1]) + std::stoull(m[2]) + std::stoull(m[3]) + std::stoull(m[4]);
  if (r.rps <= 0)
    throw std::runtime_error("wrk reported no throughput:\n" + text);
  return r;
}

// ---- results -------------------------------------------------------------------------------

struct series {
  std::vector<double> v;
  double median() const {
    auto s = v;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
  }
  double min() const { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
  double max() const { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
};

struct figure {
  std::string scenario;
  std::string name;
  std::string unit;
  series values;
  std::string goal;                     // "" for an informative figure
  std::function<bool(double)> met;      // on the median
  int decimals = 0;
};

std::vector<figure> figures;

figure& add(const std::string& scenario, const std::string& name, const std::string& unit, int decimals = 0,
            const std::string& goal = "", std::function<bool(double)> met = {}) {
  for (auto& f : figures)
    if (f.scenario == scenario && f.name == name)
      return f;
  figures.push_back({scenario, name, unit, {}, goal, std::move(met), decimals});
  return figures.back();
}

std::function<bool(double)> at_least(double x) {
  return [x](double v) { return v >= x; };
}
std::function<bool(double)> at_most(double x) {
  return [x](double v) { return v <= x; };
}

// ---- scenarios ---------------------------------------------------------------------------

// S1 (and S2, S9's baseline): the servers side by side, in a rotating order per run.
void side_by_side(const std::string& id, const std::string& what, std::vector<server*> servers, const load& l,
                  const options& o, const fs::path& tmp) {
  auto c = std::to_string(l.connections);
  for (int run = 0; run < o.runs; ++run) {
    std::map<std::string, wrk_result> got;
    for (std::size_t k = 0; k < servers.size(); ++k) {
      auto* s = servers[(k + static_cast<std::size_t>(run)) % servers.size()];
      auto r = run_wrk(*s, l, o.seconds, tmp);
      got[s->name] = r;
      say("  " + id + " c" + c + " run " + std::to_string(run + 1) + ": " + s->name + " " + fmt(r.rps) +
          " req/s, p99 " + fmt(r.p99_ms, 2) + " ms" + (r.non2xx ? ", non-2xx " + std::to_string(r.non2xx) : "") +
          (r.socket_errors ? ", socket errors " + std::to_string(r.socket_errors) : ""));
      if (s->name == "troupe" && (r.non2xx || r.socket_errors))
        throw std::runtime_error("troupe answered " + std::to_string(r.non2xx) + " non-2xx / " +
                                 std::to_string(r.socket_errors) + " socket errors");
    }
    for (auto& [name, r] : got)
      add(id, what + ", c" + c + ": " + name, "req/s").values.v.push_back(r.rps);
    auto& t = got["troupe"];
    add(id, what + ", c" + c + ": troupe p99", "ms", 2, l.connections == 64 && id == "S1" ? "≤ 2 ms" : "",
        l.connections == 64 && id == "S1" ? at_most(2) : std::function<bool(double)>{})
      .values.v.push_back(t.p99_ms);
    if (got.count("minimal Beast")) {
      double goal = id == "S1" ? 0.8 : 0.7;
      add(id, what + ", c" + c + ": troupe / minimal Beast", "×", 3, "≥ " + fmt(goal, 1) + "×", at_least(goal))
        .values.v.push_back(t.rps / got["minimal Beast"].rps);
    }
    if (got.count("Express+session"))
      add(id, what + ", c" + c + ": troupe / Express+session", "×", 2, id == "S1" ? "≥ 10×" : "",
          id == "S1" ? at_least(10) : std::function<bool(double)>{})
        .values.v.push_back(t.rps / got["Express+session"].rps);
    if (got.count("nginx"))
      add(id, what + ", c" + c + ": troupe / nginx", "×", 3).values.v.push_back(t.rps / got["nginx"].rps);
  }
}

// S4: 100 concurrent requests on one frozen user with a 4 KiB store.
void one_frozen_user_burst(server& t, const options& o) {
  for (int run = 0; run < o.runs; ++run) {
    http_client owner(t.port);
    auto name = "s4-" + random_token(8);
    if (owner.post_json("/api/login", {{"user", name}}).status != 200 ||
        owner.post_json("/api/notes", {{"text", std::string(4000, 'n')}}).status != 200)
      throw std::runtime_error("S4: could not make the user");
    http_client ops(t.port);
    if (ops.post("/_troupe/users/" + name + "/freeze", "", admin).status != 200)
      throw std::runtime_error("S4: the freeze failed");
    auto reads0 = prometheus_sample(ops.get("/_troupe/metrics", admin).body, "troupe_deposit_reads_total");
    auto cookie = *owner.cookie();
    std::atomic<int> ok{0};
    std::vector<std::thread> burst;
    std::atomic<bool> go{false};
    for (int i = 0; i < 100; ++i)
      burst.emplace_back([&] {
        http_client c(t.port);
        c.set_cookie(cookie);
        c.connect();
        while (!go)
          std::this_thread::yield();
        if (c.get("/api/notes").status == 200)
          ++ok;
      });
    go = true;
    for (auto& th : burst)
      th.join();
    auto reads1 = prometheus_sample(ops.get("/_troupe/metrics", admin).body, "troupe_deposit_reads_total");
    add("S4", "100 concurrent requests on one frozen user: user-parcel reads", "reads", 0, "exactly 1",
        [](double v) { return v == 1; })
      .values.v.push_back(reads1.value_or(0) - reads0.value_or(0));
    add("S4", "100 concurrent requests on one frozen user: answered 200", "of 100", 0, "all 100",
        [](double v) { return v == 100; })
      .values.v.push_back(ok);
    say("  S4 run " + std::to_string(run + 1) + ": " + std::to_string(ok) + " of 100 answered, " +
        fmt(reads1.value_or(0) - reads0.value_or(0)) + " parcel read(s)");
  }
}

// S5: memory per idle active user (1 connection, 1 page) at 100,000 users.
// Every request is a cookieless GET: a new guest with one connection and one
// page. An idle user rests (group.rest_idle_seconds, 60 s by default; 1 s
// here, so that the run does not wait a minute): his actor stops and his
// state, connection and page wait in his worker's memory. The figure is of
// users all resting when RSS is read, which is checked. A guest who never
// changed his state retires after group.guest_idle_seconds, so the node runs
// with that set past the run's length (and max_live_users above the users made).
void memory_per_user(const fs::path& tmp, const options& o) {
  const int n = o.s5_users;
  for (int run = 0; run < o.runs; ++run) {
    auto t = start_troupe(tmp, "s5-" + std::to_string(run), o,
                          {"--set", "group.default.guest_idle_seconds=3600", "--set",
                           "group.default.rest_idle_seconds=1", "--set",
                           "limits.max_live_users=" + std::to_string(2 * n + o.users + 1000)});
    http_client ops(t.port);
    auto sample = [&](const char* name) {
      return prometheus_sample(ops.get("/_troupe/metrics", admin).body, name).value_or(-1);
    };
    auto live_users = [&] { return sample("troupe_actors{kind=\"user\"}"); };
    auto resting_users = [&] { return sample("troupe_users{state=\"resting\"}"); };
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double live_before = live_users() + resting_users();
    long before = rss_kib(t.proc->pid());
    std::atomic<int> next{0}, failed{0};
    std::vector<std::thread> mint;
    for (int k = 0; k < 4; ++k)
      mint.emplace_back([&] {
        http_client c(t.port);
        c.use_cookie_jar(false);
        while (next.fetch_add(1) < n)
          if (c.get("/api/counter", {{"X-Troupe-Page", "p1"}}).status != 200)
            ++failed;
      });
    for (auto& th : mint)
      th.join();
    if (failed)
      throw std::runtime_error("S5: " + std::to_string(failed.load()) + " requests failed");
    // Every user made rests within a few seconds (his idle check runs at most 1 s after his rest is due).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (resting_users() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    long after = rss_kib(t.proc->pid());
    const double resting = resting_users(), live = live_users();
    if (live + resting - live_before != n || resting < n)
      throw std::runtime_error("S5: " + fmt(live + resting - live_before) + " users were made (" + fmt(resting) +
                               " resting), not " + std::to_string(n) + " all resting (did guests retire?)");
    // The application's state: notes_state {count, notes} packed, a few bytes.
    const double state_bytes = 16;
    double per_user = (after - before) * 1024.0 / n - state_bytes;
    add("S5", "memory per idle active user (1 connection, 1 page, resting), " + std::to_string(n) +
                " users, beyond the state",
        "B", 0, "≤ 2,048 B", at_most(2048))
      .values.v.push_back(per_user);
    say("  S5 run " + std::to_string(run + 1) + ": RSS " + fmt(before / 1024.0, 1) + " → " + fmt(after / 1024.0, 1) +
        " MiB for " + std::to_string(n) + " resting users = " + fmt(per_user) + " B/user");
  }
}

// S3, S6, S7: bench/deposit_bench (real node, real files), its key figures as JSON.
void deposit_scenarios(const fs::path& tmp, const options& o) {
  std::string only;
  if (o.wants("S3"))
    only += "1";
  if (o.wants("S7"))
    only += "2";
  if (o.wants("S6"))
    only += "3";
  if (only.empty())
    return;
  for (int run = 0; run < o.runs; ++run) {
    auto out = (tmp / "deposit.json").string();
    child d({bin("deposit_bench"), "--only", only, "--json", out}, (tmp / "deposit_bench.log").string());
    int code = d.wait();
    std::ifstream f(out);
    json j = json::object();
    if (f)
      f >> j;
    fs::remove(out);
    if (code != 0)
      say("  deposit_bench exited " + std::to_string(code) + " (its log: " + (tmp / "deposit_bench.log").string() +
          ")");
    auto get = [&](const char* k) { return j.contains(k) ? std::optional<double>(j[k].get<double>()) : std::nullopt; };
    if (auto w = get("wake_p99_us"), a = get("active_p99_us"); w && a) {
      add("S3", "first request of a frozen user (4 KiB store): wake p99", "µs", 0, "≤ 1,000 µs", at_most(1000))
        .values.v.push_back(*w);
      add("S3", "wake p99 / active user's p99", "×", 2, "≤ 3×", at_most(3)).values.v.push_back(*a > 0 ? *w / *a : 0);
    }
    if (auto q = get("quit_users_per_s"))
      add("S7", "soft quit of 100,000 active users", "users/s", 0, "≥ 10,000 users/s", at_least(10000))
        .values.v.push_back(*q);
    if (auto e = get("startup_ms_empty"), m = get("startup_ms_frozen"); e && m) {
      add("S6", "start-up: 1,000,000 frozen users / empty deposit", "×", 2, "unchanged (≤ 1.5× + 20 ms)",
          [](double) { return true; })  // judged per run below
        .values.v.push_back(*m / *e);
      add("S6", "start-up with 1,000,000 frozen users", "ms", 1).values.v.push_back(*m);
      add("S6", "start-up with an empty deposit", "ms", 1).values.v.push_back(*e);
    }
    if (auto b = get("bytes_per_frozen_user"))
      add("S6", "resident memory per frozen user", "B", 1, "≤ 200 B", at_most(200)).values.v.push_back(*b);
    say("  deposit_bench run " + std::to_string(run + 1) + ": " + j.dump());
  }
  // Start-up unchanged: the median with M users within 1.5× + 20 ms of the empty one's.
  for (auto& f : figures)
    if (f.scenario == "S6" && f.name.rfind("start-up: ", 0) == 0) {
      double e = 0, m = 0;
      for (auto& g : figures) {
        if (g.scenario == "S6" && g.name == "start-up with an empty deposit")
          e = g.values.median();
        if (g.scenario == "S6" && g.name == "start-up with 1,000,000 frozen users")
          m = g.values.median();
      }
      f.met = [e, m](double) { return m <= e * 1.5 + 20; };
    }
}

// F1: a request forwarded to the user's node against a raw CAF remote request
// between the same two processes (bench/forward_bench, issue 11); its JSON line.
void forwarding_scenario(const fs::path& tmp, const options& o) {
  for (int run = 0; run < o.runs; ++run) {
    auto log = (tmp / "forward_bench.log").string();
    child f({bin("forward_bench"), "--requests", o.smoke ? "500" : "10000"}, log);
    int code = f.wait();
    std::ifstream in(log);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty() && line[0] == '{')
        last = line;
    if (code != 0 || last.empty()) {
      say("  forward_bench exited " + std::to_string(code) + " (its log: " + log + ")");
      continue;
    }
    auto j = json::parse(last);
    add("F1", "forwarded request to another node: p50 / raw CAF remote request p50", "×", 3, "≤ 1.2×",
        at_most(1.2))
      .values.v.push_back(j["p50_ratio"].get<double>());
    add("F1", "raw CAF remote request p50", "µs", 1).values.v.push_back(j["raw_p50_us"].get<double>());
    add("F1", "forwarded request p50", "µs", 1).values.v.push_back(j["forwarded_p50_us"].get<double>());
    add("F1", "raw CAF remote request p99", "µs", 1).values.v.push_back(j["raw_p99_us"].get<double>());
    add("F1", "forwarded request p99", "µs", 1).values.v.push_back(j["forwarded_p99_us"].get<double>());
    say("  forward_bench run " + std::to_string(run + 1) + ": " + last);
  }
}

// S8: lease-protected increments of one hot key; the sum must be exact.
void hot_key(server& t, const options& o, const fs::path& tmp) {
  http_client c(t.port);
  for (int run = 0; run < o.runs; ++run) {
    auto key = "hot-" + std::to_string(run);
    load l{"POST", "/api/global/" + key + "/add", R"({"delta":1})", 64};
    auto r = run_wrk(t, l, o.seconds, tmp);
    auto value = c.get("/api/global/" + key).json();
    auto sum = value.value("value", json(0));
    double got = sum.is_number() ? sum.get<double>() : 0;
    add("S8", "lease-protected increments, one hot key, 64 clients", "incr/s", 0, "≥ 20,000/s", at_least(20000))
      .values.v.push_back(r.rps * (r.requests ? double(r.requests - r.non2xx) / double(r.requests) : 0));
    // wrk stops with up to 64 requests in flight: applied, but not counted by wrk.
    add("S8", "final value − 2xx answers (requests in flight when wrk stopped)", "", 0, "0 to 64",
        [](double v) { return v >= 0 && v <= 64; })
      .values.v.push_back(got - static_cast<double>(r.requests - r.non2xx));
    say("  S8 run " + std::to_string(run + 1) + ": " + fmt(r.rps) + " req/s, " + std::to_string(r.non2xx) +
        " non-2xx, value " + fmt(got) + " for " + std::to_string(r.requests - r.non2xx) + " increments");
  }
}

// S9: S1 at c64 with the census console open (its live channel, 1 Hz), ABBA order.
void with_console(server& t, const options& o, const fs::path& tmp) {
  load l;
  for (int run = 0; run < o.runs; ++run) {
    auto open_console = [&] {
      std::atomic<bool> stop{false};
      std::atomic<int> messages{0};
      std::thread watcher([&] {
        ws_client ws(t.port, "/_troupe/console/live");
        ws.send(json{{"token", admin_token}}.dump());
        ws.send(json{{"view", {{"kind", "user"}, {"limit", 50}}}}.dump());
        while (!stop)
          if (ws.read(std::chrono::milliseconds(300)))
            ++messages;
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      auto r = run_wrk(t, l, o.seconds, tmp);
      stop = true;
      watcher.join();
      if (messages < std::max(2, o.seconds - 1))  // a full snapshot, then a patch a second
        throw std::runtime_error("S9: the console got " + std::to_string(messages.load()) + " messages in " +
                                 std::to_string(o.seconds) + " s");
      return r;
    };
    wrk_result plain, watched;
    if (run % 2 == 0) {
      plain = run_wrk(t, l, o.seconds, tmp);
      watched = open_console();
    } else {
      watched = open_console();
      plain = run_wrk(t, l, o.seconds, tmp);
    }
    add("S9", "S1 c64 with the console open at 1 Hz / without", "×", 3, "≥ 0.95× (≤ 5% below)", at_least(0.95))
      .values.v.push_back(watched.rps / plain.rps);
    say("  S9 run " + std::to_string(run + 1) + ": without " + fmt(plain.rps) + " req/s, console open " +
        fmt(watched.rps) + " req/s");
  }
}

// ---- report ---------------------------------------------------------------------------------

std::string value_text(const figure& f, double v) {
  std::string s = fmt(v, f.decimals);
  // thousands separators for big integers
  if (f.decimals == 0 && std::fabs(v) >= 10000) {
    std::string digits = s, out;
    bool neg = digits[0] == '-';
    if (neg)
      digits.erase(0, 1);
    for (std::size_t i = 0; i < digits.size(); ++i) {
      if (i && (digits.size() - i) % 3 == 0)
        out += ',';
      out += digits[i];
    }
    s = (neg ? "-" : "") + out;
  }
  return s;
}

void report(const options& o, double total_s) {
  utsname u{};
  ::uname(&u);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  auto commit = capture("git -C " + std::string(BENCH_DIR) + " rev-parse --short HEAD 2>/dev/null");
  auto dirty = capture("git -C " + std::string(BENCH_DIR) + " status --porcelain --untracked-files=no 2>/dev/null");
  auto cpu = capture("awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo");
  auto mem = capture("awk '/MemTotal/ {printf \"%.1f GiB\", $2 / 1048576}' /proc/meminfo");
  auto wrk_v = capture("wrk -v 2>&1 | head -1");
  auto nginx_v = capture("nginx -v 2>&1");
  auto node_v = capture("node --version 2>&1");
  std::string machine = std::to_string(std::thread::hardware_concurrency()) + " CPUs (" + cpu + "), " + mem + ", " +
                        u.sysname + " " + u.release;

  json j{{"date", date},
         {"commit", commit + (dirty.empty() ? "" : "-dirty")},
         {"machine", machine},
         {"runs", o.runs},
         {"seconds", o.seconds},
         {"users", o.users},
         {"tools", {{"wrk", wrk_v}, {"nginx", nginx_v}, {"node", node_v}}},
         {"total_seconds", total_s},
         {"figures", json::array()}};
  std::ostringstream md;
  md << "# Benchmark results\n\n"
     << "`bench/run.sh` on " << date << ", commit " << commit << (dirty.empty() ? "" : " (with local changes)")
     << ".\nMachine: " << machine << "; load average at the end: " << capture("cut -d' ' -f1-3 /proc/loadavg")
     << ".\n" << o.runs << " run(s) per figure, wrk -t2 for " << o.seconds << " s, " << o.users
     << " users' cookies; the whole run took " << fmt(total_s / 60, 1)
     << " min. Medians, with min–max; a goal is judged on the median.\n"
     << "Tools: " << wrk_v << "; " << nginx_v << "; node " << node_v << ".\n\n"
     << "| id | figure | median | min – max | goal | |\n| --- | --- | ---: | ---: | --- | --- |\n";
  for (auto& f : figures) {
    double m = f.values.median();
    bool has_goal = !f.goal.empty();
    bool met = has_goal && f.met && f.met(m);
    md << "| " << f.scenario << " | " << f.name << " | " << value_text(f, m) << (f.unit.empty() ? "" : " " + f.unit)
       << " | " << value_text(f, f.values.min()) << " – " << value_text(f, f.values.max()) << " | " << f.goal
       << " | " << (has_goal ? (met ? "met" : "**not met**") : "") << " |\n";
    json fj{{"scenario", f.scenario}, {"figure", f.name},          {"unit", f.unit},
            {"median", m},            {"min", f.values.min()},     {"max", f.values.max()},
            {"values", f.values.v},   {"goal", f.goal}};
    if (has_goal)
      fj["met"] = met;
    j["figures"].push_back(std::move(fj));
  }
  fs::create_directories(o.out);
  std::ofstream(fs::path(o.out) / "RESULTS.md") << md.str();
  std::ofstream(fs::path(o.out) / "RESULTS.json") << j.dump(2) << "\n";
  say("\n" + md.str());
  say("written: " + (fs::path(o.out) / "RESULTS.md").string() + ", " + (fs::path(o.out) / "RESULTS.json").string());
}

}  // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  auto tmp = fs::temp_directory_path() / ("troupe-bench-" + random_token(8));
  fs::create_directories(tmp);
  auto t0 = steady::now();
  int failures = 0;
  auto step = [&](const std::string& name, const std::function<void()>& fn) {
    say("\n== " + name);
    try {
      fn();
    } catch (const std::exception& e) {
      ++failures;
      say("FAILED: " + name + ": " + e.what());
    }
  };
  {
    std::optional<server> troupe, beast, nginx, express;
    if (o.wants("S1") || o.wants("S2") || o.wants("S4") || o.wants("S8") || o.wants("S9"))
      step("starting troupe", [&] { troupe = start_troupe(tmp, "troupe", o); });
    if (!o.smoke && (o.wants("S1") || o.wants("S2"))) {
      step("starting minimal Beast", [&] { beast = start_beast(tmp, troupe->cookies); });
      step("starting nginx", [&] { nginx = start_nginx(tmp, troupe->cookies); });
      step("starting Express+session", [&] { express = start_express(tmp, o); });
    }
    auto present = [](std::initializer_list<std::optional<server>*> all) {
      std::vector<server*> out;
      for (auto* s : all)
        if (*s)
          out.push_back(&**s);
      return out;
    };
    if (troupe) {
      if (o.wants("S1"))
        for (int c : o.smoke ? std::vector<int>{64} : std::vector<int>{64, 256})
          step("S1 sticky GET /api/counter, c" + std::to_string(c), [&] {
            load l;
            l.connections = c;
            side_by_side("S1", "sticky GET /api/counter", present({&troupe, &beast, &nginx, &express}), l, o, tmp);
          });
      if (o.wants("S2"))
        step("S2 POST /api/counter/incr, c64", [&] {
          load l{"POST", "/api/counter/incr", "", 64};
          side_by_side("S2", "POST /api/counter/incr", present({&troupe, &beast, &express}), l, o, tmp);
        });
      if (o.wants("S9"))
        step("S9 S1 with the console open", [&] { with_console(*troupe, o, tmp); });
      if (o.wants("S8"))
        step("S8 lease-protected increments", [&] { hot_key(*troupe, o, tmp); });
      if (o.wants("S4"))
        step("S4 a burst on one frozen user", [&] { one_frozen_user_burst(*troupe, o); });
    }
  }  // the servers stop here: the next scenarios start their own nodes
  if (o.wants("S5"))
    step("S5 memory per idle active user", [&] { memory_per_user(tmp, o); });
  if (o.wants("S3") || o.wants("S6") || o.wants("S7"))
    step("S3, S6, S7 (deposit_bench)", [&] { deposit_scenarios(tmp, o); });
  if (!o.smoke && o.wants("F1"))
    step("F1 forwarding to another node (forward_bench)", [&] { forwarding_scenario(tmp, o); });
  if (o.smoke)  // 2 s on a busy test machine: it shows the harness works, it judges nothing
    for (auto& f : figures)
      f.goal.clear();
  report(o, std::chrono::duration<double>(steady::now() - t0).count());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return failures ? 1 : 0;
}
