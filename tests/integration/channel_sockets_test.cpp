// The channel sockets of one connection and of one user (issue 23, 8:
// channel.max_sockets_per_connection, channel.max_sockets_per_user), and what
// login and logout do to a connection's sockets (issue 23, a): against the
// real node, over real sockets (docs/channels.md "The socket").
#include "../support/channel_client.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace channel_sockets_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string admin_token = "channel-sockets-" + random_token(8);
const std::string connection_changed = "the connection changed (login or logout): open the channel again";

using sockets = std::vector<std::unique_ptr<ws_client>>;

class ChannelSockets : public node_test {
protected:
  void boot(std::vector<std::string> more = {}) {
    std::vector<std::string> args{"--set", "node.admin_token=" + admin_token};
    args.insert(args.end(), more.begin(), more.end());
    start(std::move(args));
  }
  double metric(const std::string& name) {
    return troupe::test::metric(port(), {{"Authorization", "Bearer " + admin_token}}, name);
  }
};

// The socket serves a call: who it is (the identity of its connection).
json whoami(ws_client& ws, int id = 1) {
  auto r = call(ws, {{"id", id}, {"method", "GET"}, {"path", "/api/whoami"}});
  EXPECT_EQ(r.value("status", 0), 200) << r.dump();
  return r.value("data", json::object());
}

// Opens a socket of `b` and waits until it serves (its admission is done):
// sockets are counted in the order they were opened.
void open_served(sockets& out, uint16_t port, const browser& b) {
  out.push_back(b.channel(port));
  whoami(*out.back());
}

// Whether a socket opened now with `b`'s cookie is served (not refused).
bool a_new_socket_serves(uint16_t port, const browser& b) {
  try {
    auto ws = b.channel(port);
    ws->send(json{{"id", 1}, {"method", "GET"}, {"path", "/api/whoami"}}.dump());
    auto r = read_until(*ws, [](const json& f) { return f.contains("id"); }, milliseconds(5000));
    return r && (*r)["status"] == 200;
  } catch (const transport_error&) {  // closed under the write
    return false;
  }
}

// The socket is closed by the node with `code` and a reason containing `why`.
void expect_closed(ws_client& ws, int code, const std::string& why) {
  EXPECT_FALSE(ws.read(milliseconds(5000))) << "the socket still serves";
  EXPECT_EQ(ws.close_code(), code) << ws.close_reason();
  EXPECT_NE(ws.close_reason().find(why), std::string::npos) << ws.close_reason();
}

}  // namespace

TEST_F(ChannelSockets, OneCookieHoldsAtMostMaxSocketsPerConnection) {
  boot();  // the default: 16
  browser a(port());
  sockets open;
  for (int i = 0; i < 16; ++i)
    open_served(open, port(), a);
  ws_client extra(port(), "/_troupe/ws", a.cookie());
  expect_closed(extra, 1013, "channel.max_sockets_per_connection");
  EXPECT_EQ(metric("troupe_channel_sockets_refused_total"), 1);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(whoami(*open[i], 100 + i).value("connection", ""), a.cid) << "socket " << i;
  browser other(port());
  auto theirs = other.channel(port());
  EXPECT_EQ(whoami(*theirs).value("connection", ""), other.cid);
  // One of the 16 closes: its place is free again.
  open.pop_back();
  EXPECT_TRUE(eventually([&] { return a_new_socket_serves(port(), a); }, 10s));
}

