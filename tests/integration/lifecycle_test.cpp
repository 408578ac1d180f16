// The node process: its ready line, its command line (exit code 2 and a one-line error
// for bad flags and recipes, --set overrides), orderly SIGTERM/SIGINT.
#include "../support/deposit_backend.hpp"
#include "../support/test_support.hpp"

#include <signal.h>

#include <fstream>
#include <future>
#include <regex>
#include <thread>

namespace lifecycle_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

class Lifecycle : public node_test {};

// Runs `troupe node <args>` on an ephemeral port and a scratch deposit: the only thing
// wrong is what the test passes.
struct cli_run {
  run_result res;
  std::string dir;
  ~cli_run() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::unique_ptr<cli_run> run_node(std::vector<std::string> args) {
  auto r = std::make_unique<cli_run>();
  r->dir = make_temp_dir("troupe-cli-");
  std::vector<std::string> full{"node", "--listen", "127.0.0.1:0", "--deposit", r->dir};
  full.insert(full.end(), args.begin(), args.end());
  // A refusal is immediate; a node that starts instead is killed after 5 s.
  r->res = run_binary(full, milliseconds(5000));
  return r;
}

std::string describe(const run_result& r) {
  return "exit=" + std::to_string(r.exit_code) + (r.timed_out ? " (timed out, killed)" : "") +
         "\n--- stdout:\n" + r.out + "\n--- stderr:\n" + r.err;
}

// exit code 2, a one-line stderr naming `needle`.
void expect_usage_error(const std::vector<std::string>& args, const std::string& needle) {
  SCOPED_TRACE("troupe node ... " + [&] {
    std::string s;
    for (auto& a : args)
      s += a + " ";
    return s;
  }());
  auto run = run_node(args);
  const auto& r = run->res;
  EXPECT_FALSE(r.timed_out) << "the node started instead of refusing: " << describe(r);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  auto lines = split_lines(r.err);
  EXPECT_EQ(lines.size(), 1u) << "stderr is not one line: " << describe(r);
  if (!lines.empty()) {
    EXPECT_NE(lines[0].find(needle), std::string::npos)
        << "the error does not name [" << needle << "]: " << describe(r);
  }
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << describe(r);
}

// A valid note (short text) padded with an extra member to exactly n bytes of body.
std::string padded_note(size_t n) {
  const std::string head = "{\"text\":\"padded\",\"pad\":\"", tail = "\"}";
  return head + std::string(n - head.size() - tail.size(), 'x') + tail;
}

}  // namespace

TEST_F(Lifecycle, ReadyLineNamesTheRealPort) {
  start();
  std::smatch m;
  static const std::regex re(R"(^troupe node listening on http://127\.0\.0\.1:([0-9]+)$)");
  ASSERT_TRUE(std::regex_match(node().ready_line(), m, re)) << node().ready_line();
  EXPECT_EQ(std::stoi(m[1]), port());
  EXPECT_NE(port(), 0);
  // Exactly one such line.
  auto out = node().stdout_text();
  size_t n = 0;
  for (auto& l : split_lines(out))
    if (l.rfind("troupe node listening on", 0) == 0)
      ++n;
  EXPECT_EQ(n, 1u) << out;
  http_client c(port());
  ASSERT_STATUS(c.get("/_troupe/health"), 200);
}

TEST_F(Lifecycle, HelpExitsZero) {
  auto r = run_binary({"--help"}, milliseconds(10000));
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_FALSE(r.out.empty() && r.err.empty());
  auto n = run_binary({"node", "--help"}, milliseconds(10000));
  EXPECT_EQ(n.exit_code, 0) << describe(n);
  EXPECT_NE((n.out + n.err).find("--listen"), std::string::npos) << describe(n);
}

TEST_F(Lifecycle, BogusFlagIsExit2OneLine) { expect_usage_error({"--bogus"}, "bogus"); }

TEST_F(Lifecycle, BadListenIsExit2) {
  auto dir = make_temp_dir("troupe-cli-");
  auto r = run_binary({"node", "--listen", "not-an-address", "--deposit", dir}, milliseconds(10000));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(split_lines(r.err).size(), 1u) << describe(r);
  EXPECT_NE(r.err.find("listen"), std::string::npos) << describe(r);
}

