// Worker admission against a real node (docs/SUPERVISION.md "Admission"): CPU
// admission closes a worker under /api/spin load and reopens it with
// hysteresis, offload freezes the least busy active user, and memory admission
// closes a worker past its group's budget (/api/grow) and reopens it once the
// memory is freed. Everything is observed through the worker's census detail
// (GET /_troupe/actors/worker:...) and the user's census row, polled with
// deadlines; nothing asserts how fast.
#include "../support/test_support.hpp"

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

namespace admission_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string token = "admission-token-" + random_token(10);
const headers_t auth{{"Authorization", "Bearer " + token}};

// A /proc "Name:  N kB" field in bytes (0 when absent).
std::uint64_t proc_kb(const std::string& path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::stoull(line.substr(field.size() + 1)) << 10;
  return 0;
}

// Keeps one user's handler busy: POST /api/spin {"ms": spin} in a loop, with a
// pause between requests, until stopped.
class spinner {
public:
  spinner(uint16_t port, std::string user, int spin_ms, std::chrono::milliseconds pause = 0ms)
    : client_(port), user_(std::move(user)) {
    if (client_.post_json("/api/login", {{"user", user_}}).status != 200)
      ADD_FAILURE() << "login " << user_;
    thread_ = std::thread([this, spin_ms, pause] {
      while (!stop_) {
        try {
          auto r = client_.post_json("/api/spin", {{"ms", spin_ms}});
          if (r.status == 200)
            ++served_;
        } catch (const std::exception&) {
          // a connection closed under load: the next request reconnects
        }
        if (pause > 0ms)
          std::this_thread::sleep_for(pause);  // the load's duty cycle (pacing): orders nothing
      }
    });
  }
  ~spinner() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }
  int served() const { return served_; }

private:
  http_client client_;
  std::string user_;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

class Admission : public node_test {
protected:
  void start_node(std::vector<std::string> sets) {
    std::vector<std::string> args{"--admin-token", token, "--set", "group.default.guest_idle_seconds=600"};
    for (auto& s : sets) {
      args.push_back("--set");
      args.push_back("group.default." + s);
    }
    start(args);
  }

  json actor(const std::string& id) {
    http_client c(port());
    auto r = c.get("/_troupe/actors/" + id, auth);
    if (r.status != 200) {
      ADD_FAILURE() << id << ": " << r.describe();
      return json::object();
    }
    return r.json();
  }
  json worker() { return actor("worker:default-w1"); }
};

}  // namespace

TEST_F(Admission, CpuClosesAWorkerUnderLoadAndReopensItWithHysteresis) {
  start_node({"cpu_admission_close_percent=50", "cpu_admission_reopen_percent=20", "cpu_heating_seconds=0.5",
              "cpu_cooling_seconds=5"});
  auto w = worker();
  EXPECT_EQ(w["admits"], true) << w.dump();
  EXPECT_TRUE(w["reason"].is_null()) << w.dump();
  EXPECT_TRUE(w["rss_bytes"].is_number()) << "read when the worker starts: " << w.dump();

  auto load = std::make_unique<spinner>(port(), "hot", 200);
  ASSERT_TRUE(eventually([&] { return worker()["admits"] == false; }, 30s)) << worker().dump();
  w = worker();
  EXPECT_EQ(w["reason"], "cpu") << w.dump();
  EXPECT_GT(w["cpu_temperature"].get<double>(), 50) << w.dump();
  // Retry-After is the cooling time from the temperature down to the reopen threshold.
  EXPECT_GE(w["retry_after"].get<int>(), 1) << w.dump();
  EXPECT_LE(w["retry_after"].get<int>(), static_cast<int>(std::ceil(5 * std::log(w["cpu_temperature"].get<double>() / 20))))
    << w.dump();
  // His requests are served all along (closed to newcomers only): the answer to his
  // first spin may still be on its way when the close is seen.
  EXPECT_TRUE(eventually([&] { return load->served() > 0; }, 10s)) << "the hot user was not served";
  load->stop();

  // Hysteresis: idle samples cool it, yet it stays closed below the close
  // threshold until it is below the reopen threshold.
  bool closed_below_close = false;
  bool reopened = eventually([&] {
    auto d = worker();
    double t = d["cpu_temperature"].get<double>();
    if (d["admits"] == true) {
      EXPECT_LT(t, 20) << d.dump();
      return true;
    }
    if (t < 50)
      closed_below_close = true;
    return false;
  }, 60s);
  EXPECT_TRUE(reopened) << worker().dump();
  EXPECT_TRUE(closed_below_close) << "it reopened as soon as it was below the close threshold";
  EXPECT_TRUE(worker()["reason"].is_null());
  EXPECT_EQ(worker()["retry_after"], 0);
}

