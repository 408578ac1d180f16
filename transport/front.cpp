#include "transport/front.hpp"
#include "transport/user_call.hpp"

#include "actors/errors.hpp"
#include "actors/user.hpp"
#include "registry/ids.hpp"
#include "transport/channel_session.hpp"
#include "transport/console_session.hpp"
#include "transport/http_framing.hpp"
#include "transport/stream_sink.hpp"
#include "registry/url.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using millis = std::chrono::milliseconds;

millis to_millis(double seconds) {
  return millis(static_cast<std::int64_t>(seconds * 1000));
}

std::string_view sv(beast::string_view s) noexcept {
  return {s.data(), s.size()};
}

constexpr std::string_view cookie_name = "troupe_cid";

// The troupe_cid value of the Cookie header(s), "" when absent.
std::string_view cookie_cid(const http::request<http::string_body>& req) {
  for (auto it = req.find(http::field::cookie); it != req.end() && it->name() == http::field::cookie; ++it)
    if (auto v = http_framing::cookie_value(sv(it->value()), cookie_name); !v.empty())
      return v;
  return {};
}


// X-Troupe-Operator: at most 64 printable ASCII characters, else "admin".
std::string operator_name(const http::request<http::string_body>& req) {
  auto h = req.find("X-Troupe-Operator");
  if (h == req.end() || h->value().empty() || h->value().size() > 64)
    return "admin";
  std::string name(h->value());
  for (char c : name)
    if (c < 0x20 || c > 0x7e)
      return "admin";
  return name;
}

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
                      to_millis(l.tls_handshake_timeout_seconds)};
}

// -- one TCP connection ---------------------------------------------------------------

class http_session : public std::enable_shared_from_this<http_session> {
public:
  // `tls`: the context of a TLS listener's connection (null: plain TCP).
  http_session(tcp::socket&& socket, front& owner, std::shared_ptr<net::ssl::context> tls)
    : stream_(tls ? front_stream(beast::tcp_stream(std::move(socket)), std::move(tls),
                                 owner.limits().tls_handshake_timeout)
                  : front_stream(beast::tcp_stream(std::move(socket)))),
      front_(owner),
      limits_(owner.limits()),
      buffer_(limits_.max_header_bytes + limits_.max_body_bytes + 65536),
      deadline_(stream_.get_executor()) {}

  ~http_session() {
    if (streaming_ && !streaming_->gone)  // the session ends under its stream (the front stopped): the sink ends too
      caf::anon_send(streaming_->sink, gone_atom::value);
    release_body();
    front_.session_ended();
  }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->stream_.is_tls())
        return self->do_handshake();
      self->do_wait();
    });
  }

  void shutdown_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_)
        self->close();
      else if (self->streaming_)  // shutting down: an open stream is cut (its writer is told)
        self->stream_gone();
    });
  }

  // Shutdown, past the grace period: a request still awaited is answered 503
  // + Retry-After now (and its connection closed) instead of being cut.
  void answer_unavailable_now() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->current_call_ != 0)
        self->finish(error_response(503, "the node is shutting down, retry", 1));
    });
  }

  // -- answers from the actor side (posted onto this session's strand) ------------
  void on_actor_reply(std::uint64_t call, http_response&& r);  // an admin operation's answer
  // A streaming response (docs/streaming.md), from its sink (posted onto the strand).
  void stream_write(std::string bytes);
  void stream_end(bool clean);

