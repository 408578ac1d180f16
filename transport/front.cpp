#include "transport/front.hpp"

#include "actors/errors.hpp"
#include "actors/guards.hpp"
#include "config/channel_settings.hpp"
#include "config/duration.hpp"
#include "config/group_settings.hpp"
#include "config/limits_settings.hpp"
#include "config/node_settings.hpp"
#include "transport/deadline_list.hpp"
#include "transport/http_session.hpp"
#include "transport/inline_unit.hpp"
#include "transport/worker_pipe.hpp"

#include <boost/asio/post.hpp>
#include <optional>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <caf/all.hpp>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <algorithm>
#include <array>

namespace troupe {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using millis = std::chrono::milliseconds;

using config::to_millis;

}  // namespace

front_limits front_limits::from(const config::limits_settings& l) {
  return front_limits{l.max_body_bytes,
                      static_cast<std::uint32_t>(l.max_header_bytes),
                      to_millis(l.request_timeout_seconds),
                      l.max_inflight,
                      to_millis(l.idle_timeout_seconds),
                      to_millis(l.read_timeout_seconds),
                      l.max_connections,
                      l.max_buffered_body_bytes,
                      to_millis(l.tls_handshake_timeout_seconds),
                      l.max_stream_body_bytes,
                      l.upload_chunk_bytes};
}

// -- the listener: accept loop, TLS, connection limit, shutdown ---------------------

front::front(node_context_ptr ctx, bridge_handle bridge, forwarder_handle forwarder,
             std::shared_ptr<route_cache> routes)
  : ctx_(std::move(ctx)),
    limits_(front_limits::from(ctx_->limits())),
    bridge_(std::move(bridge)),
    forwarder_(std::move(forwarder)),
    local_node_(forwarder_ ? forwarder_.node() : caf::node_id{}),
    routes_(routes ? std::move(routes) : std::make_shared<route_cache>()),
    socket_quota_(ctx_->channel().max_sockets_per_connection, ctx_->channel().max_sockets_per_user),
    main_(ioc_, false) {
  if (auto age = ctx_->node().cookie_max_age_seconds)
    cookie_attributes_ = "; Max-Age=" + std::to_string(age);
  cookie_attributes_ += "; Path=/; HttpOnly; SameSite=Lax";
  cors_ = cors_policy(ctx_->cors());
  for (auto& s : ctx_->statics())
    statics_.emplace_back(s);  // throws naming a root that is no directory: the node does not start
  std::sort(statics_.begin(), statics_.end(),
            [](const static_mount& a, const static_mount& b) { return a.prefix().size() > b.prefix().size(); });
  for (auto& type : ctx_->apps.names())
    if (auto* r = ctx_->apps.routes(type)) {
      app_routers_.push_back(r);
      if (r->has_guards())
        guarded_types_.emplace_back(type, r);
      bool streams = false;
      for (std::size_t i = 0; i < r->size(); ++i)
        streams = streams || r->streams_body(i);
      if (streams)
        streaming_types_.push_back(r);
    }
  parse_body_limit_ = limits_.max_body_bytes;
  if (!streaming_types_.empty())
    parse_body_limit_ = std::max(parse_body_limit_, limits_.max_stream_body_bytes);
  default_type_ = ctx_->default_group().user_type;
  for (auto& network : ctx_->node().trusted_proxies)
    if (auto parsed = registry::parse_network(network))  // the recipe's validation refused any other
      trusted_proxies_.push_back(*parsed);
  if (bridge_)
    channel_hub_ = spawn_channel_hub(bridge_->home_system(), ctx_->metrics);
}

std::string front::client_address(const std::string& peer, const beast::http::fields& headers) const {
  if (trusted_proxies_.empty())
    return peer;
  // Several lines of one header are one list (RFC 9110 §5.3).
  auto joined = [&](beast::string_view name) {
    std::string all;
    auto [first, last] = headers.equal_range(name);
    for (auto it = first; it != last; ++it)
      all.append(all.empty() ? "" : ",").append(it->value().data(), it->value().size());
    return all;
  };
  return registry::client_address(peer, trusted_proxies_, joined("Forwarded"), joined("X-Forwarded-For"));
}

const static_mount* front::static_mount_for(std::string_view path) const {
  for (auto& m : statics_) {
    if (path.substr(0, m.prefix().size()) != m.prefix() && path != std::string_view(m.prefix()).substr(0, m.prefix().size() - 1))
      continue;
    for (auto* r : app_routers_) {
      auto found = r->find("GET", path);
      if (found.target || found.other_method)
        return nullptr;
    }
    return &m;
  }
  return nullptr;
}

