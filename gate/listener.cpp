#include "gate/listener.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <fcntl.h>

#include <array>
#include <thread>

namespace troupe::gate {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using steady = std::chrono::steady_clock;

// Its vettings point at it (a plain pointer): they run on its thread only, and
// are destroyed with its io_context, before anything else of it.
struct listener::impl {
  impl(caf::actor_system& s, listener_options o, authenticator a, std::atomic<std::uint64_t>* r)
    : sys(s), options(std::move(o)), auth(std::move(a)), refusals(r) {}

  caf::actor_system& sys;
  listener_options options;
  authenticator auth;
  std::atomic<std::uint64_t>* refusals;
  std::unique_ptr<net::io_context> io = std::make_unique<net::io_context>(1);
  std::unique_ptr<tcp::acceptor> acceptor = std::make_unique<tcp::acceptor>(*io);
  // After an accept error (out of descriptors): a pause, never a spin.
  std::unique_ptr<net::steady_timer> retry = std::make_unique<net::steady_timer>(*io);
  std::uint16_t bound_port = 0;
  std::atomic<std::size_t> waiting{0};
  std::thread thread;
  // The refusal log, on the listener's thread only: a line every 10 s at most.
  steady::time_point last_logged{};
  std::uint64_t unlogged = 0;

  void listen() {
    tcp::resolver resolver(*io);
    auto found = resolver.resolve(options.host, std::to_string(options.port), tcp::resolver::passive);
    auto endpoint = found.begin()->endpoint();
    acceptor->open(endpoint.protocol());
    acceptor->set_option(tcp::acceptor::reuse_address(true));
    acceptor->bind(endpoint);
    acceptor->listen(net::socket_base::max_listen_connections);
    bound_port = acceptor->local_endpoint().port();
  }

  void do_accept();
  void on_accept(boost::system::error_code ec, tcp::socket socket);

  void refuse(const std::string& peer, const char* why) {
    if (refusals)
      refusals->fetch_add(1, std::memory_order_relaxed);
    ++unlogged;
    auto now = steady::now();
    if (now - last_logged < std::chrono::seconds(10))
      return;
    spdlog::warn("{}: refused a connection from {}: {} ({} refused since the last such line)", options.name, peer, why,
                 unlogged);
    last_logged = now;
    unlogged = 0;
  }
};

namespace {

std::string peer_of(const tcp::socket& s) {
  boost::system::error_code ec;
  auto e = s.remote_endpoint(ec);
  return ec ? std::string("an unknown peer") : e.address().to_string() + ":" + std::to_string(e.port());
}

// One connection being vetted, the Beast way: one operation in flight at a
// time, a deadline over all of them, a fixed-size read.
class vetting : public std::enable_shared_from_this<vetting> {
public:
  vetting(listener::impl* owner, tcp::socket socket)
    : owner_(owner), socket_(std::move(socket)), deadline_(*owner_->io), peer_(peer_of(socket_)) {}

  ~vetting() { owner_->waiting.fetch_sub(1, std::memory_order_relaxed); }

  void run() {
    deadline_.expires_after(owner_->options.handshake_timeout);
    deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) { self->on_deadline(ec); });
    nonce_ = make_nonce();
    challenge_ = encode_challenge(owner_->options.which, nonce_);
    do_write_challenge();
  }

private:
  void do_write_challenge() {
    net::async_write(socket_, net::buffer(challenge_),
                     [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                       self->on_write_challenge(ec);
                     });
  }

  void on_write_challenge(boost::system::error_code ec) {
    if (ec)
      return end("it went away before the challenge");
    do_read_answer();
  }

  void do_read_answer() {
    net::async_read(socket_, net::buffer(answer_),
                    [self = shared_from_this()](boost::system::error_code ec, std::size_t) { self->on_read_answer(ec); });
  }

  void on_read_answer(boost::system::error_code ec) {
    if (ec)
      return end(timed_out_ ? "no answer within the handshake timeout" : "it went away without an answer");
    auto m = parse_answer(std::string_view(answer_.data(), answer_.size()));
    if (!m)
      return end("not a troupe gate answer");
    whom_ = owner_->auth(nonce_, *m);
    verdict_ = whom_ ? accepted : refused;
    do_write_verdict();
  }

  void do_write_verdict() {
    net::async_write(socket_, net::buffer(&verdict_, 1),
                     [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                       self->on_write_verdict(ec);
                     });
  }

  void on_write_verdict(boost::system::error_code ec) {
    if (!whom_)
      return end(owner_->options.which == kind::worker ? "its worker token is unknown or used already"
                                                       : "it does not hold the cluster's key (node.cookie_secret)");
    if (ec)
      return end("it went away before the verdict");
    finished_ = true;
    deadline_.cancel();
    // The socket goes to CAF: a descriptor of its own (close-on-exec), ours closed.
    int fd = ::fcntl(socket_.native_handle(), F_DUPFD_CLOEXEC, 0);
    boost::system::error_code ignored;
    socket_.close(ignored);
    if (fd < 0)
      return owner_->refuse(peer_, "out of file descriptors");
    hand_over_accepted(owner_->sys, fd, owner_->options.tls, owner_->bound_port, std::move(*whom_));
  }

  void on_deadline(boost::system::error_code ec) {
    if (ec || finished_)
      return;
    timed_out_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);  // the pending operation ends with an error: end() refuses it
  }

  void end(const char* why) {
    if (finished_)
      return;
    finished_ = true;
    deadline_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
    owner_->refuse(peer_, why);
  }

  listener::impl* owner_;
  tcp::socket socket_;
  net::steady_timer deadline_;
  std::string peer_;
  nonce nonce_{};
  std::string challenge_;
  std::array<char, answer_size> answer_{};
  char verdict_ = refused;
  std::optional<published> whom_;
  bool timed_out_ = false;
  bool finished_ = false;
};

}  // namespace

void listener::impl::do_accept() {
  acceptor->async_accept([this](boost::system::error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void listener::impl::on_accept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted)
    return;
  if (ec) {  // out of descriptors, say: accepting pauses instead of spinning
    refuse("an unknown peer", "the accept failed");
    retry->expires_after(std::chrono::milliseconds(100));
    retry->async_wait([this](boost::system::error_code e) {
      if (!e)
        do_accept();
    });
    return;
  }
  if (waiting.load(std::memory_order_relaxed) >= options.max_pending) {
    refuse(peer_of(socket), "too many connections are being vetted (limits.gate_max_pending)");
    boost::system::error_code ignored;
    socket.close(ignored);
  } else {
    waiting.fetch_add(1, std::memory_order_relaxed);
    std::make_shared<vetting>(this, std::move(socket))->run();
  }
  do_accept();
}

listener::listener(caf::actor_system& sys, listener_options options, authenticator auth,
                   std::atomic<std::uint64_t>* refusals)
  : impl_(std::make_unique<impl>(sys, std::move(options), std::move(auth), refusals)) {
  impl_->listen();
  impl_->do_accept();
  impl_->thread = std::thread([i = impl_.get()] { i->io->run(); });
}

listener::~listener() {
  impl_->io->stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
  impl_->acceptor.reset();
  impl_->retry.reset();
  impl_->io.reset();  // destroys the vettings still waiting (their sockets close), never running them
}

std::uint16_t listener::port() const noexcept {
  return impl_->bound_port;
}

std::size_t listener::pending() const noexcept {
  return impl_->waiting.load(std::memory_order_relaxed);
}

}  // namespace troupe::gate
