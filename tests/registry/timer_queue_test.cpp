#include "registry/timer_queue.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace timer_queue_test_file {

using troupe::registry::timer_queue;
using namespace std::chrono_literals;

TEST(TimerQueue, GivesDueTimersEarliestFirstAndKeepsTheRest) {
  timer_queue q;
  auto t0 = timer_queue::clock::time_point{} + 1h;
  EXPECT_FALSE(q.next_due());
  q.push({t0 + 30ms, 3, 30, 0});
  q.push({t0 + 10ms, 1, 10, 2});
  q.push({t0 + 20ms, 2, 20, 1});
  q.push({t0 + 90ms, 9, 90, 0});
  ASSERT_TRUE(q.next_due());
  EXPECT_EQ(*q.next_due(), t0 + 10ms);
  std::vector<std::uint64_t> ids;
  EXPECT_EQ(q.pop_due(t0 + 5ms, [&](auto& e) { ids.push_back(e.id); }), 0u);
  EXPECT_EQ(q.pop_due(t0 + 30ms, [&](auto& e) { ids.push_back(e.id); }), 3u);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(*q.next_due(), t0 + 90ms);
}

TEST(TimerQueue, CarriesWhichAndArg) {
  timer_queue q;
  auto t0 = timer_queue::clock::time_point{} + 1h;
  q.push({t0, 7, 42, 2});
  timer_queue::entry got;
  q.pop_due(t0, [&](auto& e) { got = e; });
  EXPECT_EQ(got.id, 7u);
  EXPECT_EQ(got.arg, 42u);
  EXPECT_EQ(got.which, 2);
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, CompactDropsTheTimersOfActorsGoneAndKeepsTheOrder) {
  timer_queue q;
  auto t0 = timer_queue::clock::time_point{} + 1h;
  for (std::uint64_t i = 0; i < 100; ++i)
    q.push({t0 + std::chrono::milliseconds(100 - i), i, 0, 0});
  EXPECT_EQ(q.compact([](std::uint64_t id) { return id % 2 == 0; }), 50u);
  EXPECT_EQ(q.size(), 50u);
  std::vector<std::uint64_t> ids;
  q.pop_due(t0 + 1s, [&](auto& e) { ids.push_back(e.id); });
  ASSERT_EQ(ids.size(), 50u);
  for (std::size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(ids[i], 98 - 2 * i);  // latest pushed is due first
}

}  // namespace timer_queue_test_file
