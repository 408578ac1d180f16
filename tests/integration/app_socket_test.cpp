// App WebSockets on a real node (issue 25, docs/http.md "App WebSockets"): the
// notes sample's /api/echo (subprotocol echo.v1: every message back as it came)
// and /api/socket-lab (1 KiB messages; "crash", "close CODE REASON", "flood N",
// "all TEXT"). A socket is a page of its user: it shows in his census entry,
// stays open while he is frozen, and its next message wakes him.
#include "../support/test_support.hpp"
#include "../support/ws_client.hpp"

#include <string>

namespace app_socket_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class AppSocket : public admin_node_test {
protected:
  // A socket on `target` for the connection of `c` (its cookie), offering `subprotocols`.
  std::unique_ptr<ws_client> open(http_client& c, const std::string& target, const std::string& subprotocols = "") {
    headers_t h{{"Cookie", "troupe_cid=" + c.cookie().value()}};
    if (!subprotocols.empty())
      h.push_back({"Sec-WebSocket-Protocol", subprotocols});
    return std::make_unique<ws_client>(port(), target, h);
  }
  // The HTTP status an upgrade was refused with (0: it was accepted).
  int refused_with(const headers_t& h, const std::string& target) {
    try {
      ws_client ws(port(), target, h);
      return 0;
    } catch (const transport_error& e) {
      std::string what = e.what();
      auto at = what.find("status ");
      return at == std::string::npos ? -1 : std::stoi(what.substr(at + 7));
    }
  }
  // The close code that ends `ws` (reading what comes before it).
  int close_code_of(ws_client& ws) {
    for (int i = 0; i < 100000 && ws.read(10s); ++i) {
    }
    return ws.close_code();
  }
  // Alice's pages as her census entry shows them.
  json pages_of(const std::string& user) {
    http_client admin(port());
    auto r = admin.get("/_troupe/actors/user:" + user, auth);
    json pages = json::array();
    if (r.status != 200)
      return pages;
    for (auto& conn : r.json().value("connections", json::array()))
      for (auto& p : conn.value("pages", json::array()))
        pages.push_back(p);
    return pages;
  }
};

}  // namespace

TEST_F(AppSocket, EchoesTextAndBinaryUnderItsSubprotocol) {
  start_with();
  http_client alice(port());
  login(alice, "alice");
  auto ws = open(alice, "/api/echo", "chat.v9, echo.v1");
  EXPECT_EQ(ws->handshake_header("Sec-WebSocket-Protocol"), "echo.v1");
  ws->send("hello");
  EXPECT_EQ(ws->read().value_or("<none>"), "hello");
  EXPECT_FALSE(ws->last_binary());
  const std::string bytes("\x00\x01\xfe\xff rest", 8);
  ws->send_binary(bytes);
  EXPECT_EQ(ws->read().value_or("<none>"), bytes);
  EXPECT_TRUE(ws->last_binary());
  EXPECT_EQ(m("troupe_app_socket_messages_total", "direction=\"in\""), 2);
  EXPECT_EQ(m("troupe_app_socket_messages_total", "direction=\"out\""), 2);
  EXPECT_EQ(m("troupe_app_sockets"), 1);
  // The socket is a page of hers, in the census.
  auto pages = pages_of("alice");
  ASSERT_EQ(pages.size(), 1u) << pages.dump();
  EXPECT_EQ(pages[0]["socket"]["path"], "/api/echo");
  EXPECT_EQ(pages[0]["socket"]["subprotocol"], "echo.v1");
  // Closed by its client: the page goes, the count with it.
  ws->close(1000);
  EXPECT_TRUE(eventually([&] { return m("troupe_app_sockets") == 0; }));
  EXPECT_TRUE(eventually([&] { return pages_of("alice").empty(); })) << pages_of("alice").dump();
}

TEST_F(AppSocket, UpgradesAreNegotiatedOrRefusedOverHttp) {
  start_with();
  http_client alice(port());
  login(alice, "alice");
  headers_t cookie{{"Cookie", "troupe_cid=" + alice.cookie().value()}};
  auto with = [&](const std::string& offered) {
    auto h = cookie;
    if (!offered.empty())
      h.push_back({"Sec-WebSocket-Protocol", offered});
    return h;
  };
  EXPECT_EQ(refused_with(with(""), "/api/echo"), 400) << "echo.v1 is required";
  EXPECT_EQ(refused_with(with("echo.v2"), "/api/echo"), 400);
  EXPECT_EQ(refused_with(with("echo.v1"), "/api/echo"), 0);
  EXPECT_EQ(refused_with(cookie, "/api/socket-lab?refuse=1"), 403) << "its open handler refused";
  EXPECT_EQ(refused_with(cookie, "/api/counter"), 400) << "not a WebSocket route";
  EXPECT_EQ(refused_with(cookie, "/api/nowhere"), 404);
  EXPECT_GE(m("troupe_app_socket_upgrades_refused_total"), 5);
  // A WebSocket route asked without the upgrade.
  auto plain = alice.get("/api/echo");
  EXPECT_STATUS(plain, 426);
  EXPECT_EQ(plain.get("Upgrade"), "websocket");
  EXPECT_TRUE(eventually([&] { return m("troupe_app_sockets") == 0; }));
  EXPECT_TRUE(eventually([&] { return pages_of("alice").empty(); })) << "a refused socket leaves no page";
}

// A browser's first request may be the upgrade: it gets its connection's cookie with the 101.
TEST_F(AppSocket, AFirstUpgradeCarriesTheNewConnectionsCookie) {
  start_with();
  ws_client ws(port(), "/api/socket-lab");
  EXPECT_NE(ws.handshake_header("Set-Cookie").find("troupe_cid="), std::string::npos);
  auto hello = ws.read().value_or("<none>");
  EXPECT_EQ(hello.rfind("hello guest_", 0), 0u) << hello;
}