bool front::streams_body(std::string_view method, std::string_view path) const {
  for (auto* r : streaming_types_) {
    auto found = r->find(method, path);
    if (found.target && found.streamed_body)
      return true;
  }
  return false;
}

bool front::may_be_guarded(std::string_view method, std::string_view path) const {
  for (auto& [type, r] : guarded_types_) {
    auto found = find_route(*r, method, path);
    if (found.target && r->guarded(found.index))
      return true;
  }
  return false;
}

std::optional<http_response> front::guard_refusal(const http_request& req, const std::string& user,
                                                  const std::string& type) {
  for (auto& [name, r] : guarded_types_)
    if (name == type)
      return troupe::guard_refusal(ctx_->metrics, *r, find_route(*r, req.method, req.path), req, user);
  return std::nullopt;
}

front::~front() {
  stop();
}

bool front::admin_token_matches(std::string_view presented) const noexcept {
  const auto& token = ctx_->node().admin_token;
  return !token.empty() && presented.size() == token.size()
         && CRYPTO_memcmp(presented.data(), token.data(), token.size()) == 0;
}

void front::bind(listener& l, const std::string& host, std::uint16_t port) {
  tcp::endpoint ep{net::ip::make_address(host), port};
  l.acceptor.open(ep.protocol());
  l.acceptor.set_option(net::socket_base::reuse_address(true));
  l.acceptor.bind(ep);
  l.acceptor.listen(net::socket_base::max_listen_connections);
  l.port = l.acceptor.local_endpoint().port();
}

void front::use_tls(std::shared_ptr<tls_credentials> credentials) {
  tls_ = std::move(credentials);
  main_.tls = tls_ != nullptr;
  ctx_->metrics.tls.not_after_unix.store(tls_ ? tls_->identity().not_after_unix : 0, std::memory_order_relaxed);
}

void front::listen_plain(const std::string& host, std::uint16_t port) {
  plain_ = std::make_unique<listener>(ioc_, false);
  bind(*plain_, host, port);
  do_accept(*plain_);
}

tls_credentials::reload_result front::reload_tls() {
  if (!tls_)
    return {false, "TLS is off (node.tls_cert and node.tls_key are not set)", {}};
  auto r = tls_->reload();
  auto& m = ctx_->metrics.tls;
  if (r.ok) {
    m.reloads_ok.fetch_add(1, std::memory_order_relaxed);
    m.not_after_unix.store(r.identity.not_after_unix, std::memory_order_relaxed);
    spdlog::info("front: TLS pair reloaded: new connections get {} (serial {})", r.identity.subject, r.identity.serial);
  } else {
    m.reloads_refused.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("front: TLS reload refused, still serving {} (serial {}): {}", r.identity.subject, r.identity.serial,
                 r.reason);
  }
  return r;
}

void front::listen(const std::string& host, std::uint16_t port) {
  bind(main_, host, port);
  port_ = main_.port;
  // limits.max_connections refuses cleanly only below the descriptor limit:
  // raise the soft limit towards the hard one when it needs it (no privilege
  // needed), and say so when even that is not enough.
  constexpr rlim_t spare_fds = 256;  // deposit files, the log, the actor system
  rlimit fds{};
  if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY
      && fds.rlim_cur < limits_.max_connections + spare_fds) {
    auto want = static_cast<rlim_t>(limits_.max_connections + spare_fds);
    rlimit raised = fds;
    raised.rlim_cur = fds.rlim_max == RLIM_INFINITY ? want : std::min(want, fds.rlim_max);
    if (raised.rlim_cur > fds.rlim_cur && setrlimit(RLIMIT_NOFILE, &raised) == 0)
      fds = raised;
    if (fds.rlim_cur < want)
      spdlog::warn("front: limits.max_connections ({}) needs about {} file descriptors, the process may open {}: "
                   "past that, connections wait unaccepted instead of being refused with 503 (raise ulimit -n or "
                   "lower limits.max_connections)",
                   limits_.max_connections, want, fds.rlim_cur);
  }
  do_accept(main_);
}

void front::do_accept(listener& l) {
  l.acceptor.async_accept(next_shard(), [this, &l](beast::error_code ec, tcp::socket socket) {
    on_accept(l, ec, std::move(socket));
  });
}

net::io_context& front::next_shard() noexcept {
  auto i = next_shard_++ % (shards_.size() + 1);
  return i == 0 ? ioc_ : *shards_[i - 1];
}