private:
  // TLS: the handshake comes before the first read, within limits.tls_handshake_timeout_seconds.
  void do_handshake();
  void on_handshake(beast::error_code ec);
  // Idle keep-alive: wait (idle_timeout) for the first byte of the next request.
  void do_wait();
  void on_first_bytes(beast::error_code ec, std::size_t n);
  // A request has begun: read all of it (read_timeout, header and body limits).
  void do_read();
  void on_read_header(beast::error_code ec, std::size_t n);
  // The head passed every check: read the body (after a 100 Continue when asked for).
  void do_read_body();
  void on_read(beast::error_code ec, std::size_t n);
  // Which answer a failed read gets (431/413/400/503), or a silent close.
  void on_read_error(beast::error_code ec);
  // The node-wide budget of buffered bodies (limits.max_buffered_body_bytes).
  bool reserve_body(std::uint64_t bytes);
  void release_body();
  void handle();
  void handle_admin(std::string_view path, std::string_view query);
  void handle_census(std::string_view query);
  void handle_tls_reload();
  void refuse_method(const char* allowed);
  void order(std::string what, std::string target);
  template <class Send>
  void admin_call_to_bridge(Send send);
  void dispatch_call();
  void on_deadline();
  void finish(http_response&& r);
  void do_write(std::uint16_t status, std::string body, std::string_view content_type,
                std::uint32_t retry_after = 0, bool challenge = false);
  void on_write(beast::error_code ec, bool keep);
  void refuse_and_close(std::uint16_t status, const std::string& text, std::uint32_t retry_after = 0);
  void linger_close();
  void close();

  front_stream stream_;
  front& front_;
  const front_limits& limits_;
  beast::flat_buffer buffer_;
  std::optional<http_framing::request_parser> parser_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
  net::steady_timer deadline_;
  bool idle_ = true;
  bool close_after_ = false;
  bool over_budget_ = false;           // the body budget refused a chunk of the current request
  std::uint64_t reserved_body_ = 0;    // bytes of the node-wide body budget this request holds
  // Beast keeps a reference to its chunk callback: it lives as long as the session.
  std::function<void(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
  std::string allow_;                  // the Allow header of a 405, "" otherwise
  std::string route_key_;              // the user type's route that answered (its figures), "" otherwise
  std::string interim_;                // "100 Continue", while it is written
  // The request being served, shared with the slots that carry it to actors.
  std::shared_ptr<http_request> call_req_;
  bool minted_ = false;
  std::string rotated_cid_;  // login/logout gave the connection this new id: the reply's cookie
  bool counted_ = false;
  std::uint64_t call_seq_ = 0;
  std::uint64_t current_call_ = 0;  // 0: nothing awaited
  std::chrono::steady_clock::time_point started_;
  caf::actor target_;  // the actor that answered the current call (a stream's writer)

  // -- a streaming response (docs/streaming.md) -----------------------------------
  // The sink actor keeps the queue and sends one batch at a time; the session
  // writes it as one chunk and tells the sink when it is out. A read stays
  // posted meanwhile, to notice the client's disconnect (no request deadline
  // applies; a client that takes nothing for read_timeout is cut).
  struct stream_io {
    stream_sink_handle sink;
    http::response<http::empty_body> head;
    std::optional<http::response_serializer<http::empty_body>> head_writer;
    bool head_done = false;
    std::optional<std::string> pending;  // the first batch, when it came before the head was out
    std::string out;                     // the batch on the wire
    bool writing = false;
    bool ending = false, end_clean = false, last_out = false;
    bool gone = false;                   // the sink was told (or has ended): tell it nothing more
    std::array<char, 512> discard{};
  };
  std::unique_ptr<stream_io> streaming_;
  void start_stream(http_response&& r);
  void on_stream_head(beast::error_code ec);
  void do_stream_chunk(std::string bytes);
  void on_stream_chunk(beast::error_code ec, std::size_t n);
  void finish_stream_end();
  void do_watch_client();
  void stream_gone();
};

namespace {

// What every continuation handed to the actor side shares: it answers on
// its session's strand, if the session still exists, tagged with its call id.
class session_link {
public:
  session_link(std::weak_ptr<http_session> s, net::any_io_executor ex, std::uint64_t id)
    : session_(std::move(s)), ex_(std::move(ex)), id_(id) {}

protected:
  // Runs fn(session, id) on the session's strand; the first call marks the link answered.
  template <class F>
  void post(F fn) {
    answered_ = true;
    net::post(ex_, [s = session_, id = id_, fn = std::move(fn)]() mutable {
      if (auto session = s.lock())
        fn(*session, id);
    });
  }
  bool answered() const noexcept { return answered_; }

private:
  std::weak_ptr<http_session> session_;
  net::any_io_executor ex_;
  std::uint64_t id_;
  bool answered_ = false;
};

// The front's side of one admin operation handed to the bridge.
class admin_call final : public admin_slot, session_link {
public:
  using session_link::session_link;

  void done(http_response&& r) override {
    post([r = std::move(r)](http_session& s, std::uint64_t id) mutable { s.on_actor_reply(id, std::move(r)); });
  }

  ~admin_call() override {
    if (!answered())
      post([](http_session& s, std::uint64_t id) {
        s.on_actor_reply(id, error_response(503, "the operation was dropped", 1));
      });
  }
};

}  // namespace

void http_session::do_handshake() {
  stream_.expires_after(limits_.tls_handshake_timeout);
  stream_.tls().async_handshake(net::ssl::stream_base::server,
                                beast::bind_front_handler(&http_session::on_handshake, shared_from_this()));
}

void http_session::on_handshake(beast::error_code ec) {
  if (ec) {  // counted, and logged at most once a second: a scan must not flood the log
    front_.context().metrics.tls.handshake_failures.fetch_add(1, std::memory_order_relaxed);
    front_.tls_handshake_log("front: TLS handshake failed: {}", ec.message());
    return close();
  }
  do_wait();
}

void http_session::do_wait() {
  idle_ = true;
  if (front_.closing())
    return close();
  if (buffer_.size() > 0)  // a pipelined request is already here
    return do_read();
  stream_.expires_after(limits_.idle_timeout);
  auto room = std::min<std::size_t>(4096, buffer_.max_size() - buffer_.size());
  stream_.async_read_some(buffer_.prepare(room), beast::bind_front_handler(&http_session::on_first_bytes,
                                                                           shared_from_this()));
}

