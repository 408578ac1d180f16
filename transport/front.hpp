#pragma once
/// \file
/// The front: Boost.Beast HTTP/1.1 listener. Not an actor: it reads a request
/// (with a deadline and a size limit on every read), finds the connection's
/// user actor through the routing cache (or the bridge on a miss), hands the
/// request over without ever blocking on an actor (to a user on another node
/// through the forwarder, transport/forwarder.hpp), and writes the reply.

#include "actors/node_context.hpp"
#include "actors/rate_limited_log.hpp"
#include "config/fwd.hpp"
#include "registry/ip_network.hpp"
#include "transport/bridge.hpp"
#include "transport/channel_actor.hpp"
#include "transport/channel_quota.hpp"
#include "transport/cors.hpp"
#include "transport/forwarder.hpp"
#include "transport/route_cache.hpp"
#include "transport/static_files.hpp"
#include "transport/tls_credentials.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/fields.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace troupe {

class http_session;

/// Settings of the front, taken from the recipe's [limits].
struct front_limits {
  std::uint64_t max_body_bytes;
  std::uint32_t max_header_bytes;
  std::chrono::milliseconds request_timeout;
  std::uint64_t max_inflight;
  std::chrono::milliseconds idle_timeout;
  std::chrono::milliseconds read_timeout;
  std::uint64_t max_connections;
  std::uint64_t max_buffered_body_bytes;
  std::chrono::milliseconds tls_handshake_timeout;
  std::uint64_t max_stream_body_bytes;  ///< a streamed body (route_table::upload), at most
  std::uint64_t upload_chunk_bytes;     ///< one piece of it, at most

  static front_limits from(const config::limits_settings& limits);
};

class stall_watchdog;

class front {
public:
  /// `forwarder`: this node's forwarder, which serves users whose actor lives
  /// on another node (none: every user is taken to be local). `routes`: the
  /// routing cache, when another part of the node must reach it too (none: a fresh one).
  front(node_context_ptr ctx, bridge_handle bridge, forwarder_handle forwarder = {},
        std::shared_ptr<route_cache> routes = nullptr);
  ~front();

  /// Binds and listens; throws std::system_error when the address cannot be used.
  void listen(const std::string& host, std::uint16_t port);

  /// The port actually bound (useful with port 0).
  std::uint16_t port() const noexcept { return port_; }

  /// Before listen(): the main listener serves TLS (HTTPS, WSS) with `credentials`.
  void use_tls(std::shared_ptr<tls_credentials> credentials);
  bool tls_enabled() const noexcept { return tls_ != nullptr; }
  /// With TLS: a second listener serving plain HTTP (node.plain_listen); throws like listen().
  void listen_plain(const std::string& host, std::uint16_t port);
  std::uint16_t plain_port() const noexcept { return plain_ ? plain_->port : 0; }
  /// Loads the TLS pair again (POST /_troupe/tls/reload, SIGHUP): new connections
  /// take it, open ones keep theirs; a bad pair is refused and the old one kept.
  /// Counted (troupe_tls_reloads_total) and logged. TLS off: refused, nothing counted.
  tls_credentials::reload_result reload_tls();

  /// Starts `threads` threads running the front.
  void start(int threads);

  /// Stops accepting and closes idle keep-alive connections; requests in
  /// flight are finished and their connections closed after the reply.
  void begin_shutdown();

  /// Waits until every connection is closed or `grace` has passed; true when drained.
  bool wait_drained(std::chrono::milliseconds grace);

  /// After the grace period: every request still awaited is answered 503 +
  /// Retry-After with Connection: close (posted; wait_drained again for them to go out).
  void answer_in_flight_unavailable();

  /// Stops the threads (connections still open are cut).
  void stop();

