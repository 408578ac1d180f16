// Profiles at the start (issue 27, docs/config.md "Profiles"): the five levels
// of a real node's settings as GET /_troupe/config shows them, the composition
// in force at /_troupe/orchestration/status, a named profile that is missing or
// invalid stopping the start (exit 2, one line), and a worker process composing
// the same profile as its node.
#include "../support/test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <regex>

namespace profiles_test_file {

using namespace troupe::test;
using nlohmann::json;

namespace {

const std::string token = "profiles-" + random_token(16);
headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

std::string describe(const run_result& r) {
  return "exit=" + std::to_string(r.exit_code) + "\n--- stdout:\n" + r.out + "\n--- stderr:\n" + r.err;
}

class Profiles : public node_test {
protected:
  Profiles() {
    std::filesystem::create_directories(dir_.path + "/profiles");
    write("recipe.toml", "[limits]\nmax_inflight = 7000\nhold_seconds = 3\nmax_consoles = 9\n\n"
                         "[orchestration]\nprofiles_path = \"" + dir_.path + "/profiles\"\n");
    write("profiles/busy.toml", "[limits]\nmax_inflight = 5000\nhold_seconds = 4\nmax_pages_per_user = 50\n"
                                "[group.default]\nuser_idle_freeze_minutes = 5\n");
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_.path + "/" + name) << text; }
  std::string recipe() const { return dir_.path + "/recipe.toml"; }

  json get(const std::string& path) {
    http_client c(port());
    auto r = c.get(path, bearer());
    EXPECT_STATUS(r, 200);
    return r.json();
  }

  scratch_dir dir_{"troupe-profiles-"};
};

// Sets an environment variable for one scope (the node started in it inherits it).
struct scoped_env {
  scoped_env(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~scoped_env() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_F(Profiles, TheStartComposesDefaultsRecipeProfileEnvironmentAndSetEachShownWithItsLevel) {
  {
    scoped_env env("TROUPE_LIMITS_HOLD_SECONDS", "6");
    start({"--admin-token", token, "--config", recipe(), "--set", "orchestration.profile_name=busy", "--set",
           "limits.max_consoles=11"});
  }
  auto config = get("/_troupe/config");
  EXPECT_EQ(config["generation"], 1);
  EXPECT_EQ(config["source"], "boot");
  EXPECT_EQ(config["active_profile"], "busy");
  auto level = [&](const std::string& key) { return config["settings"][key]["level"].get<std::string>(); };
  auto value = [&](const std::string& key) { return config["settings"][key]["value"]; };
  EXPECT_EQ(level("limits.max_body_bytes"), "default");
  EXPECT_EQ(value("limits.max_inflight"), 5000);
  EXPECT_EQ(level("limits.max_inflight"), "profile");   // over the recipe's 7000
  EXPECT_EQ(value("limits.max_pages_per_user"), 50);
  EXPECT_EQ(level("limits.max_pages_per_user"), "profile");
  EXPECT_EQ(value("limits.hold_seconds"), 6);
  EXPECT_EQ(level("limits.hold_seconds"), "environment");  // over the profile's 4
  EXPECT_EQ(value("limits.max_consoles"), 11);
  EXPECT_EQ(level("limits.max_consoles"), "set");  // over the recipe's 9
  EXPECT_EQ(level("orchestration.profiles_path"), "recipe");
  EXPECT_EQ(value("group.default.user_idle_freeze_minutes"), 5);
  EXPECT_EQ(value("node.admin_token"), "***") << "a secret is never shown";
  EXPECT_EQ(config.dump().find(token), std::string::npos);

  auto status = get("/_troupe/orchestration/status");
  EXPECT_EQ(status["generation"], 1);
  EXPECT_EQ(status["source"], "boot");
  EXPECT_EQ(status["active_profile"], "busy");
  EXPECT_TRUE(std::regex_match(status["digest"].get<std::string>(), std::regex("[0-9a-f]{64}"))) << status["digest"];
  EXPECT_EQ(status["digest"], config["digest"]);
  EXPECT_EQ(status["effective_settings"]["limits.max_inflight"], 5000);
  ASSERT_EQ(status["members"].size(), 1u);
  EXPECT_EQ(status["members"][0]["generation"], 1);
  EXPECT_EQ(status["members"][0]["acknowledged"], true);

  http_client c(port());
  EXPECT_EQ(c.post("/_troupe/config", "", bearer()).status, 405);
  EXPECT_EQ(c.get("/_troupe/config").status, 401) << "behind the admin token";
}

TEST_F(Profiles, WithoutAProfileTheStartIsGenerationOneOfTheRecipe) {
  start({"--admin-token", token, "--config", recipe()});
  auto status = get("/_troupe/orchestration/status");
  EXPECT_EQ(status["generation"], 1);
  EXPECT_EQ(status["source"], "boot");
  EXPECT_TRUE(status["active_profile"].is_null());
  EXPECT_EQ(status["effective_settings"]["limits.max_inflight"], 7000);
}

TEST_F(Profiles, AMissingOrInvalidProfileStopsTheStartWithExit2AndOneLineNamingIt) {
  write("profiles/broken.toml", "[limits]\nmax_inflight = 0\nmax_bodyy = 1\n");
  struct attempt {
    std::string profile, says;
  };
  for (auto& a : {attempt{"absent", "no profile \"absent\""}, attempt{"broken", "limits.max_bodyy: unknown key"},
                  attempt{"../etc", "not a profile name"}}) {
    auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--deposit", dir_.path + "/d", "--config", recipe(),
                         "--set", "orchestration.profile_name=" + a.profile});
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_NE(r.err.find(a.says), std::string::npos) << describe(r);
    EXPECT_EQ(split_lines(r.err).size(), 1u) << "one line: " << describe(r);
    EXPECT_EQ(r.out, "") << "never ready: " << describe(r);
  }
  auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--deposit", dir_.path + "/d", "--config", recipe(), "--set",
                       "orchestration.profile_name=broken"});
  EXPECT_NE(r.err.find("and 1 more"), std::string::npos) << "every problem is counted: " << describe(r);
}

// The child composes its recipe from its bootstrap, profile included: a
// profile the child did not have would leave it with other settings than its node.
TEST_F(Profiles, AWorkerProcessComposesTheSameProfileAsItsNode) {
  write("profiles/tight.toml", "[limits]\nmax_message_bytes = 64\n");
  start({"--admin-token", token, "--config", recipe(), "--set", "orchestration.profile_name=tight", "--set",
         "group.default.isolation=process"});
  http_client alice(port()), bob(port());
  ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
  ASSERT_STATUS(bob.post_json("/api/login", {{"user", "bob"}}), 200);
  // A note between users is encoded in alice's worker process, which refuses it past limits.max_message_bytes.
  auto small = alice.post_json("/api/tell", {{"user", "bob"}, {"text", "hi"}});
  EXPECT_STATUS(small, 200);
  auto large = alice.post_json("/api/tell", {{"user", "bob"}, {"text", std::string(200, 'x')}});
  EXPECT_EQ(large.status, 413) << large.describe();
}

}  // namespace profiles_test_file