void http_session::on_first_bytes(beast::error_code ec, std::size_t n) {
  if (ec)
    return close();  // idle timeout, peer closed, or shutdown
  buffer_.commit(n);
  do_read();
}

void http_session::do_read() {
  idle_ = false;
  over_budget_ = false;
  parser_.emplace();
  http_framing::configure(*parser_, {limits_.max_body_bytes, limits_.max_header_bytes});
  if (!on_chunk_)
    on_chunk_ = [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
      if (size > 0 && !reserve_body(size)) {
        over_budget_ = true;
        ec = http::error::body_limit;  // stops the parser; on_read_error answers 503
      }
    };
  parser_->on_chunk_header(on_chunk_);
  stream_.expires_after(limits_.read_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&http_session::on_read_header, shared_from_this()));
}

void http_session::on_read_header(beast::error_code ec, std::size_t) {
  if (ec)
    return on_read_error(ec);
  const auto& head = parser_->get();
  if (auto why = http_framing::header_refusal(head.base()); !why.empty())
    return refuse_and_close(400, why);
  // A known length is reserved whole now (Beast has checked it against
  // limits.max_body_bytes); a chunked body is reserved chunk by chunk.
  if (auto length = parser_->content_length(); length && *length > 0 && !reserve_body(*length))
    return refuse_and_close(503, "the node is buffering too many request bodies (limits.max_buffered_body_bytes), retry",
                            1);
  if (parser_->is_done())
    return on_read({}, 0);
  auto expect = head.find(http::field::expect);
  if (expect == head.end() || head.version() < 11)
    return do_read_body();
  if (!beast::iequals(expect->value(), "100-continue"))
    return refuse_and_close(417, "only Expect: 100-continue is understood");
  // The client waits for this before it sends the body (RFC 9110 §10.1.1).
  interim_ = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(stream_, net::buffer(interim_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec)
      return self->close();
    self->do_read_body();
  });
}

void http_session::do_read_body() {
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&http_session::on_read, shared_from_this()));
}

void http_session::on_read(beast::error_code ec, std::size_t) {
  if (ec)
    return on_read_error(ec);
  stream_.expires_never();
  req_ = parser_->release();
  handle();
}

void http_session::on_read_error(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == net::error::eof)
    return close();
  if (over_budget_)
    return refuse_and_close(503, "the node is buffering too many request bodies (limits.max_buffered_body_bytes), retry",
                            1);
  switch (http_framing::status_for(ec)) {
    case 431: return refuse_and_close(431, "request header fields too large");
    case 413: return refuse_and_close(413, "request body too large");
    case 400: return refuse_and_close(400, "malformed HTTP request");
    default: return close();  // read timeout or I/O error: nobody to answer
  }
}

bool http_session::reserve_body(std::uint64_t bytes) {
  if (!front_.reserve_body(bytes))
    return false;
  reserved_body_ += bytes;
  return true;
}

void http_session::release_body() {
  if (reserved_body_ == 0)
    return;
  front_.release_body(reserved_body_);
  reserved_body_ = 0;
}

void http_session::handle() {
  started_ = std::chrono::steady_clock::now();
  std::string_view target = sv(req_.target());
  auto qmark = target.find('?');
  std::string_view path = target.substr(0, qmark);
  if (path.substr(0, 8) == "/_troupe" && (path.size() == 8 || path[8] == '/'))
    return handle_admin(path, qmark == std::string_view::npos ? std::string_view{} : target.substr(qmark + 1));

  auto& ctx = front_.context();
  std::string cid(cookie_cid(req_));
  minted_ = !ctx.cids->verify(cid);
  if (minted_)
    cid = ctx.cids->mint();  // absent, malformed or not minted here: a new connection, never an error

  if (static_cast<std::uint64_t>(ctx.metrics.inflight.load(std::memory_order_relaxed)) >= limits_.max_inflight)
    return do_write(503, error_body("the node is at its in-flight request limit"), "application/json", 1);
  // A cluster member without the majority (fenced, stopped, cut off) serves
  // nobody: another member may serve these users now (docs/CLUSTER.md).
  if (ctx.serving && !ctx.serving->may_serve()) {
    front_.routes().erase(cid);
    return do_write(503, error_body("this node is not serving: it is not in contact with the cluster's majority"),
                    "application/json", 1);
  }
  ctx.metrics.inflight.fetch_add(1, std::memory_order_relaxed);
  counted_ = true;

  auto call = std::make_shared<http_request>();
  call->method.assign(req_.method_string().data(), req_.method_string().size());
  call->path.assign(path.data(), path.size());
  if (qmark != std::string_view::npos)
    call->query.assign(target.substr(qmark + 1));
  call->body = std::move(req_.body());
  call->cid = std::move(cid);
  call->deadline_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch() + limits_.request_timeout)
                        .count();
  if (auto page = req_.find("X-Troupe-Page"); page != req_.end())
    call->page.assign(page->value().data(), page->value().size());
  call->headers.reserve(8);
  for (auto& field : req_)
    call->headers.push_back({std::string(field.name_string()), std::string(field.value())});
  call_req_ = std::move(call);
  dispatch_call();
}

