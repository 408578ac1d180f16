// deposit_bench: the performance figures of freezing and waking (issue 3, "Performance"),
// each measured against a real node (build/bin/troupe, started by tests/support/node_process)
// over real HTTP (tests/support/http_client) and real files.
//
//   deposit_bench [--users-quit N] [--frozen M] [--wake-users K] [--wake-gap-ms MS]
//                 [--only LIST] [--quit-threads T] [--gen-threads G] [--gen-budget SECONDS]
//                 [--keep] [--backends LIST] [--pg-url URL]
//
//   1. wake latency: K frozen users with a ~4 KiB store; the first request of each (the
//      wake) against a request of an active user, interleaved in the same run.
//   2. soft quit: N guests minted as fast as possible, each with a state (a counter of 1:
//      a guest without state is never written), then SIGTERM; users frozen per
//      second (the node's own log line), parcel files written, SIGTERM-to-exit time.
//   4. fencing (store level, no node): what the owner-epoch check adds to a user write
//      (the flock of the shard's lock, the claim and header reads) against the write
//      itself, and a wake's claim (read + claim written) against a plain read.
//   3. start-up with M frozen users: M parcels written directly with the store library,
//      then a node started on an empty deposit and on the M-user deposit: time to the
//      ready line, RSS at ready and 10 s later, time for troupe_users{state="frozen"} to
//      reach M; then 100 random frozen users logged into and woken.
//
// --backends filesystem,postgres runs scenarios 1, 2 and 3 once per backend (issue 12):
// scenario 1's two nodes side by side, their wakes interleaved; 2 and 3 one backend after
// the other. A postgres node runs on --pg-url in a fresh schema (bench_<pid>_<n>) that is
// dropped after the scenario; scenario 3 writes its M parcels there with the store library
// (make_postgres_deposit + put_batch, one connection per generating thread).
//
// It ends with a Markdown table of every figure (bench/README.md explains each one).
// Not part of the test suite: every step has a timeout and a failing scenario is
// reported (with the node's diagnostics) and skipped, the others still run.
#include "../tests/support/prometheus.hpp"
#include "../tests/support/http_client.hpp"
#include "../tests/support/node_process.hpp"

#include "store/codec.hpp"
#include "store/deposit.hpp"
#include "store/parcel.hpp"
#include "store/postgres_deposit.hpp"

#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace troupe::test;
using std::chrono::milliseconds;
using std::chrono::seconds;
using steady = std::chrono::steady_clock;

namespace {

// ---- options ----------------------------------------------------------------------

struct options {
  std::size_t users_quit = 100000;   // scenario 2: N
  std::size_t frozen = 1000000;      // scenario 3: M
  std::size_t wake_users = 2000;     // scenario 1: K
  std::size_t wake_gap_ms = 0;       // scenario 1: pause before each wake
  std::size_t fence_users = 2000;    // scenario 4: users written, checked, claimed
  std::string only = "123";
  unsigned quit_threads = 16;
  unsigned gen_threads = 2;
  double gen_budget_s = 420;         // scenario 3: cap on generating the parcels
  bool keep = false;
  std::string json;                  // write the key figures here
  std::vector<std::string> backends{"filesystem"};  // scenarios 1-3 run once per backend
  std::string pg_url;                // the postgres backend's server (default $TROUPE_TEST_PG_URL)
};

[[noreturn]] void usage(const std::string& err = {}) {
  if (!err.empty())
    std::cerr << "deposit_bench: " << err << "\n";
  std::cerr << "usage: deposit_bench [--users-quit N] [--frozen M] [--wake-users K] [--wake-gap-ms MS]\n"
               "                     [--only 123] [--quit-threads T] [--gen-threads G] [--gen-budget SECONDS]\n"
               "                     [--keep] [--backends LIST] [--pg-url URL]\n"
               "  --users-quit N    scenario 2: guests minted, then soft quit (default 100000)\n"
               "  --frozen M        scenario 3: frozen users generated in the deposit (default 1000000)\n"
               "  --wake-users K    scenario 1: frozen users woken one by one (default 2000)\n"
               "  --wake-gap-ms MS  scenario 1: pause before each wake (default 0; shows what the\n"
               "                    node still does in the background after the previous one)\n"
               "  --fence-users F   scenario 4: users written, checked and claimed (default 2000)\n"
               "  --only LIST       scenarios to run, e.g. 13 (default 123; 4 = fencing costs)\n"
               "  --quit-threads T  scenario 2: client threads minting guests (default 16)\n"
               "  --gen-threads G   scenario 3: threads writing parcels (default 2)\n"
               "  --gen-budget S    scenario 3: if the first 100k parcels project past S seconds,\n"
               "                    M is cut to what fits (said in the output; default 420)\n"
               "  --keep            keep scenario 3's deposit directory (prints its path)\n"
               "  --json PATH       also write the key figures as one JSON object to PATH\n"
               "  --backends LIST   deposit backends of scenarios 1-3, comma-separated: filesystem,\n"
               "                    postgres (default filesystem); scenario 4 is filesystem only\n"
               "  --pg-url URL      the PostgreSQL server of the postgres backend (default\n"
               "                    $TROUPE_TEST_PG_URL; scripts/pg_server.sh start DIR prints one)\n"
               "The node binary is TROUPE_BIN (build), or $TROUPE_TEST_BIN.\n";
  std::exit(2);
}

std::size_t to_count(const std::string& flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno || !end || *end || v[0] == '-' || v[0] == '\0')
    usage(flag + " wants a non-negative integer, got \"" + v + "\"");
  return static_cast<std::size_t>(n);
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty())
      out.push_back(item);
  return out;
}

options parse(int argc, char** argv) {
  options o;
  if (const char* u = std::getenv("TROUPE_TEST_PG_URL"))
    o.pg_url = u;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--users-quit") o.users_quit = to_count(a, value());
    else if (a == "--frozen") o.frozen = to_count(a, value());
    else if (a == "--wake-users") o.wake_users = to_count(a, value());
    else if (a == "--wake-gap-ms") o.wake_gap_ms = to_count(a, value());
    else if (a == "--only") o.only = value();
    else if (a == "--fence-users") o.fence_users = std::max<std::size_t>(1, to_count(a, value()));
    else if (a == "--quit-threads") o.quit_threads = static_cast<unsigned>(std::max<std::size_t>(1, to_count(a, value())));
    else if (a == "--gen-threads") o.gen_threads = static_cast<unsigned>(std::max<std::size_t>(1, to_count(a, value())));
    else if (a == "--gen-budget") o.gen_budget_s = static_cast<double>(to_count(a, value()));
    else if (a == "--keep") o.keep = true;
    else if (a == "--json") o.json = value();
    else if (a == "--backends") o.backends = split_list(value());
    else if (a == "--pg-url") o.pg_url = value();
    else if (a == "-h" || a == "--help") usage();
    else usage("unknown argument " + a);
  }
  if (o.frozen > 9999999)
    usage("--frozen: at most 9999999 (user names are u%07d)");
  if (o.backends.empty())
    usage("--backends: name at least one of filesystem, postgres");
  for (const auto& b : o.backends) {
    if (b != "filesystem" && b != "postgres")
      usage("--backends: unknown backend \"" + b + "\" (filesystem, postgres)");
    if (std::count(o.backends.begin(), o.backends.end(), b) > 1)
      usage("--backends: " + b + " twice");
  }
  if (std::count(o.backends.begin(), o.backends.end(), "postgres") && o.pg_url.empty())
    usage("--backends postgres needs --pg-url URL (or TROUPE_TEST_PG_URL)");
  return o;
}

