#include "registry/cpu_admission.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace cpu_admission_test_file {

using namespace troupe::registry;
using namespace std::chrono_literals;
using clock_type = cpu_temperature::clock;

namespace {

const auto t0 = clock_type::time_point{} + 1000h;

cpu_admission_settings settings(double close = 80, double reopen = 50) {
  cpu_admission_settings s;
  s.close_percent = close;
  s.reopen_percent = reopen;
  return s;
}

// Feeds `percent` every 100 ms for `span`, starting after `from`; returns the time reached.
clock_type::time_point feed(cpu_admission& a, double percent, std::chrono::milliseconds span,
                            clock_type::time_point from) {
  auto t = from;
  for (auto done = 0ms; done < span; done += 100ms) {
    t += 100ms;
    a.sample(percent, t);
  }
  return t;
}

}  // namespace

TEST(CpuTemperature, HeatsInItsHeatingTimeAndCoolsInItsCoolingTime) {
  cpu_temperature t(1s, 5s);
  t.sample(0, t0);
  auto at = t0;
  for (int i = 0; i < 10; ++i)  // 1 s at 100 %
    t.sample(100, at += 100ms);
  EXPECT_NEAR(t.value(), 100 * (1 - std::exp(-1.0)), 0.5) << "63 % of the way after one heating constant";
  const double hot = t.value();
  for (int i = 0; i < 10; ++i)  // 1 s idle
    t.sample(0, at += 100ms);
  EXPECT_NEAR(t.value(), hot * std::exp(-1.0 / 5), 0.5) << "cooling is five times slower";
  t.sample(100, at - 1s);
  EXPECT_NEAR(t.value(), hot * std::exp(-1.0 / 5), 0.5) << "a sample from the past is ignored";
  EXPECT_THROW(cpu_temperature(0s, 5s), std::invalid_argument);
}

TEST(CpuAdmission, ClosesWhenHotAndOneIdleSampleNeverReopensIt) {
  cpu_admission a(settings());
  a.sample(0, t0);
  EXPECT_TRUE(a.open());
  auto t = feed(a, 100, 3000ms, t0);
  EXPECT_FALSE(a.open()) << "3 s at 100 % heats past 80 %";
  EXPECT_EQ(a.sample(0, t += 100ms), cpu_admission::change::none) << "one idle sample";
  EXPECT_FALSE(a.open());
  t = feed(a, 0, 1000ms, t);
  EXPECT_FALSE(a.open()) << "still above the reopen threshold after 1 s idle";
  bool reopened = false;
  for (int i = 0; i < 100 && !reopened; ++i)
    reopened = a.sample(0, t += 100ms) == cpu_admission::change::reopened;
  EXPECT_TRUE(reopened);
  EXPECT_TRUE(a.open());
  EXPECT_LT(a.temperature(), 50);
}

TEST(CpuAdmission, BetweenTheThresholdsItStaysAsItWas) {
  cpu_admission a(settings());
  a.sample(65, t0);
  auto t = feed(a, 65, 10000ms, t0);
  EXPECT_TRUE(a.open()) << "65 % never closes it";
  t = feed(a, 100, 5000ms, t);
  ASSERT_FALSE(a.open());
  t = feed(a, 65, 30000ms, t);
  EXPECT_FALSE(a.open()) << "65 % never reopens it either";
}

TEST(CpuAdmission, AWorkerThatJustAdmittedIsSkippedForTheInterval) {
  auto s = settings();
  s.admission_interval = 500ms;
  cpu_admission a(s);
  a.sample(10, t0);
  EXPECT_TRUE(a.admits(t0));
  a.admitted(t0);
  EXPECT_FALSE(a.admits(t0 + 400ms));
  EXPECT_TRUE(a.admits(t0 + 500ms));
}

TEST(CpuAdmission, OffloadOnlyWhenClosedAndPastItsThreshold) {
  auto s = settings();
  s.offload_percent = 90;
  cpu_admission a(s);
  a.sample(0, t0);
  auto t = feed(a, 85, 10000ms, t0);
  EXPECT_FALSE(a.open());
  EXPECT_FALSE(a.wants_offload()) << "closed, but below the offload threshold";
  t = feed(a, 100, 5000ms, t);
  EXPECT_TRUE(a.wants_offload());
}

TEST(CpuAdmission, ThresholdsOutOfOrderAreRefused) {
  EXPECT_THROW(cpu_admission(settings(50, 50)), std::invalid_argument);
  EXPECT_THROW(cpu_admission(settings(50, 60)), std::invalid_argument);
  EXPECT_THROW(cpu_admission(settings(0, 0)), std::invalid_argument);
  auto s = settings();
  s.offload_percent = 70;
  EXPECT_THROW(cpu_admission{s}, std::invalid_argument);
}

}  // namespace cpu_admission_test_file