// 405 with the methods the path takes.
void http_session::refuse_method(const char* allowed) {
  allow_ = allowed;
  do_write(405, error_body(std::string("use ") + allowed), "application/json");
}

void http_session::handle_admin(std::string_view path, std::string_view query) {
  auto& ctx = front_.context();
  // Everything but the three operator actions only reads.
  bool reads = req_.method() == http::verb::get || req_.method() == http::verb::head;
  if (path == "/_troupe/health") {  // from atomics only: nothing is asked of an actor here
    if (!reads)
      return refuse_method("GET, HEAD");
    auto h = assess_health(ctx.health, ctx.recipe.node.health_max_restart_rate, &ctx.metrics);
    return do_write(h.status, std::move(h.body), "application/json");
  }
  // The page channels: for every client (a valid cookie is their credential), not the admin surface.
  if (path == "/_troupe/ws") {
    if (req_.method() != http::verb::get)
      return refuse_method("GET");
    if (!beast::websocket::is_upgrade(req_))
      return do_write(426, error_body("a WebSocket upgrade is expected here"), "application/json");
    std::string cid(cookie_cid(req_));
    if (!ctx.cids->verify(cid))
      cid.clear();  // refused with 1008 once the handshake is done
    return start_channel_session(std::move(stream_), std::move(req_), front_, std::move(cid));
  }
  if (ctx.recipe.node.admin_token.empty())  // the admin surface is off
    return do_write(404, error_body("not found"), "application/json");
  // The console page holds no data (it asks for the token, then everything it
  // shows comes through token-checked calls); its live channel checks the token itself.
  if (path == "/_troupe/console")
    return reads ? do_write(200, std::string(console_page()), "text/html; charset=utf-8") : refuse_method("GET, HEAD");
  if (path == "/_troupe/console/live") {
    if (req_.method() != http::verb::get)
      return refuse_method("GET");
    if (!beast::websocket::is_upgrade(req_))
      return do_write(426, error_body("a WebSocket upgrade is expected here"), "application/json");
    // Only an authenticated channel takes a slot: one with the token in its
    // header now, one without it once its first message brings the token.
    bool authenticated = false;
    if (auto h = req_.find(http::field::authorization); h != req_.end()) {
      std::string_view v = sv(h->value());
      authenticated = v.substr(0, 7) == "Bearer " && front_.admin_token_matches(v.substr(7));
    }
    if (authenticated && !front_.console_opened())
      return do_write(503, error_body("too many consoles are open (limits.max_consoles)"), "application/json", 5);
    return start_console_session(std::move(stream_), std::move(req_), front_, authenticated);
  }
  std::string_view auth;
  if (auto h = req_.find(http::field::authorization); h != req_.end())
    auth = sv(h->value());
  constexpr std::string_view bearer = "Bearer ";
  if (auth.substr(0, bearer.size()) != bearer || !front_.admin_token_matches(auth.substr(bearer.size())))
    return do_write(401, error_body("missing or wrong admin token"), "application/json", 0, true);
  constexpr std::string_view actors = "/_troupe/actors/";
  bool read_only_path = path == "/_troupe/metrics" || path == "/_troupe/global" || path == "/_troupe/census"
                        || path == "/_troupe/orchestration/log" || path == "/_troupe/history"
                        || (path.substr(0, actors.size()) == actors && path.size() > actors.size());
  if (read_only_path && !reads)
    return refuse_method("GET, HEAD");
  if (path == "/_troupe/metrics")
    return do_write(200, ctx.metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
  if (path == "/_troupe/history")  // the rate history (one sample a second) and the per-route figures
    return do_write(200, ctx.metrics.history_json(), "application/json");
  if (path == "/_troupe/global")
    return admin_call_to_bridge([](front& f, local_admin slot) {
      caf::anon_send(f.bridge(), global_atom::value, std::move(slot));
    });
  if (path == "/_troupe/census")
    return handle_census(query);
  if (path == "/_troupe/tls/reload")
    return req_.method() == http::verb::post ? handle_tls_reload() : refuse_method("POST");
  if (path == "/_troupe/orchestration/log") {
    std::uint32_t tail = 100;
    auto params = registry::parse_query(query);
    if (!params)
      return do_write(400, error_body("malformed query string"), "application/json");
    for (auto& [k, v] : *params)
      if (k == "tail") {
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), tail);
        if (ec != std::errc{} || end != v.data() + v.size() || tail < 1 || tail > 1000)
          return do_write(400, error_body("tail: must be 1-1000"), "application/json");
      }
    return admin_call_to_bridge([tail](front& f, local_admin slot) {
      caf::anon_send(f.bridge(), log_atom::value, tail, std::move(slot));
    });
  }
  if (path.substr(0, actors.size()) == actors && path.size() > actors.size()) {
    auto id = registry::percent_decode(path.substr(actors.size()));
    if (!id || id->size() > 512)
      return do_write(400, error_body("malformed actor id"), "application/json");
    return admin_call_to_bridge([id = std::move(*id)](front& f, local_admin slot) mutable {
      caf::anon_send(f.bridge(), census_atom::value, std::move(id), std::move(slot));
    });
  }
  // POST /_troupe/users/{user}/freeze|drop, POST /_troupe/workers/{worker}/drain
  constexpr std::string_view users = "/_troupe/users/", workers = "/_troupe/workers/";
  auto split_action = [&](std::string_view base) -> std::optional<std::pair<std::string, std::string>> {
    if (path.substr(0, base.size()) != base)
      return std::nullopt;
    auto rest = path.substr(base.size());
    auto slash = rest.rfind('/');
    if (slash == std::string_view::npos || slash == 0)
      return std::nullopt;
    auto name = registry::percent_decode(rest.substr(0, slash));
    if (!name)
      return std::nullopt;
    return std::make_pair(std::move(*name), std::string(rest.substr(slash + 1)));
  };
  if (auto a = split_action(users); a && (a->second == "freeze" || a->second == "drop")) {
    if (req_.method() != http::verb::post)
      return refuse_method("POST");
    auto& user = a->first;
    if (!registry::valid_user_name(user) && !(registry::is_guest(user) && registry::valid_cid(user.substr(6))))
      return do_write(404, error_body("no such user on this node"), "application/json");
    return order(a->second, std::move(user));
  }
  if (auto a = split_action(workers); a && a->second == "drain") {
    if (req_.method() != http::verb::post)
      return refuse_method("POST");
    return order("drain", std::move(a->first));
  }
  do_write(404, error_body("not found"), "application/json");
}