void front::on_accept(listener& l, const beast::error_code& ec, tcp::socket socket) {
  if (closing() || !l.acceptor.is_open())
    return;
  if (!ec) {
    l.backoff = millis(0);
    if (static_cast<std::uint64_t>(live_sessions_.load(std::memory_order_relaxed)) >= limits_.max_connections)
      refuse_connection(std::move(socket), l.tls);
    else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      // A TLS listener's connection takes the credentials current now: a reload later changes it not.
      auto session = std::make_shared<http_session>(std::move(socket), *this, l.tls ? tls_->current() : nullptr);
      session_started(session);
      session->start();
    }
    return do_accept(l);
  }
  // Out of descriptors or memory (or any error but a client's abort), accepting
  // again at once fails again at once: pause (50 ms, doubling up to 1 s) while
  // the connections already open are served.
  bool transient = ec == net::error::connection_aborted || ec == net::error::connection_reset
                   || ec == net::error::interrupted || ec == net::error::try_again;
  bool exhausted = !transient;
  if (exhausted)
    l.backoff = std::min<millis>(std::max<millis>(l.backoff * 2, millis(50)), millis(1000));
  auto now = std::chrono::steady_clock::now();
  ++accept_failures_unlogged_;
  if (now - accept_logged_ >= std::chrono::seconds(10)) {
    spdlog::warn("front: accept failed: {} ({} failure(s) since the last report){}", ec.message(),
                 accept_failures_unlogged_,
                 exhausted ? fmt::format("; pausing accepts for {} ms", l.backoff.count()) : std::string{});
    accept_logged_ = now;
    accept_failures_unlogged_ = 0;
  }
  if (!exhausted)
    return do_accept(l);  // a connection aborted before it was accepted, and the like
  l.pause.expires_after(l.backoff);
  l.pause.async_wait([this, &l](beast::error_code wait_ec) {
    if (!wait_ec && !closing())
      do_accept(l);
  });
}

namespace {

// The answer past limits.max_connections, written without reading the request.
const std::string& connection_refusal() {
  static const std::string text = [] {
    std::string body = error_body("the node is at its connection limit (limits.max_connections), retry");
    return "HTTP/1.1 503 Service Unavailable\r\nServer: troupe\r\nContent-Type: application/json\r\n"
           "Retry-After: 1\r\nConnection: close\r\nContent-Length: "
           + std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return text;
}

// Refused connections answered at once; past this many, they are closed unanswered.
constexpr std::int64_t max_refusing = 64;

}  // namespace

void front::refuse_connection(tcp::socket socket, bool tls) {
  ctx_->metrics.count_request(503);
  if (tls) {  // a canned answer would need a handshake: closed unanswered
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  if (refusing_.fetch_add(1, std::memory_order_relaxed) >= max_refusing) {
    refusing_.fetch_sub(1, std::memory_order_relaxed);
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  // Write the canned answer, half-close, and drain what the client sent for at
  // most a second (closing with unread bytes would reset the answer away).
  struct refusal {
    beast::tcp_stream stream;
    std::array<char, 4096> sink;
    std::atomic<std::int64_t>& count;
    refusal(tcp::socket s, std::atomic<std::int64_t>& c) : stream(std::move(s)), count(c) {}
    ~refusal() { count.fetch_sub(1, std::memory_order_relaxed); }
    static void drain(std::shared_ptr<refusal> r) {
      r->stream.async_read_some(net::buffer(r->sink), [r](beast::error_code ec, std::size_t) {
        if (ec) {
          beast::error_code ignored;
          r->stream.socket().close(ignored);
          return;
        }
        drain(r);
      });
    }
  };
  auto r = std::make_shared<refusal>(std::move(socket), refusing_);
  r->stream.expires_after(std::chrono::seconds(1));
  net::async_write(r->stream, net::buffer(connection_refusal()), [r](beast::error_code ec, std::size_t) {
    if (ec)
      return;
    beast::error_code ignored;
    r->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    refusal::drain(r);
  });
}

namespace {
// Messages one resume of a user on an io thread may handle; the rest of his mailbox goes to an actor thread.
constexpr std::size_t inline_throughput = 8;
}  // namespace

void front::start(int threads) {
  auto& sys = bridge_->home_system();
  auto stall = node_context::timer_millis(ctx_->limits().shard_stall_ms / 1000.0);
  const bool inline_handlers = ctx_->node().inline_handlers;
  if (inline_handlers)
    watchdog_ = std::make_unique<stall_watchdog>(stall, [this, stall](std::chrono::milliseconds running) {
      stuck_log("front: an io thread has been running one handler for {} ms (limits.shard_stall_ms = {}): the "
                "sockets of that thread wait", running.count(), stall.count());
    });
  for (int i = 1; i < threads; ++i) {
    shards_.push_back(std::make_unique<net::io_context>(1));
    shard_work_.push_back(net::make_work_guard(*shards_.back()));
  }
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this, &sys, stall, inline_handlers, i, &ioc = i == 0 ? ioc_ : *shards_[i - 1]] {
      // This io thread runs the handlers of the idle local users it sends requests to (transport/inline_unit.hpp).
      inline_unit unit(sys, inline_throughput, stall, [this, stall](std::chrono::milliseconds took) {
        ctx_->metrics.shard_stalls.fetch_add(1, std::memory_order_relaxed);
        stall_log("front: a handler ran {} ms on an io thread (limits.shard_stall_ms = {}): the sockets of "
                  "that thread waited as long", took.count(), stall.count());
      });
      if (inline_handlers) {
        unit.install();
        watchdog_->watch(&unit);
      }
      deadline_list deadlines(ioc.get_executor());  // this thread's calls' and connections' deadlines, one timer
      deadlines.install();
      std::optional<worker_pipes_here> pipes;  // this thread's pipes to the worker processes
      if (ctx_->worker_pipes) {
        pipes.emplace(ioc, *ctx_, static_cast<std::size_t>(i));
        pipes->install();
      }
      ioc.run();
      if (inline_handlers)
        watchdog_->unwatch(&unit);
    });
}

void front::session_started(const std::shared_ptr<http_session>& s) {
  live_sessions_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> guard{sessions_mutex_};
  if (sessions_.size() >= 1024 && sessions_.size() % 1024 == 0)  // prune the ended ones now and then
    sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(), [](auto& w) { return w.expired(); }),
                    sessions_.end());
  sessions_.push_back(s);
}