// ---- results ----------------------------------------------------------------------

struct row {
  std::string scenario, backend, figure, value, goal;
};
std::vector<row> results;
std::map<std::string, double> figures;  // --json: the key figures as numbers (bench/harness.cpp reads them)
std::mutex log_mu;
// The backend the rows added now belong to (scenarios set it per backend).
std::string current_backend = "filesystem";

void add(const std::string& scenario, const std::string& figure, const std::string& value,
         const std::string& goal = "") {
  results.push_back({scenario, current_backend, figure, value, goal});
}

// The --json key of a figure of the current backend: filesystem keeps the names
// bench/harness.cpp reads; postgres gets "pg_" in front.
std::string fig(const std::string& name) {
  return current_backend == "postgres" ? "pg_" + name : name;
}

template <class... A>
void say(A&&... a) {
  std::lock_guard<std::mutex> lk(log_mu);
  std::ostringstream os;
  (os << ... << a);
  std::cout << os.str() << std::endl;
}

std::string fmt(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Thousands separators: 1234567 -> "1,234,567".
std::string num(double v) {
  std::string s = fmt(v, 0);
  std::string out;
  int start = (s[0] == '-') ? 1 : 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > static_cast<std::size_t>(start) && (s.size() - i) % 3 == 0)
      out.push_back(',');
    out.push_back(s[i]);
  }
  return out;
}

double secs_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}
double us_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct stats {
  std::size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

// Nearest-rank percentiles.
stats stats_of(std::vector<double> v) {
  stats s;
  s.n = v.size();
  if (v.empty())
    return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  s.p50 = at(0.50);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.max = v.back();
  double sum = 0;
  for (double x : v)
    sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

std::string stats_text(const stats& s) {
  return "p50 " + fmt(s.p50) + " / p90 " + fmt(s.p90) + " / p99 " + fmt(s.p99) + " / max " +
         fmt(s.max) + " (mean " + fmt(s.mean) + ", n=" + std::to_string(s.n) + ")";
}

// ---- node helpers -----------------------------------------------------------------

const std::string admin_token = "bench-" + random_token(24);
headers_t bearer() { return {{"Authorization", "Bearer " + admin_token}}; }


std::string metrics_text(uint16_t port) {
  http_client c(port);
  auto r = c.get("/_troupe/metrics", bearer(), milliseconds(20000));
  if (r.status != 200)
    throw std::runtime_error("GET /_troupe/metrics: " + r.describe());
  return r.body;
}

double metric(const std::string& text, const std::string& name, const std::string& labels = "") {
  auto v = prometheus_sample(text, name, labels);
  if (!v)
    throw std::runtime_error("no sample " + name + (labels.empty() ? "" : "{" + labels + "}") +
                             " in the metrics");
  return *v;
}

// (upper bound, cumulative count) of a histogram's buckets.
std::vector<std::pair<double, double>> buckets(const std::string& text, const std::string& name) {
  std::vector<std::pair<double, double>> out;
  std::regex re("^" + name + R"re(_bucket\{le="([^"]+)"\} ([0-9.eE+-]+)$)re");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, re)) {
      double le = m[1] == "+Inf" ? INFINITY : std::stod(m[1]);
      out.emplace_back(le, std::stod(m[2]));
    }
  }
  return out;
}

// "0.52 0.61 0.70": other work on the machine skews every figure.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  throw std::runtime_error("no VmRSS in /proc/" + std::to_string(pid) + "/status");
}

struct parcel_files {
  std::size_t users = 0, connections = 0, other = 0;
};
// *.parcel files under dir (recursively); *guests counts those named guest_*.
std::size_t count_parcels_under(const fs::path& dir, std::size_t* guests = nullptr) {
  std::size_t n = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (it->is_regular_file(ec) && !name.empty() && name[0] != '.' && name.size() > 7 &&
        name.compare(name.size() - 7, 7, ".parcel") == 0) {
      ++n;
      if (guests && name.rfind("guest_", 0) == 0)
        ++*guests;
    }
  }
  return n;
}

// The same count from names alone (readdir, no stat): cheap enough to poll.
std::size_t count_parcel_names(const fs::path& users_dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator shard(users_dir, ec), end; !ec && shard != end; shard.increment(ec)) {
    std::error_code ec2;
    for (fs::directory_iterator it(shard->path(), ec2), e2; !ec2 && it != e2; it.increment(ec2)) {
      auto name = it->path().filename().native();
      if (!name.empty() && name[0] != '.' && name.size() > 7 && name.compare(name.size() - 7, 7, ".parcel") == 0)
        ++n;
    }
  }
  return n;
}

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

// Removes a deposit directory: its shard directories on 16 threads (an unlink can wait
// on the disk, e.g. a filesystem mounted with "discard"), then the rest. Best effort.
void remove_deposit(const fs::path& dir) {
  std::vector<fs::path> shards;
  std::error_code ec;
  for (const char* kind : {"users", "connections"})
    for (fs::directory_iterator it(dir / kind, ec), end; !ec && it != end; it.increment(ec))
      shards.push_back(it->path());
  parallel_for(shards.size(), 16, [&](std::size_t i) {
    std::error_code e;
    fs::remove_all(shards[i], e);
  });
  fs::remove_all(dir, ec);
}

// Runs fn(i) for i in [0, n) on `threads` threads; the first exception is rethrown.
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex mu;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (;;) {
        std::size_t i = next.fetch_add(1);
        if (i >= n || failed)
          return;
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu);
          if (!first)
            first = std::current_exception();
          failed = true;
          return;
        }
      }
    });
  for (auto& th : pool)
    th.join();
  if (first)
    std::rethrow_exception(first);
}

void expect_status(const response& r, int code, const std::string& what) {
  if (r.status != code)
    throw std::runtime_error(what + ": expected HTTP " + std::to_string(code) + ", got " +
                             r.describe());
}

long long count_in(const response& r, const std::string& what) {
  expect_status(r, 200, what);
  return r.json().at("count").get<long long>();
}

// A node, or its diagnostics in the exception when a step fails.
template <class F>
void with_diagnostics(node_process& node, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + "\n" + node.diagnostics());
  }
}

// ---- the backends -----------------------------------------------------------------

// One libpq connection of the bench's own (counts, schemas); throws on any error.
class pg_connection {
public:
  explicit pg_connection(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string why = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("postgres: cannot connect to " + troupe::store::redact_postgres_url(url) + ": " + why);
    }
    exec("SET client_min_messages = warning");
  }
  ~pg_connection() { PQfinish(conn_); }
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;

  // Runs `sql`; the first column of the first row ("" when none).
  std::string exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string why = PQerrorMessage(conn_);
      PQclear(r);
      throw std::runtime_error("postgres: " + sql.substr(0, 80) + ": " + why);
    }
    std::string out = PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return out;
  }
  std::size_t count(const std::string& sql) { return static_cast<std::size_t>(std::stoull(exec(sql))); }

