#include "registry/rate_history.hpp"

#include <gtest/gtest.h>

namespace rate_history_test_file {

using namespace troupe::registry;

namespace {

rate_counters counters(std::uint64_t requests, std::uint64_t errors = 0, std::uint64_t wakes = 0,
                       std::uint64_t freezes = 0) {
  rate_counters c;
  c.requests = requests;
  c.errors = errors;
  c.wakes = wakes;
  c.freezes = freezes;
  return c;
}

constexpr std::int64_t t0 = 1'796'223'845'000;  // 2026-12-02T15:04:05Z

}  // namespace

TEST(rate_history, the_first_reading_is_a_baseline_and_the_next_ones_are_rates) {
  rate_history h(10);
  h.record(t0, counters(100, 5, 2, 1));
  EXPECT_EQ(h.size(), 0u);
  h.record(t0 + 1000, counters(150, 7, 5, 1));
  ASSERT_EQ(h.size(), 1u);
  auto s = h.at(0);
  EXPECT_EQ(s.unix_ms, t0 + 1000);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 50);
  EXPECT_DOUBLE_EQ(s.errors_per_s, 2);
  EXPECT_DOUBLE_EQ(s.wakes_per_s, 3);
  EXPECT_DOUBLE_EQ(s.freezes_per_s, 0);
  EXPECT_FALSE(s.p50_ms);  // no latency counted: none to tell
  // Two seconds late: the rate is per second of the real interval.
  h.record(t0 + 3000, counters(250));
  EXPECT_DOUBLE_EQ(h.at(1).requests_per_s, 50);
  // A counter that went down (or a clock that did not move) is no change, never negative.
  h.record(t0 + 4000, counters(10));
  EXPECT_DOUBLE_EQ(h.at(2).requests_per_s, 0);
  h.record(t0 + 4000, counters(20));
  EXPECT_EQ(h.size(), 3u);
}

TEST(rate_history, keeps_its_capacity_dropping_the_oldest) {
  rate_history h(3);
  for (int i = 0; i <= 5; ++i)
    h.record(t0 + i * 1000, counters(static_cast<std::uint64_t>(i * i)));
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h.capacity(), 3u);
  // Seconds 3, 4, 5 kept: rates 5, 7, 9 (i² - (i-1)²).
  EXPECT_EQ(h.at(0).unix_ms, t0 + 3000);
  EXPECT_DOUBLE_EQ(h.at(0).requests_per_s, 5);
  EXPECT_DOUBLE_EQ(h.at(2).requests_per_s, 9);
  EXPECT_EQ(h.latest()->unix_ms, t0 + 5000);
  auto all = h.samples();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.front().unix_ms, t0 + 3000);
  EXPECT_EQ(rate_history(0).capacity(), 1u);  // never empty
}

TEST(rate_history, latency_quantiles_come_from_the_interval_only) {
  rate_history h(4);
  rate_counters c;
  c.latency[latency_bucket(15'000'000)] = 1000;  // a slow past: not this interval's
  h.record(t0, c);
  c.requests = 100;
  c.latency[latency_bucket(150)] += 99;  // 100-200 µs
  c.latency[latency_bucket(40'000)] += 1;  // 20-50 ms
  h.record(t0 + 1000, c);
  auto s = h.at(0);
  ASSERT_TRUE(s.p50_ms && s.p99_ms);
  EXPECT_GT(*s.p50_ms, 0.1);
  EXPECT_LE(*s.p50_ms, 0.2);
  EXPECT_LE(*s.p99_ms, 0.2);  // the 99th of 100 is still a fast one
  EXPECT_FALSE(latency_quantile_ms(latency_counts{}, 0.5));
}

TEST(rate_history, buckets_and_quantiles) {
  EXPECT_EQ(latency_bucket(0), 0u);
  EXPECT_EQ(latency_bucket(10), 0u);
  EXPECT_EQ(latency_bucket(11), 1u);
  EXPECT_EQ(latency_bucket(10'000'000), latency_bounds_us.size() - 1);
  EXPECT_EQ(latency_bucket(10'000'001), latency_bounds_us.size());
  latency_counts c{};
  c[latency_bucket(1500)] = 10;  // 1-2 ms
  EXPECT_DOUBLE_EQ(*latency_quantile_ms(c, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(*latency_quantile_ms(c, 1.0), 2.0);
  c = {};
  c[latency_bounds_us.size()] = 3;  // past the last bound: the last bound
  EXPECT_DOUBLE_EQ(*latency_quantile_ms(c, 0.99), 10'000);
}

TEST(rate_history, answers_json_with_iso_utc_times) {
  EXPECT_EQ(iso_utc(t0 + 123), "2026-12-02T15:04:05.123Z");
  EXPECT_EQ(iso_utc(0), "1970-01-01T00:00:00.000Z");
  rate_history h(2);
  h.record(t0, counters(0));
  h.record(t0 + 1000, counters(3));
  auto j = h.to_json();
  EXPECT_EQ(j["interval_seconds"], 1);
  EXPECT_EQ(j["capacity"], 2);
  ASSERT_EQ(j["samples"].size(), 1u);
  auto& s = j["samples"][0];
  EXPECT_EQ(s["t"], "2026-12-02T15:04:06.000Z");
  EXPECT_EQ(s["unix_ms"], t0 + 1000);
  EXPECT_EQ(s["requests_per_s"], 3.0);
  EXPECT_TRUE(s["p50_ms"].is_null());
  EXPECT_TRUE(s["p99_ms"].is_null());
}

}  // namespace rate_history_test_file