bool front::console_opened() noexcept {
  auto max = static_cast<std::int64_t>(ctx_->limits().max_consoles);
  if (consoles_.fetch_add(1, std::memory_order_relaxed) >= max) {
    consoles_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

std::uint64_t front::console_waiting(std::function<void()> evict) {
  std::function<void()> evicted;
  std::uint64_t ticket;
  {
    std::lock_guard<std::mutex> guard{waiting_mutex_};
    if (waiting_consoles_.size() >= ctx_->limits().max_unauthenticated_consoles) {
      evicted = std::move(waiting_consoles_.begin()->second);
      waiting_consoles_.erase(waiting_consoles_.begin());
    }
    ticket = ++waiting_seq_;
    waiting_consoles_.emplace(ticket, std::move(evict));
  }
  if (evicted)
    evicted();
  return ticket;
}

void front::console_authenticated_or_gone(std::uint64_t ticket) {
  std::lock_guard<std::mutex> guard{waiting_mutex_};
  waiting_consoles_.erase(ticket);
}

bool front::reserve_body(std::uint64_t bytes) noexcept {
  auto before = buffered_body_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes > limits_.max_buffered_body_bytes) {
    buffered_body_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void front::session_ended() noexcept {
  live_sessions_.fetch_sub(1, std::memory_order_relaxed);
}

void front::begin_shutdown() {
  closing_.store(true, std::memory_order_release);
  net::post(ioc_, [this] {
    beast::error_code ignored;
    main_.acceptor.close(ignored);
    main_.pause.cancel();
    if (plain_) {
      plain_->acceptor.close(ignored);
      plain_->pause.cancel();
    }
  });
  std::lock_guard<std::mutex> guard{sessions_mutex_};
  for (auto& w : sessions_)
    if (auto s = w.lock())
      s->shutdown_if_idle();
}

void front::answer_in_flight_unavailable() {
  std::lock_guard<std::mutex> guard{sessions_mutex_};
  for (auto& w : sessions_)
    if (auto s = w.lock())
      s->answer_unavailable_now();
}

bool front::wait_drained(std::chrono::milliseconds grace) {
  auto until = std::chrono::steady_clock::now() + grace;
  while (live_sessions_.load(std::memory_order_relaxed) > 0) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void front::stop() {
  ioc_.stop();
  for (auto& shard : shards_)
    shard->stop();
  for (auto& t : threads_)
    if (t.joinable())
      t.join();
  threads_.clear();
  shard_work_.clear();  // the shards themselves live as long as ioc_: a late answer may still be posted to one
  watchdog_.reset();
  if (channel_hub_)  // no socket is left: the actor system's shutdown does not wait for it
    caf::anon_send_exit(channel_hub_, caf::exit_reason::user_shutdown);
}

}  // namespace troupe