private:
  PGconn* conn_;
};

// A schema of its own on the server for one node (or deposit), dropped when it goes.
class pg_schema {
public:
  pg_schema(std::string url, const std::string& what) : url_(std::move(url)) {
    static std::atomic<int> next{0};
    name_ = "bench_" + std::to_string(::getpid()) + "_" + std::to_string(++next);
    pg_connection(url_).exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
    say("postgres schema ", name_, " (", what, ")");
  }
  ~pg_schema() {
    try {
      auto t = steady::now();
      pg_connection(url_).exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
      say("dropped postgres schema ", name_, " in ", fmt(secs_since(t), 2), " s");
    } catch (const std::exception& e) {
      say("could not drop postgres schema ", name_, ": ", e.what());
    }
  }
  pg_schema(const pg_schema&) = delete;
  pg_schema& operator=(const pg_schema&) = delete;

  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }

  // The node flags that put a node on this schema.
  std::vector<std::string> node_args() const {
    return {"--set", "deposit.backend=postgres", "--set", "deposit.url=" + url_, "--set", "deposit.schema=" + name_};
  }
  // A store-library deposit on it (migrates it); batch_rows as the node's default.
  std::unique_ptr<troupe::store::deposit> open() const {
    troupe::store::postgres_options po;
    po.url = url_;
    po.schema = name_;
    po.batch_rows = 1000;
    po.statement_timeout = milliseconds(120000);
    return troupe::store::make_postgres_deposit(po);
  }

private:
  std::string url_, name_;
};

// A node of the current backend: on postgres a fresh schema (nullptr on filesystem).
std::unique_ptr<pg_schema> schema_for(const options& o, const std::string& backend, const std::string& what) {
  if (backend != "postgres")
    return nullptr;
  return std::make_unique<pg_schema>(o.pg_url, what);
}

std::vector<std::string> node_args(const pg_schema* schema) {
  std::vector<std::string> args{"--admin-token", admin_token};
  if (schema) {
    auto pg = schema->node_args();
    args.insert(args.end(), pg.begin(), pg.end());
  }
  return args;
}

// " (postgres)" in a heading, "[postgres] " in front of a line; nothing for
// filesystem (its output stays as it was).
std::string on_backend() { return current_backend == "filesystem" ? "" : " (" + current_backend + ")"; }
std::string tag() { return current_backend == "filesystem" ? "" : "[" + current_backend + "] "; }

// ---- scenario 1: wake latency -----------------------------------------------------

// One backend's node of scenario 1 and what was measured on it.
struct wake_run {
  std::string backend;
  std::unique_ptr<pg_schema> schema;  // postgres only
  std::unique_ptr<node_process> node;
  std::vector<std::string> cookies, users;
  std::vector<double> wake_us, active_us;
  std::mt19937_64 rng{42};
  std::string m0;
  double create_s = 0, freeze_s = 0;
};

// A step on one run's node; its failure carries the backend and the node's diagnostics.
template <class F>
void on_run(wake_run& r, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw std::runtime_error("[" + r.backend + "] " + e.what() + "\n" + r.node->diagnostics());
  }
}

// K users with a 4 KiB note each, then all frozen.
void prepare_wakes(wake_run& r, std::size_t K) {
  const uint16_t port = r.node->port();
  const std::string text(4000, 'x');  // 4000 bytes of note: the store is ~4 KiB
  r.cookies.assign(K, {});
  r.users.assign(K, {});
  auto t0 = steady::now();
  parallel_for(K, 4, [&](std::size_t i) {
    http_client c(port);
    std::string note = "user " + std::to_string(i) + " ";
    note += text.substr(0, 4000 - note.size());  // exactly 4000 bytes
    auto resp = c.post_json("/api/notes", {{"text", note}});
    expect_status(resp, 200, "POST /api/notes");
    auto w = c.get("/api/whoami");
    expect_status(w, 200, "GET /api/whoami");
    r.users[i] = w.json().at("user").get<std::string>();
    if (!c.cookie())
      throw std::runtime_error("no troupe_cid cookie for user " + r.users[i]);
    r.cookies[i] = *c.cookie();
  });
  r.create_s = secs_since(t0);
  say(tag(), "created ", K, " users in ", fmt(r.create_s, 2), " s");

  t0 = steady::now();
  parallel_for(K, 4, [&](std::size_t i) {
    http_client admin(port);
    auto resp = admin.post("/_troupe/users/" + r.users[i] + "/freeze", {}, bearer(), milliseconds(30000));
    expect_status(resp, 200, "freeze of " + r.users[i]);
    if (resp.json() != nlohmann::json({{"frozen", r.users[i]}}))
      throw std::runtime_error("freeze of " + r.users[i] + " answered " + resp.body);
  });
  r.freeze_s = secs_since(t0);
  r.m0 = metrics_text(port);
  say(tag(), "froze ", K, " users in ", fmt(r.freeze_s, 2), " s; troupe_users frozen=",
      metric(r.m0, "troupe_users", "state=\"frozen\""), " active=", metric(r.m0, "troupe_users", "state=\"active\""));
  if (metric(r.m0, "troupe_users", "state=\"active\"") != 0)
    throw std::runtime_error("users still active after freezing all of them:\n" + r.m0);
}

// A GET /api/counter on a fresh connection connected before the clock starts (us).
double time_get(uint16_t port, const std::string& cookie, const std::string& who) {
  http_client c(port);
  c.set_cookie(cookie);
  c.connect();
  auto a = steady::now();
  auto r = c.get("/api/counter");
  auto b = steady::now();
  if (count_in(r, "GET /api/counter of " + who) != 0)
    throw std::runtime_error("GET /api/counter of " + who + ": count is not 0: " + r.body);
  return us_between(a, b);
}

// The i-th wake of a run, then a request of a random already-woken user of his.
void wake_one(wake_run& r, std::size_t i) {
  const uint16_t port = r.node->port();
  r.wake_us.push_back(time_get(port, r.cookies[i], r.users[i] + " (wake)"));
  std::size_t j = std::uniform_int_distribution<std::size_t>(0, i)(r.rng);
  r.active_us.push_back(time_get(port, r.cookies[j], r.users[j] + " (active)"));
}

