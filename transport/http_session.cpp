#include "transport/http_session.hpp"

#include "actors/errors.hpp"
#include "actors/response_headers.hpp"
#include "config/limits_settings.hpp"
#include "registry/ids.hpp"
#include "transport/admin_routes.hpp"
#include "transport/app_socket_session.hpp"
#include "transport/front.hpp"
#include "transport/strand_link.hpp"
#include "transport/stream_writer.hpp"
#include "transport/user_call.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using http_framing::sv;

constexpr std::string_view cookie_name = platform_cookie;

// The front's side of one admin operation handed to the bridge.
class admin_call final : public admin_slot, strand_link<http_session> {
public:
  using strand_link::strand_link;

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

http_session::http_session(tcp::socket&& socket, front& owner, std::shared_ptr<net::ssl::context> tls)
  : stream_(tls ? front_stream(beast::tcp_stream(std::move(socket)), std::move(tls), owner.limits().tls_handshake_timeout)
                : front_stream(beast::tcp_stream(std::move(socket)))),
    front_(owner),
    limits_(owner.limits()),
    buffer_(limits_.max_header_bytes + limits_.max_body_bytes + 65536),
    deadline_(stream_.get_executor()) {}

http_session::~http_session() {
  end_upload();
  release_body();
  front_.session_ended();
}

void http_session::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    if (self->stream_.is_tls())
      return self->do_handshake();
    self->do_wait();
  });
}

void http_session::shutdown_if_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->idle_)
      self->close();
    else if (auto writer = self->writer_.lock())  // shutting down: an open stream is cut (its writer is told)
      writer->gone();
  });
}

void http_session::answer_unavailable_now() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->current_call_ != 0)
      self->finish(error_response(503, "the node is shutting down, retry", 1));
  });
}

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
  watch(limits_.idle_timeout);
  auto room = std::min<std::size_t>(4096, buffer_.max_size() - buffer_.size());
  stream_.async_read_some(buffer_.prepare(room), beast::bind_front_handler(&http_session::on_first_bytes,
                                                                           shared_from_this()));
}

void http_session::on_first_bytes(beast::error_code ec, std::size_t n) {
  unwatch();
  if (ec)
    return close();  // idle timeout, peer closed, or shutdown
  buffer_.commit(n);
  do_read();
}

void http_session::do_read() {
  idle_ = false;
  over_budget_ = false;
  upload_parser_.reset();
  parser_.emplace();
  http_framing::configure(*parser_, {front_.parse_body_limit(), limits_.max_header_bytes});
  if (!on_chunk_)
    on_chunk_ = [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
      if (size > 0 && !reserve_body(size)) {
        over_budget_ = true;
        ec = http::error::body_limit;  // stops the parser; on_read_error answers 503
      }
    };
  parser_->on_chunk_header(on_chunk_);
  watch(limits_.read_timeout);  // the header and the body, however they are read (100 Continue included)
  beast::error_code ec;
  if (parse_buffered(&request_parser_base::is_header_done, ec) || ec)
    return on_read_header(ec, 0);
  http::async_read_header(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&http_session::on_read_header, shared_from_this()));
}

void http_session::on_read_header(beast::error_code ec, std::size_t) {
  if (ec)
    return on_read_error(ec);
  const auto& head = parser_->get();
  if (auto why = http_framing::header_refusal(head.base()); !why.empty())
    return refuse_and_close(400, why);
  if (front_.parse_body_limit() > limits_.max_body_bytes) {  // some route streams its body: is it this one?
    auto target = sv(head.target());
    if (front_.streams_body(sv(head.method_string()), target.substr(0, target.find('?'))))
      return begin_upload();
    if (auto length = parser_->content_length(); length && *length > limits_.max_body_bytes)
      return refuse_and_close(413, "request body too large");
    parser_->body_limit(limits_.max_body_bytes);  // a chunked one counts from here
  }
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
  beast::error_code ec;
  parser_->eager(true);
  if (parse_buffered(&request_parser_base::is_done, ec) || ec)
    return on_read(ec, 0);
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&http_session::on_read, shared_from_this()));
}

// What the buffer holds already is parsed here, as Beast's read would parse
// it; but a read that reads nothing posts its completion (a queued handler and
// an allocation), and a keep-alive request's first bytes are always here
// (do_wait read them). True once `stage_done`; false when more bytes are needed.
bool http_session::parse_buffered(bool (request_parser_base::*stage_done)() const, beast::error_code& ec) {
  auto& parser = static_cast<request_parser_base&>(*parser_);
  while (!(parser.*stage_done)() && buffer_.size() > 0) {
    buffer_.consume(parser.put(buffer_.data(), ec));
    if (ec == http::error::need_more) {
      ec = {};
      return false;
    }
    if (ec)
      return false;
  }
  return (parser.*stage_done)();
}