  // -- for sessions ---------------------------------------------------------------
  const node_context& context() const noexcept { return *ctx_; }
  node_context& context() noexcept { return *ctx_; }
  /// What follows troupe_cid=ID in the platform's Set-Cookie (node.cookie_max_age_seconds).
  const std::string& cookie_attributes() const noexcept { return cookie_attributes_; }
  /// The client a request with `headers` comes from over a socket from `peer`:
  /// `peer`, or whom Forwarded / X-Forwarded-For name when `peer` is one of
  /// node.trusted_proxies (registry::client_address).
  std::string client_address(const std::string& peer, const boost::beast::http::fields& headers) const;
  /// The node's CORS policy ([[cors]]).
  const cors_policy& cors() const noexcept { return cors_; }
  /// The [[static]] mount that serves `path` (the longest prefix), or nullptr; a
  /// path one of the app's routes takes is the app's, whatever the mounts.
  const static_mount* static_mount_for(std::string_view path) const;
  /// True when some user type declares guards (docs/http.md "Guards"): the
  /// front judges them before a request reaches any actor.
  bool guards() const noexcept { return !guarded_types_.empty(); }
  /// True when some type has a guarded route for `method` `path` (worth asking whose the connection is).
  bool may_be_guarded(std::string_view method, std::string_view path) const;
  /// The refusal of `req` by the guards of `user`'s type `type`, counted; nullopt when they let it through.
  std::optional<http_response> guard_refusal(const http_request& req, const std::string& user,
                                             const std::string& type);
  /// True when some type streams the body of its route for `method` `path` (route_table::upload).
  bool streams_body(std::string_view method, std::string_view path) const;
  /// The body limit a request's parser starts with: the larger of max_body_bytes and,
  /// when some route streams its body, max_stream_body_bytes (the head decides which applies).
  std::uint64_t parse_body_limit() const noexcept { return parse_body_limit_; }
  /// The user type of the default group: a fresh guest's.
  const std::string& default_type() const noexcept { return default_type_; }
  const front_limits& limits() const noexcept { return limits_; }
  route_cache& routes() noexcept { return *routes_; }
  const bridge_handle& bridge() const noexcept { return bridge_; }
  /// True when `actor` lives on another node: its requests go through the forwarder.
  bool is_remote(const user_handle& actor) const noexcept { return forwarder_ && actor.node() != local_node_; }
  const forwarder_handle& forwarder() const noexcept { return forwarder_; }
  /// The actor of this front's channel sockets (transport/channel_actor.hpp), and their numbers.
  const channel_hub_handle& channel_hub() const noexcept { return channel_hub_; }
  std::uint64_t next_channel_socket() noexcept { return channel_sockets_.fetch_add(1, std::memory_order_relaxed) + 1; }
  /// This node's channel sockets by connection and by user (channel.max_sockets_per_*), by those numbers.
  channel_quota& socket_quota() noexcept { return socket_quota_; }
  bool closing() const noexcept { return closing_.load(std::memory_order_acquire); }
  /// True when the admin surface is on and `presented` is its token (constant-time compare).
  bool admin_token_matches(std::string_view presented) const noexcept;
  void session_started(const std::shared_ptr<http_session>& s);
  /// Counts an authenticated console's live channel; false when limits.max_consoles are open already.
  bool console_opened() noexcept;
  void console_closed() noexcept { consoles_.fetch_sub(1, std::memory_order_relaxed); }
  /// Registers a live channel still waiting for its token; when
  /// limits.max_unauthenticated_consoles wait already, the oldest one is
  /// evicted (its `evict` is called, outside any lock). Returns a ticket for
  /// console_authenticated_or_gone.
  std::uint64_t console_waiting(std::function<void()> evict);
  /// The channel of `ticket` has its token, or has gone: it waits no more.
  void console_authenticated_or_gone(std::uint64_t ticket);
  void session_ended() noexcept;
  /// Per-request warnings, at most one line a second each (overload must not flood the log).
  rate_limited_log no_placement_log, timeout_log, tls_handshake_log{spdlog::level::info}, stall_log, stuck_log;
  /// Reserves `bytes` of limits.max_buffered_body_bytes for a body being read; false past it.
  bool reserve_body(std::uint64_t bytes) noexcept;
  void release_body(std::uint64_t bytes) noexcept {
    buffered_body_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

private:
  // One listening socket: node.listen (TLS when configured) or node.plain_listen.
  struct listener {
    listener(boost::asio::io_context& ioc, bool is_tls) : acceptor(ioc), pause(ioc), tls(is_tls) {}
    boost::asio::ip::tcp::acceptor acceptor;
    // Out of file descriptors (EMFILE/ENFILE): accepting pauses this long (growing).
    boost::asio::steady_timer pause;
    std::chrono::milliseconds backoff{0};
    bool tls;
    std::uint16_t port = 0;
  };
  void bind(listener& l, const std::string& host, std::uint16_t port);
  void do_accept(listener& l);
  // The io_context of the next connection: each io thread's in turn.
  boost::asio::io_context& next_shard() noexcept;
  void on_accept(listener& l, const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket);
  // Past limits.max_connections: a canned 503, then the socket is closed
  // (on a TLS listener it is closed unanswered: a handshake to refuse costs what it saves).
  void refuse_connection(boost::asio::ip::tcp::socket socket, bool tls);

  node_context_ptr ctx_;
  front_limits limits_;
  std::string cookie_attributes_;
  std::vector<registry::ip_network> trusted_proxies_;
  cors_policy cors_;
  std::vector<static_mount> statics_;        // longest prefix first
  std::vector<const router*> app_routers_;  // every user type's, for static_mount_for
  std::vector<std::pair<std::string, const router*>> guarded_types_;  // the types that declare guards
  std::string default_type_;
  std::vector<const router*> streaming_types_;  // the types with a route_table::upload route
  std::uint64_t parse_body_limit_ = 0;
  bridge_handle bridge_;
  forwarder_handle forwarder_;
  channel_hub_handle channel_hub_;
  std::atomic<std::uint64_t> channel_sockets_{0};
  caf::node_id local_node_;  // the forwarder's: this node
  std::shared_ptr<route_cache> routes_;
  // Declared before the io_context: sessions still queued in it when it is
  // destroyed report their end to these.
  std::atomic<bool> closing_{false};
  std::atomic<std::int64_t> live_sessions_{0};
  std::atomic<std::int64_t> consoles_{0};
  std::atomic<std::uint64_t> buffered_body_bytes_{0};
  std::atomic<std::int64_t> refusing_{0};  // refused connections still being answered
  channel_quota socket_quota_;
  std::mutex waiting_mutex_;
  std::uint64_t waiting_seq_ = 0;
  std::map<std::uint64_t, std::function<void()>> waiting_consoles_;  // by ticket: oldest first
  std::mutex sessions_mutex_;
  std::vector<std::weak_ptr<http_session>> sessions_;  // for shutdown; pruned as they end
  // Run by one thread (as each shard): Asio then queues what that thread posts
  // to itself (an answer, a completion) without its lock and without a wake-up.
  // Other threads still post to it safely.
  boost::asio::io_context ioc_{1};
  std::shared_ptr<tls_credentials> tls_;  // null: no TLS
  listener main_;
  std::unique_ptr<listener> plain_;       // node.plain_listen, with TLS only
  // Accept failures are logged once per interval with a count.
  std::chrono::steady_clock::time_point accept_logged_{};
  std::uint64_t accept_failures_unlogged_ = 0;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  // The io_contexts of the io threads besides ioc_'s (node.io_threads > 1), one
  // thread each: a connection is served by one of them from its accept to its
  // close, so its handlers never run concurrently and need no strand (a strand
  // in an any_io_executor costs a heap allocation per handler).
  std::vector<std::unique_ptr<boost::asio::io_context>> shards_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> shard_work_;
  std::size_t next_shard_ = 0;  // on ioc_'s thread (the acceptors')
  std::unique_ptr<stall_watchdog> watchdog_;  // with node.inline_handlers
};

}  // namespace troupe
