#include "gate/caf_socket.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/openssl/session.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

namespace troupe::gate {

namespace {

namespace caf_net = caf::io::network;

// A TLS stream over caf::openssl's session (the SSL object, its context made
// from the actor system's openssl.* settings).
struct tls_policy {
  explicit tls_policy(caf::openssl::session_ptr s) : session(std::move(s)) {}
  caf_net::rw_state read_some(std::size_t& result, caf_net::native_socket fd, void* buf, std::size_t len) {
    return session->read_some(result, fd, buf, len);
  }
  caf_net::rw_state write_some(std::size_t& result, caf_net::native_socket fd, const void* buf, std::size_t len) {
    return session->write_some(result, fd, buf, len);
  }
  bool must_read_more(caf_net::native_socket fd, std::size_t threshold) { return session->must_read_more(fd, threshold); }
  caf::openssl::session_ptr session;
};

// A CAF connection in TLS: the scribe caf::openssl makes for its own
// doormen, for a socket we accepted or dialed ourselves.
class tls_scribe final : public caf::io::scribe {
public:
  tls_scribe(caf_net::default_multiplexer& mpx, caf_net::native_socket fd, caf::openssl::session_ptr s)
    : caf::io::scribe(caf_net::conn_hdl_from_socket(fd)), stream_(mpx, fd, std::move(s)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (launched_)
      return;
    launched_ = true;
    stream_.start(this);
    stream_.force_empty_write(this);  // drives SSL_accept / SSL_connect before any data
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = caf_net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  std::uint16_t port() const override {
    auto x = caf_net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  caf_net::stream_impl<tls_policy> stream_;
};

}  // namespace

caf::actor basp_broker(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

caf::io::scribe_ptr make_scribe(caf::actor_system& sys, int fd, bool tls, bool accepted) {
  auto& mpx = sys.middleman().backend();
  if (!tls)
    return mpx.new_scribe(fd);
  caf_net::nonblocking(fd, true);  // else SSL_accept / SSL_connect would block the calling thread
  caf::openssl::session_ptr session;
  try {
    session = caf::openssl::make_session(sys, fd, accepted);
  } catch (const std::exception& e) {  // it throws on a certificate it cannot load
    spdlog::error("gate: no TLS session: {}", e.what());
  }
  if (!session) {
    ::close(fd);
    return nullptr;
  }
  return caf::make_counted<tls_scribe>(static_cast<caf_net::default_multiplexer&>(mpx), fd, std::move(session));
}

void hand_over_accepted(caf::actor_system& sys, int fd, bool tls, std::uint16_t port, published whom) {
  auto scribe = make_scribe(sys, fd, tls, true);
  if (!scribe)
    return;
  caf::anon_send(basp_broker(sys), caf::publish_atom::value, std::move(scribe), port, std::move(whom.actor),
                 std::move(whom.interface));
}

}  // namespace troupe::gate
