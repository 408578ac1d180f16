#include "gate/dial.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace troupe::gate {

namespace {

using steady = std::chrono::steady_clock;

caf::error failed(const std::string& why) {
  return caf::make_error(caf::sec::cannot_connect_to_node, why);
}

int left_ms(steady::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
  return ms > 0 ? static_cast<int>(ms) : 0;
}

// Waits until `fd` is ready for `events` or the deadline: true when ready.
bool wait_for(int fd, short events, steady::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, left_ms(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    return n > 0;
  }
}

// Exactly `size` bytes (the gate's fixed sizes), or false.
bool read_exactly(int fd, char* out, std::size_t size, steady::time_point deadline) {
  std::size_t got = 0;
  while (got < size) {
    if (!wait_for(fd, POLLIN, deadline))
      return false;
    auto n = ::recv(fd, out + got, size - got, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, const std::string& bytes, steady::time_point deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    if (!wait_for(fd, POLLOUT, deadline))
      return false;
    auto n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// A nonblocking TCP connection to host:port within the deadline: its descriptor, or -1 with `why` set.
int connect_tcp(const std::string& host, std::uint16_t port, steady::time_point deadline, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = std::string("cannot resolve ") + host + ": " + ::gai_strerror(rc);
    return -1;
  }
  why = "no address of " + host;
  int fd = -1;
  for (auto* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    int error = rc == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      error = ETIMEDOUT;
      if (wait_for(fd, POLLOUT, deadline)) {
        socklen_t len = sizeof error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
      }
    }
    if (error != 0) {
      why = std::string("cannot connect: ") + std::strerror(error);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

caf::expected<int> dial(const std::string& host, std::uint16_t port, kind which, std::string_view key,
                        std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  const auto where = host + ":" + std::to_string(port);
  std::string why;
  int fd = connect_tcp(host, port, deadline, why);
  if (fd < 0)
    return failed(where + ": " + why);
  auto fail = [&](std::string text) {
    ::close(fd);
    return failed(where + ": " + text);
  };
  std::string challenge(challenge_size, '\0');
  if (!read_exactly(fd, challenge.data(), challenge.size(), deadline))
    return fail("no gate challenge within " + std::to_string(timeout.count()) + " ms (not a troupe port?)");
  auto n = parse_challenge(challenge, which);
  if (!n)
    return fail(which == kind::worker ? "not a troupe worker gate" : "not a troupe cluster port");
  if (!write_all(fd, encode_answer(sign(key, which, *n)), deadline))
    return fail("the gate went away before the answer");
  char verdict = 0;
  if (!read_exactly(fd, &verdict, 1, deadline))
    return fail("no verdict from the gate");
  if (verdict != accepted)
    return fail(which == kind::worker ? "the node's worker gate refused this worker (its token is unknown or used already)"
                                      : "the member refused this node: it does not hold the cluster's key (is "
                                        "node.cookie_secret the same on every member?)");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

namespace {

using endpoint = std::pair<std::string, std::uint16_t>;
using connected_promise = caf::typed_response_promise<caf::node_id, caf::strong_actor_ptr, std::set<std::string>>;

// The connector keeps one connection per endpoint, as CAF's middleman does:
// a second dial to the same member would open a redundant connection, which
// CAF closes again (and with TLS that close took the first one's route down).
struct connector_state {
  static const char* name;
  std::map<endpoint, connected> cached;  // until the actor reached there goes down
  std::map<endpoint, std::vector<connected_promise>> pending;
};

const char* connector_state::name = "troupe.gate_connector";

// Dials one connection (blocking: it runs in a detached actor, on a thread of
// its own) and hands it to CAF; answers once, then ends.
caf::behavior dial_one(caf::event_based_actor* self, dial_settings settings) {
  return {
    [=](caf::connect_atom, const std::string& host, std::uint16_t port)
      -> caf::result<caf::node_id, caf::strong_actor_ptr, std::set<std::string>> {
      auto fd = dial(host, port, settings.which, settings.key, settings.timeout);
      if (!fd) {
        self->quit();  // once this answer is out
        return std::move(fd.error());
      }
      auto scribe = make_scribe(self->system(), *fd, settings.tls, false);
      if (!scribe) {
        self->quit();
        return failed(host + ":" + std::to_string(port) + ": no TLS session (see the log)");
      }
      auto promise = self->make_response_promise<caf::node_id, caf::strong_actor_ptr, std::set<std::string>>();
      self->request(basp_broker(self->system()), settings.timeout, caf::connect_atom::value, std::move(scribe), port)
        .then(
          [self, promise](caf::node_id& node, caf::strong_actor_ptr& actor, std::set<std::string>& interface) mutable {
            promise.deliver(std::move(node), std::move(actor), std::move(interface));
            self->quit();
          },
          [self, promise](caf::error& err) mutable {
            promise.deliver(std::move(err));
            self->quit();
          });
      return promise;
    },
  };
}

}  // namespace

connector_handle spawn_connector(caf::actor_system& sys, dial_settings settings) {
  // Hidden: the actor system's shutdown does not wait for it (it holds nothing to save).
  return sys.spawn<caf::hidden>([settings](connector_handle::stateful_pointer<connector_state> self) -> connector_handle::behavior_type {
    self->set_down_handler([self](caf::down_msg& dm) {
      auto& cached = self->state.cached;
      for (auto i = cached.begin(); i != cached.end();)
        i = i->second.actor && i->second.actor->address() == dm.source ? cached.erase(i) : std::next(i);
    });
    return {
      [=](caf::connect_atom, std::string& host, std::uint16_t port)
        -> caf::result<caf::node_id, caf::strong_actor_ptr, std::set<std::string>> {
        auto& st = self->state;
        endpoint key{host, port};
        if (auto c = st.cached.find(key); c != st.cached.end())
          return caf::make_result(c->second.node, c->second.actor, c->second.interface);
        auto promise = self->make_response_promise<caf::node_id, caf::strong_actor_ptr, std::set<std::string>>();
        auto& waiting = st.pending[key];
        waiting.push_back(promise);
        if (waiting.size() > 1)
          return promise;  // a dial to it is under way
        auto helper = self->system().spawn<caf::detached>(dial_one, settings);
        // The helper's own timeouts bound it: the gate, then CAF's handshake.
        self->request(helper, 2 * settings.timeout + std::chrono::seconds(1), caf::connect_atom::value, host, port)
          .then(
            [self, key](caf::node_id& node, caf::strong_actor_ptr& actor, std::set<std::string>& interface) {
              auto& st = self->state;
              if (actor) {
                self->monitor(actor);
                st.cached[key] = connected{node, actor, interface};
              }
              auto waiting = std::move(st.pending[key]);
              st.pending.erase(key);
              for (auto& p : waiting)
                p.deliver(node, actor, interface);
            },
            [self, key](caf::error& err) {
              auto waiting = std::move(self->state.pending[key]);
              self->state.pending.erase(key);
              for (auto& p : waiting)
                p.deliver(err);
            });
        return promise;
      },
    };
  });
}

}  // namespace troupe::gate