// The figures of one run (current_backend is its backend).
void report_wakes(wake_run& r, const options& o, double measure_s) {
  const std::size_t K = r.users.size();
  const uint16_t port = r.node->port();
  const std::string& m0 = r.m0;
  auto m1 = metrics_text(port);
  const double wakes = metric(m1, "troupe_user_wakes_total") - metric(m0, "troupe_user_wakes_total");
  const double reads = metric(m1, "troupe_deposit_reads_total") - metric(m0, "troupe_deposit_reads_total");
  const double wsum = metric(m1, "troupe_user_wake_seconds_sum") - metric(m0, "troupe_user_wake_seconds_sum");
  const double wcount = metric(m1, "troupe_user_wake_seconds_count") - metric(m0, "troupe_user_wake_seconds_count");

  // The note came back with the woken store (a sample of users).
  for (std::size_t i = 0; i < K; i += std::max<std::size_t>(1, K / 20)) {
    http_client c(port);
    c.set_cookie(r.cookies[i]);
    auto resp = c.get("/api/notes");
    expect_status(resp, 200, "GET /api/notes of " + r.users[i]);
    auto notes = resp.json().at("notes");
    if (notes.size() != 1 || notes[0].get<std::string>().rfind("user " + std::to_string(i) + " ", 0) != 0 ||
        notes[0].get<std::string>().size() != 4000)
      throw std::runtime_error("the note of " + r.users[i] + " did not survive the freeze: " +
                               resp.body.substr(0, 200));
  }

  auto w = stats_of(r.wake_us), a = stats_of(r.active_us);
  say(tag(), "measured in ", fmt(measure_s, 2), " s");
  say(tag(), "wake   (us): ", stats_text(w));
  say(tag(), "active (us): ", stats_text(a));
  say(tag(), "node: wakes ", wakes, ", parcel reads ", reads, ", troupe_user_wake_seconds mean ",
      fmt(wcount > 0 ? wsum / wcount * 1e6 : 0, 1), " us over ", wcount);

  // Where the node's own wake histogram puts its p99 (a bucket bound).
  auto b0 = buckets(m0, "troupe_user_wake_seconds"), b1 = buckets(m1, "troupe_user_wake_seconds");
  std::string hist_p99 = "n/a";
  if (b0.size() == b1.size() && !b1.empty() && wcount > 0) {
    for (std::size_t i = 0; i < b1.size(); ++i)
      if (b1[i].second - b0[i].second >= 0.99 * wcount) {
        hist_p99 = std::isinf(b1[i].first) ? "> last bucket" : "<= " + fmt(b1[i].first * 1e6) + " us";
        break;
      }
  }

  const std::string s = "1 wake";
  add(s, "users created (4 KiB note each) / time", num(K) + " in " + fmt(r.create_s, 2) + " s");
  add(s, "ordered freezes (POST /_troupe/users/{u}/freeze, 4 clients)",
      fmt(r.freeze_s, 2) + " s = " + num(K / r.freeze_s) + " freezes/s");
  add(s, "wake latency p50 / p90 / p99 / max (us)" +
             (o.wake_gap_ms ? ", " + std::to_string(o.wake_gap_ms) + " ms pause before each" : std::string()),
      fmt(w.p50) + " / " + fmt(w.p90) + " / " + fmt(w.p99) + " / " + fmt(w.max),
      std::string("p99 <= 1000 us: ") + (w.p99 <= 1000 ? "met" : "NOT met"));
  add(s, "active latency p50 / p90 / p99 / max (us)",
      fmt(a.p50) + " / " + fmt(a.p90) + " / " + fmt(a.p99) + " / " + fmt(a.max));
  add(s, "p99 wake / p99 active", fmt(a.p99 > 0 ? w.p99 / a.p99 : 0, 2));
  figures[fig("wake_p99_us")] = w.p99;
  figures[fig("active_p99_us")] = a.p99;
  figures[fig("wake_p50_us")] = w.p50;
  add(s, "p50 wake - p50 active (us): the wake's own cost", fmt(w.p50 - a.p50));
  add(s, "node: troupe_user_wake_seconds sum/count (us), histogram p99",
      fmt(wcount > 0 ? wsum / wcount * 1e6 : 0, 1) + " (n=" + num(wcount) + "), p99 " + hist_p99);
  add(s, "node: wakes / parcel reads during the run", num(wakes) + " / " + num(reads));
}

// Every backend's node runs at once; the wakes (and active requests) alternate
// between them, one at a time, so both see the same machine.
void wake_latency(const options& o) {
  const std::size_t K = o.wake_users;
  if (K == 0)
    throw std::runtime_error("--wake-users 0: nothing to measure");
  say("\n## 1. wake latency: ", K, " frozen users with a ~4 KiB store");
  std::vector<std::unique_ptr<wake_run>> runs;
  for (const auto& b : o.backends) {
    current_backend = b;
    auto r = std::make_unique<wake_run>();
    r->backend = b;
    r->schema = schema_for(o, b, "scenario 1");
    r->node = std::make_unique<node_process>(node_args(r->schema.get()));
    say(tag(), "node pid ", r->node->pid(), " on port ", r->node->port(), ", deposit ",
        r->schema ? "postgres schema " + r->schema->name() : r->node->deposit_dir());
    on_run(*r, [&] { prepare_wakes(*r, K); });
    runs.push_back(std::move(r));
  }
  if (runs.size() > 1)
    say("wakes interleaved over ", runs.size(), " nodes");
  auto t0 = steady::now();
  for (std::size_t i = 0; i < K; ++i)
    for (auto& r : runs) {
      if (o.wake_gap_ms)
        std::this_thread::sleep_for(milliseconds(o.wake_gap_ms));
      on_run(*r, [&] { wake_one(*r, i); });
    }
  const double measure_s = secs_since(t0);
  for (auto& r : runs) {
    current_backend = r->backend;
    on_run(*r, [&] { report_wakes(*r, o, measure_s); });
  }
}

// ---- scenario 2: soft quit --------------------------------------------------------