void http_session::order(std::string what, std::string target) {
  beast::error_code ec;
  auto remote = stream_.socket().remote_endpoint(ec);
  operator_order o{std::move(what), std::move(target), operator_name(req_), ec ? "" : remote.address().to_string()};
  admin_call_to_bridge([o = std::move(o)](front& f, local_admin slot) mutable {
    caf::anon_send(f.bridge(), order_atom::value, std::move(o), std::move(slot));
  });
}

// POST /_troupe/tls/reload: 200 with what is served now, or 409 with why the
// new pair was refused (the old one still served) or that TLS is off. Reading
// two small files is the only I/O: it runs here, on the io thread, rarely.
void http_session::handle_tls_reload() {
  if (!front_.tls_enabled())
    return do_write(409, error_body("TLS is off (node.tls_cert and node.tls_key are not set)"), "application/json");
  auto r = front_.reload_tls();
  nlohmann::json served{{"subject", r.identity.subject}, {"serial", r.identity.serial},
                        {"not_after", r.identity.not_after_unix}};
  if (!r.ok)
    return do_write(409, nlohmann::json{{"error", r.reason}, {"result", "refused"}, {"served", served}}.dump(),
                    "application/json");
  do_write(200, nlohmann::json{{"result", "ok"}, {"served", served}}.dump(), "application/json");
}

// GET /_troupe/census: its parameters (docs/census.md); a bad one is a 400 naming it.
void http_session::handle_census(std::string_view query) {
  auto params = registry::parse_query(query);
  if (!params)
    return do_write(400, error_body("malformed query string"), "application/json");
  census_query q;
  for (auto& [k, v] : *params) {
    auto number = [&, &k = k, &v = v](auto& out) {
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
      return ec == std::errc{} && end == v.data() + v.size();
    };
    if (k == "kind")
      q.kind = v;
    else if (k == "prefix")
      q.prefix = v;
    else if (k == "worker")
      q.worker = v;
    else if (k == "state")
      q.state = v;
    else if (k == "node")
      q.node = v;
    else if (k == "after")
      q.after = v;
    else if (k == "probe")
      q.probe = v != "0";
    else if (k == "offset" && !number(q.offset))
      return do_write(400, error_body("offset: must be a non-negative integer"), "application/json");
    else if (k == "limit" && !number(q.limit))
      return do_write(400, error_body("limit: must be 1-1000"), "application/json");
  }
  admin_call_to_bridge([q = std::move(q)](front& f, local_admin slot) mutable {
    caf::anon_send(f.bridge(), census_atom::value, std::move(q), std::move(slot));
  });
}

