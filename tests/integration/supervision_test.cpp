// Supervision against a real node (issue 13): a user whose actor crashes
// max_user_restarts times within restart_window_seconds is quarantined alone.
// (The group-degraded scenario needs worker processes to kill: it is written
// with them; tests/actors/tree_test.cpp covers it with worker actors.)
#include "../support/test_support.hpp"

namespace supervision_test_file {

using namespace troupe::test;
using std::chrono::milliseconds;

namespace {

const std::string token = "supervision-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

class Supervision : public node_test {};

}  // namespace

TEST_F(Supervision, AUserCrashingMaxUserRestartsTimesIsQuarantinedAloneThenServedFromHisLastState) {
  start({"--admin-token", token, "--set", "group.default.max_user_restarts=3", "--set",
         "group.default.restart_window_seconds=3"});
  http_client alice(port()), bob(port());
  ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
  ASSERT_STATUS(bob.post_json("/api/login", {{"user", "bob"}}), 200);
  ASSERT_EQ(count_of(alice.post("/api/counter/incr")), 1);
  ASSERT_EQ(count_of(alice.post("/api/counter/incr")), 2);
  ASSERT_EQ(count_of(bob.post("/api/counter/incr")), 1);

  for (int crash = 1; crash < 3; ++crash) {  // restarted each time, from his last good state
    ASSERT_STATUS(alice.post("/api/crash"), 502);
    ASSERT_EQ(count_of(alice.get("/api/counter")), 2) << "crash " << crash;
  }
  ASSERT_STATUS(alice.post("/api/crash"), 502);  // the third within 3 s: quarantined

  response refused;
  ASSERT_TRUE(eventually([&] {  // his actor's down may still be on its way
    refused = alice.get("/api/counter");
    return refused.status == 503;
  }, milliseconds(5000))) << refused.describe();
  EXPECT_NE(refused.body.find("alice"), std::string::npos) << refused.describe();
  EXPECT_NE(refused.body.find("quarantined"), std::string::npos) << refused.describe();
  ASSERT_TRUE(refused.has("Retry-After")) << refused.describe();
  auto retry = std::stoi(refused.get("Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 3);  // until his oldest crash leaves the window
  // Everyone else is served meanwhile.
  EXPECT_EQ(count_of(bob.post("/api/counter/incr")), 2);
  EXPECT_GE(metric(port(), bearer(), "troupe_admission_rejections_total", "reason=\"quarantined\""), 1.0);

  // After the window he is served again, with his last good state.
  response back;
  ASSERT_TRUE(eventually([&] {
    back = alice.get("/api/counter");
    return back.status != 503;
  }, milliseconds(10000))) << back.describe();
  ASSERT_STATUS(back, 200);
  EXPECT_EQ(count_of(back), 2);
  EXPECT_EQ(count_of(alice.post("/api/counter/incr")), 3);
}

TEST_F(Supervision, HealthAndMetricsShowNoDegradedGroupOnAHealthyNode) {
  start({"--admin-token", token});
  EXPECT_EQ(metric(port(), bearer(), "troupe_group_degraded", "group=\"default\""), 0.0);
  EXPECT_EQ(metric(port(), bearer(), "troupe_workers", "group=\"default\",state=\"open\""), 1.0);
  http_client c(port());
  auto h = c.get("/_troupe/health");
  EXPECT_EQ(h.status, 200) << h.describe();
  EXPECT_EQ(h.body.find("degraded_groups"), std::string::npos) << h.describe();
}

}  // namespace supervision_test_file
