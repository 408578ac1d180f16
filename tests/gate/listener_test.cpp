// A gate's listener and its dialing side over real loopback sockets, with two
// real CAF actor systems in one process (a "node" and a "peer"): a connection
// that answers the challenge reaches the actor the authenticator names and
// talks typed messages to it; garbage, a wrong key, a replayed answer, a
// silent client and a crowd past max_pending are refused, counted, and never
// reach CAF.
#include "gate/dial.hpp"
#include "gate/listener.hpp"
#include "../support/eventually.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace listener_test_file {

using namespace troupe::gate;
using troupe::test::eventually;
using namespace std::chrono_literals;

namespace {

using adder = caf::typed_actor<caf::replies_to<std::int32_t, std::int32_t>::with<std::int32_t>>;

adder::behavior_type adder_impl() {
  return {[](std::int32_t a, std::int32_t b) { return a + b; }};
}

caf::actor_system_config& with_middleman(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.enable-automatic-connections", false);
  return cfg;
}

// A raw TCP client of the listener (what a stray process does).
int raw_connect(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True once the server closed `fd` (EOF) within `timeout`; bytes before are skipped.
bool closed_by_server(int fd, std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  char buf[256];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      return true;
  }
  return false;
}

class GateListener : public ::testing::Test {
protected:
  GateListener()
    : node_sys(with_middleman(node_cfg)), peer_sys(with_middleman(peer_cfg)), served(node_sys.spawn(adder_impl)) {}

  ~GateListener() override {
    gate.reset();
    caf::anon_send_exit(served, caf::exit_reason::user_shutdown);
  }

  void open(std::size_t max_pending = 64, std::chrono::milliseconds timeout = 3000ms) {
    listener_options o;
    o.name = "test gate";
    o.host = "127.0.0.1";
    o.which = kind::cluster;
    o.max_pending = max_pending;
    o.handshake_timeout = timeout;
    auto whom = publish_of(node_sys, served);
    gate = std::make_unique<listener>(
      node_sys, o,
      [this, whom](const nonce& n, const mac& m) -> std::optional<published> {
        if (same(sign(key, kind::cluster, n), m))
          return whom;
        return std::nullopt;
      },
      &refusals);
  }

  // Dials with `with_key` and, through CAF's handshake, reaches the adder.
  caf::expected<adder> reach(const std::string& with_key) {
    auto fd = dial("127.0.0.1", gate->port(), kind::cluster, with_key, 3000ms);
    if (!fd)
      return fd.error();
    caf::scoped_actor self{peer_sys};
    caf::expected<adder> out{caf::sec::cannot_connect_to_node};
    self->request(basp_broker(peer_sys), 5s, caf::connect_atom::value, make_scribe(peer_sys, *fd, false, false),
                  gate->port())
      .receive(
        [&](caf::node_id&, caf::strong_actor_ptr& actor, std::set<std::string>& interface) {
          if (actor && peer_sys.assignable<adder>(interface))
            out = caf::actor_cast<adder>(actor);
        },
        [&](caf::error& err) { out = err; });
    return out;
  }

  std::int32_t add(const adder& a, std::int32_t x, std::int32_t y) {
    caf::scoped_actor self{peer_sys};
    std::int32_t sum = -1;
    self->request(a, 5s, x, y).receive([&](std::int32_t s) { sum = s; }, [&](caf::error&) {});
    return sum;
  }