TEST_F(Lifecycle, BadRecipeValueIsExit2NamingTheKey) {
  expect_usage_error({"--set", "limits.max_body_bytes=0"}, "max_body_bytes");
  expect_usage_error({"--set", "limits.max_body_bytes=lots"}, "max_body_bytes");
}

TEST_F(Lifecycle, UnknownRecipeKeyIsExit2NamingTheKey) {
  expect_usage_error({"--set", "limits.nope=1"}, "nope");
}

TEST_F(Lifecycle, MissingConfigFileIsExit2) {
  expect_usage_error({"--config", "/nonexistent.toml"}, "nonexistent.toml");
}

TEST_F(Lifecycle, BadConfigFileIsExit2NamingTheKey) {
  auto dir = make_temp_dir("troupe-cfg-");
  {
    std::ofstream f(dir + "/bad.toml");
    f << "[limits]\nmax_header_bytes = -5\n";
  }
  {
    std::ofstream f(dir + "/broken.toml");
    f << "[limits\nmax_header_bytes = \n";
  }
  expect_usage_error({"--config", dir + "/bad.toml"}, "max_header_bytes");
  {
    auto run = run_node({"--config", dir + "/broken.toml"});
    EXPECT_EQ(run->res.exit_code, 2) << describe(run->res);
    EXPECT_EQ(split_lines(run->res.err).size(), 1u) << describe(run->res);
  }
  std::filesystem::remove_all(dir);
}

TEST_F(Lifecycle, ConfigFileIsReadAndSetOverridesIt) {
  auto dir = make_temp_dir("troupe-cfg-");
  {
    std::ofstream f(dir + "/t.toml");
    f << "[limits]\nmax_body_bytes = 4096\n";
  }
  {
    // The recipe's limit applies.
    node_process n({"--config", dir + "/t.toml"});
    http_client c(n.port());
    auto r = c.post("/api/notes", padded_note(5000));
    EXPECT_TRUE(is_json_error(r, 413)) << n.diagnostics();
  }
  {
    // --set wins over the recipe.
    node_process n({"--config", dir + "/t.toml", "--set", "limits.max_body_bytes=100000"});
    http_client c(n.port());
    auto r = c.post("/api/notes", padded_note(5000));
    EXPECT_EQ(r.status, 200) << r.describe() << n.diagnostics();
  }
  std::filesystem::remove_all(dir);
}

TEST_F(Lifecycle, SigtermLetsInflightFinishAndExitsZero) {
  const std::string token = "lifecycle-admin-" + random_token(16);
  const headers_t auth{{"Authorization", "Bearer " + token}};
  start({"--admin-token", token});
  http_client a(port());
  ASSERT_STATUS(a.get("/api/whoami"), 200);
  auto t0 = std::chrono::steady_clock::now();
  auto sleeper = std::async(std::launch::async, [&] {
    return a.post_json("/api/sleep", {{"ms", 1500}}, {}, milliseconds(10000));
  });
  // The sleep is in flight (the node's own gauge) before the signal.
  ASSERT_TRUE(eventually([&] { return metric(port(), auth, "troupe_http_inflight") >= 1; }, milliseconds(5000)));
  node().terminate();
  // The node says it is stopping (its listener closes right after).
  ASSERT_TRUE(eventually([&] { return node().stderr_log().find("SIGTERM: stopping") != std::string::npos; },
                         milliseconds(5000)))
      << node().stderr_tail();

  // A new connection is refused, or closed without being served.
  {
    http_client late(port());
    std::string outcome;
    try {
      auto r = late.get("/api/whoami", {}, milliseconds(2000));
      outcome = "served after SIGTERM: " + r.describe();
    } catch (const transport_error& e) {
      if (e.kind == failure::timeout)
        outcome = std::string("neither refused nor closed within 2 s: ") + e.what();
    }
    EXPECT_TRUE(outcome.empty()) << outcome;
  }

  response r;
  ASSERT_NO_THROW(r = sleeper.get()) << "the in-flight request was cut by SIGTERM";
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("slept", -1), 1500);
  EXPECT_GE(ms_since(t0), 1450);

  auto code = node().wait_exit(milliseconds(10000));
  ASSERT_TRUE(code.has_value()) << "still running 10 s after SIGTERM";
  EXPECT_EQ(*code, 0);
}