TEST_F(Admission, OffloadFreezesTheLeastBusyActiveUser) {
  start_node({"cpu_admission_close_percent=30", "cpu_admission_reopen_percent=10", "cpu_offload_percent=50",
              "cpu_heating_seconds=0.5"});
  // Counted from the start: the offload may come before the users' rows are read.
  const double freezes_before = metric(port(), auth, "troupe_user_freezes_total");
  // Light logs in first: both land on the only worker before heavy heats it
  // (a login once it is closed would start a second worker for him).
  auto light = std::make_unique<spinner>(port(), "light", 2, 150ms);
  auto heavy = std::make_unique<spinner>(port(), "heavy", 200);
  ASSERT_TRUE(eventually([&] { return actor("user:light").value("state", "") == "active"; }, 10s));
  auto heavy_actor = actor("user:heavy")["actor"];
  ASSERT_FALSE(heavy_actor.is_null()) << actor("user:heavy").dump();
  // He stays frozen until his next request, which comes within 150 ms: poll
  // the freeze counter too, so that a short stay is not missed.
  bool light_frozen = eventually([&] {
    return actor("user:light").value("state", "") != "active" ||
           metric(port(), auth, "troupe_user_freezes_total") > freezes_before;
  }, 60s);
  EXPECT_TRUE(light_frozen) << worker().dump();
  // His next request lands on a worker that admits: none does, so the group grew one.
  EXPECT_TRUE(eventually([&] {
    auto parent = actor("user:light")["parent"];  // null while he is frozen
    return parent.is_string() && parent.get<std::string>() == "worker:default-w2";
  }, 30s)) << actor("user:light").dump();
  light->stop();
  auto h = actor("user:heavy");
  EXPECT_EQ(h.value("state", ""), "active") << h.dump();
  EXPECT_EQ(h["actor"], heavy_actor) << "the busiest user was frozen (his actor changed): " << h.dump();
  heavy->stop();
  EXPECT_EQ(worker()["reason"], "cpu");
  EXPECT_NE(node().stderr_log().find("offload: user"), std::string::npos) << "the freeze was not offload's";
}

