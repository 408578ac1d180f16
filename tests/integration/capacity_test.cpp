// The capacity guards (issue 27, docs/SUPERVISION.md "Capacity guards") on a
// real node: worker_max_users refuses the newcomer past it and a hot apply
// moves it; past limits.machine_memory_alarm_percent every worker closes and
// the group does not grow; past limits.commander_memory_max_percent, or with
// the deposit's disk (a small tmpfs) under deposit.low_space_percent free, no
// new guest is placed while the users already here are served — each seen in
// /_troupe/health, the census the console reads, and
// troupe_admission_rejections_total{reason}.
#include "../support/test_support.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/mount.h>
#include <unistd.h>

namespace capacity_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

const std::string token = "capacity-" + random_token(16);
headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

class Capacity : public node_test {
protected:
  // A new browser's first increment: its answer, and its cookie for later.
  response newcomer(std::string* cookie = nullptr) {
    http_client c(port());
    auto r = c.post("/api/counter/incr");
    if (cookie)
      *cookie = c.cookie().value_or("");
    return r;
  }

  json health() {
    http_client c(port());
    auto r = c.get("/_troupe/health");
    return r.json();
  }

  bool health_says(const std::string& reason) {
    auto h = health();
    for (auto& r : h.value("reasons", json::array()))
      if (r.value("reason", "") == reason)
        return true;
    return false;
  }

  double workers(const std::string& state) {
    return metric(port(), bearer(), "troupe_workers", "group=\"default\",state=\"" + state + "\"");
  }

  // Waits until `n` workers reported themselves closed (the commander hears it on the same path).
  bool closed_workers(double n) {
    return eventually([&] { return workers("closed") == n; }, milliseconds(5000));
  }

  double rejections(const std::string& reason) {
    return metric(port(), bearer(), "troupe_admission_rejections_total", "reason=\"" + reason + "\"");
  }
};

}  // namespace

TEST_F(Capacity, WorkerMaxUsersRefusesTheNewcomerPastItAndAHotApplyMovesIt) {
  // In the recipe file: a profile composes over it (--set would win over any profile).
  scratch_dir dir{"troupe-capacity-"};
  std::ofstream(dir.path + "/recipe.toml") << "[[group]]\nname = \"default\"\nworker_max_users = 2\n"
                                              "worker_max_number = 1\n";
  start({"--admin-token", token, "--config", dir.path + "/recipe.toml"});
  std::string first;
  ASSERT_STATUS(newcomer(&first), 200);
  ASSERT_STATUS(newcomer(), 200);
  ASSERT_TRUE(closed_workers(1));
  auto refused = newcomer();
  EXPECT_EQ(refused.status, 503) << refused.describe();
  EXPECT_NE(refused.body.find("users"), std::string::npos) << refused.describe();
  EXPECT_TRUE(refused.has("Retry-After")) << refused.describe();
  EXPECT_GE(rejections("users"), 1);
  // The users already hosted are served.
  http_client again(port());
  again.set_cookie(first);
  EXPECT_STATUS(again.post("/api/counter/incr"), 200);

  http_client admin(port());
  auto applied = admin.post("/_troupe/orchestration/apply", R"({"group":{"default":{"worker_max_users":3}}})",
                            {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}});
  ASSERT_STATUS(applied, 200);
  EXPECT_EQ(applied.json()["changed_settings"][0]["key"], "group.default.worker_max_users");
  // What the console shows: the generation in force and where it came from.
  auto census = admin.get("/_troupe/census", bearer());
  ASSERT_STATUS(census, 200);
  auto settings = census.json()["settings"];
  EXPECT_EQ(settings["generation"], 2) << census.body.substr(0, 1000);
  EXPECT_EQ(settings["source"], "inline");
  EXPECT_TRUE(eventually([&] { return newcomer().status == 200; }, milliseconds(5000)))
    << "the third user is admitted under the new cap";
  ASSERT_TRUE(closed_workers(1));
  EXPECT_EQ(newcomer().status, 503) << "and the fourth is not";
}

TEST_F(Capacity, PastTheMachineMemoryAlarmEveryWorkerClosesAndTheGroupDoesNotGrow) {
  // Every machine uses more than 1 % of its memory.
  start({"--admin-token", token, "--set", "limits.machine_memory_alarm_percent=1"});
  ASSERT_TRUE(eventually([&] { return health_says("machine_memory_alarm"); }, milliseconds(5000))) << health().dump();
  EXPECT_EQ(health()["status"], "degraded");
  response r;
  ASSERT_TRUE(eventually([&] { return (r = newcomer()).status == 503; }, milliseconds(5000))) << r.describe();
  EXPECT_NE(r.body.find("machine_memory"), std::string::npos) << r.describe();
  EXPECT_GE(rejections("machine_memory"), 1);
  EXPECT_EQ(workers("closed"), 1);
  EXPECT_EQ(workers("open") + workers("starting"), 0) << "no worker was started for him";
}