void soft_quit(const options& o) {
  const std::size_t N = o.users_quit;
  if (N == 0)
    throw std::runtime_error("--users-quit 0: nothing to measure");
  say("\n## 2. soft quit of ", N, " active guests", on_backend());
  auto schema = schema_for(o, current_backend, "scenario 2");  // outlives the node
  node_process node(node_args(schema.get()));
  say("node pid ", node.pid(), " on port ", node.port(), ", deposit ",
      schema ? "postgres schema " + schema->name() : node.deposit_dir());
  std::unique_ptr<pg_connection> pg;  // the counts on postgres
  if (schema)
    pg = std::make_unique<pg_connection>(schema->url());
  const std::string users_table = schema ? schema->name() + ".users" : "";
  // User parcels standing in the deposit: file names (readdir, no stat) or rows.
  auto user_parcels_now = [&]() -> std::size_t {
    if (pg)
      return pg->count("SELECT count(*) FROM " + users_table + " WHERE parcel IS NOT NULL");
    return count_parcel_names(fs::path(node.deposit_dir()) / "users");
  };
  struct deposit_guard {  // N parcels: removed in parallel before node_process removes the rest
    node_process& node;
    ~deposit_guard() {
      node.kill9();
      if (!std::getenv("TROUPE_TEST_KEEP_DIRS"))
        remove_deposit(node.deposit_dir());
    }
  } guard{node};
  with_diagnostics(node, [&] {
    const uint16_t port = node.port();
    std::atomic<std::size_t> next{0}, done{0}, errors{0};
    std::atomic<bool> abort{false};
    std::string first_error;
    std::mutex err_mu;
    auto t0 = steady::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < o.quit_threads; ++t)
      pool.emplace_back([&] {
        auto c = std::make_unique<http_client>(port);
        c->use_cookie_jar(false);
        while (!abort && next.fetch_add(1) < N) {
          for (int attempt = 0;; ++attempt) {
            std::string why;
            try {
              // A guest with state (count 1): the soft quit writes his parcel (a guest
              // without state leaves no trace, nothing to write).
              auto r = c->post("/api/counter/incr");
              if (r.status == 200 && troupe_cid_cookie(r)) {
                done.fetch_add(1);
                break;
              }
              why = "POST /api/counter/incr: " + r.describe();
            } catch (const std::exception& e) {
              why = e.what();
              c = std::make_unique<http_client>(port);
              c->use_cookie_jar(false);
            }
            {
              std::lock_guard<std::mutex> lk(err_mu);
              if (first_error.empty())
                first_error = why;
            }
            if (errors.fetch_add(1) >= 100 || attempt >= 5) {
              abort = true;
              return;
            }
            std::this_thread::sleep_for(milliseconds(50));
          }
        }
      });
    // Progress every 5 s.
    while (done < N && !abort) {
      std::this_thread::sleep_for(milliseconds(200));
      static auto last = steady::now();
      if (secs_since(last) >= 5) {
        last = steady::now();
        say("  minted ", num(done), " guests (", fmt(secs_since(t0), 1), " s)");
      }
      if (secs_since(t0) > 600) {
        abort = true;
        say("  minting has taken over 10 min: stopping");
      }
    }
    for (auto& th : pool)
      th.join();
    double mint_s = secs_since(t0);
    if (abort || done != N)
      throw std::runtime_error("minting guests failed after " + std::to_string(done) + " of " +
                               std::to_string(N) + " (" + std::to_string(errors) +
                               " errors); first error: " + first_error);
    say("minted ", num(N), " guests in ", fmt(mint_s, 2), " s (", num(N / mint_s), "/s, ", errors.load(),
        " retried errors)");

    auto m = metrics_text(port);
    const double active = metric(m, "troupe_users", "state=\"active\"");
    say("troupe_users{state=\"active\"} = ", num(active));
    if (active < static_cast<double>(N))
      throw std::runtime_error("troupe_users{state=\"active\"} is " + fmt(active) + ", not " +
                               std::to_string(N) + ":\n" + m);
    const long rss_before = rss_kib(node.pid());

    // While the node quits: when do all N user parcels stand in the deposit? (a
    // readdir count, no stat, every 250 ms; the renames precede the final flush)
    const fs::path users_dir = fs::path(node.deposit_dir()) / "users";
    auto sigterm = steady::now();
    node.terminate();
    std::optional<int> code;
    double all_on_disk_s = -1;
    std::size_t on_disk = 0;
    const auto give_up = sigterm + std::chrono::minutes(10);
    while (!(code = node.wait_exit(milliseconds(250))) && steady::now() < give_up) {
      if (all_on_disk_s < 0 && (on_disk = user_parcels_now()) >= N)
        all_on_disk_s = secs_since(sigterm);
    }
    double exit_s = secs_since(sigterm);
    if (!code)
      throw std::runtime_error("the node did not exit within 10 min of SIGTERM");
    bool by_exit = false;  // the node was quicker than the 250 ms poll
    if (all_on_disk_s < 0 && (on_disk = user_parcels_now()) >= N) {
      all_on_disk_s = exit_s;
      by_exit = true;
    }
    say("node exited with code ", *code, " ", fmt(exit_s, 2), " s after SIGTERM");
    if (all_on_disk_s >= 0)
      say("all ", num(N), " user parcels were in the deposit ", fmt(all_on_disk_s, 2), " s after SIGTERM");
    auto log = node.stderr_log();
    std::smatch sm;
    static const std::regex quit_re(R"(soft quit: ([0-9]+) user\(s\) frozen in ([0-9]+) ms)");
    const bool have_line = std::regex_search(log, sm, quit_re);
    const double frozen = have_line ? std::stod(sm[1]) : 0, ms = have_line ? std::stod(sm[2]) : 0;
    if (have_line)
      say("log: ", sm[0].str());
    else
      say("NO soft quit line in the node's log; its last lines:\n", node.stderr_tail(1500));
    auto t_walk = steady::now();
    std::size_t guest_files = 0, user_files = 0, conn_files = 0;
    if (pg) {
      user_files = user_parcels_now();
      guest_files = pg->count("SELECT count(*) FROM " + users_table +
                              " WHERE parcel IS NOT NULL AND substring(key from 1 for 6) = 'guest_'::bytea");
      conn_files = pg->count("SELECT count(*) FROM " + schema->name() + ".connections");
      say("parcel rows: ", num(user_files), " user (", num(guest_files), " guest_*), ", num(conn_files),
          " connection (counted in ", fmt(secs_since(t_walk), 2), " s)");
    } else {
      user_files = count_parcels_under(users_dir, &guest_files);
      conn_files = count_parcels_under(fs::path(node.deposit_dir()) / "connections");
      say("parcel files: ", num(user_files), " user (", num(guest_files), " guest_*), ", num(conn_files),
          " connection (walked in ",
          fmt(secs_since(t_walk), 2), " s)");
    }

    const std::string s = "2 quit";
    // Issue 3's goal on files; issue 12's on PostgreSQL (group commit).
    const double quit_goal = pg ? 20000 : 10000;
    const std::string quit_goal_text = pg ? ">= 20,000 users/s: " : ">= 10,000 users/s: ";
    add(s, "guests minted with state (POST /api/counter/incr, no cookie, " + std::to_string(o.quit_threads) + " clients)",
        num(N) + " in " + fmt(mint_s, 2) + " s = " + num(N / mint_s) + "/s");
    add(s, "troupe_users{state=\"active\"} before SIGTERM", num(active));
    add(s, "node RSS with them active", num(rss_before) + " KiB = " + num(rss_before * 1024.0 / N) + " B/user");
    if (have_line) {
      add(s, "soft quit (node log): users frozen in ms", num(frozen) + " in " + num(ms) + " ms");
      figures[fig("quit_users_per_s")] = ms > 0 ? frozen / (ms / 1000.0) : 0;
      add(s, "soft quit rate", num(ms > 0 ? frozen / (ms / 1000.0) : 0) + " users/s",
          quit_goal_text + (ms > 0 && frozen / (ms / 1000.0) >= quit_goal ? "met" : "NOT met"));
    } else {
      const bool watchdog = log.find("shutdown did not complete in time") != std::string::npos;
      add(s, "soft quit (node log)",
          std::string("NO \"soft quit: ...\" line") + (watchdog ? ": the shutdown watchdog killed the node" : ""),
          quit_goal_text + "NOT met");
    }
    add(s, "all N user parcels in the deposit after SIGTERM",
        all_on_disk_s >= 0 ? (by_exit ? "by the exit, <= " : "") + fmt(all_on_disk_s, 2) + " s (>= " +
                                 num(N / all_on_disk_s) + " users/s)"
                           : "never (" + num(on_disk) + " seen)");
    add(s, "SIGTERM to exit (wall), exit code", fmt(exit_s, 2) + " s, code " + std::to_string(*code));
    add(s, std::string(pg ? "parcel rows" : "parcel files") + " written: users (of which guest_*) / connections",
        num(user_files) + " (" + num(guest_files) + ") / " + num(conn_files));
    if (!have_line || *code != 0)
      throw std::runtime_error("the soft quit did not complete (exit code " + std::to_string(*code) +
                               (have_line ? "" : ", no soft quit line") + ")");
  });
}