  const std::string key = cluster_key("a shared secret");
  caf::actor_system_config node_cfg, peer_cfg;
  caf::actor_system node_sys, peer_sys;
  adder served;
  std::atomic<std::uint64_t> refusals{0};
  std::unique_ptr<listener> gate;
};

TEST_F(GateListener, AConnectionWithTheKeyReachesThePublishedActor) {
  open();
  auto a = reach(key);
  ASSERT_TRUE(a) << peer_sys.render(a.error());
  EXPECT_EQ(add(*a, 20, 22), 42);
  EXPECT_EQ(refusals.load(), 0u);
  // Its connection leaves the vetting once handed on: maybe a moment after CAF has used it.
  EXPECT_TRUE(eventually([&] { return gate->pending() == 0; }, 2000ms)) << gate->pending();
}

TEST_F(GateListener, AWrongKeyIsRefusedWithAClearTextAndCounted) {
  open();
  auto a = reach(cluster_key("another secret"));
  ASSERT_FALSE(a);
  auto text = peer_sys.render(a.error());
  EXPECT_NE(text.find("refused"), std::string::npos) << text;
  EXPECT_NE(text.find("node.cookie_secret"), std::string::npos) << text;
  EXPECT_TRUE(eventually([&] { return refusals.load() == 1; }, 2000ms));
}

TEST_F(GateListener, GarbageAndAFakeHeaderNeverReachCafAndTheGoodConnectionsGoOn) {
  open();
  auto good = reach(key);
  ASSERT_TRUE(good);
  // Random bytes, NULs, and a CAF header announcing 0xffffffff bytes of payload.
  std::vector<std::string> payloads{std::string(4096, '\0'), std::string("\x00\x00\x00\x00\xff\xff\xff\xff", 8) +
                                                                 std::string(64, '\x01')};
  std::string noise;
  for (int i = 0; i < 4096; ++i)
    noise += static_cast<char>((i * 7919) & 0xff);
  payloads.push_back(noise);
  for (auto& p : payloads) {
    int fd = raw_connect(gate->port());
    ASSERT_GE(fd, 0);
    ::send(fd, p.data(), p.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(closed_by_server(fd, 3000ms));
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return refusals.load() == payloads.size(); }, 2000ms));
  EXPECT_EQ(add(*good, 1, 2), 3) << "the connection that passed is unharmed";
}

TEST_F(GateListener, ARecordedAnswerIsWorthlessOnAnotherConnection) {
  open();
  // Records the answer to one challenge, and plays it to the next connection.
  int first = raw_connect(gate->port());
  std::string challenge(challenge_size, '\0');
  ASSERT_EQ(::recv(first, challenge.data(), challenge.size(), MSG_WAITALL), static_cast<ssize_t>(challenge_size));
  auto recorded = encode_answer(sign(key, kind::cluster, *parse_challenge(challenge, kind::cluster)));
  ::close(first);
  int second = raw_connect(gate->port());
  ASSERT_EQ(::recv(second, challenge.data(), challenge.size(), MSG_WAITALL), static_cast<ssize_t>(challenge_size));
  ::send(second, recorded.data(), recorded.size(), MSG_NOSIGNAL);
  char verdict = 0;
  ASSERT_EQ(::recv(second, &verdict, 1, MSG_WAITALL), 1);
  EXPECT_EQ(verdict, refused);
  ::close(second);
}

TEST_F(GateListener, ASilentClientIsClosedAtTheHandshakeTimeout) {
  open(64, 300ms);
  int fd = raw_connect(gate->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(eventually([&] { return gate->pending() == 1; }, 1000ms));
  EXPECT_TRUE(closed_by_server(fd, 5000ms)) << "a silent client is never let go";
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return gate->pending() == 0 && refusals.load() == 1; }, 2000ms));
}

TEST_F(GateListener, PastMaxPendingANewConnectionIsClosedAtOnceAndTheGoodOneStillPasses) {
  open(5, 5000ms);
  std::vector<int> idle;
  for (int i = 0; i < 5; ++i)
    idle.push_back(raw_connect(gate->port()));
  ASSERT_TRUE(eventually([&] { return gate->pending() == 5; }, 2000ms));
  int extra = raw_connect(gate->port());
  EXPECT_TRUE(closed_by_server(extra, 2000ms));
  ::close(extra);
  EXPECT_EQ(gate->pending(), 5u);
  for (int fd : idle)
    ::close(fd);  // they go away: their places free up
  ASSERT_TRUE(eventually([&] { return gate->pending() == 0; }, 2000ms));
  auto a = reach(key);
  ASSERT_TRUE(a);
  EXPECT_EQ(add(*a, 2, 3), 5);
}

}  // namespace

}  // namespace listener_test_file
