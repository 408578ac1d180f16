// The second sample, `tally`, proves the public API again: path parameters,
// http_error statuses, per-user state — on a real node started with --app tally.
#include "../support/test_support.hpp"

#include <csignal>

namespace samples_test_file {

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

namespace {
struct NotesFaults : node_test {};
}  // namespace

// The notes sample's fault routes (issue 13): spin busy-loops, grow holds memory,
// abort takes the (thread-isolated) node down; each bounded.
TEST_F(NotesFaults, SpinGrowAndAbortDoWhatTheySayWithinTheirLimits) {
  start();
  http_client c(port());
  auto spun = c.post_json("/api/spin", {{"ms", 30}});
  ASSERT_STATUS(spun, 200);
  EXPECT_EQ(spun.json().value("spun_ms", -1), 30);
  EXPECT_GT(spun.json().value("turns", 0ull), 0ull) << "it really looped";
  EXPECT_STATUS(c.post_json("/api/spin", {{"ms", -1}}), 400);
  EXPECT_STATUS(c.post_json("/api/spin", {{"ms", 60001}}), 400);
  EXPECT_STATUS(c.post_json("/api/spin", {{"ms", "lots"}}), 400);

  auto grown = c.post_json("/api/grow", {{"mb", 8}});
  ASSERT_STATUS(grown, 200);
  EXPECT_EQ(grown.json().value("held_mb", 0), 8);
  EXPECT_EQ(c.post_json("/api/grow", {{"mb", 2}}).json().value("held_mb", 0), 10) << "it keeps what it held";
  EXPECT_STATUS(c.post_json("/api/grow", {{"mb", 0}}), 400);
  EXPECT_STATUS(c.post_json("/api/grow", {{"mb", 1025}}), 400);
  EXPECT_EQ(count_of(c.post("/api/counter/incr")), 1) << "the user is still served";

  try {
    c.post("/api/abort");
  } catch (const std::exception&) {  // the connection dies with the node
  }
  auto code = node().wait_exit(std::chrono::milliseconds(10000));
  ASSERT_TRUE(code.has_value()) << "the node is still running after /api/abort";
  EXPECT_EQ(*code, 128 + SIGABRT);
}

}  // namespace samples_test_file