TEST_F(Capacity, PastTheCommanderMemoryLimitNoNewGuestIsPlacedButKnownUsersAreServed) {
  start({"--admin-token", token, "--set", "limits.commander_memory_max_percent=0.0001"});
  ASSERT_TRUE(eventually([&] { return health_says("commander_memory"); }, milliseconds(5000))) << health().dump();
  auto r = newcomer();
  EXPECT_EQ(r.status, 503) << r.describe();
  EXPECT_NE(r.body.find("commander_memory_max_percent"), std::string::npos) << r.describe();
  EXPECT_EQ(r.get("Retry-After"), "5");
  EXPECT_GE(rejections("commander_memory"), 1);
}

TEST_F(Capacity, ADepositDiskLowOnSpaceRefusesNewGuestsShowsInHealthAndTheCensusAndRecovers) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "mounting a small tmpfs needs root";
  scratch_dir dir{"troupe-capacity-"};
  auto disk = dir.path + "/disk";
  std::filesystem::create_directories(disk);
  ASSERT_EQ(::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=4m"), 0) << std::strerror(errno);
  struct unmount {
    std::string at;
    ~unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount_at_end{disk};
  start_on(disk + "/deposit", {"--admin-token", token, "--set", "deposit.low_space_percent=20"});
  std::string known;
  ASSERT_STATUS(newcomer(&known), 200);
  // Filled to 90 %: under 20 % free.
  {
    std::ofstream filler(disk + "/filler", std::ios::binary);
    std::string mb(1 << 20, 'x');
    for (int i = 0; i < 3; ++i)
      filler << mb;
    filler << std::string(600 << 10, 'x');
  }
  ASSERT_TRUE(eventually([&] { return health_says("deposit_low_space"); }, milliseconds(5000))) << health().dump();
  EXPECT_EQ(health()["status"], "degraded");
  auto refused = newcomer();
  EXPECT_EQ(refused.status, 503) << refused.describe();
  EXPECT_NE(refused.body.find("low on space"), std::string::npos) << refused.describe();
  EXPECT_GE(rejections("low_space"), 1);
  // The user already here is served and can still freeze.
  http_client c(port());
  c.set_cookie(known);
  EXPECT_STATUS(c.post("/api/counter/incr"), 200);
  // The census (what the console shows) carries the warning.
  http_client admin(port());
  auto census = admin.get("/_troupe/census", bearer());
  ASSERT_STATUS(census, 200);
  EXPECT_NE(census.body.find("deposit_low_space"), std::string::npos) << census.body.substr(0, 2000);
  // Space again: new guests again.
  std::filesystem::remove(disk + "/filler");
  EXPECT_TRUE(eventually([&] { return newcomer().status == 200; }, milliseconds(5000)));
  EXPECT_FALSE(health_says("deposit_low_space"));
}

// Each worker started past worker_max_users is a line of the orchestration
// log with the settings generation in force when it happened.
TEST_F(Capacity, AWorkerStartedForArrivalsIsLoggedWithTheGenerationInForce) {
  start({"--admin-token", token, "--set", "group.default.worker_max_users=1", "--set",
         "group.default.worker_max_number=3"});
  ASSERT_STATUS(newcomer(), 200);
  ASSERT_TRUE(closed_workers(1));
  ASSERT_STATUS(newcomer(), 200);  // the first worker is full: a second one starts for him
  ASSERT_TRUE(closed_workers(2));
  http_client admin(port());
  auto applied = admin.post("/_troupe/orchestration/apply", R"({"group":{"default":{"guest_idle_seconds":30}}})",
                            {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}});
  ASSERT_STATUS(applied, 200);
  ASSERT_EQ(applied.json()["generation"], 2);
  ASSERT_STATUS(newcomer(), 200);  // and a third, under generation 2
  std::vector<std::uint64_t> generations;
  json lines;
  ASSERT_TRUE(eventually([&] {
    auto r = admin.get("/_troupe/orchestration/log?tail=100", bearer());
    if (r.status != 200)
      return false;
    lines = r.json()["lines"];
    generations.clear();
    for (auto& l : lines)
      if (l.value("what", "") == "worker_start")
        generations.push_back(l["numbers"].value("generation", 0u));
    return generations.size() == 3;  // the group's start, then two for arrivals
  }, milliseconds(5000))) << lines.dump(1);
  EXPECT_EQ(generations, (std::vector<std::uint64_t>{1, 1, 2})) << lines.dump(1);
}

}  // namespace capacity_test_file
