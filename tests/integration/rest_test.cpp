// Resting users on a real node (docs/config.md group.rest_idle_seconds): an
// idle user's actor stops and his state, connections and pages wait in his
// worker's memory; his next request or message starts him again from them,
// without reading the deposit. He still freezes when his idle time is up, the
// soft quit writes him, and a user with an open channel keeps his actor. The
// write path of a resting user's freeze is tested on a full deposit.
#include "../support/test_support.hpp"
#include "../support/ws_client.hpp"
#include "store/deposit.hpp"

#include <filesystem>
#include <fstream>

namespace rest_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string token = "rest-admin-" + random_token(16);
const headers_t auth{{"Authorization", "Bearer " + token}};

class Rest : public node_test {
protected:
  // Users rest after 0.3 s idle; extra settings after.
  node_process& start_here(std::vector<std::string> extra = {}, const std::string& dir = {}) {
    std::vector<std::string> args{"--admin-token", token, "--set", "group.default.rest_idle_seconds=0.3"};
    args.insert(args.end(), extra.begin(), extra.end());
    return start_on(dir.empty() ? deposit_.path : dir, args);
  }
  double metric(const std::string& name, const std::string& labels = "") {
    return troupe::test::metric(port(), auth, name, labels);
  }
  double resting() { return metric("troupe_users", "state=\"resting\""); }
  double live_users() { return metric("troupe_actors", "kind=\"user\""); }
  json actor(const std::string& id) {
    http_client admin(port());
    auto r = admin.get("/_troupe/actors/" + id, auth);
    return r.status == 200 ? r.json() : json{{"status", r.status}};
  }
  static void login(http_client& c, const std::string& user) {
    ASSERT_STATUS(c.post_json("/api/login", {{"user", user}}), 200);
  }
  scratch_dir deposit_;
};

}  // namespace

TEST_F(Rest, AnIdleUserRestsAndComesBackAsHeWasWithoutTheDeposit) {
  start_here();
  http_client ann(port());
  login(ann, "ann");
  for (int i = 0; i < 3; ++i)
    ASSERT_STATUS(ann.post("/api/counter/incr", "", {{"X-Troupe-Page", "p1"}}), 200);
  ASSERT_STATUS(ann.post_json("/api/notes", {{"text", "kept in memory"}}), 200);
  const auto cid = ann.cookie().value_or("");

  ASSERT_TRUE(eventually([&] { return resting() == 1 && live_users() == 0; }, 10s))
    << "resting " << resting() << ", live " << live_users();
  auto shown = actor("user:ann");
  EXPECT_EQ(shown.value("state", ""), "resting") << shown.dump();
  EXPECT_EQ(shown.value("actor", json(0)), json(nullptr)) << "no actor while he rests: " << shown.dump();
  EXPECT_EQ(shown.value("parent", json()), "worker:default-w1") << "still placed on his worker: " << shown.dump();
  EXPECT_EQ(metric("troupe_user_rests_total"), 1);
  EXPECT_EQ(metric("troupe_user_freezes_total"), 0) << "resting writes nothing";

  EXPECT_EQ(count_of(ann.get("/api/counter", {{"X-Troupe-Page", "p1"}})), 3);
  EXPECT_EQ(note_texts(ann.get("/api/notes")), std::vector<std::string>{"kept in memory"});
  auto who = ann.get("/api/whoami");
  ASSERT_STATUS(who, 200);
  EXPECT_EQ(who.json().value("user", ""), "ann");
  EXPECT_EQ(who.json().value("connection", ""), cid) << "his connection came back with him";
  EXPECT_EQ(metric("troupe_user_resumes_total"), 1);
  EXPECT_EQ(metric("troupe_user_wakes_total"), 0) << "started from memory, not from his parcel";
  EXPECT_EQ(resting(), 0);
  shown = actor("user:ann");
  EXPECT_EQ(shown.value("state", ""), "active") << shown.dump();
  EXPECT_EQ(shown["store"]["count"], 3) << shown.dump();
  EXPECT_EQ(shown.value("pages", 0), 1) << "his page record came back too: " << shown.dump();
  // Idle again, he rests again.
  EXPECT_TRUE(eventually([&] { return resting() == 1; }, 10s));
}