void http_session::on_read(beast::error_code ec, std::size_t) {
  unwatch();
  if (ec)
    return on_read_error(ec);
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
    return serve_admin(*this, path, qmark == std::string_view::npos ? std::string_view{} : target.substr(qmark + 1));

  if (!front_.cors().empty()) {  // [[cors]]: a preflight is the front's; answers from here on carry the headers
    auto origin = sv(req_[http::field::origin]);
    if (req_.method() == http::verb::options && !origin.empty() &&
        req_.find(http::field::access_control_request_method) != req_.end())
      return answer_preflight(origin);
    cors_headers_ = front_.cors().answer_headers(origin);
  }
  if (auto* mount = front_.static_mount_for(path))  // [[static]]: the front's, no actor, no connection minted
    return serve_file(*mount, path);

  auto& ctx = front_.context();
  std::string cid(request_cid());
  // A routed id was verified (or minted) when it was routed: finding it costs a
  // hash lookup, its HMAC an eighth of a warm request's instructions. A forged
  // tag changes the id's hash, so the lookup tells nothing about the real tag.
  routed_ = front_.routes().find(cid);
  minted_ = !(routed_ || ctx.cids->verify(cid));
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
  // An app WebSocket's upgrade (route_table::websocket): its socket is
  // registered before the user sees it (his `open` may write to it).
  if (beast::websocket::is_upgrade(req_)) {
    http_response refusal;
    if (!(socket_ticket_ = app_socket_ticket::issue(front_, stream_.get_executor(), cid, refusal))) {
      ctx.metrics.app_sockets.upgrades_refused.fetch_add(1, std::memory_order_relaxed);
      return do_write(refusal.status, std::move(refusal.body), refusal.content_type, refusal.retry_after);
    }
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
  call->client = client_address();
  if (upload_parser_ && !upload_source_) {  // a streamed body: its source reads it as the actor asks
    upload_source_ = spawn_upload_source(front_.bridge()->home_system(), make_upload_port());
    call->upload_from = upload_source_;
  }
  call->deadline_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch() + limits_.request_timeout)
                        .count();
  if (socket_ticket_) {
    call->socket = socket_event::open;
    call->channel = socket_ticket_->socket();
    call->page = socket_ticket_->page();
  } else if (auto page = req_.find("X-Troupe-Page"); page != req_.end()) {
    call->page.assign(page->value().data(), page->value().size());
  }
  call->headers.reserve(8);
  for (auto& field : req_)
    call->headers.push_back({std::string(field.name_string()), std::string(field.value())});
  call_req_ = std::move(call);
  dispatch_call();
}


std::string_view http_session::request_cid() const {
  for (auto it = req_.find(http::field::cookie); it != req_.end() && it->name() == http::field::cookie; ++it)
    if (auto v = http_framing::cookie_value(sv(it->value()), cookie_name); !v.empty())
      return v;
  return {};
}

const std::string& http_session::peer_address() {
  if (peer_.empty()) {
    beast::error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec)
      peer_ = remote.address().to_string();
  }
  return peer_;
}

void http_session::answer(std::uint16_t status, std::string body, std::string_view content_type,
                          std::uint32_t retry_after, bool challenge) {
  do_write(status, std::move(body), content_type, retry_after, challenge);
}

// 405 with the methods the path takes.
void http_session::refuse_method(const char* allowed) {
  allow_ = allowed;
  do_write(405, error_body(std::string("use ") + allowed), "application/json");
}

// An admin operation answered by the actors: the reply comes back like an
// actor's (on_actor_reply), under the request deadline.
void http_session::call_bridge(const std::function<void(front&, local_admin)>& send) {
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
            [self = shared_from_this(), id](http_response&& r, const user_handle& answered_by) {
              if (id != self->current_call_)
                return;  // answered already (the shutdown's 503)
              self->target_ = answered_by;
              if (!r.set_cid.empty())  // the request's id is dead: hand the client the new one
                self->rotated_cid_ = std::move(r.set_cid);
              self->finish(std::move(r));
            },
            minted_, std::exchange(routed_, std::nullopt));
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
  end_upload();
  current_call_ = 0;
  deadline_.cancel();
  if (counted_) {
    counted_ = false;
    front_.context().metrics.inflight.fetch_sub(1, std::memory_order_relaxed);
  }
  route_key_ = std::move(r.route_key);
  if (auto ticket = std::move(socket_ticket_)) {  // an app WebSocket's upgrade: not accepted, the ticket goes back
    if (r.status == 101)
      return accept_socket(std::move(ticket), r);
    front_.context().metrics.app_sockets.upgrades_refused.fetch_add(1, std::memory_order_relaxed);
  }
  if (r.stream_id != 0)
    return start_stream(std::move(r));
  do_write(r.status, std::move(r.body), r.content_type, r.retry_after, false, &r.headers);
}

