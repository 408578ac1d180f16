// Profiles (issue 27, docs/config.md "Profiles"): the five levels of a real
// node's settings as GET /_troupe/config shows them, the composition in force at
// /_troupe/orchestration/status, a named profile that is missing or invalid
// stopping the start (exit 2, one line), a worker process composing the same
// profile as its node; applied while the node runs: each HTTP outcome, 50
// concurrent applies, SIGHUP, and a lowered idle freeze seen in behaviour.
#include "../support/test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <signal.h>
#include <thread>

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

namespace {

response apply_profile(uint16_t port, const std::string& body, const std::string& type = "application/toml") {
  http_client c(port);
  auto h = bearer();
  h.emplace_back("Content-Type", type);
  return c.post("/_troupe/orchestration/apply", body, h);
}

response reload_profile(uint16_t port, const std::string& body = "") {
  http_client c(port);
  return c.post("/_troupe/orchestration/reload", body, bearer());
}

std::vector<std::string> violation_keys(const response& r) {
  std::vector<std::string> out;
  auto body = r.json();
  for (auto& v : body["violations"])
    out.push_back(v["key"].get<std::string>() + ": " + v["rule"].get<std::string>());
  return out;
}

}  // namespace

TEST_F(Profiles, AnApplyWhileTheNodeRunsAnswersEachOutcomeAndLogsEveryAttempt) {
  write("profiles/quiet.toml", "[group.default]\nuser_idle_freeze_minutes = 10\nguest_idle_seconds = 4\n");
  start({"--admin-token", token, "--config", recipe()});
  auto first = apply_profile(port(), "[group.default]\nuser_idle_freeze_minutes = 20\n");
  ASSERT_STATUS(first, 200);
  auto a = first.json();
  EXPECT_EQ(a["outcome"], "applied");
  EXPECT_EQ(a["generation"], 2);
  EXPECT_EQ(a["source"], "inline");
  EXPECT_TRUE(a["active_profile"].is_null());
  ASSERT_EQ(a["changed_settings"].size(), 1u);
  EXPECT_EQ(a["changed_settings"][0], (json{{"key", "group.default.user_idle_freeze_minutes"}, {"from", 30}, {"to", 20}}));
  EXPECT_EQ(a["effective_settings"]["group.default.user_idle_freeze_minutes"], 20);
  EXPECT_EQ(a["effective_settings"]["limits.max_inflight"], 7000);

  auto same = apply_profile(port(), R"({"group": {"default": {"user_idle_freeze_minutes": 20}}})", "application/json");
  ASSERT_STATUS(same, 200);
  EXPECT_EQ(same.json()["outcome"], "unchanged");
  EXPECT_EQ(same.json()["generation"], 2);
  EXPECT_EQ(same.json()["digest"], a["digest"]);
  EXPECT_TRUE(same.json()["changed_settings"].empty());

  auto restart = apply_profile(port(), "[limits]\nmax_inflight = 3\n[group.default]\nuser_idle_freeze_minutes = 5\n");
  EXPECT_STATUS(restart, 400);
  EXPECT_EQ(violation_keys(restart), (std::vector<std::string>{"limits.max_inflight: needs a restart"})) << restart.body;
  EXPECT_EQ(get("/_troupe/orchestration/status")["effective_settings"]["group.default.user_idle_freeze_minutes"], 20)
    << "all or nothing: the hot key of a refused apply did not apply either";

  auto invalid = apply_profile(port(), "[limits]\nmax_bodyy = 1\n[group.default]\nuser_idle_freeze_minutes = -1\n"
                               "guest_idle_seconds = \"soon\"\n");
  EXPECT_STATUS(invalid, 400);
  EXPECT_EQ(invalid.json()["violations"].size(), 3u) << invalid.body;
  EXPECT_STATUS(apply_profile(port(), "[group.default\n"), 400);

  EXPECT_STATUS(reload_profile(port()), 400) << "nothing to reload: no profile is active";
  EXPECT_STATUS(reload_profile(port(), R"({"name": "absent"})"), 404);
  EXPECT_STATUS(reload_profile(port(), R"({"name": 3})"), 400);
  auto quiet = reload_profile(port(), R"({"name": "quiet"})");
  ASSERT_STATUS(quiet, 200);
  EXPECT_EQ(quiet.json()["generation"], 3);
  EXPECT_EQ(quiet.json()["source"], "profile");
  EXPECT_EQ(quiet.json()["active_profile"], "quiet");
  EXPECT_EQ(quiet.json()["effective_settings"]["group.default.guest_idle_seconds"], 4);
  EXPECT_STATUS(reload_profile(port()), 200) << "the active profile again";

  http_client c(port());
  EXPECT_EQ(c.get("/_troupe/orchestration/apply", bearer()).status, 405);
  EXPECT_EQ(c.post("/_troupe/orchestration/apply", "", {}).status, 401);
  auto status = get("/_troupe/orchestration/status");
  EXPECT_EQ(status["generation"], 3);
  EXPECT_EQ(status["digest"], quiet.json()["digest"]);

  auto log = get("/_troupe/orchestration/log?tail=20")["lines"];
  int refused = 0, applied = 0;
  for (auto& line : log) {
    if (line["what"] != "apply" && line["what"] != "reload")
      continue;
    EXPECT_TRUE(line["numbers"].contains("generation")) << line;
    refused += line["outcome"] == "refused";
    applied += line["outcome"] == "ok";
    if (line["outcome"] == "refused" && line["what"] == "apply" && line["numbers"].value("violations", 0) == 3) {
      EXPECT_NE(line["detail"].get<std::string>().find("limits.max_bodyy: unknown key"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(refused, 5) << log.dump();  // a reload body that is not {"name": …} never reaches the orchestrator
  EXPECT_EQ(applied, 2) << log.dump();
}

// The recipe level is the file as the node read it at the start: an edit on
// disk since changes nothing until a restart, and does not block an apply.
TEST_F(Profiles, AnApplyComposesOntoTheRecipeTheNodeStartedWithNotTheFileAsItIsNow) {
  start({"--admin-token", token, "--config", recipe()});
  write("recipe.toml", "[limits]\nmax_inflight = 1\n[[group]]\nname = \"default\"\nuser_type = \"notes\"\n"
                       "user_idle_freeze_minutes = 1\n");
  auto r = apply_profile(port(), "[group.default]\nguest_idle_seconds = 3\n");
  ASSERT_STATUS(r, 200);
  auto applied = r.json();
  EXPECT_EQ(applied["effective_settings"]["limits.max_inflight"], 7000);
  EXPECT_EQ(applied["effective_settings"]["group.default.user_idle_freeze_minutes"], 30);
  ASSERT_EQ(applied["changed_settings"].size(), 1u) << r.body;
  EXPECT_EQ(applied["changed_settings"][0]["key"], "group.default.guest_idle_seconds");
}

// 50 applies at once: each gets a generation of its own, the last one is in
// force whole, and no reader ever sees a value with another generation's number.
TEST_F(Profiles, FiftyConcurrentAppliesGetSuccessiveGenerationsAndNoReadIsTorn) {
  start({"--admin-token", token, "--config", recipe()});
  constexpr int n = 50;
  std::vector<response> answers(n);
  std::vector<json> reads;
  std::mutex reads_mutex;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    http_client c(port());
    while (!done) {
      auto r = c.get("/_troupe/orchestration/status", bearer());
      if (r.status == 200) {
        std::lock_guard<std::mutex> guard{reads_mutex};
        reads.push_back(r.json());
      }
    }
  });
  std::vector<std::thread> writers;
  for (int i = 0; i < n; ++i)
    writers.emplace_back([&, i] {
      answers[i] = apply_profile(port(), "[group.default]\nguest_idle_seconds = " + std::to_string(100 + i) + "\n");
    });
  for (auto& w : writers)
    w.join();
  done = true;
  reader.join();
  std::map<std::uint64_t, double> value_of;  // generation -> the value it put in force
  value_of[1] = 2;
  for (auto& a : answers) {
    ASSERT_STATUS(a, 200);
    ASSERT_EQ(a.json()["outcome"], "applied") << a.body;
    auto g = a.json()["generation"].get<std::uint64_t>();
    EXPECT_EQ(value_of.count(g), 0u) << "generation " << g << " given twice";
    value_of[g] = a.json()["effective_settings"]["group.default.guest_idle_seconds"].get<double>();
  }
  EXPECT_EQ(value_of.rbegin()->first, static_cast<std::uint64_t>(n + 1));
  auto last = get("/_troupe/orchestration/status");
  EXPECT_EQ(last["generation"], n + 1);
  EXPECT_EQ(last["effective_settings"]["group.default.guest_idle_seconds"], value_of[n + 1]);
  ASSERT_FALSE(reads.empty());
  for (auto& r : reads)
    EXPECT_EQ(r["effective_settings"]["group.default.guest_idle_seconds"].get<double>(),
              value_of[r["generation"].get<std::uint64_t>()])
      << "generation " << r["generation"];
}

TEST_F(Profiles, SighupReadsTheActiveProfileAgain) {
  write("profiles/quiet.toml", "[group.default]\nguest_idle_seconds = 4\n");
  auto& n = start({"--admin-token", token, "--config", recipe(), "--set", "orchestration.profile_name=quiet"});
  EXPECT_EQ(get("/_troupe/orchestration/status")["effective_settings"]["group.default.guest_idle_seconds"], 4);
  write("profiles/quiet.toml", "[group.default]\nguest_idle_seconds = 6\n");
  ASSERT_EQ(::kill(n.pid(), SIGHUP), 0);
  ASSERT_TRUE(eventually([&] { return get("/_troupe/orchestration/status")["generation"] == 2; }));
  auto status = get("/_troupe/orchestration/status");
  EXPECT_EQ(status["effective_settings"]["group.default.guest_idle_seconds"], 6);
  EXPECT_EQ(status["source"], "profile");
  EXPECT_EQ(status["active_profile"], "quiet");
  EXPECT_TRUE(eventually([&] { return n.stderr_log().find("SIGHUP: profile reloaded: applied, generation 2") != std::string::npos; }));
}

// The policy acts on its next beat: a lowered idle freeze freezes an idle user
// at his next idle check, in a worker thread and in a worker process alike.
TEST_F(Profiles, ALoweredIdleFreezeFreezesAnIdleUserOnTheNextSweep) {
  for (const char* isolation : {"thread", "process"}) {
    SCOPED_TRACE(isolation);
    start({"--admin-token", token, "--set", std::string("group.default.isolation=") + isolation});
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", "idler"}}), 200);
    ASSERT_STATUS(c.post("/api/counter/incr"), 200);
    auto freezes = [&] { return metric(port(), bearer(), "troupe_user_freezes_total"); };
    EXPECT_EQ(freezes(), 0);
    ASSERT_STATUS(apply_profile(port(), "[group.default]\nuser_idle_freeze_minutes = 0.01\n"), 200);
    EXPECT_TRUE(eventually([&] { return freezes() >= 1; }, std::chrono::seconds(30)))
      << "an idle user was not frozen under the lowered idle freeze";
    EXPECT_EQ(count_of(c.get("/api/counter")), 1) << "he wakes with his state";
  }
}

// group.NAME.workers is hot: lowered, the workers beyond it retire on the
// next quiet period (the commander reads the settings in force at its beat).
TEST_F(Profiles, ALoweredGroupMinimumRetiresIdleWorkersOnTheNextQuietPeriod) {
  write("minimum.toml", "[[group]]\nname = \"default\"\nworkers = 3\nworker_max_number = 4\n"
                        "worker_min_life_seconds = 0\ncpu_retirement_quiet_seconds = 0.5\n");
  start({"--admin-token", token, "--config", dir_.path + "/minimum.toml"});
  auto open_workers = [&] {
    return metric(port(), bearer(), "troupe_workers", "group=\"default\",state=\"open\"");
  };
  ASSERT_TRUE(eventually([&] { return open_workers() == 3; }, std::chrono::seconds(5)));
  // Three workers stay while the minimum is 3 (several retirement beats pass).
  EXPECT_FALSE(eventually([&] { return open_workers() < 3; }, std::chrono::milliseconds(1500)));
  ASSERT_STATUS(apply_profile(port(), "[group.default]\nworkers = 1\n"), 200);
  EXPECT_TRUE(eventually([&] { return open_workers() == 1; }, std::chrono::seconds(10)))
    << "the workers beyond the lowered minimum were not retired";
}

}  // namespace profiles_test_file
