// Page channels (issue 14) against the real node over real sockets:
// GET /_troupe/ws, its envelopes, /_troupe/openchannel and its refusals (403,
// 409), sequential pages, pushes (own page, foreign page, all pages, other
// users), a channel across its user's freeze and wake, the outgoing queue's
// overflow policy (close, drop_oldest) and the [channel] limits.
#include "../support/channel_client.hpp"
#include "../support/prometheus.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <set>

namespace channel_test_file {

using namespace troupe::test;
using nlohmann::json;

namespace {

const std::string admin_token = "channel-test-token";

double metric(uint16_t port, const std::string& name) {
  http_client c(port);
  auto r = c.get("/_troupe/metrics", {{"Authorization", "Bearer " + admin_token}});
  EXPECT_STATUS(r, 200);
  return prometheus_sample(r.body, name).value_or(-1);
}

class Channel : public node_test {
protected:
  void boot(std::vector<std::string> more = {}) {
    std::vector<std::string> args{"--set", "node.admin_token=" + admin_token};
    args.insert(args.end(), more.begin(), more.end());
    start(std::move(args));
  }

  // An operator freezes `user` (POST /_troupe/users/{u}/freeze).
  void freeze(const std::string& user) {
    http_client admin(port());
    ASSERT_STATUS(admin.post("/_troupe/users/" + user + "/freeze", "", {{"Authorization", "Bearer " + admin_token}}),
                  200);
  }