// The user accepted the upgrade: the socket's session takes the connection over.
void http_session::accept_socket(std::unique_ptr<app_socket_ticket> ticket, const http_response& accepted) {
  front_.context().metrics.count_answer(101, std::chrono::steady_clock::now() - started_, route_key_);
  route_key_.clear();
  release_body();
  std::vector<http_header> headers;
  if (auto cookie = take_cookie(); !cookie.empty())  // a new connection's id, as any first answer carries
    headers.push_back({"Set-Cookie", std::move(cookie)});
  auto call = call_req_;
  upgrade([&](front_stream&& stream, request_type&& upgrade) {
    start_app_socket(std::move(stream), std::move(upgrade), front_, std::move(ticket), accepted, *call,
                     std::move(headers));
  });
}

void http_session::do_write(std::uint16_t status, std::string body, std::string_view content_type,
                            std::uint32_t retry_after, bool challenge, const std::vector<http_header>* app_headers) {
  end_upload();
  routed_.reset();  // answered without a call (a refusal): the route found for it is not kept
  auto& ctx = front_.context();
  ctx.metrics.count_answer(status, std::chrono::steady_clock::now() - started_, route_key_);
  route_key_.clear();
  release_body();  // the request is done with: its body no longer counts
  bool keep = req_.keep_alive() && !close_after_ && !front_.closing();
  res_ = {};
  res_.version(req_.version() ? req_.version() : 11);
  res_.result(status);
  res_.set(http::field::server, "troupe");
  if (!content_type.empty())
    res_.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  if (retry_after)
    res_.set(http::field::retry_after, std::to_string(retry_after));
  if (challenge)
    res_.set(http::field::www_authenticate, "Bearer realm=\"troupe\"");
  if (!allow_.empty()) {
    res_.set(http::field::allow, allow_);
    allow_.clear();
  }
  if (auto cookie = take_cookie(); !cookie.empty())
    res_.set(http::field::set_cookie, cookie);
  if (app_headers)
    add_app_headers(res_, *app_headers);
  add_cors_headers(res_);
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
  watch(limits_.read_timeout);  // a client that does not read its reply is cut
  http::async_write(stream_, res_, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
    self->on_write(ec, keep);
  });
}

// A handler's headers replace those of the same name the front wrote (Server,
// Cache-Control, Retry-After …), except the platform's Set-Cookie, and repeat
// as the handler repeated them.
void http_session::add_app_headers(http::fields& fields, const std::vector<http_header>& headers) {
  for (auto& h : headers)
    if (!beast::iequals(h.name, "set-cookie"))
      fields.erase(h.name);
  for (auto& h : headers)
    fields.insert(h.name, h.value);
}

// The [[cors]] headers of this request's answer (given once).
void http_session::add_cors_headers(http::fields& fields) {
  for (auto& h : cors_headers_)
    fields.insert(h.name, h.value);
  cors_headers_.clear();
}

void http_session::on_write(beast::error_code ec, bool keep) {
  unwatch();
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
  unwatch();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

void http_session::watch(deadline_entry::clock::duration d) {
  stream_.expires_never();  // what another path (TLS, a file, the 100 Continue) left on Beast's timers
  if (!deadlines_)
    deadlines_ = &deadline_list::here(own_deadlines_, stream_.get_executor());
  deadlines_->set_after(io_deadline_, d);
}

void http_session::unwatch() noexcept {
  deadline_list::clear(io_deadline_);
}

std::string http_session::take_cookie() {
  std::string cookie;
  if (!rotated_cid_.empty() || (minted_ && call_req_))
    cookie = std::string(cookie_name) + "=" + (rotated_cid_.empty() ? call_req_->cid : rotated_cid_)
             + front_.cookie_attributes();
  minted_ = false;
  rotated_cid_.clear();
  return cookie;
}

}  // namespace troupe
