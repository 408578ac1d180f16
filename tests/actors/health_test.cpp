// The health actor (actors/health.cpp) on CAF's deterministic test coordinator:
// the test moves the clock one second at a time and sees what the actor made of
// each second (its windows, its probes of the deposit), never the machine's pace.
// What /_troupe/health answers from those figures: assess_health's tests.
#include "actors/health.hpp"
#include "actors/node_context.hpp"
#include "config/recipe.hpp"
#include "deterministic_system.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace health_test_file {

using namespace troupe;
using namespace std::chrono_literals;

namespace {

// The deposit as the health actor sees it: it records each probe's freshness.
deposit_prober::behavior_type recording_deposit(deposit_prober::pointer,
                                                std::shared_ptr<std::vector<std::int64_t>> probes) {
  return {[probes](probe_write_atom, std::int64_t fresh_ms) { probes->push_back(fresh_ms); }};
}

class health_actor : public ::testing::Test, protected test::deterministic_system {
protected:
  health_actor() {
    ctx = std::make_shared<node_context>();
    ctx->recipe().node.health_probe_seconds = 5;
    deposit = sys->spawn(recording_deposit, probes);
    health = spawn_health(*sys, ctx, deposit);
    sched->run();  // its first tick, at once
  }

  ~health_actor() override {
    caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deposit, caf::exit_reason::user_shutdown);
    sched->run();
    health = nullptr;
    deposit = nullptr;
    sys.reset();
  }

  // `n` seconds pass, one at a time: each second's tick runs, and what it sends is delivered.
  void seconds(int n) {
    for (int i = 0; i < n; ++i) {
      sched->advance_time(1s);
      sched->run();
    }
  }

  std::shared_ptr<node_context> ctx;
  std::shared_ptr<std::vector<std::int64_t>> probes = std::make_shared<std::vector<std::int64_t>>();
  deposit_prober deposit;
  caf::actor health;
};

}  // namespace

TEST_F(health_actor, probes_the_deposit_once_a_probe_period_asking_for_that_freshness) {
  seconds(4);
  EXPECT_TRUE(probes->empty());
  seconds(1);
  ASSERT_EQ(probes->size(), 1u);
  EXPECT_EQ(probes->front(), 5000);  // a write within the last 5 s makes the probe needless
  seconds(4);
  EXPECT_EQ(probes->size(), 1u);
  seconds(1);
  EXPECT_EQ(probes->size(), 2u);
}

TEST_F(health_actor, counts_the_restarts_of_the_last_minute_only) {
  ctx->metrics.user_restarts += 7;
  seconds(1);
  EXPECT_EQ(ctx->health.restarts_last_minute.load(), 7u);
  EXPECT_EQ(ctx->health.window_seconds.load(), 2u);  // the start's sample, its first tick's, this one's
  seconds(59);
  EXPECT_EQ(ctx->health.restarts_last_minute.load(), 7u);  // the window still reaches a sample without them
  EXPECT_EQ(ctx->health.window_seconds.load(), 60u);
  seconds(1);
  EXPECT_EQ(ctx->health.restarts_last_minute.load(), 0u);  // a minute later they have left the window
  EXPECT_EQ(ctx->health.window_seconds.load(), 60u);
}

TEST_F(health_actor, samples_the_capacity_figures_and_flags_the_node_past_its_memory_limit) {
  ctx->recipe().limits.commander_memory_max_percent = 0.0001;  // any process holds more than this of a machine
  seconds(1);
  auto& h = ctx->health;
  EXPECT_GT(h.machine_memory_used_percent.load(), 0);
  EXPECT_LT(h.machine_memory_used_percent.load(), 100);
  EXPECT_GT(h.node_memory_percent.load(), 0.0001);
  EXPECT_TRUE(h.commander_memory_high.load());
  EXPECT_FALSE(h.machine_memory_alarm.load()) << "this machine is not 95 % full";
  EXPECT_EQ(h.deposit_free_percent.load(), -1) << "no deposit directory here (./deposit)";
  EXPECT_FALSE(h.deposit_low_space.load());
  ctx->recipe().limits.commander_memory_max_percent = 100;
  seconds(1);
  EXPECT_FALSE(h.commander_memory_high.load());
}

TEST(capacity, each_flag_rises_past_its_limit_and_falls_only_clear_of_it) {
  health_signals s;
  capacity_limits limits{80, 50, 10};
  s.machine_memory_used_percent = 81;
  s.node_memory_percent = 51;
  s.deposit_free_percent = 9;
  judge_capacity(s, limits);
  EXPECT_TRUE(s.machine_memory_alarm);
  EXPECT_TRUE(s.commander_memory_high);
  EXPECT_TRUE(s.deposit_low_space);
  auto h = assess_health(s, 1e9);
  EXPECT_EQ(h.status, 200) << "a warning: the node still serves and persists";
  for (auto* reason : {"machine_memory_alarm", "commander_memory", "deposit_low_space"})
    EXPECT_NE(h.body.find(reason), std::string::npos) << reason << " in " << h.body;
  EXPECT_NE(h.body.find("\"deposit_free_percent\":9.0"), std::string::npos) << h.body;
  // Just under the limits: still flagged (no flapping on the edge).
  s.machine_memory_used_percent = 78;
  s.node_memory_percent = 48;
  s.deposit_free_percent = 10.5;
  judge_capacity(s, limits);
  EXPECT_TRUE(s.machine_memory_alarm);
  EXPECT_TRUE(s.commander_memory_high);
  EXPECT_TRUE(s.deposit_low_space);
  // Clear of them: cleared.
  s.machine_memory_used_percent = 70;
  s.node_memory_percent = 40;
  s.deposit_free_percent = 12;
  judge_capacity(s, limits);
  EXPECT_FALSE(s.machine_memory_alarm);
  EXPECT_FALSE(s.commander_memory_high);
  EXPECT_FALSE(s.deposit_low_space);
  EXPECT_EQ(assess_health(s, 1e9).body, R"({"status":"ok"})");
  // Unknown figures flag nothing; low_space_percent 0 is off.
  s.deposit_free_percent = 0.5;
  judge_capacity(s, {80, 50, 0});
  EXPECT_FALSE(s.deposit_low_space);
  s.machine_memory_used_percent = -1;
  judge_capacity(s, {1, 50, 10});
  EXPECT_FALSE(s.machine_memory_alarm);
}

TEST(capacity, a_member_that_may_not_serve_is_503_not_serving_so_a_balancer_drops_it) {
  health_signals s;
  serving_signal serving;  // until_ms 0: not joined, or fenced
  auto h = assess_health(s, 1e9, nullptr, &serving);
  EXPECT_EQ(h.status, 503);
  EXPECT_NE(h.body.find("not_serving"), std::string::npos) << h.body;
  serving.until_ms = serving_signal::now_ms() + 60000;  // its lease runs
  EXPECT_EQ(assess_health(s, 1e9, nullptr, &serving).status, 200);
  EXPECT_EQ(assess_health(s, 1e9).status, 200) << "a lone node has no lease to lose";
}

}  // namespace health_test_file