// ---- scenario 3: start-up with M frozen users -------------------------------------

// The shape of the notes sample's store (samples/notes/notes.hpp, notes_state).
struct notes_state {
  std::int64_t count = 0;
  std::vector<std::string> notes;
  MSGPACK_DEFINE_MAP(count, notes);
};

std::string user_name(std::size_t i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "u%07zu", i);
  return buf;
}

troupe::store::parcel user_parcel(std::size_t i) {
  notes_state st;
  st.count = static_cast<std::int64_t>(i);
  st.notes.push_back("note of " + user_name(i) + ": generated by deposit_bench, ~100 bytes in all");
  troupe::store::parcel p;
  p.generation = 1;
  p.writer_node = "deposit_bench";
  p.writer_worker = "gen";
  p.cause = troupe::store::parcel_cause::freeze;
  p.payload = troupe::store::pack(st);
  return p;
}

// Writes users [from, to] (1-based names) in batches of 4096 with put_batch, one
// thread per entry of `deps` (the same filesystem deposit several times, or one
// PostgreSQL deposit each: its calls are served one at a time per connection).
void generate(const std::vector<troupe::store::deposit*>& deps, std::size_t from, std::size_t to) {
  constexpr std::size_t batch_size = 4096;
  const std::size_t n = to >= from ? to - from + 1 : 0;
  const std::size_t batches = (n + batch_size - 1) / batch_size;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex mu;
  std::vector<std::thread> pool;
  for (auto* dep : deps)
    pool.emplace_back([&, dep] {
      for (std::size_t b; !failed && (b = next.fetch_add(1)) < batches;) {
        try {
          std::vector<troupe::store::deposit::batch_entry> batch;
          std::size_t lo = from + b * batch_size, hi = std::min(to, lo + batch_size - 1);
          batch.reserve(hi - lo + 1);
          for (std::size_t i = lo; i <= hi; ++i)
            batch.push_back({false, user_name(i), user_parcel(i)});
          auto errs = dep->put_batch(batch);
          for (std::size_t k = 0; k < errs.size(); ++k)
            if (!errs[k].empty())
              throw std::runtime_error("put_batch: " + batch[k].key + ": " + errs[k]);
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu);
          if (!first)
            first = std::current_exception();
          failed = true;
        }
      }
    });
  for (auto& th : pool)
    th.join();
  if (first)
    std::rethrow_exception(first);
}

struct start_figures {
  double ready_ms = 0;
  long rss_ready = 0, rss_10s = 0, rss_census = 0;
  double census_s = -1;  // time from ready until troupe_users{frozen} reached the target
  double frozen_seen = 0;
};

// Starts a node on `dir` (its own --deposit), times it to the ready line, then watches
// RSS and troupe_users{state="frozen"} until it reaches `target` and 10 s have passed.
// `schema`: on PostgreSQL, the node's deposit (dir is then only its fallback).
std::unique_ptr<node_process> start_and_watch(const std::string& dir, const pg_schema* schema, std::size_t target,
                                              start_figures& f) {
  node_options no;
  no.with_deposit = false;
  no.start_timeout = milliseconds(60000);
  std::vector<std::string> args{"--deposit", dir};
  for (auto& a : node_args(schema))
    args.push_back(a);
  auto t0 = steady::now();
  auto node = std::make_unique<node_process>(args, no);
  auto ready = steady::now();
  f.ready_ms = std::chrono::duration<double, std::milli>(ready - t0).count();
  f.rss_ready = rss_kib(node->pid());
  say("node pid ", node->pid(), " ready in ", fmt(f.ready_ms, 1), " ms, RSS ", num(f.rss_ready), " KiB");
  with_diagnostics(*node, [&] {
    bool have_10s = false;
    for (;;) {
      double t = secs_since(ready);
      if (!have_10s && t >= 10) {
        f.rss_10s = rss_kib(node->pid());
        have_10s = true;
        say("  RSS after 10 s: ", num(f.rss_10s), " KiB");
      }
      if (f.census_s < 0) {
        f.frozen_seen = metric(metrics_text(node->port()), "troupe_users", "state=\"frozen\"");
        if (f.frozen_seen >= static_cast<double>(target)) {
          f.census_s = secs_since(ready);
          f.rss_census = rss_kib(node->pid());
          say("  troupe_users{state=\"frozen\"} = ", num(f.frozen_seen), " after ", fmt(f.census_s, 2),
              " s (RSS ", num(f.rss_census), " KiB)");
        } else if (t > 300) {
          throw std::runtime_error("troupe_users{state=\"frozen\"} is " + fmt(f.frozen_seen) + ", not " +
                                   std::to_string(target) + ", 5 min after ready");
        }
      }
      if (have_10s && f.census_s >= 0)
        return;
      if (!node->running())
        throw std::runtime_error("the node exited");
      std::this_thread::sleep_for(milliseconds(f.census_s < 0 ? 50 : 200));
    }
  });
  return node;
}