  // `b` logged in as the new user `name`, his page "tab" open on a socket and
  // his counter at 1 through it.
  std::unique_ptr<ws_client> named_page(browser& b, const std::string& name) {
    b.login(name);
    auto ws = b.channel(port());
    EXPECT_EQ(open_channel(*ws, "tab", 1)["status"], 200);
    EXPECT_EQ(call(*ws, {{"id", 2}, {"page", "tab"}, {"path", "/api/counter/incr"}})["data"]["count"], 1);
    return ws;
  }
};

}  // namespace

TEST_F(Channel, HandshakeWithoutAValidCookieIsClosedWith1008) {
  boot();
  for (auto headers : {headers_t{}, headers_t{{"Cookie", "troupe_cid=" + random_token(32)}}}) {
    ws_client ws(port(), "/_troupe/ws", headers);
    EXPECT_FALSE(ws.read(milliseconds(5000)));
    EXPECT_EQ(ws.close_code(), 1008);
    EXPECT_NE(ws.close_reason().find("troupe_cid"), std::string::npos) << ws.close_reason();
  }
  // Not an upgrade: told so over HTTP.
  http_client c(port());
  EXPECT_STATUS(c.get("/_troupe/ws"), 426);
  EXPECT_GE(metric(port(), "troupe_channel_sockets_refused_total"), 2);
}

TEST_F(Channel, CallsAreServedByTheSameRoutesAsHttp) {
  boot();
  browser b(port());
  auto ws = b.channel(port());
  auto r = call(*ws, {{"id", 1}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["data"]["count"], 1);
  r = call(*ws, {{"id", "two"}, {"method", "GET"}, {"path", "/api/counter"}});
  EXPECT_EQ(r["data"]["count"], 1) << r.dump();
  r = call(*ws, {{"id", 3}, {"path", "/api/notes"}, {"data", {{"text", "over the channel"}}}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  // Same user, same state over HTTP.
  auto h = b.http.get("/api/notes");
  EXPECT_NE(h.body.find("over the channel"), std::string::npos) << h.body;
  EXPECT_EQ(json::parse(b.http.get("/api/counter").body)["count"], 1);
  r = call(*ws, {{"id", 4}, {"path", "/api/nothing"}});
  EXPECT_EQ(r["status"], 404);
  r = call(*ws, {{"id", 5}, {"method", "GET"}, {"path", "/api/whoami"}});
  EXPECT_EQ(r["data"]["connection"], b.cid) << r.dump();
}

TEST_F(Channel, OpenChannelRefusals) {
  boot();
  browser a(port());
  auto ws = a.channel(port());
  // A call for a page that never opened its channel: 409, with a text that says what to do.
  auto r = call(*ws, {{"id", 1}, {"page", "p1"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 409) << r.dump();
  EXPECT_NE(r["data"]["error"].get<std::string>().find("openchannel"), std::string::npos) << r.dump();
  r = open_channel(*ws, "p1", 2);
  EXPECT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["data"]["channel"], "open");
  r = call(*ws, {{"id", 3}, {"page", "p1"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  // Opening twice changes nothing.
  r = open_channel(*ws, "p1", 4, true);
  EXPECT_EQ(r["status"], 200);
  EXPECT_EQ(r["data"]["sequential"], false) << r.dump();
  // Without a page: 400.
  r = call(*ws, {{"id", 5}, {"path", "/_troupe/openchannel"}});
  EXPECT_EQ(r["status"], 400) << r.dump();

  // The same user on another connection: his page p1 is this connection's, not that one's.
  ASSERT_STATUS(a.http.post_json("/api/login", {{"user", "ann" + random_token(6)}}), 200);
  auto user = json::parse(a.http.get("/api/whoami").body)["user"].get<std::string>();
  a.cid = a.http.cookie().value();
  auto ws_a = a.channel(port());
  ASSERT_EQ(open_channel(*ws_a, "pa", 1)["status"], 200);
  browser other(port());
  ASSERT_STATUS(other.http.post_json("/api/login", {{"user", user}}), 200);
  other.cid = other.http.cookie().value();
  auto ws_o = other.channel(port());
  r = open_channel(*ws_o, "pa", 1);
  EXPECT_EQ(r["status"], 403) << r.dump();
  r = call(*ws_o, {{"id", 2}, {"page", "pa"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 403) << r.dump();
  // A page opened on one socket is not served through another socket of the same connection.
  auto ws_a2 = a.channel(port());
  r = call(*ws_a2, {{"id", 1}, {"page", "pa"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 409) << r.dump();
  // Until it opens there (a reconnecting browser): then it is served there, and no longer on the old one.
  EXPECT_EQ(open_channel(*ws_a2, "pa", 2)["status"], 200);
  EXPECT_EQ(call(*ws_a2, {{"id", 3}, {"page", "pa"}, {"path", "/api/counter/incr"}})["status"], 200);
  EXPECT_EQ(call(*ws_a, {{"id", 2}, {"page", "pa"}, {"path", "/api/counter/incr"}})["status"], 409);
}

TEST_F(Channel, BadFramesGetAClearErrorAndKeepTheSocket) {
  boot({"--set", "channel.max_frame_bytes=1024"});
  browser b(port());
  auto ws = b.channel(port());
  ws->send("not json");
  auto r = read_until(*ws, [](const json&) { return true; });
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["status"], 400);
  EXPECT_TRUE((*r)["id"].is_null());
  EXPECT_EQ((*r)["data"]["error"], "the frame is not JSON");
  ws->send(R"({"id":9,"path":"no-slash"})");
  r = read_until(*ws, [](const json&) { return true; });
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["id"], 9);
  EXPECT_EQ((*r)["status"], 400);
  // The socket still serves.
  EXPECT_EQ(call(*ws, {{"id", 10}, {"path", "/api/counter/incr"}})["status"], 200);
  EXPECT_EQ(metric(port(), "troupe_channel_bad_frames_total"), 2);
  // A frame past channel.max_frame_bytes cannot be read: the socket is closed with 1009.
  ws->send(json{{"id", 11}, {"path", "/api/notes"}, {"data", {{"text", std::string(2000, 'x')}}}}.dump());
  EXPECT_FALSE(read_until(*ws, [](const json&) { return true; }));
  EXPECT_EQ(ws->close_code(), 1009) << ws->error_text();
}

TEST_F(Channel, SequentialPageIsServedOneCallAtATimeInOrder) {
  // A user's queue of 4 waiting calls: 100 concurrent deferred calls overflow
  // it unless the page sends them one at a time.
  boot({"--set", "limits.user_queue_length=4"});
  browser b(port());
  auto ws = b.channel(port());
  ASSERT_EQ(open_channel(*ws, "seq", 1, true)["data"]["sequential"], true);
  ASSERT_EQ(open_channel(*ws, "free", 2)["data"]["sequential"], false);
  auto burst = [&](const std::string& page, int base) {
    for (int i = 0; i < 100; ++i) {
      json e{{"id", base + i}, {"page", page}};
      if (i % 2 == 0)
        e.update({{"path", "/api/sleep"}, {"data", {{"ms", 10}}}});
      else
        e.update({{"path", "/api/notes"}, {"data", {{"text", page + std::to_string(i)}}}});
      ws->send(e.dump());
    }
    std::vector<json> replies;
    while (replies.size() < 100) {
      auto r = read_until(*ws, [](const json& f) { return f.contains("id"); }, milliseconds(20000));
      if (!r)
        break;
      replies.push_back(*r);
    }
    return replies;
  };
  auto seq = burst("seq", 1000);
  ASSERT_EQ(seq.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(seq[i]["id"], 1000 + i) << "out of order at " << i;
    EXPECT_EQ(seq[i]["status"], 200) << seq[i].dump();
  }
  auto notes = json::parse(b.http.get("/api/notes").body)["notes"];
  ASSERT_EQ(notes.size(), 50u) << notes.dump();
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(notes[i], "seq" + std::to_string(2 * i + 1));
  // The control: the same burst on a page that is not sequential reaches the
  // user at once, past his queue (503s) — what the sequential page was spared.
  auto free = burst("free", 2000);
  ASSERT_EQ(free.size(), 100u);
  int refused = 0;
  for (auto& r : free)
    refused += r["status"] == 503;
  EXPECT_GT(refused, 0);
}

TEST_F(Channel, PushReachesOwnPagesOnlyAndSaysSo) {
  boot();
  browser a(port());
  auto ws = a.channel(port());
  ASSERT_EQ(open_channel(*ws, "p1", 1)["status"], 200);
  ASSERT_EQ(open_channel(*ws, "p2", 2)["status"], 200);
  // A user with no open channel reaches nobody (and is served on).
  browser lone(port());
  auto none = lone.http.post_json("/api/broadcast", {{"text", "anyone?"}});
  ASSERT_STATUS(none, 200);
  EXPECT_EQ(json::parse(none.body), json::parse(R"({"delivered":0,"not_delivered":0})"));
  EXPECT_STATUS(lone.http.get("/api/counter"), 200);  // and is served after it
  // To his own page: delivered, and the frame is on the socket.
  auto r = a.http.post_json("/api/push", {{"page", "p1"}, {"text", "hello"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"delivered":1,"not_delivered":0})"));
  auto pushed = read_until(*ws, [](const json& f) { return f.contains("push"); });
  ASSERT_TRUE(pushed);
  EXPECT_EQ(*pushed, json::parse(R"({"push":"/notes/push","data":{"text":"hello"}})"));
  // To a page that never opened a channel, and to a page of another connection: not delivered.
  r = a.http.post_json("/api/push", {{"page", "never"}, {"text", "x"}});
  EXPECT_EQ(json::parse(r.body)["not_delivered"], 1) << r.body;
  browser other(port());
  auto ws_o = other.channel(port());
  ASSERT_EQ(open_channel(*ws_o, "theirs", 1)["status"], 200);
  r = a.http.post_json("/api/push", {{"page", "theirs"}, {"text", "intrusion"}});
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"delivered":0,"not_delivered":1})")) << r.body;
  EXPECT_FALSE(read_until(*ws_o, [](const json& f) { return f.contains("push"); }, milliseconds(300)));
  // Broadcast: every open page of the user (over the channel too).
  // The pushes are queued before the reply (the user answers once both were taken).
  ws->send(json{{"id", 3}, {"path", "/api/broadcast"}, {"data", {{"text", "all"}}}}.dump());
  std::vector<json> pushes;
  auto b = read_until(*ws, [&](const json& f) {
    if (f.contains("push"))
      pushes.push_back(f);
    return f.contains("id") && f["id"] == 3;
  });
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)["data"], json::parse(R"({"delivered":2,"not_delivered":0})")) << b->dump();
  ASSERT_EQ(pushes.size(), 2u);  // the same frame, once per page
  for (auto& f : pushes)
    EXPECT_EQ(f, json::parse(R"({"push":"/notes/broadcast","data":{"text":"all"}})"));
  EXPECT_GE(metric(port(), "troupe_channel_pushes_delivered_total"), 3);
  EXPECT_GE(metric(port(), "troupe_channel_pushes_not_delivered_total"), 2);
  // The socket is gone: a push to its page is not delivered.
  ws.reset();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  json outcome;
  do {
    outcome = json::parse(a.http.post_json("/api/push", {{"page", "p1"}, {"text", "late"}}).body);
  } while (outcome["delivered"] != 0 && std::chrono::steady_clock::now() < until);
  EXPECT_EQ(outcome, json::parse(R"({"delivered":0,"not_delivered":1})"));
}

TEST_F(Channel, PushUsersReachesLiveUsersAndWakesNobody) {
  boot();
  browser a(port()), b(port());
  auto bob = "bob" + random_token(6);
  auto carl = "carl" + random_token(6);
  ASSERT_STATUS(b.http.post_json("/api/login", {{"user", bob}}), 200);
  b.cid = b.http.cookie().value();
  auto ws_b = b.channel(port());
  ASSERT_EQ(open_channel(*ws_b, "main", 1)["status"], 200);
  // carl exists, then is frozen: a push does not wake him.
  browser c(port());
  ASSERT_STATUS(c.http.post_json("/api/login", {{"user", carl}}), 200);
  ASSERT_STATUS(c.http.post_json("/api/counter/incr", json::object()), 200);
  http_client admin(port());
  ASSERT_STATUS(admin.post("/_troupe/users/" + carl + "/freeze", "", {{"Authorization", "Bearer " + admin_token}}),
                200);
  auto wakes = metric(port(), "troupe_user_wakes_total");
  auto r = a.http.post_json("/api/push_users", {{"users", {bob, carl, "nobody_" + random_token(4)}}, {"text", "hi"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"delivered":1,"not_delivered":2})")) << r.body;
  auto pushed = read_until(*ws_b, [](const json& f) { return f.contains("push"); });
  ASSERT_TRUE(pushed);
  EXPECT_EQ((*pushed)["data"]["text"], "hi");
  EXPECT_EQ(metric(port(), "troupe_user_wakes_total"), wakes);
}

TEST_F(Channel, PushUsersNamingTooManyUsersSendsNothing) {
  boot({"--set", "channel.max_push_users=2"});
  browser a(port()), b(port());
  auto bob = "bob" + random_token(6);
  ASSERT_STATUS(b.http.post_json("/api/login", {{"user", bob}}), 200);
  b.cid = b.http.cookie().value();
  auto ws_b = b.channel(port());
  ASSERT_EQ(open_channel(*ws_b, "main", 1)["status"], 200);
  auto r = a.http.post_json("/api/push_users", {{"users", {bob, "x1", "x2"}}, {"text", "no"}});
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"delivered":0,"not_delivered":3})")) << r.body;
  // Duplicates count once: two names are within the limit.
  r = a.http.post_json("/api/push_users", {{"users", {bob, bob, "x1"}}, {"text", "yes"}});
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"delivered":1,"not_delivered":1})")) << r.body;
  auto pushed = read_until(*ws_b, [](const json& f) { return f.contains("push"); });
  ASSERT_TRUE(pushed);
  EXPECT_EQ((*pushed)["data"]["text"], "yes");
}

// Issue 23 (1): a page keeps hearing its user across a freeze and a wake. The
// operator freezes him while the page's socket stays open; a message from
// another user wakes him (no call of the page's in between) and its push
// reaches the page; the page's own calls are served on the same socket.
TEST_F(Channel, APageKeepsHearingItsUserAcrossAFreezeAndAWake) {
  boot();
  browser a(port());
  auto name = "dora" + random_token(6);
  auto ws = named_page(a, name);
  freeze(name);
  ASSERT_TRUE(ws->open());
  // Another user's message wakes him; his handler pushes it to his pages.
  browser b(port());
  auto told = b.http.post_json("/api/tell", {{"user", name}, {"text", "wake up"}});
  ASSERT_STATUS(told, 200);
  auto pushed = read_until(*ws, [](const json& f) { return f.value("push", "") == "/inbox"; });
  ASSERT_TRUE(pushed) << "the page never heard its woken user";
  EXPECT_EQ((*pushed)["data"]["text"], "wake up");
  // The page's calls go on on the same socket, with his state back.
  auto r = call(*ws, {{"id", 3}, {"page", "tab"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["data"]["count"], 2);
  // Frozen again and woken by the page's own call this time.
  freeze(name);
  r = call(*ws, {{"id", 4}, {"page", "tab"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["data"]["count"], 3);
  auto p = a.http.post_json("/api/push", {{"page", "tab"}, {"text", "still there"}});
  EXPECT_EQ(json::parse(p.body)["delivered"], 1) << p.body;
}

// A guest who never changed his state is retired when idle (his actor goes,
// nothing is written): the live counter page he left open hears his next
// change all the same.
TEST_F(Channel, AGuestsPageKeepsHearingHimAfterHeIsRetiredIdle) {
  boot({"--set", "group.default.guest_idle_seconds=0.5"});
  browser a(port());
  auto ws = a.channel(port());
  ASSERT_EQ(open_channel(*ws, "live", 1)["status"], 200);
  ASSERT_TRUE(eventually([&] { return metric(port(), "troupe_guests_retired_total") >= 1; }, milliseconds(10000)))
    << "the idle guest was not retired";
  ASSERT_EQ(count_of(a.http.post("/api/counter/incr")), 1);
  auto pushed = read_until(*ws, [](const json& f) { return f.value("push", "") == "/counter"; });
  ASSERT_TRUE(pushed) << "the page never heard its guest again";
  EXPECT_EQ((*pushed)["data"]["count"], 1);
}

// A socket that closed while its user was frozen is not bound again: the new
// socket of the reconnecting page gets 409 until it opens the channel again.
TEST_F(Channel, AfterFreezeASocketClosedMeanwhileIsForgottenAndTheNewOneReopens) {
  boot();
  browser a(port());
  auto name = "erin" + random_token(6);
  {
    auto ws = named_page(a, name);
    freeze(name);
  }  // the browser went away while he was frozen
  auto ws = a.channel(port());
  auto r = call(*ws, {{"id", 3}, {"page", "tab"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 409) << r.dump();
  EXPECT_EQ(open_channel(*ws, "tab", 4)["status"], 200);
  r = call(*ws, {{"id", 5}, {"page", "tab"}, {"path", "/api/counter/incr"}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["data"]["count"], 2);  // his state came back with him
  auto p = a.http.post_json("/api/push", {{"page", "tab"}, {"text", "back"}});
  EXPECT_EQ(json::parse(p.body)["delivered"], 1) << p.body;
  // Nothing of the closed socket lingers: his pages are all reached.
  auto all = a.http.post_json("/api/broadcast", {{"text", "all"}});
  EXPECT_EQ(json::parse(all.body)["not_delivered"], 0) << all.body;
}

namespace {

// Pushes large frames to a page whose client does not read, until `stop` says so.
template <class Stop>
bool flood(browser& a, Stop stop) {
  std::string text(4000, 'z');
  for (int i = 0; i < 4000; ++i) {
    auto r = a.http.post_json("/api/push", {{"page", "slow"}, {"text", text + std::to_string(i)}});
    if (r.status != 200)
      return false;
    if (stop(json::parse(r.body)))
      return true;
  }
  return false;
}

}  // namespace

TEST_F(Channel, OverflowCloseClosesTheSocketWith1013) {
  boot({"--set", "channel.overflow=close", "--set", "channel.max_queued_frames=8"});
  browser a(port());
  auto ws = a.channel(port());
  ws->set_receive_buffer(4096);
  ASSERT_EQ(open_channel(*ws, "slow", 1)["status"], 200);
  // Once the kernel's buffers are full the queue fills: the push that overflows is not delivered.
  ASSERT_TRUE(flood(a, [](const json& o) { return o["not_delivered"] == 1; }));
  EXPECT_EQ(metric(port(), "troupe_channel_overflow_closes_total"), 1);
  // The client reads what was written before (a wide window now: quickly), then the close.
  ws->set_receive_buffer(4 << 20);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ws->read(milliseconds(2000)) && std::chrono::steady_clock::now() < until) {
  }
  EXPECT_EQ(ws->close_code(), 1013) << ws->close_reason();
  EXPECT_NE(ws->close_reason().find("channel.overflow"), std::string::npos) << ws->close_reason();
}

TEST_F(Channel, OverflowDropOldestKeepsTheSocketAndTheNewestFrames) {
  boot({"--set", "channel.overflow=drop_oldest", "--set", "channel.max_queued_frames=8"});
  browser a(port());
  auto ws = a.channel(port());
  ws->set_receive_buffer(4096);
  ASSERT_EQ(open_channel(*ws, "slow", 1)["status"], 200);
  int pushed = 0;
  ASSERT_TRUE(flood(a, [&](const json&) {
    ++pushed;
    return pushed % 50 == 0 && metric(port(), "troupe_channel_overflow_drops_total") > 0;
  }));
  // Every push was delivered (queued); the oldest queued frames made room.
  ws->set_receive_buffer(4 << 20);  // the client reads quickly now
  auto last = "z" + std::to_string(pushed - 1);
  auto newest_seen = [&](const std::string& seen) {
    return seen.size() >= last.size() && seen.compare(seen.size() - last.size(), last.size(), last) == 0;
  };
  // Read until the newest frame comes (a quiet gap is no end: after a long zero
  // window the node's TCP probes it again with a backed-off timer).
  std::string seen;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until && !newest_seen(seen) && ws->open()) {
    auto f = ws->read(milliseconds(2000));
    if (!f)
      continue;
    auto j = json::parse(*f);
    if (j.contains("push"))
      seen = j["data"]["text"].get<std::string>();
  }
  EXPECT_TRUE(ws->open());
  ASSERT_GE(seen.size(), last.size());
  EXPECT_EQ(seen.substr(seen.size() - last.size()), last);  // the newest frame arrived
  // The socket still serves (a call of the connection: this guest, who changed no
  // state, may have been retired meanwhile, his page binding with him).
  EXPECT_EQ(call(*ws, {{"id", 2}, {"path", "/api/counter/incr"}})["status"], 200);
}

TEST_F(Channel, SocketAndCallLimits) {
  boot({"--set", "channel.max_sockets=2", "--set", "channel.max_calls_per_socket=2", "--set",
        "channel.idle_timeout_seconds=0.5"});
  browser a(port());
  auto one = a.channel(port());
  auto two = a.channel(port());
  ws_client three(port(), "/_troupe/ws", a.cookie());
  EXPECT_FALSE(three.read(milliseconds(5000)));
  EXPECT_EQ(three.close_code(), 1013);
  EXPECT_NE(three.close_reason().find("channel.max_sockets"), std::string::npos);
  // Calls in flight per socket: the third one waiting is refused at once.
  for (int i = 1; i <= 3; ++i)
    one->send(json{{"id", i}, {"path", "/api/sleep"}, {"data", {{"ms", 300}}}}.dump());
  std::map<int, int> status;
  for (int i = 0; i < 3; ++i)
    if (auto f = read_until(*one, [](const json& f) { return f.contains("id"); }))
      status[(*f)["id"].get<int>()] = (*f)["status"].get<int>();
  EXPECT_EQ(status[3], 503);
  EXPECT_EQ(status[1], 200);
  EXPECT_EQ(status[2], 200);
  // A socket that stops answering pings (its client reads nothing) is closed past the idle timeout.
  // `one` reads for three idle timeouts (its client answers the pings);
  // `two` reads nothing meanwhile, then finds itself closed.
  auto until = std::chrono::steady_clock::now() + milliseconds(1500);
  while (std::chrono::steady_clock::now() < until)
    EXPECT_FALSE(one->read(milliseconds(100)));
  EXPECT_FALSE(two->read(milliseconds(3000)));
  EXPECT_FALSE(two->open());
  EXPECT_TRUE(one->open());
  // A socket that reads (and so answers pings) stays.
  EXPECT_EQ(call(*one, {{"id", 9}, {"path", "/api/counter/incr"}})["status"], 200);
}

// Issue 23 (7): at limits.max_pages_per_user a new page takes the place of the
// least recently used page of an idle connection of the user, never of a page
// of a connection that has a channel open: while every other connection has
// one, the new page is refused 429 as before.
TEST_F(Channel, PagesOfAConnectionWithAnOpenChannelAreNotReclaimed) {
  boot({"--set", "limits.max_pages_per_user=4"});
  auto name = "ines" + random_token(6);
  browser a(port()), b(port()), c(port());
  a.login(name);
  b.login(name);
  c.login(name);
  auto ws_a = a.channel(port());
  auto ws_b = b.channel(port());
  ASSERT_EQ(open_channel(*ws_a, "a1", 1)["status"], 200);
  // A page of the same connection without a channel: in use all the same.
  ASSERT_STATUS(a.http.get("/api/counter", {{"X-Troupe-Page", "a2"}}), 200);
  ASSERT_EQ(open_channel(*ws_b, "b1", 1)["status"], 200);
  ASSERT_EQ(open_channel(*ws_b, "b2", 2)["status"], 200);
  EXPECT_STATUS(c.http.get("/api/counter", {{"X-Troupe-Page", "c1"}}), 429);
  auto ws_c = c.channel(port());
  EXPECT_EQ(open_channel(*ws_c, "c1", 1)["status"], 429);
  EXPECT_EQ(call(*ws_a, {{"id", 2}, {"page", "a1"}, {"path", "/api/counter/incr"}})["status"], 200);
  EXPECT_EQ(metric(port(), "troupe_pages_reclaimed_total"), 0);
  // a's socket goes: his connection is idle now, and one of its pages makes room.
  ws_a.reset();
  EXPECT_TRUE(eventually([&] {
    return c.http.get("/api/counter", {{"X-Troupe-Page", "c1"}}).status == 200;
  }, std::chrono::seconds(10)));
  EXPECT_EQ(metric(port(), "troupe_pages_reclaimed_total"), 1);
  EXPECT_EQ(call(*ws_b, {{"id", 3}, {"page", "b1"}, {"path", "/api/counter/incr"}})["status"], 200);
}

}  // namespace channel_test_file