// An admin operation answered by the actors: the reply comes back like an
// actor's (on_actor_reply), under the request deadline.
template <class Send>
void http_session::admin_call_to_bridge(Send send) {
  auto id = ++call_seq_;
  current_call_ = id;
  deadline_.expires_after(limits_.request_timeout);
  deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec)
      self->on_deadline();
  });
  send(front_, local_admin{std::make_shared<admin_call>(weak_from_this(), stream_.get_executor(), id)});
}

// The request goes the one way every user call goes (transport/user_call.hpp):
// cache or resolve, slot or forwarder, one re-resolve, its deadline (504).
void http_session::dispatch_call() {
  auto id = ++call_seq_;
  current_call_ = id;
  call_user(front_, stream_.get_executor(), call_req_, limits_.request_timeout,
            // The call holds the session until it is answered (its deadline bounds that).
            [self = shared_from_this(), id](http_response&& r, const caf::actor& answered_by) {
              if (id != self->current_call_)
                return;  // answered already (the shutdown's 503)
              self->target_ = answered_by;
              if (!r.set_cid.empty())  // the request's id is dead: hand the client the new one
                self->rotated_cid_ = std::move(r.set_cid);
              self->finish(std::move(r));
            },
            minted_);
}

void http_session::on_actor_reply(std::uint64_t id, http_response&& r) {
  if (id != current_call_)
    return;  // answered already (504) or superseded
  finish(std::move(r));
}

// An admin operation past the request deadline.
void http_session::on_deadline() {
  if (current_call_ == 0)
    return;
  front_.timeout_log("front: {} {} not answered within {} ms (504)", std::string(req_.method_string()),
               std::string(sv(req_.target()).substr(0, sv(req_.target()).find('?'))), limits_.request_timeout.count());
  finish(error_response(504, "the request was not answered in time"));
}

void http_session::finish(http_response&& r) {
  current_call_ = 0;
  deadline_.cancel();
  if (counted_) {
    counted_ = false;
    front_.context().metrics.inflight.fetch_sub(1, std::memory_order_relaxed);
  }
  route_key_ = std::move(r.route_key);
  if (r.stream_id != 0)
    return start_stream(std::move(r));
  do_write(r.status, std::move(r.body), r.content_type, r.retry_after);
}

void http_session::do_write(std::uint16_t status, std::string body, std::string_view content_type,
                            std::uint32_t retry_after, bool challenge) {
  auto& ctx = front_.context();
  ctx.metrics.count_answer(status, std::chrono::steady_clock::now() - started_, route_key_);
  route_key_.clear();
  release_body();  // the request is done with: its body no longer counts
  bool keep = req_.keep_alive() && !close_after_ && !front_.closing();
  res_ = {};
  res_.version(req_.version() ? req_.version() : 11);
  res_.result(status);
  res_.set(http::field::server, "troupe");
  res_.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  if (retry_after)
    res_.set(http::field::retry_after, std::to_string(retry_after));
  if (challenge)
    res_.set(http::field::www_authenticate, "Bearer realm=\"troupe\"");
  if (!allow_.empty()) {
    res_.set(http::field::allow, allow_);
    allow_.clear();
  }
  if (!rotated_cid_.empty() || (minted_ && call_req_))
    res_.set(http::field::set_cookie, std::string(cookie_name) + "="
                                          + (rotated_cid_.empty() ? call_req_->cid : rotated_cid_)
                                          + "; Path=/; HttpOnly; SameSite=Lax");
  res_.keep_alive(keep);
  res_.body() = std::move(body);
  res_.prepare_payload();
  // A reply to HEAD has the headers GET's would have, its Content-Length
  // included, and no content (RFC 9110 §9.3.2): a byte of it would be read as
  // the start of the next response on this connection.
  if (req_.method() == http::verb::head)
    res_.body().clear();
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug("{} {} -> {} ({} us)", std::string(req_.method_string()), std::string(req_.target()).substr(0, 200),
                  status,
                  std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_)
                    .count());
  minted_ = false;
  rotated_cid_.clear();
  stream_.expires_after(limits_.read_timeout);  // a client that does not read its reply is cut
  http::async_write(stream_, res_, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
    self->on_write(ec, keep);
  });
}

void http_session::on_write(beast::error_code ec, bool keep) {
  if (ec)
    return close();
  if (!keep)
    return linger_close();
  call_req_.reset();
  do_wait();
}

void http_session::refuse_and_close(std::uint16_t status, const std::string& text, std::uint32_t retry_after) {
  close_after_ = true;
  started_ = std::chrono::steady_clock::now();
  if (parser_ && parser_->is_header_done())
    req_ = parser_->release();  // answer in the request's HTTP version (and method: HEAD has no content)
  else
    req_ = {};  // not the previous request's: it is not what is answered
  do_write(status, error_body(text), "application/json", retry_after);
}