TEST_F(Rest, ARestingUserFreezesWhenHisIdleTimeIsUp) {
  // Idle freeze after 1.8 s: he rests first, then his worker starts him to freeze.
  start_here({"--set", "group.default.user_idle_freeze_minutes=0.03"});
  http_client bob(port());
  login(bob, "bob");
  ASSERT_EQ(count_of(bob.post("/api/counter/incr")), 1);
  ASSERT_TRUE(eventually([&] { return metric("troupe_user_rests_total") >= 1; }, 10s));
  ASSERT_TRUE(eventually([&] { return metric("troupe_user_freezes_total") == 1 && resting() == 0; }, 15s))
    << "freezes " << metric("troupe_user_freezes_total") << ", resting " << resting();
  ASSERT_TRUE(eventually([&] { return actor("user:bob").value("state", "") == "frozen"; }, 5s))
    << actor("user:bob").dump();
  EXPECT_EQ(count_of(bob.get("/api/counter")), 1);
  EXPECT_EQ(metric("troupe_user_wakes_total"), 1) << "woken from the parcel his freeze wrote";
}

TEST_F(Rest, AMessageStartsARestingRecipient) {
  start_here();
  http_client alice(port()), bob(port());
  login(alice, "alice");
  login(bob, "bob");
  ASSERT_EQ(count_of(bob.post("/api/counter/incr")), 1);
  ASSERT_TRUE(eventually([&] { return resting() == 2; }, 10s)) << "resting " << resting();

  auto r = alice.post_json("/api/tell", {{"user", "bob"}, {"text", "are you there"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json(), json({{"delivered", true}, {"user", "bob"}}));
  EXPECT_GE(metric("troupe_user_resumes_total"), 2) << "alice to send, bob to receive";
  auto box = bob.get("/api/inbox");
  ASSERT_STATUS(box, 200);
  EXPECT_EQ(box.json()["inbox"], json::array({{{"from", "alice"}, {"text", "are you there"}}}));
  EXPECT_EQ(count_of(bob.get("/api/counter")), 1);
  EXPECT_EQ(metric("troupe_user_wakes_total"), 0);
}

TEST_F(Rest, AUserWithAnOpenChannelKeepsHisActor) {
  start_here();
  http_client carol(port());
  login(carol, "carol");
  ASSERT_STATUS(carol.get("/api/counter", {{"X-Troupe-Page", "tab"}}), 200);
  ws_client ws(port(), "/_troupe/ws", {{"Cookie", "troupe_cid=" + carol.cookie().value_or("")}});
  ws.send(json({{"page", "tab"}, {"id", 1}, {"path", "/_troupe/openchannel"}, {"data", json::object()}}).dump());
  auto opened = ws.read(10s);
  ASSERT_TRUE(opened);
  ASSERT_EQ(json::parse(*opened).value("status", 0), 200) << *opened;

  // A user who came after carol's last call rests: carol is past her rest time too, and live.
  http_client late(port());
  login(late, "late");
  ASSERT_TRUE(eventually([&] { return actor("user:late").value("state", "") == "resting"; }, 10s))
    << actor("user:late").dump();
  EXPECT_EQ(actor("user:carol").value("state", ""), "active") << actor("user:carol").dump();
  EXPECT_EQ(resting(), 1);
  auto r = late.post_json("/api/push_users", {{"users", {"carol"}}, {"text", "hello"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("delivered", 0), 1) << r.describe();
  auto pushed = ws.read(10s);
  ASSERT_TRUE(pushed) << "no push on carol's channel";
  EXPECT_EQ(json::parse(*pushed).value("push", ""), "/notes/push") << *pushed;
}

TEST_F(Rest, AnOperatorDropsARestingUser) {
  start_here();
  http_client dan(port());
  login(dan, "dan");
  ASSERT_EQ(count_of(dan.post("/api/counter/incr")), 1);
  ASSERT_TRUE(eventually([&] { return resting() == 1; }, 10s));
  http_client admin(port());
  ASSERT_STATUS(admin.post("/_troupe/users/dan/drop", "", auth), 200);
  EXPECT_EQ(resting(), 0);
  EXPECT_TRUE(eventually([&] { return actor("user:dan").value("status", 0) == 404; }, 5s)) << actor("user:dan").dump();
}

TEST_F(Rest, TheSoftQuitWritesRestingUsers) {
  start_here();
  {
    http_client erin(port());
    login(erin, "erin");
    ASSERT_EQ(count_of(erin.post("/api/counter/incr")), 1);
    ASSERT_EQ(count_of(erin.post("/api/counter/incr")), 2);
  }
  ASSERT_TRUE(eventually([&] { return resting() == 1; }, 10s));
  node().terminate();
  auto code = node().wait_exit(15s);
  ASSERT_TRUE(code) << "the soft quit did not end";
  EXPECT_EQ(*code, 0) << node().stderr_tail();
  start_here();
  http_client erin(port());
  login(erin, "erin");
  EXPECT_EQ(count_of(erin.get("/api/counter")), 2);
}

// His freeze after a rest writes like anybody's: on a full deposit it is
// aborted and he keeps his state in memory; once there is room his next freeze
// lands, and a kill -9 after it loses nothing.
TEST_F(Rest, ARestingUsersFreezeOnAFullDepositLosesNothing) {
  scratch_dir dir;
  small_tmpfs deposit(dir.path + "/deposit");
  if (!deposit.mounted())
    GTEST_SKIP() << deposit.why();
  const std::vector<std::string> args{"--set", "group.default.user_idle_freeze_minutes=0.03"};
  start_here(args, deposit.path);
  http_client fay(port());
  login(fay, "fay");
  ASSERT_EQ(count_of(fay.post("/api/counter/incr")), 1);
  deposit.fill();
  ASSERT_LT(std::filesystem::space(deposit.path).available, 64u * 1024) << "the tmpfs is not full";
  ASSERT_TRUE(eventually([&] { return metric("troupe_user_rests_total") >= 1; }, 10s));
  ASSERT_TRUE(eventually([&] { return node().stderr_log().find("freeze aborted") != std::string::npos; }, 15s))
    << node().stderr_tail();
  EXPECT_EQ(metric("troupe_user_freezes_total"), 0);
  EXPECT_EQ(count_of(fay.get("/api/counter")), 1) << "his state stayed in memory";

  std::filesystem::remove(deposit.path + "/filler");
  ASSERT_TRUE(eventually([&] { return metric("troupe_user_freezes_total") == 1; }, 20s)) << node().stderr_tail();
  node().kill9();
  start_here(args, deposit.path);
  http_client again(port());
  login(again, "fay");
  EXPECT_EQ(count_of(again.get("/api/counter")), 1);
}

// What he left in memory is newer than his parcel on disk: a parcel corrupted
// while he rests is never read (he comes back from memory), and the soft quit's
// freeze writes his state over it; a restart finds every acknowledged change.
TEST_F(Rest, ACorruptParcelUnderARestingUserIsNeverServedAndHisFreezeReplacesIt) {
  start_here();
  http_client gus(port());
  login(gus, "gus");
  ASSERT_EQ(count_of(gus.post("/api/counter/incr")), 1);
  http_client admin(port());
  ASSERT_STATUS(admin.post("/_troupe/users/gus/freeze", "", auth), 200);  // a parcel of his on disk (count 1)
  ASSERT_EQ(count_of(gus.post("/api/counter/incr")), 2);                  // woken, changed in memory only
  ASSERT_TRUE(eventually([&] { return resting() == 1; }, 10s));
  auto file = troupe::store::filesystem_parcel_path(deposit_.path, troupe::store::parcel_kind::user, "gus");
  ASSERT_TRUE(std::filesystem::is_regular_file(file));
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "not a parcel";

  EXPECT_EQ(count_of(gus.get("/api/counter")), 2) << "he came back from memory";
  EXPECT_EQ(metric("troupe_deposit_quarantined_total"), 0) << "his parcel was not read";
  ASSERT_TRUE(eventually([&] { return resting() == 1; }, 10s));
  node().terminate();
  auto code = node().wait_exit(15s);
  ASSERT_TRUE(code) << "the soft quit did not end";
  EXPECT_EQ(*code, 0) << node().stderr_tail();
  start_here();
  http_client again(port());
  login(again, "gus");
  EXPECT_EQ(count_of(again.get("/api/counter")), 2);
}

// The deposit removed under the node while he rests: his freeze at the soft
// quit heals it and lands; a restart finds him as he was.
TEST_F(Rest, ADepositRemovedWhileHeRestsIsHealedByHisFreeze) {
  start_here();
  {
    http_client hal(port());
    login(hal, "hal");
    for (int i = 1; i <= 3; ++i)
      ASSERT_EQ(count_of(hal.post("/api/counter/incr")), i);
  }
  ASSERT_TRUE(eventually([&] { return resting() == 1; }, 10s));
  std::filesystem::remove_all(deposit_.path);
  node().terminate();
  auto code = node().wait_exit(15s);
  ASSERT_TRUE(code) << "the soft quit did not end";
  EXPECT_EQ(*code, 0) << "nothing was left unsaved: " << node().stderr_tail();
  start_here();
  http_client hal(port());
  login(hal, "hal");
  EXPECT_EQ(count_of(hal.get("/api/counter")), 3);
}

}  // namespace rest_test_file
