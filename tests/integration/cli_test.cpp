// The command line as a new user meets it (issue 15): `troupe --version`, `troupe`
// alone, `troupe census` with its token from TROUPE_NODE_ADMIN_TOKEN, and
// scripts/run.sh passing its flags through and printing the console URL of the
// address the node really listens on. Real binary, real script, real node.
#include "../support/test_support.hpp"

#include <troupe/version.hpp>

#include <signal.h>

#include <cstdlib>
#include <regex>

namespace cli_test_file {

using namespace troupe::test;
using std::chrono::milliseconds;

namespace {

std::string describe(const run_result& r) {
  return "exit=" + std::to_string(r.exit_code) + (r.timed_out ? " (timed out, killed)" : "") + "\n--- stdout:\n" +
         r.out + "\n--- stderr:\n" + r.err;
}

// Sets an environment variable for one scope (the children inherit it).
struct scoped_env {
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name))
      old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(Cli, VersionPrintsTheProjectVersion) {
  auto r = run_binary({"--version"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "troupe " TROUPE_VERSION "\n") << describe(r);
  EXPECT_EQ(std::string(TROUPE_VERSION), "0.2.0");
  EXPECT_EQ(r.err, "") << describe(r);
}

TEST(Cli, NoCommandPrintsTheUsageAndExitsZero) {
  auto r = run_binary({});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("Usage:"), std::string::npos) << describe(r);
  for (const char* command : {"node", "census", "--version"})
    EXPECT_NE(r.out.find(command), std::string::npos) << command << " is not in the usage: " << describe(r);
  EXPECT_EQ(r.err, "") << describe(r);
}

TEST(Cli, AnUnknownCommandIsStillAUsageError) {
  auto r = run_binary({"nodes"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("nodes"), std::string::npos) << describe(r);
}

TEST(Cli, CensusTakesTheTokenFromTheEnvironment) {
  const std::string token = "cli-" + random_token(24);
  node_process node({"--admin-token", token});
  const std::string url = "http://127.0.0.1:" + std::to_string(node.port());
  {  // neither flag nor variable: a usage error naming both
    scoped_env none("TROUPE_NODE_ADMIN_TOKEN", "");
    ::unsetenv("TROUPE_NODE_ADMIN_TOKEN");
    auto r = run_binary({"census", "--url", url, "--json"});
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_NE(r.err.find("--token"), std::string::npos) << describe(r);
    auto help = run_binary({"census", "--help"});
    EXPECT_NE(help.out.find("TROUPE_NODE_ADMIN_TOKEN"), std::string::npos) << describe(help);
  }
  {  // the variable alone
    scoped_env env("TROUPE_NODE_ADMIN_TOKEN", token);
    auto r = run_binary({"census", "--url", url, "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    auto census = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(census.is_discarded()) << describe(r);
    EXPECT_TRUE(census.is_object()) << describe(r);
  }
  {  // a wrong variable is refused by the node (exit 1); the flag wins over it
    scoped_env env("TROUPE_NODE_ADMIN_TOKEN", token + "-wrong");
    auto wrong = run_binary({"census", "--url", url, "--json"});
    EXPECT_EQ(wrong.exit_code, 1) << describe(wrong);
    auto flag = run_binary({"census", "--url", url, "--json", "--token", token});
    EXPECT_EQ(flag.exit_code, 0) << describe(flag);
  }
}

// scripts/run.sh with TROUPE_BIN (no set-up, no build): its own defaults give way
// to the flags given (before: "--listen: At Most 1 required but received 2"), and
// it prints the console URL of the port the node got for 127.0.0.1:0.
TEST(Cli, RunScriptPassesItsFlagsThroughAndPrintsTheRealConsoleUrl) {
  scoped_env bin("TROUPE_BIN", troupe_binary());
  scratch_dir dir("troupe-run-");
  node_options o;
  o.with_listen = false;
  o.with_deposit = false;
  o.command = {"/bin/bash", TROUPE_SOURCE_DIR "/scripts/run.sh"};
  const std::string token = "run-" + random_token(20);
  node_process node({"--listen", "127.0.0.1:0", "--app", "tally", "--deposit", dir.path + "/deposit", "--set",
                     "node.admin_token=" + token},
                    o);
  ASSERT_NE(node.port(), 0);
  const std::string console =
    "troupe: console at http://127.0.0.1:" + std::to_string(node.port()) + "/_troupe/console#token=" + token;
  EXPECT_TRUE(eventually([&] { return node.stdout_text().find(console) != std::string::npos; }, milliseconds(5000)))
    << "wanted [" << console << "] in: " << node.stdout_text();
  http_client c(node.port());
  // --app tally took: the default group serves the tally type, not notes.
  auto made = c.post("/tally/apples");
  ASSERT_STATUS(made, 200);
  EXPECT_EQ(made.json()["value"], 1) << made.describe();
  EXPECT_STATUS(c.get("/api/whoami"), 404);
  // The token printed is the node's.
  EXPECT_STATUS(c.get("/_troupe/census", {{"Authorization", "Bearer " + token}}), 200);
  // --deposit took: a soft quit freezes the user there.
  node.terminate();
  auto code = node.wait_exit(milliseconds(20000));
  ASSERT_TRUE(code.has_value()) << node.diagnostics();
  EXPECT_EQ(*code, 0) << node.diagnostics();
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/deposit/users")) << node.diagnostics();
}

// Its defaults still apply to what is not given: --app notes, and a generated token.
TEST(Cli, RunScriptDefaultsFillWhatIsNotGiven) {
  scoped_env bin("TROUPE_BIN", troupe_binary());
  scoped_env no_token("TROUPE_NODE_ADMIN_TOKEN", "");
  ::unsetenv("TROUPE_NODE_ADMIN_TOKEN");
  scratch_dir dir("troupe-run-");
  node_options o;
  o.with_listen = false;
  o.with_deposit = false;
  o.command = {"/bin/bash", TROUPE_SOURCE_DIR "/scripts/run.sh"};
  node_process node({"--listen=127.0.0.1:0", "--deposit", dir.path + "/deposit"}, o);
  static const std::regex url_re(R"(troupe: console at http://127\.0\.0\.1:([0-9]+)/_troupe/console#token=([A-Za-z0-9_-]+))");
  std::smatch m;
  std::string out;
  EXPECT_TRUE(eventually([&] {
    out = node.stdout_text();
    return std::regex_search(out, m, url_re);
  }, milliseconds(5000))) << out;
  ASSERT_EQ(m.size(), 3u) << out;
  EXPECT_EQ(std::stoi(m[1]), node.port()) << out;
  http_client c(node.port());
  EXPECT_STATUS(c.get("/api/whoami"), 200);  // notes
  EXPECT_STATUS(c.get("/_troupe/census", {{"Authorization", "Bearer " + m[2].str()}}), 200);
}

}  // namespace cli_test_file
