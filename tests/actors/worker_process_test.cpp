// The worker process slot's heartbeat period (docs/SUPERVISION.md "Workers as processes").
#include "actors/worker_process.hpp"
#include "config/group_settings.hpp"

#include <gtest/gtest.h>

namespace worker_process_test_file {

using namespace std::chrono_literals;

namespace {

troupe::config::group_settings with_stuck_timeout(double seconds) {
  troupe::config::group_settings g;
  g.isolation = "process";
  g.stuck_timeout_seconds = seconds;
  return g;
}

TEST(WorkerProcess, HeartbeatIsAQuarterOfTheStuckTimeoutAtMostASecond) {
  EXPECT_EQ(troupe::heartbeat_interval(with_stuck_timeout(10)), caf::timespan{1s});
  EXPECT_EQ(troupe::heartbeat_interval(with_stuck_timeout(4)), caf::timespan{1s});
  EXPECT_EQ(troupe::heartbeat_interval(with_stuck_timeout(1)), caf::timespan{250ms});
  EXPECT_EQ(troupe::heartbeat_interval(with_stuck_timeout(0.1)), caf::timespan{25ms});
}

}  // namespace

}  // namespace worker_process_test_file
