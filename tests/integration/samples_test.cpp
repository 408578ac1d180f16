// The second sample, `tally`, proves the public API again: path parameters,
// http_error statuses, per-user state — on a real node started with --app tally.
#include "../support/test_support.hpp"

using namespace troupe::test;

namespace {
struct Tally : shared_node_test<Tally> {
  static std::vector<std::string> args() { return {"--app", "tally"}; }
};
}  // namespace

TEST_F(Tally, PathParametersAddressNamedTallies) {
  http_client c(port());
  ASSERT_STATUS(c.post("/tally/apples"), 200);
  auto r = c.post("/tally/apples");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().at("name"), "apples");
  EXPECT_EQ(r.json().at("value"), 2);
  ASSERT_STATUS(c.post("/tally/green%20pears"), 200);
  auto one = c.get("/tally/green%20pears");
  ASSERT_STATUS(one, 200);
  EXPECT_EQ(one.json().at("name"), "green pears");
  EXPECT_EQ(one.json().at("value"), 1);
  auto all = c.get("/tally");
  ASSERT_STATUS(all, 200);
  EXPECT_EQ(all.json().at("tallies").at("apples"), 2);
  EXPECT_TRUE(is_json_error(c.get("/tally/plums"), 404));
}

TEST_F(Tally, EachUserHasHisOwnTallies) {
  http_client a(port()), b(port());
  ASSERT_STATUS(a.post("/tally/x"), 200);
  ASSERT_STATUS(a.post("/tally/x"), 200);
  ASSERT_STATUS(b.post("/tally/x"), 200);
  EXPECT_EQ(a.get("/tally/x").json().at("value"), 2);
  EXPECT_EQ(b.get("/tally/x").json().at("value"), 1);
  EXPECT_NE(a.get("/tally").json().at("user"), b.get("/tally").json().at("user"));
}

TEST_F(Tally, TheNotesRoutesAreNotThere) {
  http_client c(port());
  EXPECT_TRUE(is_json_error(c.get("/api/whoami"), 404));
  EXPECT_TRUE(is_json_error(c.get("/api/counter"), 404));
}
