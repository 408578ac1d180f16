// Worker admission on a real actor system (docs/SUPERVISION.md "Admission"):
// a worker spawned by the test's own actor (standing in for its group, so the
// admission reports come to the test) hosts users whose handlers burn CPU.
// It reports closed with reason cpu and a computed Retry-After, stays closed
// while it cools between the thresholds, reports open again; offload freezes
// the least busy of its active users.
#include "../support/eventually.hpp"
#include "../support/test_support.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/worker.hpp"
#include "config/recipe.hpp"
#include "registry/proc_stats.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

namespace admission_test_file {

using namespace troupe;
using namespace std::chrono_literals;
using troupe::test::eventually;

namespace {

struct tally {
  std::int64_t n = 0;
  MSGPACK_DEFINE(n);
};

// POST /spin/{ms}: busy-loops that long on the handler's thread;
// POST /grow/{mb}: keeps that much resident memory (not in his store).
class spin_app : public user_actor<tally> {
public:
  static void routes(route_table<spin_app>& r) {
    r.post("/grow/{mb}", [](spin_app& u, request& q) {
      std::string block(static_cast<std::size_t>(std::stoi(q.param("mb"))) << 20, '\0');
      for (std::size_t i = 0; i < block.size(); i += 4096)  // touched: resident
        block[i] = static_cast<char>(i);
      u.ballast_.push_back(std::move(block));
      return json({{"blocks", u.ballast_.size()}});
    });
    r.post("/spin/{ms}", [](request& q) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::stoi(q.param("ms")));
      std::uint64_t turns = 0;
      while (std::chrono::steady_clock::now() < until)
        ++turns;
      return json({{"turns", turns}});
    });
  }

private:
  std::vector<std::string> ballast_;
};

class worker_admission_actors : public ::testing::Test {
protected:
  worker_admission_actors() {
    register_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    sys.emplace(cfg);
    ctx = std::make_shared<node_context>();
    ctx->node_name = "test-node";
    auto& g = ctx->recipe().groups.front();
    g.user_type = "spinner";
    g.cpu_admission_close_percent = 50;
    g.cpu_admission_reopen_percent = 20;
    g.cpu_offload_percent = 80;
    g.cpu_heating_seconds = 0.5;
    g.cpu_cooling_seconds = 3;
    ctx->apps.add<spin_app>("spinner");
    dir = std::filesystem::temp_directory_path() / ("troupe-admission-" + ctx->cids->mint());
    deposit = spawn_deposit(*sys, store::make_filesystem_deposit(dir.string()));
    group.emplace(*sys);
    driver.emplace(*sys);
  }

  // `mem_total_bytes`: the machine's memory as the worker sees it (0: /proc/meminfo).
  void start_worker(std::uint64_t mem_total_bytes = 0) {
    worker_spec spec{"default-w1", "default", {}, {}, deposit, ctx};
    spec.mem_total_bytes = mem_total_bytes;
    worker = spawn_worker(**group, std::move(spec));
  }