TEST_F(AppSocket, CloseCodes) {
  start_with({"--set", "channel.max_queued_frames=8"});
  http_client alice(port());
  login(alice, "alice");
  auto lab = [&] {
    auto ws = open(alice, "/api/socket-lab");
    EXPECT_EQ(ws->read().value_or("<none>"), "hello alice");
    return ws;
  };
  {  // the handler closes it, with its code and reason
    auto ws = lab();
    ws->send("close 4001 see you");
    EXPECT_EQ(close_code_of(*ws), 4001);
    EXPECT_EQ(ws->close_reason(), "see you");
  }
  {
    auto ws = lab();
    ws->send("close 1000");
    EXPECT_EQ(close_code_of(*ws), 1000);
  }
  {  // a message past max_message_bytes (1 KiB); one at the limit passes
    auto ws = lab();
    ws->send(std::string(1024 - 5, 'x'));
    EXPECT_EQ(ws->read().value_or("<none>").size(), 1024u);
    ws->send(std::string(1025, 'x'));
    EXPECT_EQ(close_code_of(*ws), 1009);
  }
  {  // the handler fails: 1011; he restarts and serves the next socket
    auto ws = lab();
    ws->send("crash");
    EXPECT_EQ(close_code_of(*ws), 1011);
    auto again = lab();
    again->send("ping");
    EXPECT_EQ(again->read().value_or("<none>"), "lab: ping");
  }
  {  // more than the outgoing queue holds (channel.max_queued_frames = 8, overflow = close)
    auto ws = lab();
    ws->set_receive_buffer(4096);
    ws->send("flood 20000");
    EXPECT_EQ(close_code_of(*ws), 1013);
    EXPECT_GE(m("troupe_channel_overflow_closes_total"), 1);
  }
  EXPECT_TRUE(eventually([&] { return m("troupe_app_sockets") == 0; }));
}

// Login on the socket's connection: the socket was the guest's, it is closed (1008).
TEST_F(AppSocket, ALoginOnItsConnectionClosesIt) {
  start_with();
  http_client c(port());
  ASSERT_STATUS(c.get("/api/whoami"), 200);
  auto ws = open(c, "/api/socket-lab");
  EXPECT_EQ(ws->read().value_or("<none>").rfind("hello guest_", 0), 0u);
  login(c, "alice");
  EXPECT_EQ(close_code_of(*ws), 1008);
}

// A user writes to every socket he has open (app_socket values from sockets()).
TEST_F(AppSocket, AUserWritesToAllHisSockets) {
  start_with();
  http_client alice(port());
  login(alice, "alice");
  auto one = open(alice, "/api/socket-lab");
  auto two = open(alice, "/api/socket-lab");
  auto echo = open(alice, "/api/echo", "echo.v1");
  ASSERT_TRUE(one->read());
  ASSERT_TRUE(two->read());
  one->send("all ping");
  EXPECT_EQ(one->read().value_or("<none>"), "ping");
  EXPECT_EQ(two->read().value_or("<none>"), "ping");
  EXPECT_EQ(echo->read().value_or("<none>"), "ping");
  EXPECT_EQ(pages_of("alice").size(), 3u);
}

// Frozen with his socket open: the socket stays, its next message wakes him.
TEST_F(AppSocket, TheSocketStaysOpenAcrossAFreezeAndItsNextMessageWakesHim) {
  start_with();
  http_client alice(port()), admin(port());
  login(alice, "alice");
  ASSERT_STATUS(alice.post("/api/counter/incr"), 200);
  auto ws = open(alice, "/api/echo", "echo.v1");
  ws->send("before");
  ASSERT_EQ(ws->read().value_or("<none>"), "before");
  ASSERT_STATUS(admin.post("/_troupe/users/alice/freeze", "", auth), 200);
  ASSERT_TRUE(eventually([&] { return m("troupe_users", "state=\"active\"") == 0; }));
  const auto wakes = m("troupe_user_wakes_total");
  EXPECT_EQ(ws->read(200ms), std::nullopt);
  EXPECT_TRUE(ws->open()) << "the freeze closed the socket: " << ws->close_code();
  ws->send_binary(std::string("\x01\x02", 2));
  EXPECT_EQ(ws->read().value_or("<none>"), std::string("\x01\x02", 2));
  EXPECT_EQ(m("troupe_user_wakes_total"), wakes + 1);
  auto counter = alice.get("/api/counter");
  EXPECT_EQ(counter.json().value("count", -1), 1);
  auto pages = pages_of("alice");
  ASSERT_EQ(pages.size(), 1u) << pages.dump();
  EXPECT_EQ(pages[0]["socket"]["path"], "/api/echo");
}

// A user in a worker process: the upgrade and each message cross the
// forwarder; his writes reach the front's socket from his process.
TEST_F(AppSocket, AUserInAWorkerProcessServesHisSocket) {
  start_with({"--set", "group.default.isolation=process"});
  http_client alice(port());
  login(alice, "alice");
  auto ws = open(alice, "/api/echo", "echo.v1");
  for (const std::string& text : std::vector<std::string>{"one", "two", std::string(3000, 'z')}) {
    ws->send(text);
    EXPECT_EQ(ws->read().value_or("<none>"), text);
  }
  ws->close(1000);
  EXPECT_TRUE(eventually([&] { return pages_of("alice").empty(); }));
}

}  // namespace app_socket_test_file