TEST_F(Admission, MemoryPastTheGroupBudgetClosesTheWorkerAndFreeingItReopensIt) {
  // Thread isolation: the node's resident memory against memory_max_percent of
  // the machine. The budget is set 200 MB above what the node holds now, and
  // the user grows past it; the test needs no machine with little memory.
  start_node({"user_idle_freeze_minutes=1"});
  const auto machine = proc_kb("/proc/meminfo", "MemTotal");
  ASSERT_GT(machine, 0u);
  const auto node_rss = proc_kb("/proc/" + std::to_string(node().pid()) + "/status", "VmRSS");
  ASSERT_GT(node_rss, 0u);
  node().terminate();
  ASSERT_TRUE(node().wait_exit(10000ms));
  const double percent = 100.0 * static_cast<double>(node_rss + (200ull << 20)) / static_cast<double>(machine);
  ASSERT_LT(percent, 100) << "a machine this small cannot run this test";
  std::ostringstream set;
  set.precision(6);
  set << std::fixed << "memory_max_percent=" << percent;
  start_node({"user_idle_freeze_minutes=1", set.str()});
  EXPECT_EQ(worker()["admits"], true) << worker().dump();

  http_client c(port());
  ASSERT_STATUS(c.post_json("/api/login", {{"user", "fat"}}), 200);
  ASSERT_STATUS(c.post_json("/api/grow", {{"mb", 300}}), 200);
  ASSERT_TRUE(eventually([&] { return worker()["admits"] == false; }, 20s)) << worker().dump();
  auto w = worker();
  EXPECT_EQ(w["reason"], "memory") << w.dump();
  EXPECT_GT(w["rss_bytes"].get<double>(), percent / 100 * static_cast<double>(machine)) << w.dump();
  // Retry-After: until his idle freeze (1 minute after his last request), the next memory freed.
  EXPECT_GE(w["retry_after"].get<int>(), 1) << w.dump();
  EXPECT_LE(w["retry_after"].get<int>(), 60) << w.dump();
  EXPECT_STATUS(c.get("/api/counter"), 200) << "existing users keep being served";

  // His freeze frees the ballast (it is not part of his store): the worker reopens.
  ASSERT_STATUS(c.post("/_troupe/users/fat/freeze", "", auth), 200);
  EXPECT_TRUE(eventually([&] { return worker()["admits"] == true; }, 20s)) << worker().dump();
}

// The worker count is a reading: an arrival no open worker admits (the only
// worker closed by CPU admission under load) starts a second worker and lands
// there; once the load stopped and the group was quiet, the idle second
// worker (its guest retired) is retired again — not counted as a restart.
TEST_F(Admission, AGroupGrowsUnderArrivalsNoWorkerAdmitsAndShrinksWhenIdle) {
  start({"--admin-token", token, "--set", "group.default.cpu_admission_close_percent=50", "--set",
         "group.default.cpu_admission_reopen_percent=20", "--set", "group.default.cpu_heating_seconds=0.5", "--set",
         "group.default.cpu_cooling_seconds=1", "--set", "group.default.worker_admission_interval_seconds=0", "--set",
         "group.default.worker_max_number=2", "--set", "group.default.worker_min_life_seconds=0", "--set",
         "group.default.cpu_retirement_quiet_seconds=1", "--set", "group.default.guest_idle_seconds=0.5"});
  auto open_workers = [&] { return metric(port(), auth, "troupe_workers", "group=\"default\",state=\"open\""); };
  EXPECT_EQ(open_workers(), 1);
  auto load = std::make_unique<spinner>(port(), "hot", 200);
  ASSERT_TRUE(eventually([&] { return worker()["admits"] == false; }, 30s)) << worker().dump();
  // A newcomer: no worker admits him, the group grows and he lands on the new worker.
  http_client newcomer(port());
  auto who = newcomer.get("/api/whoami");
  ASSERT_EQ(who.status, 200) << who.describe();
  EXPECT_EQ(who.json().value("worker", ""), "default-w2") << who.describe();
  EXPECT_EQ(open_workers(), 1);  // w2 open, w1 closed
  EXPECT_EQ(metric(port(), auth, "troupe_workers", "group=\"default\",state=\"closed\""), 1);
  load->stop();
  // Quiet again: the guest retired, the group cooled; the worker beyond the minimum goes.
  ASSERT_TRUE(eventually([&] {
    http_client c(port());
    return c.get("/_troupe/actors/worker:default-w2", auth).status == 404;
  }, 60s)) << "the idle second worker was not retired";
  EXPECT_TRUE(eventually([&] { return open_workers() == 1; }, 10s));
  EXPECT_EQ(metric(port(), auth, "troupe_worker_restarts_total", "group=\"default\""), 0);
  http_client c(port());
  EXPECT_EQ(c.get("/api/whoami").json().value("worker", ""), "default-w1") << "a newcomer lands on the open worker";
}

}  // namespace admission_test_file
