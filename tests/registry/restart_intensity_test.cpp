#include "registry/restart_intensity.hpp"

#include <gtest/gtest.h>

namespace restart_intensity_test_file {

using namespace troupe::registry;
using namespace std::chrono_literals;
using clock_type = restart_intensity::clock;

namespace {

const auto t0 = clock_type::time_point{} + 1000h;

}  // namespace

TEST(restart_intensity, allows_max_restarts_within_the_window_and_degrades_at_the_next) {
  restart_intensity r(3, 10, 30, 2);
  EXPECT_TRUE(r.record(t0));
  EXPECT_TRUE(r.record(t0 + 1s));
  EXPECT_TRUE(r.record(t0 + 2s));
  EXPECT_FALSE(r.degraded());
  EXPECT_FALSE(r.record(t0 + 3s));  // the fourth within 10 s: more than 3
  EXPECT_TRUE(r.degraded());
  EXPECT_EQ(r.why(), degradation::restart_intensity);
  EXPECT_EQ(r.since(), t0 + 3s);
  EXPECT_FALSE(r.record(t0 + 4s));  // no restart while degraded
  EXPECT_EQ(r.since(), t0 + 3s);
}

TEST(restart_intensity, restarts_older_than_the_window_are_forgotten) {
  restart_intensity r(2, 10, 30, 1);
  EXPECT_TRUE(r.record(t0));
  EXPECT_TRUE(r.record(t0 + 5s));
  EXPECT_TRUE(r.record(t0 + 10500ms));  // the first left the window
  EXPECT_EQ(r.restarts_in_window(t0 + 10500ms), 2u);
  EXPECT_TRUE(r.record(t0 + 30s));
  EXPECT_FALSE(r.degraded());
  EXPECT_EQ(r.restarts_in_window(t0 + 30s), 1u);
}

TEST(restart_intensity, zero_max_restarts_degrades_at_the_first_death) {
  restart_intensity r(0, 10, 30, 1);
  EXPECT_FALSE(r.record(t0));
  EXPECT_TRUE(r.degraded());
}

TEST(restart_intensity, recovers_after_the_interval_and_forgets_its_restarts) {
  restart_intensity r(1, 10, 30, 1);
  EXPECT_TRUE(r.record(t0));
  EXPECT_FALSE(r.record(t0 + 1s));
  ASSERT_TRUE(r.recovery_at());
  EXPECT_EQ(*r.recovery_at(), t0 + 31s);
  EXPECT_FALSE(r.recover(t0 + 30s));
  EXPECT_TRUE(r.degraded());
  EXPECT_TRUE(r.recover(t0 + 31s));
  EXPECT_FALSE(r.degraded());
  EXPECT_EQ(r.why(), degradation::none);
  EXPECT_EQ(r.restarts_in_window(t0 + 31s), 0u);
  EXPECT_TRUE(r.record(t0 + 32s));  // a fresh budget, though the old restarts were within the window
  EXPECT_FALSE(r.recover(t0 + 100s));  // not degraded: nothing to recover
}

TEST(restart_intensity, retry_after_counts_down_to_the_recovery_rounded_up) {
  restart_intensity r(0, 10, 30, 1);
  EXPECT_EQ(r.retry_after(t0), 0u);  // not degraded
  r.record(t0);
  EXPECT_EQ(r.retry_after(t0), 30u);
  EXPECT_EQ(r.retry_after(t0 + 10500ms), 20u);
  EXPECT_EQ(r.retry_after(t0 + 29900ms), 1u);
  EXPECT_EQ(r.retry_after(t0 + 45s), 1u);  // overdue: at least 1
}

TEST(restart_intensity, recovery_off_stays_degraded_without_retry_after) {
  restart_intensity r(0, 10, 0, 1);
  r.record(t0);
  EXPECT_TRUE(r.degraded());
  EXPECT_FALSE(r.recovery_at());
  EXPECT_EQ(r.retry_after(t0), 0u);
  EXPECT_FALSE(r.recover(t0 + 1000h));
  EXPECT_TRUE(r.degraded());
}

TEST(restart_intensity, parked_slots_do_not_count_and_all_parked_is_degraded_for_good) {
  restart_intensity r(5, 10, 30, 2);
  r.park(0, t0);
  EXPECT_TRUE(r.parked(0));
  EXPECT_FALSE(r.parked(1));
  EXPECT_FALSE(r.degraded());
  EXPECT_EQ(r.restarts_in_window(t0), 0u);
  r.park(1, t0 + 1s);
  EXPECT_TRUE(r.degraded());
  EXPECT_EQ(r.why(), degradation::all_parked);
  EXPECT_EQ(r.retry_after(t0 + 1s), 0u);  // retrying will not help
  EXPECT_FALSE(r.recover(t0 + 1000h));
  EXPECT_EQ(r.parked_count(), 2u);
}

TEST(restart_intensity, parking_the_last_slot_of_a_degraded_group_makes_it_permanent) {
  restart_intensity r(0, 10, 30, 1);
  r.record(t0);
  ASSERT_EQ(r.why(), degradation::restart_intensity);
  r.park(0, t0 + 1s);
  EXPECT_EQ(r.why(), degradation::all_parked);
  EXPECT_EQ(r.since(), t0);  // degraded since the first cause
  EXPECT_EQ(r.retry_after(t0 + 1s), 0u);
}

TEST(restart_intensity, a_slot_added_later_is_not_parked) {
  restart_intensity r(5, 10, 30, 1);
  r.park(0, t0);
  EXPECT_TRUE(r.degraded());
  r.add_slot();
  EXPECT_EQ(r.slots(), 2u);
  EXPECT_FALSE(r.parked(1));
}

}  // namespace restart_intensity_test_file