// Half-close, then discard what the client still sends for a moment, so that
// the reply is not lost to a reset caused by unread request bytes.
void http_session::linger_close() {
  if (stream_.is_tls()) {  // close_notify, then the peer's, within limits.tls_handshake_timeout_seconds
    stream_.expires_after(limits_.tls_handshake_timeout);
    return stream_.tls().async_shutdown([self = shared_from_this()](beast::error_code) { self->close(); });
  }
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(std::chrono::seconds(2));
  buffer_.consume(buffer_.size());
  stream_.async_read_some(buffer_.prepare(std::min<std::size_t>(65536, buffer_.max_size())),
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            if (ec)
                              return self->close();
                            self->linger_close();
                          });
}

void http_session::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

// -- streaming responses (docs/streaming.md) ------------------------------------------

namespace {

// The session as its stream's sink sees it: calls are posted onto the strand,
// dropped when the session is gone (its destructor told the sink).
class session_stream_port final : public stream_port {
public:
  session_stream_port(std::weak_ptr<http_session> s, net::any_io_executor ex)
    : session_(std::move(s)), ex_(std::move(ex)) {}
  void write(std::string bytes) override {
    post([b = std::move(bytes)](http_session& s) mutable { s.stream_write(std::move(b)); });
  }
  void end(bool clean) override {
    post([clean](http_session& s) { s.stream_end(clean); });
  }

private:
  template <class F>
  void post(F fn) {
    net::post(ex_, [s = session_, fn = std::move(fn)]() mutable {
      if (auto session = s.lock())
        fn(*session);
    });
  }
  std::weak_ptr<http_session> session_;
  net::any_io_executor ex_;
};

}  // namespace

void http_session::start_stream(http_response&& r) {
  auto& ctx = front_.context();
  const auto& lim = ctx.recipe.limits;
  auto tell_writer_gone = [&] {
    stream_event e;
    e.id = r.stream_id;
    e.what = static_cast<std::uint8_t>(stream_event::kind::gone);
    if (target_)
      caf::anon_send(target_, stream_msg_atom::value, std::move(e));
  };
  if (req_.method() == http::verb::head) {  // the head only: no stream behind it
    tell_writer_gone();
    return do_write(200, {}, r.content_type);
  }
  auto& open = ctx.metrics.stream.open;
  if (!target_ || open.fetch_add(1, std::memory_order_relaxed) >= static_cast<std::int64_t>(lim.max_streams)) {
    if (target_)
      open.fetch_sub(1, std::memory_order_relaxed);
    ctx.metrics.stream.refusals.fetch_add(1, std::memory_order_relaxed);
    tell_writer_gone();
    return do_write(503, error_body("the node has too many open streams (limits.max_streams), retry"),
                    "application/json", 1);
  }
  // Counted in troupe_stream_open now; the sink counts itself out when it ends.
  // Its route's figures count it as answered once its head is due.
  ctx.metrics.count_answer(200, std::chrono::steady_clock::now() - started_, route_key_);
  route_key_.clear();
  release_body();
  streaming_ = std::make_unique<stream_io>();
  auto& io = *streaming_;
  stream_sink_spec spec;
  spec.writer = target_;
  spec.id = r.stream_id;
  spec.format = r.content_type == content_type_of(stream_format::ndjson) ? stream_format::ndjson : stream_format::sse;
  spec.port = std::make_shared<session_stream_port>(weak_from_this(), stream_.get_executor());
  spec.queue_bytes = lim.stream_queue_bytes;
  spec.credit_bytes = lim.stream_credit_bytes;
  spec.keepalive = to_millis(lim.stream_keepalive_seconds);
  spec.metrics = &ctx.metrics;
  io.sink = spawn_stream_sink(front_.bridge()->home_system(), std::move(spec));

  io.head.version(req_.version() ? req_.version() : 11);
  io.head.result(http::status::ok);
  io.head.set(http::field::server, "troupe");
  io.head.set(http::field::content_type, r.content_type);
  io.head.set(http::field::cache_control, "no-cache");
  io.head.set("X-Accel-Buffering", "no");  // proxies must not hold events back
  if (!rotated_cid_.empty() || (minted_ && call_req_))
    io.head.set(http::field::set_cookie, std::string(cookie_name) + "="
                                             + (rotated_cid_.empty() ? call_req_->cid : rotated_cid_)
                                             + "; Path=/; HttpOnly; SameSite=Lax");
  minted_ = false;
  rotated_cid_.clear();
  io.head.keep_alive(false);  // the connection ends with the stream
  io.head.chunked(true);
  io.head_writer.emplace(io.head);
  do_watch_client();
  stream_.expires_after(limits_.read_timeout);
  http::async_write_header(stream_, *io.head_writer, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_stream_head(ec);
  });
}

void http_session::on_stream_head(beast::error_code ec) {
  if (ec)
    return stream_gone();
  auto& io = *streaming_;
  io.head_done = true;
  if (io.pending) {
    auto first = std::move(*io.pending);
    io.pending.reset();
    return do_stream_chunk(std::move(first));
  }
  if (io.ending)
    finish_stream_end();
}