void startup(const options& o) {
  std::size_t M = o.frozen;
  say("\n## 3. start-up with ", M, " frozen users in the deposit", on_backend());
  // On postgres: the schemas of the two nodes (dropped after them, declared first).
  std::unique_ptr<pg_schema> empty_schema, full_schema;
  if (current_backend == "postgres") {
    empty_schema = std::make_unique<pg_schema>(o.pg_url, "scenario 3, empty deposit");
    full_schema = std::make_unique<pg_schema>(o.pg_url, "scenario 3, M frozen users");
  }
  const std::string root = make_temp_dir("troupe-bench-");
  struct cleanup {
    std::string root;
    bool keep;
    ~cleanup() {
      if (keep) {
        say("kept ", root);
        return;
      }
      auto t = steady::now();
      remove_deposit(fs::path(root) / "full");
      std::error_code ec;
      fs::remove_all(root, ec);
      say("removed ", root, " in ", fmt(secs_since(t), 1), " s", ec ? " (" + ec.message() + ")" : "");
    }
  } cleanup_root{root, o.keep};
  const std::string empty_dir = root + "/empty", full_dir = root + "/full";
  const std::string s = "3 start";

  // -- the M parcels, straight through the store library ------------------------------
  auto dep = full_schema ? full_schema->open() : troupe::store::make_filesystem_deposit(full_dir);
  std::vector<std::unique_ptr<troupe::store::deposit>> more_connections;  // postgres: one per generating thread
  std::vector<troupe::store::deposit*> gen_deps{dep.get()};
  for (unsigned t = 1; t < o.gen_threads; ++t) {
    if (full_schema) {
      more_connections.push_back(full_schema->open());
      gen_deps.push_back(more_connections.back().get());
    } else {
      gen_deps.push_back(dep.get());
    }
  }
  const std::string gen_how = "put_batch 4096, " + std::to_string(o.gen_threads) + " threads" +
                              (full_schema ? ", batch_rows 1000, a connection each" : "");
  {
    auto one = user_parcel(1);
    auto encoded = troupe::store::encode(one);
    say("one parcel: ", one.payload.size(), " bytes of payload, ", encoded.size(), " bytes encoded");
    add(s, "parcel size: payload / encoded (bytes)",
        std::to_string(one.payload.size()) + " / " + std::to_string(encoded.size()));
  }
  auto g0 = steady::now();
  const std::size_t probe = std::min<std::size_t>(M, 100000);
  generate(gen_deps, 1, probe);
  double probe_s = secs_since(g0);
  double rate = probe / std::max(probe_s, 1e-9);
  say(tag(), "generated ", num(probe), " parcels in ", fmt(probe_s, 2), " s = ", num(rate), " parcels/s (",
      o.gen_threads, " threads, put_batch of 4096", full_schema ? ", batch_rows 1000" : "", ")");
  add(s, "parcel generation rate, first " + num(probe) + " (" + gen_how + ")", num(rate) + " parcels/s");
  if (M > probe) {
    double projected = M / rate;
    if (projected > o.gen_budget_s) {
      std::size_t fit = static_cast<std::size_t>(rate * o.gen_budget_s) / 100000 * 100000;
      fit = std::max(fit, probe);
      say("WARNING: ", num(M), " parcels would take ~", fmt(projected), " s (> --gen-budget ", o.gen_budget_s,
          " s): M is cut to ", num(fit));
      add(s, "M cut (generation over budget)", num(M) + " -> " + num(fit) + " (projected " + fmt(projected) + " s)");
      M = fit;
    }
    if (M > probe) {
      generate(gen_deps, probe + 1, M);
    }
  }
  double gen_s = secs_since(g0);
  more_connections.clear();
  say(tag(), "generated ", num(M), " parcels in ", fmt(gen_s, 2), " s = ", num(M / gen_s), "/s");
  figures[fig("generation_s")] = gen_s;
  add(s, "generation of M parcels (M / time / rate)",
      num(M) + " / " + fmt(gen_s, 1) + " s / " + num(M / gen_s) + " per s");
  auto c0 = steady::now();
  const std::size_t counted = dep->count_users();
  double count_s = secs_since(c0);
  say(tag(), "deposit count_users() = ", num(counted), " in ", fmt(count_s, 2), " s (warm)");
  if (counted != M)
    throw std::runtime_error("count_users() says " + std::to_string(counted) + ", not " + std::to_string(M));
  dep.reset();
  add(s, full_schema ? "deposit count_users() in this process (one SELECT count)"
                     : "deposit count_users() in this process (warm dentries)",
      fmt(count_s, 2) + " s");
  if (empty_schema)  // migrated like the full one, so both nodes find a current schema
    empty_schema->open().reset();

  // -- a node on the empty deposit, then one on the M-user deposit --------------------
  say("node on an empty deposit", on_backend(), ":");
  start_figures fe, fm;
  start_and_watch(empty_dir, empty_schema.get(), 0, fe).reset();
  say("node on the deposit of ", num(M), " users", on_backend(), ":");
  auto node = start_and_watch(full_schema ? root + "/full-fallback" : full_dir, full_schema.get(), M, fm);

  with_diagnostics(*node, [&] {
    // -- 100 random frozen users: login (fresh client) + GET /api/counter -------------
    std::mt19937_64 rng(7);
    std::vector<std::size_t> picks;
    const std::size_t want = std::min<std::size_t>(100, M);
    while (picks.size() < want) {
      std::size_t i = std::uniform_int_distribution<std::size_t>(1, M)(rng);
      if (std::find(picks.begin(), picks.end(), i) == picks.end())
        picks.push_back(i);
    }
    std::vector<double> total_us, login_us, get_us;
    for (auto i : picks) {
      http_client c(node->port());
      c.connect();
      auto a = steady::now();
      auto r = c.post_json("/api/login", {{"user", user_name(i)}});
      auto b = steady::now();
      expect_status(r, 200, "POST /api/login " + user_name(i));
      auto g = c.get("/api/counter");
      auto e = steady::now();
      auto n = count_in(g, "GET /api/counter of " + user_name(i));
      if (n != static_cast<long long>(i))
        throw std::runtime_error(user_name(i) + " woke with count " + std::to_string(n) + ", not " +
                                 std::to_string(i));
      login_us.push_back(us_between(a, b));
      get_us.push_back(us_between(b, e));
      total_us.push_back(us_between(a, e));
    }
    auto tot = stats_of(total_us), lg = stats_of(login_us), gt = stats_of(get_us);
    say("login+wake (us): ", stats_text(tot));
    say("  login (us): ", stats_text(lg));
    say("  GET   (us): ", stats_text(gt));

    auto mib = [](long kib) { return fmt(kib / 1024.0, 1) + " MiB"; };
    add(s, "start to ready line: empty deposit / M users (ms)",
        fmt(fe.ready_ms, 1) + " / " + fmt(fm.ready_ms, 1),
        std::string("start-up unaffected: ") +
            (fm.ready_ms <= fe.ready_ms * 1.5 + 20 ? "met" : "NOT met"));
    add(s, "RSS at ready: empty / M users", mib(fe.rss_ready) + " / " + mib(fm.rss_ready));
    add(s, "RSS 10 s after ready: empty / M users", mib(fe.rss_10s) + " / " + mib(fm.rss_10s));
    add(s, "RSS when the census reached M", mib(fm.rss_census));
    const double per_user_10s = (fm.rss_10s - fe.rss_10s) * 1024.0 / M;
    const double per_user_ready = (fm.rss_ready - fe.rss_ready) * 1024.0 / M;
    figures[fig("startup_ms_empty")] = fe.ready_ms;
    figures[fig("startup_ms_frozen")] = fm.ready_ms;
    figures[fig("bytes_per_frozen_user")] = per_user_10s;
    figures[fig("frozen_users")] = static_cast<double>(M);
    add(s, "memory per frozen user (RSS_M - RSS_empty) / M, 10 s after ready",
        fmt(per_user_10s, 2) + " B (at ready: " + fmt(per_user_ready, 2) + " B)",
        std::string("<= 200 B: ") + (per_user_10s <= 200 ? "met" : "NOT met"));
    add(s, "troupe_users{state=\"frozen\"} reached M after (census in the background)",
        fmt(fm.census_s, 2) + " s (value " + num(fm.frozen_seen) + ")");
    add(s, "login + wake of " + std::to_string(want) + " random frozen users p50 / p99 / max (us)",
        fmt(tot.p50) + " / " + fmt(tot.p99) + " / " + fmt(tot.max));
    add(s, "  of which POST /api/login p50 / p99, GET /api/counter p50 / p99 (us)",
        fmt(lg.p50) + " / " + fmt(lg.p99) + ", " + fmt(gt.p50) + " / " + fmt(gt.p99));
  });
}

}  // namespace

// ---- scenario 4: fencing costs (store level) --------------------------------------