TEST_F(ChannelSockets, OneUserHoldsAtMostMaxSocketsPerUserOverHisConnections) {
  boot();  // the defaults: 16 per connection, 64 per user
  auto name = "uma" + random_token(6);
  std::vector<std::unique_ptr<browser>> his;
  for (int i = 0; i < 5; ++i) {
    his.push_back(std::make_unique<browser>(port()));
    his.back()->login(name);
  }
  sockets open;
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 16; ++i)
      open_served(open, port(), *his[b]);
  EXPECT_EQ(whoami(*open.back()).value("user", ""), name);
  // His fifth connection is within its own 16, but he holds 64 sockets: the
  // 65th is closed, and so is every one after it.
  for (int i = 0; i < 16; ++i) {
    ws_client refused(port(), "/_troupe/ws", his[4]->cookie());
    expect_closed(refused, 1013, "channel.max_sockets_per_user");
  }
  EXPECT_EQ(metric("troupe_channel_sockets_refused_total"), 16);
  // Other users are not affected: a guest, and another named user.
  browser guest(port()), bob(port());
  bob.login("bob" + random_token(6));
  auto ws_guest = guest.channel(port());
  auto ws_bob = bob.channel(port());
  EXPECT_EQ(whoami(*ws_guest).value("connection", ""), guest.cid);
  EXPECT_EQ(whoami(*ws_bob).value("connection", ""), bob.cid);
  EXPECT_EQ(whoami(*open.front(), 2).value("user", ""), name) << "his first socket still serves";
  // One of his sockets closes: his fifth connection gets its place.
  open.pop_back();
  EXPECT_TRUE(eventually([&] { return a_new_socket_serves(port(), *his[4]); }, 10s));
}

// A login over a socket counts it under the user it logged into: past his
// limit it is closed 1013 once the reply (the new connection) was written.
TEST_F(ChannelSockets, ALoginOverASocketCountsItUnderTheNewUser) {
  boot({"--set", "channel.max_sockets_per_user=2"});
  auto name = "vic" + random_token(6);
  browser v(port());
  v.login(name);
  sockets his;
  open_served(his, port(), v);
  open_served(his, port(), v);
  browser g(port());
  auto ws = g.channel(port());
  auto r = call(*ws, {{"id", 1}, {"path", "/api/login"}, {"data", {{"user", name}}}});
  EXPECT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["data"]["user"], name);
  expect_closed(*ws, 1013, "channel.max_sockets_per_user");
  EXPECT_EQ(whoami(*his[0]).value("user", ""), name);
  // The node refuses what a client frame names as the admission call.
  auto probe = call(*his[1], {{"id", 7}, {"path", "/_troupe/socket"}});
  EXPECT_EQ(probe["status"], 404) << probe.dump();
}

// Issue 23 (a): a logout over one socket ends the connection's old id: the
// carrier goes on under the new id, every other socket of the old id on this
// node is closed 4001 (its page opens it again with the cookie it holds).
TEST_F(ChannelSockets, LogoutOverOneSocketClosesTheOtherSocketsOfTheConnection) {
  boot();
  browser a(port());
  auto name = "lea" + random_token(6);
  a.login(name);
  auto one = a.channel(port());
  auto two = a.channel(port());
  ASSERT_EQ(whoami(*one).value("user", ""), name);
  ASSERT_EQ(whoami(*two).value("user", ""), name);
  auto out = call(*one, {{"id", 2}, {"path", "/api/logout"}});
  ASSERT_EQ(out["status"], 200) << out.dump();
  const std::string new_id = out["data"]["connection"];
  EXPECT_NE(new_id, a.cid);
  expect_closed(*two, 4001, connection_changed);
  EXPECT_EQ(two->close_reason(), connection_changed);
  auto carrier = whoami(*one, 3);
  EXPECT_EQ(carrier.value("connection", ""), new_id) << "the carrier goes on under the new id";
  EXPECT_NE(carrier.value("user", ""), name);
  // A socket opened again with the old cookie is a stranger: a new guest of that id.
  auto reopened = a.channel(port());
  auto stranger = whoami(*reopened);
  EXPECT_EQ(stranger.value("connection", ""), a.cid);
  EXPECT_NE(stranger.value("user", ""), name);
}

TEST_F(ChannelSockets, LoginOverHttpClosesTheSocketsOfTheOldId) {
  boot();
  browser a(port());
  auto ws = a.channel(port());
  auto old_id = a.cid;
  ASSERT_EQ(whoami(*ws).value("connection", ""), old_id);
  auto name = "max" + random_token(6);
  a.login(name);
  ASSERT_NE(a.cid, old_id);
  expect_closed(*ws, 4001, connection_changed);
  // The page opens its channel again with the cookie it holds now.
  auto again = a.channel(port());
  auto who = whoami(*again);
  EXPECT_EQ(who.value("user", ""), name);
  EXPECT_EQ(who.value("connection", ""), a.cid);
}

}  // namespace channel_sockets_test_file