void http_session::stream_write(std::string bytes) {
  if (!streaming_ || streaming_->gone || streaming_->ending)
    return;
  auto& io = *streaming_;
  if (!io.head_done || io.writing) {  // the sink sends one batch at a time: at most one waits here
    io.pending = std::move(bytes);
    return;
  }
  do_stream_chunk(std::move(bytes));
}

void http_session::do_stream_chunk(std::string bytes) {
  auto& io = *streaming_;
  io.out = std::move(bytes);
  io.writing = true;
  stream_.expires_after(limits_.read_timeout);  // the write timer only: the watching read never expires
  net::async_write(stream_, http::make_chunk(net::buffer(io.out)),
                   [self = shared_from_this(), n = io.out.size()](beast::error_code ec, std::size_t) {
                     self->on_stream_chunk(ec, n);
                   });
}

void http_session::on_stream_chunk(beast::error_code ec, std::size_t n) {
  auto& io = *streaming_;
  io.writing = false;
  if (ec)
    return stream_gone();
  io.out.clear();
  if (!io.gone)
    caf::anon_send(io.sink, written_atom::value, static_cast<std::uint64_t>(n));
  if (io.pending) {
    auto next = std::move(*io.pending);
    io.pending.reset();
    return do_stream_chunk(std::move(next));
  }
  if (io.ending)
    finish_stream_end();
}

void http_session::stream_end(bool clean) {
  if (!streaming_ || streaming_->gone)
    return;
  auto& io = *streaming_;
  io.gone = true;  // the sink has ended: nothing more to tell it
  io.ending = true;
  io.end_clean = clean;
  if (!clean)
    return close();
  if (io.head_done && !io.writing && !io.pending)
    finish_stream_end();
}

// The last chunk, then a half-close; the watching read sees the client close (or a short linger cuts it).
void http_session::finish_stream_end() {
  auto& io = *streaming_;
  if (!io.end_clean)
    return close();
  if (io.last_out)
    return;
  io.last_out = true;
  stream_.expires_after(limits_.read_timeout);
  net::async_write(stream_, http::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec)
      return self->close();
    beast::error_code ignored;
    self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    self->deadline_.expires_after(std::chrono::seconds(2));
    self->deadline_.async_wait([self](beast::error_code e) {
      if (!e)
        self->close();
    });
  });
}

void http_session::do_watch_client() {
  stream_.expires_never();  // no request deadline while streaming: the read only watches for the client's end
  stream_.async_read_some(net::buffer(streaming_->discard), [self = shared_from_this()](beast::error_code ec,
                                                                                       std::size_t) {
    if (!ec)
      return self->do_watch_client();  // a client has nothing to say on a stream: discarded
    if (self->streaming_->last_out)
      return self->close();  // the stream ended and the client closed: done
    self->stream_gone();
  });
}

// The client went away (or cannot be written to): the sink is told once, the socket closed.
void http_session::stream_gone() {
  auto& io = *streaming_;
  if (!io.gone) {
    io.gone = true;
    caf::anon_send(io.sink, gone_atom::value);
  }
  close();
}

// -- the listener --------------------------------------------------------------------

front::front(node_context_ptr ctx, bridge_handle bridge, forwarder_handle forwarder,
             std::shared_ptr<route_cache> routes)
  : ctx_(std::move(ctx)),
    limits_(front_limits::from(ctx_->recipe.limits)),
    bridge_(std::move(bridge)),
    forwarder_(std::move(forwarder)),
    local_node_(forwarder_ ? forwarder_.node() : caf::node_id{}),
    routes_(routes ? std::move(routes) : std::make_shared<route_cache>()),
    socket_quota_(ctx_->recipe.channel.max_sockets_per_connection, ctx_->recipe.channel.max_sockets_per_user),
    main_(ioc_, false) {
  if (bridge_)
    channel_hub_ = spawn_channel_hub(bridge_->home_system(), ctx_->metrics);
}

front::~front() {
  stop();
}

bool front::admin_token_matches(std::string_view presented) const noexcept {
  const auto& token = ctx_->recipe.node.admin_token;
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
  l.acceptor.async_accept(net::make_strand(ioc_), [this, &l](beast::error_code ec, tcp::socket socket) {
    on_accept(l, ec, std::move(socket));
  });
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

void front::start(int threads) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] { ioc_.run(); });
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
  auto max = static_cast<std::int64_t>(ctx_->recipe.limits.max_consoles);
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
    if (waiting_consoles_.size() >= ctx_->recipe.limits.max_unauthenticated_consoles) {
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
  for (auto& t : threads_)
    if (t.joinable())
      t.join();
  threads_.clear();
  if (channel_hub_)  // no socket is left: the actor system's shutdown does not wait for it
    caf::anon_send_exit(channel_hub_, caf::exit_reason::user_shutdown);
}

}  // namespace troupe
