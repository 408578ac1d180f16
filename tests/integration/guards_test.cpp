// Guards on a real node (issue 25, docs/http.md "Guards"): the notes sample's
// GET /api/staff/report is guarded (403 unless the user's name starts with
// staff_). The front judges it before any actor: a refused request wakes
// nobody (a frozen user stays frozen, the deposit's read count is unchanged)
// and creates no guest; refusals are counted by type and route.
#include "../support/test_support.hpp"

#include <string>

namespace guards_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class Guards : public admin_node_test {
protected:
  double refused() { return m("troupe_guard_rejections_total", "type=\"notes\",route=\"/api/staff/report\""); }
};

}  // namespace

TEST_F(Guards, OnlyStaffPassAndRefusalsAreCounted) {
  start_with();
  http_client guest(port()), alice(port()), ann(port());
  auto r = guest.get("/api/staff/report");
  EXPECT_STATUS(r, 403);
  EXPECT_EQ(r.json().value("error", ""), "staff only") << r.body;
  login(alice, "alice");
  EXPECT_STATUS(alice.get("/api/staff/report"), 403);
  EXPECT_STATUS(alice.request("HEAD", "/api/staff/report"), 403);  // HEAD takes GET's route, and its guard
  login(ann, "staff_ann");
  ASSERT_STATUS(ann.post("/api/counter/incr"), 200);
  auto report = ann.get("/api/staff/report");
  ASSERT_STATUS(report, 200);
  EXPECT_EQ(report.json().value("user", ""), "staff_ann");
  EXPECT_EQ(report.json().value("count", -1), 1);
  EXPECT_EQ(refused(), 3);
  // Unguarded routes are not judged.
  EXPECT_STATUS(alice.get("/api/counter"), 200);
  EXPECT_EQ(refused(), 3);
}

// A stranger (no cookie) is refused as the guest he would be, and no guest is made for it.
TEST_F(Guards, AStrangerIsRefusedWithoutAGuestBeingMade) {
  start_with();
  auto before = m("troupe_users", "state=\"active\"");
  for (int i = 0; i < 5; ++i) {
    http_client stranger(port());
    EXPECT_STATUS(stranger.get("/api/staff/report"), 403);
  }
  EXPECT_EQ(m("troupe_users", "state=\"active\""), before);
  EXPECT_EQ(refused(), 5);
}

// A frozen user's request refused by the guard does not wake him: the
// deposit reads nothing. The same connection's next unguarded request does.
TEST_F(Guards, ARefusalWakesNobodyAndReadsNothing) {
  start_with();
  http_client alice(port()), admin(port());
  login(alice, "alice");
  ASSERT_STATUS(alice.post("/api/counter/incr"), 200);
  ASSERT_STATUS(admin.post("/_troupe/users/alice/freeze", "", auth), 200);
  ASSERT_TRUE(eventually([&] { return m("troupe_users", "state=\"active\"") == 0; }));
  const auto reads = m("troupe_deposit_reads_total");
  const auto wakes = m("troupe_user_wakes_total");
  for (int i = 0; i < 3; ++i)
    EXPECT_STATUS(alice.get("/api/staff/report"), 403);
  EXPECT_EQ(m("troupe_deposit_reads_total"), reads);
  EXPECT_EQ(m("troupe_user_wakes_total"), wakes);
  EXPECT_EQ(m("troupe_users", "state=\"active\""), 0);
  auto counter = alice.get("/api/counter");
  ASSERT_STATUS(counter, 200);
  EXPECT_EQ(counter.json().value("count", -1), 1);
  EXPECT_GT(m("troupe_deposit_reads_total"), reads) << "the wake read his parcel";
  EXPECT_EQ(m("troupe_user_wakes_total"), wakes + 1);
}

}  // namespace guards_test_file