TEST_F(Lifecycle, SigtermOnAnIdleNodeExitsZeroQuickly) {
  start();
  {
    // Some live actors and an open keep-alive connection.
    http_client a(port()), b(port());
    ASSERT_STATUS(a.post("/api/counter/incr"), 200);
    ASSERT_STATUS(b.post_json("/api/login", {{"user", "sigterm_" + random_token(6)}}), 200);
    auto t0 = std::chrono::steady_clock::now();
    node().terminate();
    auto code = node().wait_exit(milliseconds(10000));
    ASSERT_TRUE(code.has_value()) << "still running 10 s after SIGTERM";
    EXPECT_EQ(*code, 0);
    // How quickly: bench/README.md "Timing goals taken out of the tests".
    std::cerr << "[ info ] an idle node stopped " << ms_since(t0) << " ms after SIGTERM\n";
    EXPECT_TRUE(a.wait_closed(milliseconds(1000)));
  }
}

TEST_F(Lifecycle, SigintExitsZero) {
  start();
  http_client a(port());
  ASSERT_STATUS(a.post("/api/counter/incr"), 200);
  node().send_signal(SIGINT);
  auto code = node().wait_exit(milliseconds(10000));
  ASSERT_TRUE(code.has_value()) << "still running 10 s after SIGINT";
  EXPECT_EQ(*code, 0);
}

TEST_F(Lifecycle, SecretsNeverReachTheLog) {
  const std::string token = "tok-" + random_token(24);
  start({"--admin-token", token, "--set", "node.log_level=debug"});
  http_client c(port());
  ASSERT_STATUS(c.get("/api/whoami"), 200);
  ASSERT_STATUS(c.post("/api/counter/incr"), 200);
  ASSERT_EQ(c.get("/_troupe/metrics", {{"Authorization", "Bearer " + token}}).status, 200);
  ASSERT_EQ(c.get("/_troupe/metrics", {{"Authorization", "Bearer wrong-" + token}}).status, 401);
  ASSERT_EQ(c.post("/api/crash").status, 502);  // an error line with context
  ASSERT_EQ(c.get("/api/nope").status, 404);
  const std::string cid = *c.cookie();
  node().terminate();
  ASSERT_TRUE(node().wait_exit(milliseconds(10000)).has_value());
  auto logs = node().stderr_log() + node().stdout_text();
  EXPECT_EQ(logs.find(token), std::string::npos) << "the admin token is in the log";
  EXPECT_EQ(logs.find(cid), std::string::npos) << "a cookie value is in the log";
  // ...while the log does say what went wrong.
  EXPECT_NE(logs.find("crash requested"), std::string::npos)
      << "the handler's exception text is not in the log";
}

TEST_F(Lifecycle, APostgresDepositThatCannotBeReachedIsExit2WithoutItsPassword) {
  expect_usage_error({"--set", "deposit.backend=postgres", "--set",
                      "deposit.url=postgresql://troupe:pg-pass-never-shown@127.0.0.1:1/troupe"},
                     "PostgreSQL deposit");
  auto run = run_node({"--set", "deposit.backend=postgres", "--set",
                       "deposit.url=postgresql://troupe:pg-pass-never-shown@127.0.0.1:1/troupe"});
  EXPECT_EQ(run->res.err.find("pg-pass-never-shown"), std::string::npos) << describe(run->res);
  EXPECT_NE(run->res.err.find("***"), std::string::npos) << "the URL is shown redacted: " << describe(run->res);
}

TEST_F(Lifecycle, AnUnknownDepositBackendIsAUsageError) {
  expect_usage_error({"--set", "deposit.backend=sqlite"}, "backend");
}

TEST_F(Lifecycle, APostgresDepositMigratedByANewerTroupeIsRefused) {
  scratch_database db;
  TROUPE_NEED_SCRATCH_DATABASE(db);
  ASSERT_TRUE(psql(db.url(), "CREATE SCHEMA troupe;\n"
                             "CREATE TABLE troupe.schema_version (version integer PRIMARY KEY, applied_at timestamptz);\n"
                             "INSERT INTO troupe.schema_version (version) VALUES (1), (999);"));
  auto args = postgres_args(db.url());
  expect_usage_error(args, "database schema version 999 is newer than this troupe understands");
}

}  // namespace lifecycle_test_file