void fencing_costs(const options& o) {
  namespace store = troupe::store;
  const std::string dir = make_temp_dir("deposit-bench-fence-");
  struct cleanup {
    std::string d;
    ~cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } gone{dir};
  auto dep = store::make_filesystem_deposit(dir + "/deposit");
  auto time_us = [](auto&& fn) {
    auto t = steady::now();
    fn();
    return us_between(t, steady::now());
  };
  const std::size_t n = o.fence_users;
  store::parcel p;
  p.writer_node = "bench";
  p.writer_worker = "bench-w1";
  p.cause = store::parcel_cause::checkpoint;
  p.payload = store::pack(std::string(4000, 'x'));  // the ~4 KiB store of scenario 1
  std::vector<double> write_us, check_us, lock_us, get_us, claim_new_us, claim_same_us, reclaim_us;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string user = "f" + std::to_string(i);
    p.owner_epoch = (std::uint64_t{1} << 32) | (i + 1);
    write_us.push_back(time_us([&] { dep->put_user(user, p); }));
    // The check alone: the claim and the parcel header, as the write reads them under the lock.
    check_us.push_back(time_us([&] { (void)dep->owner_epoch(user); }));
    // The lock alone: open, flock, close of the shard's lock file (what the write takes).
    const std::string lock = dir + "/deposit/users/.fence-" +
                             fs::path(store::filesystem_parcel_path(dir + "/deposit", store::parcel_kind::user, user))
                               .parent_path().filename().string() + ".lock";
    lock_us.push_back(time_us([&] {
      int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::flock(fd, LOCK_EX);
        ::close(fd);
      }
    }));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::string user = "f" + std::to_string(i);
    get_us.push_back(time_us([&] { (void)dep->get_user(user); }));
    const std::uint64_t newer = (std::uint64_t{2} << 32) | (i + 1);
    claim_new_us.push_back(time_us([&] { (void)dep->claim_user(user, newer); }));     // a wake: claim written
    claim_same_us.push_back(time_us([&] { (void)dep->claim_user(user, newer); }));    // a restart: nothing written
  }
  for (std::size_t i = 0; i < n; ++i) {  // woken again by a newer placement: his claim file exists
    const std::string user = "f" + std::to_string(i);
    reclaim_us.push_back(time_us([&] { (void)dep->claim_user(user, (std::uint64_t{3} << 32) | (i + 1)); }));
  }
  auto w = stats_of(write_us), c = stats_of(check_us), l = stats_of(lock_us);
  auto g = stats_of(get_us), cn = stats_of(claim_new_us), cs = stats_of(claim_same_us), rc = stats_of(reclaim_us);
  say("\n## Fencing costs (store level, ", n, " users, 4 KiB parcels, ", dir, ")");
  say("user write (fsync'd, fenced), us:     ", stats_text(w));
  say("  of which the check (reads), us:     ", stats_text(c));
  say("  of which the lock (open+flock), us: ", stats_text(l));
  say("plain read (get_user), us:            ", stats_text(g));
  say("wake claim, new epoch (read + claim), us: ", stats_text(cn));
  say("claim at the same epoch (read), us:   ", stats_text(cs));
  say("wake claim, his claim file exists, us: ", stats_text(rc));
  add("4 fencing", "user write p50 / p99 (us)", fmt(w.p50) + " / " + fmt(w.p99));
  add("4 fencing", "check + lock p50 / p99 (us)", fmt(c.p50 + l.p50) + " / " + fmt(c.p99 + l.p99),
      "small against the write");
  add("4 fencing", "get vs wake claim (first / again) p50 (us)",
      fmt(g.p50) + " vs " + fmt(cn.p50) + " / " + fmt(rc.p50));
  figures["fence_write_p50_us"] = w.p50;
  figures["fence_check_lock_p50_us"] = c.p50 + l.p50;
  figures["fence_get_p50_us"] = g.p50;
  figures["fence_claim_p50_us"] = cn.p50;
  figures["fence_reclaim_p50_us"] = rc.p50;
}

int main(int argc, char** argv) {
  options o = parse(argc, argv);
  say("# deposit_bench");
  say("node binary: ", troupe_binary());
  say("options: --wake-users ", o.wake_users, " --wake-gap-ms ", o.wake_gap_ms, " --users-quit ", o.users_quit, " --frozen ", o.frozen,
      " --only ", o.only, " --quit-threads ", o.quit_threads, " --gen-threads ", o.gen_threads,
      " --gen-budget ", o.gen_budget_s, " --backends ", [&] {
        std::string l;
        for (auto& b : o.backends)
          l += (l.empty() ? "" : ",") + b;
        return l;
      }(), "; ", std::thread::hardware_concurrency(), " CPU(s)");
  if (!o.pg_url.empty())
    say("postgres: ", troupe::store::redact_postgres_url(o.pg_url));
  if (::access(troupe_binary().c_str(), X_OK) != 0) {
    std::cerr << "deposit_bench: the node binary " << troupe_binary()
              << " is not executable (build the troupe target)\n";
    return 2;
  }
  auto t0 = steady::now();
  int failures = 0;
  // Scenario `id` on `backend` (scenario 1 takes every backend at once: "").
  auto run = [&](char id, const char* name, void (*fn)(const options&), const std::string& backend) {
    if (o.only.find(id) == std::string::npos)
      return;
    current_backend = backend.empty() ? o.backends.front() : backend;
    const std::string on = backend.empty() || backend == "filesystem" ? "" : " on " + backend;
    auto t = steady::now();
    say("\n(load average before scenario ", id, on, ": ", loadavg(), ")");
    try {
      fn(o);
      say("(scenario ", id, on, " took ", fmt(secs_since(t), 1), " s)");
    } catch (const std::exception& e) {
      ++failures;
      say("\nSCENARIO ", id, " (", name, ")", on, " FAILED after ", fmt(secs_since(t), 1), " s:\n", e.what());
      std::string first = e.what();
      first = first.substr(0, std::min<std::size_t>(200, first.find('\n')));
      if (backend.empty())
        current_backend = o.backends.size() > 1 ? "all" : o.backends.front();
      add(std::string(1, id) + " " + name, "FAILED", first);
    }
  };
  run('1', "wake", wake_latency, "");
  for (const auto& b : o.backends)
    run('2', "quit", soft_quit, b);
  for (const auto& b : o.backends)
    run('3', "start", startup, b);
  run('4', "fencing", fencing_costs, "filesystem");

  std::ostringstream t;
  t << "\n## Results (total run " << fmt(secs_since(t0), 1) << " s, " << std::thread::hardware_concurrency()
    << " CPUs; load average at the end " << loadavg()
    << ")\n\n| Scenario | Backend | Figure | Value | Goal |\n|---|---|---|---|---|\n";
  for (auto& r : results) {
    std::string v = r.value;
    std::replace(v.begin(), v.end(), '\n', ' ');
    std::replace(v.begin(), v.end(), '|', '/');
    t << "| " << r.scenario << " | " << r.backend << " | " << r.figure << " | " << v << " | " << r.goal << " |\n";
  }
  say(t.str());
  if (!o.json.empty()) {
    nlohmann::json j(figures);
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return failures ? 1 : 0;
}