  ~worker_admission_actors() override {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deposit, caf::exit_reason::user_shutdown);
    worker = nullptr;
    deposit = nullptr;
    group.reset();
    driver.reset();
    sys.reset();
    std::filesystem::remove_all(dir);
  }

  // Hosts `user` on the worker with connection "c-<user>"; answers his actor.
  user_handle host(const std::string& user) {
    user_handle h;
    (*driver)
      ->request(worker, 5s, attach_atom::value, attach_order{user, "c-" + user, {}, false, 0, {}})
      .receive([&](placement& p) { h = p.actor; },
               [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return h;
  }

  // `budget`: a bound, not a timing goal (a fresh VM backs first-touched memory slowly).
  int spin(const user_handle& h, const std::string& user, int ms, const std::string& route = "/spin/",
           std::chrono::seconds budget = 5s) {
    int status = 0;
    http_request req{"POST", route + std::to_string(ms), "", "", "c-" + user, "", {}, 0, {}, {}, {}, 0, {}};
    (*driver)
      ->request(h, budget, http_atom::value, std::move(req))
      .receive([&](http_response& r) { status = r.status; },
               [&](caf::error& e) {
                 status = -1;
                 std::cerr << "spin " << user << ": " << sys->render(e) << "\n";
               });
    return status;
  }

  // The next admission report the worker sent its group, waiting up to `wait`.
  std::optional<admission_report> next_report(std::chrono::milliseconds wait) {
    std::optional<admission_report> out;
    (*group)->receive([&](admission_atom, admission_report& r) { out = r; },
                      caf::after(wait) >> [] {});
    return out;
  }

  nlohmann::json detail() {
    nlohmann::json out;
    (*driver)
      ->request(worker, 5s, probe_atom::value, std::uint64_t{1}, true)
      .receive([&](actor_probe& p) { out = nlohmann::json::parse(p.detail); },
               [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return out;
  }

  std::vector<std::string> hosted() {
    std::vector<std::string> out;
    (*driver)
      ->request(worker, 5s, scan_atom::value)
      .receive([&](std::vector<std::string>& names, std::vector<std::uint64_t>&) { out = std::move(names); },
               [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return out;
  }

  // The occupancy tests: the worker's share is set (through the injected
  // machine size) this far above what the test process holds, and a user grows past it.
  static constexpr std::uint64_t headroom = 64u << 20;
  static constexpr int grown_mb = 96;

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  node_context_ptr ctx;
  std::filesystem::path dir;
  deposit_handle deposit;
  std::optional<caf::scoped_actor> group, driver;
  worker_handle worker;
};

}  // namespace

TEST_F(worker_admission_actors, ClosesWithReasonCpuAndAComputedRetryAfterThenReopensWithHysteresis) {
  start_worker();
  auto hot = host("hot");
  std::optional<admission_report> closed;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(spin(hot, "hot", 100), 200);
    closed = next_report(0ms);
  }
  ASSERT_TRUE(closed) << "no report while its user burnt a core: " << detail().dump();
  EXPECT_EQ(closed->worker, caf::actor_cast<caf::actor_addr>(worker));
  EXPECT_FALSE(closed->admits);
  EXPECT_EQ(closed->reason, static_cast<std::uint8_t>(refusal_reason::cpu));
  // Closed just past 50 %: cooling to 20 % at 3 s takes 3 × ln(50 / 20) ≈ 2.7 s at least.
  EXPECT_GE(closed->retry_after, 2u);
  EXPECT_LE(closed->retry_after, static_cast<std::uint32_t>(std::ceil(3 * std::log(100.0 * 2 / 20))));

  // Idle now: it cools, closed, through the band between the thresholds;
  // meanwhile its reports keep the Retry-After current (shorter as it cools).
  bool closed_below_close = false;
  std::optional<admission_report> reopened;
  // A handler's time counts once it ended, after its answer: the last spins
  // may still heat it a little after the close was reported.
  std::uint32_t retry_after = closed->retry_after + 2;
  while (!reopened && std::chrono::steady_clock::now() < deadline + 30s) {
    auto d = detail();
    if (d["admits"] == false && d["cpu_temperature"].get<double>() < 50)
      closed_below_close = true;
    auto r = next_report(50ms);
    if (r && r->admits)
      reopened = r;
    else if (r) {
      EXPECT_EQ(r->reason, static_cast<std::uint8_t>(refusal_reason::cpu));
      EXPECT_LE(r->retry_after, retry_after) << "an idle worker only cools";
      EXPECT_GE(r->retry_after, 1u);
      retry_after = r->retry_after;
    }
  }
  ASSERT_TRUE(reopened) << detail().dump();
  EXPECT_TRUE(reopened->admits);
  EXPECT_EQ(reopened->retry_after, 0u);
  EXPECT_TRUE(closed_below_close) << "one cool sample reopened it";
  EXPECT_LT(detail()["cpu_temperature"].get<double>(), 20);
}

TEST_F(worker_admission_actors, OffloadFreezesTheLeastBusyActiveUserAndNeverTheLastOne) {
  start_worker();
  auto heavy = host("heavy");
  auto light = host("light");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool light_gone = false;
  while (!light_gone && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(spin(heavy, "heavy", 150), 200);
    spin(light, "light", 1);  // -1 once he is frozen and gone
    auto names = hosted();
    light_gone = std::find(names.begin(), names.end(), "light") == names.end();
  }
  ASSERT_TRUE(light_gone) << detail().dump();
  auto names = hosted();
  EXPECT_EQ(names, std::vector<std::string>{"heavy"}) << "the busiest user stays";
  // Alone and still hot: he is never offloaded.
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(spin(heavy, "heavy", 150), 200);
  EXPECT_TRUE(detail()["cpu_temperature"].get<double>() > 80) << detail().dump();
  EXPECT_EQ(hosted(), std::vector<std::string>{"heavy"});
}

TEST_F(worker_admission_actors, PastItsOccupancyAProcessWorkerFreezesItsUsersThenAsksToBeReplaced) {
  // isolation "process": this test process stands for the worker's. Its
  // share is set (through the injected machine size) `headroom` above what
  // it holds now; a user grows past it.
  auto& g = ctx->recipe().groups.front();
  g.isolation = "process";
  g.cpu_admission_close_percent = 0;  // memory only
  g.cpu_offload_percent = 0;
  g.memory_max_percent = 100;
  g.worker_max_number = 1;
  g.worker_memory_admission_percent = 90;
  g.restart_occupancy_max_percent = 100;
  const auto rss = registry::rss_bytes();
  ASSERT_TRUE(rss);
  start_worker(*rss + headroom);
  auto fat = host("fat");
  auto slim = host("slim");
  ASSERT_EQ(spin(fat, "fat", grown_mb, "/grow/", 60s), 200);

  auto closed = next_report(10s);
  ASSERT_TRUE(closed) << detail().dump();
  EXPECT_FALSE(closed->admits);
  EXPECT_EQ(closed->reason, static_cast<std::uint8_t>(refusal_reason::memory));
  EXPECT_GE(closed->retry_after, 1u);
  std::optional<std::uint64_t> replace_rss;
  (*group)->receive([&](replace_atom, caf::actor_addr& who, std::uint64_t bytes) {
                      EXPECT_EQ(who, caf::actor_cast<caf::actor_addr>(worker));
                      replace_rss = bytes;
                    },
                    caf::after(std::chrono::seconds(20)) >> [] {});
  ASSERT_TRUE(replace_rss) << detail().dump();
  EXPECT_GT(*replace_rss, *rss + headroom);
  // Their freezes are durable when it asks; their exits follow.
  EXPECT_TRUE(eventually([&] { return hosted().empty(); }, 10s));
  EXPECT_EQ(detail()["draining"], true) << "it takes no newcomer while it waits to be replaced";
  auto parcels = std::distance(std::filesystem::recursive_directory_iterator(dir),
                               std::filesystem::recursive_directory_iterator{});
  EXPECT_GE(parcels, 2) << "both users' parcels are in the deposit";
}

// The same with a full deposit: the freezes fail, so nothing reports success
// for state it did not keep — no replacement is asked for, the users stay
// hosted with their state and are served, and the worker returns to service.
TEST_F(worker_admission_actors, PastItsOccupancyWithAFullDepositAWorkerKeepsItsUsersAndAsksNoReplacement) {
  troupe::test::small_tmpfs full(dir.string(), "256k");
  if (!full.mounted())
    GTEST_SKIP() << full.why();
  full.fill();
  auto& g = ctx->recipe().groups.front();
  g.isolation = "process";
  g.cpu_admission_close_percent = 0;
  g.cpu_offload_percent = 0;
  g.memory_max_percent = 100;
  g.worker_max_number = 1;
  g.worker_memory_admission_percent = 90;
  g.restart_occupancy_max_percent = 100;
  const auto rss = registry::rss_bytes();
  ASSERT_TRUE(rss);
  start_worker(*rss + headroom);
  auto fat = host("fat");
  auto slim = host("slim");
  ASSERT_EQ(spin(fat, "fat", grown_mb, "/grow/", 60s), 200);
  auto closed = next_report(10s);
  ASSERT_TRUE(closed) << detail().dump();
  EXPECT_FALSE(closed->admits);
  // The freezes fail against the full deposit: back in service, nobody asked to replace it.
  // Watched for 5 s (its beat retries every second): its renewed admission
  // reports are taken too, or the blocking receive's timeout would never fire.
  bool replacement_asked = false;
  for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;)
    (*group)->receive([&](replace_atom, caf::actor_addr&, std::uint64_t) { replacement_asked = true; },
                      [&](admission_atom, admission_report&) {},
                      caf::after(std::chrono::duration_cast<std::chrono::milliseconds>(
                        until - std::chrono::steady_clock::now() + 1ms)) >> [] {});
  EXPECT_FALSE(replacement_asked) << "a replacement was asked for users whose freezes failed";
  auto names = hosted();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"fat", "slim"})) << detail().dump();
  EXPECT_EQ(spin(slim, "slim", 1), 200) << "his users keep being served";
}

}  // namespace admission_test_file
