#include "transport/app_socket_session.hpp"

#include "actors/node_context.hpp"
#include "config/channel_settings.hpp"
#include "transport/channel_actor.hpp"
#include "transport/front.hpp"
#include "transport/user_call.hpp"
#include "transport/ws_session.hpp"

#include <boost/asio/post.hpp>
#include <caf/all.hpp>

#include <random>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using nlohmann::json;

class app_socket_session;

/// Where the hub's wake-ups and the quota's closer find the socket's session
/// (none while the upgrade is with the user). Read and written on its strand only.
struct app_socket_slot {
  std::weak_ptr<app_socket_session> session;
  bool connection_changed = false;  // login or logout ended its connection before the session was there
};

namespace {

// A login or logout ended the socket's connection: the socket was its user's,
// the connection is somebody else's now.
constexpr const char* connection_moved_text = "the connection changed (login or logout): open the socket again";

std::string random_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(8, '0');
  auto bits = rng();
  for (auto& c : out) {
    c = hex[bits & 0xF];
    bits >>= 4;
  }
  return out;
}

// How the socket closes when its user did not take a message: he is
// unavailable for now (1013), his handler failed or he lost the socket with a
// restart (409; 1011), or the message was refused (1008).
websocket::close_reason close_for(const http_response& r) {
  auto j = json::parse(r.body, nullptr, false);
  std::string why = j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>()
                                                                                   : "status " + std::to_string(r.status);
  if (r.status == 503 || r.status == 504 || r.status == 429)
    return ws_session::reason(websocket::close_code::try_again_later, why);
  if (r.status >= 500)
    return ws_session::reason(websocket::close_code::internal_error, "the message handler failed");
  if (r.status == 409)
    return ws_session::reason(websocket::close_code::internal_error, why);
  return ws_session::reason(websocket::close_code::policy_error, why);
}

}  // namespace

// -- the session -----------------------------------------------------------------------

class app_socket_session final : public ws_session {
public:
  app_socket_session(front_stream&& stream, front& owner, std::unique_ptr<app_socket_ticket> ticket,
                     const http_request& call)
    : ws_session(std::move(stream)), front_(owner), ticket_(std::move(ticket)) {
    // Each message goes to the user as the upgrade did, without its headers.
    template_.method = "GET";
    template_.path = call.path;
    template_.query = call.query;
    template_.cid = call.cid;
    template_.page = ticket_->page();
    template_.channel = ticket_->socket();
    template_.client = call.client;
  }

  void run(const upgrade_request& upgrade, const http_response& accepted, std::vector<http_header> headers) {
    ticket_->slot_->session = shared_as<app_socket_session>();
    auto body = json::parse(accepted.body, nullptr, false);
    std::string user, subprotocol;
    std::size_t max_message = front_.context().channel().max_frame_bytes;
    if (body.is_object()) {
      user = body.value("user", "");
      subprotocol = body.value("subprotocol", "");
      max_message = body.value("max_message_bytes", max_message);
    }
    if (!subprotocol.empty())
      headers.push_back({"Sec-WebSocket-Protocol", subprotocol});
    if (!front_.socket_quota().try_admit(ticket_->socket_, user))
      refusal_ = ws_session::reason(websocket::close_code::try_again_later,
                            "too many open WebSockets for this user (channel.max_sockets_per_user)");
    if (ticket_->slot_->connection_changed)
      refusal_ = ws_session::reason(websocket::close_code::policy_error, connection_moved_text);
    timeouts t{};
    t.handshake_timeout = front_.limits().read_timeout;
    t.idle_timeout = node_context::timer_millis(front_.context().channel().idle_timeout_seconds);
    t.keep_alive_pings = true;  // a ping at half the idle time: a silent but live client stays
    accept(upgrade, t, max_message, std::move(headers));  // past max_message Beast closes with 1009
  }

  void kick() override {
    if (closed() || !accepted())  // what `open` queued waits for the handshake (on_accepted kicks)
      return;
    if (ticket_->outbox_->overflowed())
      return close(ws_session::reason(websocket::close_code::try_again_later,
                              "the outgoing queue is full (channel.overflow = close)"));
    write_next();
  }

  void connection_ended() {
    if (!accepted()) {  // a close cannot overtake the handshake
      refusal_ = ws_session::reason(websocket::close_code::policy_error, connection_moved_text);
      return;
    }
    close(ws_session::reason(websocket::close_code::policy_error, connection_moved_text));
  }

private:
  void on_accepted() override {
    if (refusal_)
      return close(std::move(*refusal_));
    read_next();
    kick();  // what `open` queued
  }

  // One message at a time: the next is read once the user has handled this one.
  void on_message(std::string&& data) override {
    auto& ctx = front_.context();
    if (front_.closing())
      return close(ws_session::reason(websocket::close_code::going_away, "the node is shutting down"));
    if (static_cast<std::uint64_t>(ctx.metrics.inflight.load(std::memory_order_relaxed)) >= front_.limits().max_inflight)
      return close(ws_session::reason(websocket::close_code::try_again_later, "the node is at its in-flight request limit"));
    if (ctx.serving && !ctx.serving->may_serve())
      return close(ws_session::reason(websocket::close_code::try_again_later, "this node is not serving"));
    ctx.metrics.app_sockets.messages_in.fetch_add(1, std::memory_order_relaxed);
    auto req = std::make_shared<http_request>(template_);
    req->body = std::move(data);
    req->socket = got_text() ? socket_event::text : socket_event::binary;
    auto timeout = front_.limits().request_timeout;
    req->deadline_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch() + timeout)
                         .count();
    auto& metrics = ctx.metrics;
    metrics.inflight.fetch_add(1, std::memory_order_relaxed);
    // No read is pending meanwhile: the call holds the session until it is answered (its deadline bounds that).
    call_user(front_, executor(), std::move(req), timeout,
              [self = shared_as<app_socket_session>(), &metrics](http_response&& r, const user_handle&) {
                metrics.inflight.fetch_sub(1, std::memory_order_relaxed);
                self->handled(r);
              });
  }

  void handled(const http_response& r) {
    if (closed())
      return;
    if (r.status / 100 != 2)
      return close(close_for(r));
    read_next();
  }

  std::optional<ws_frame> next_frame() override { return ticket_->outbox_->take(); }

  void on_written() override {
    front_.context().metrics.app_sockets.messages_out.fetch_add(1, std::memory_order_relaxed);
  }

  void on_closed() override { ticket_->outbox_->close(); }

  front& front_;
  std::unique_ptr<app_socket_ticket> ticket_;  // given back when the session goes
  http_request template_;
  std::optional<close_reason> refusal_;
};

// -- the ticket ------------------------------------------------------------------------

app_socket_ticket::app_socket_ticket(front& owner, std::uint64_t socket, std::string page)
  : front_(owner), socket_(socket), page_(std::move(page)) {}

std::unique_ptr<app_socket_ticket> app_socket_ticket::issue(front& owner, net::any_io_executor strand,
                                                            const std::string& cid, http_response& refusal) {
  auto& ctx = owner.context();
  auto& settings = ctx.channel();
  auto& metrics = ctx.metrics;
  // Page channels and app sockets share channel.max_sockets.
  auto opening = metrics.app_sockets.open.fetch_add(1, std::memory_order_relaxed);
  if (static_cast<std::uint64_t>(opening + metrics.channel.sockets.load(std::memory_order_relaxed)) >=
      settings.max_sockets) {
    metrics.app_sockets.open.fetch_sub(1, std::memory_order_relaxed);
    refusal = error_response(503, "too many open WebSockets on this node (channel.max_sockets)", 1);
    return nullptr;
  }
  auto socket = owner.next_channel_socket();
  std::unique_ptr<app_socket_ticket> t(
    new app_socket_ticket(owner, socket, "ws-" + std::to_string(socket) + "-" + random_suffix()));
  t->slot_ = std::make_shared<app_socket_slot>();
  // Login or logout on its connection closes it (the socket was the old user's).
  auto closer = [weak = std::weak_ptr<app_socket_slot>(t->slot_), strand] {
    net::post(strand, [weak] {
      auto slot = weak.lock();
      if (!slot)
        return;
      slot->connection_changed = true;
      if (auto s = slot->session.lock())
        s->connection_ended();
    });
  };
  if (!(t->in_quota_ = owner.socket_quota().try_open(socket, cid, closer))) {
    refusal = error_response(429, "too many open WebSockets for this connection (channel.max_sockets_per_connection)");
    return nullptr;  // the ticket's destructor gives back what it took
  }
  t->outbox_ = std::make_shared<channel_outbox>(outbox_limits(settings));
  auto link = std::make_shared<channel_link>();
  link->outbox = t->outbox_;
  link->wake = [weak = std::weak_ptr<app_socket_slot>(t->slot_), strand] {
    net::post(strand, [weak] {
      if (auto slot = weak.lock())
        if (auto s = slot->session.lock())
          s->kick();
    });
  };
  caf::anon_send(owner.channel_hub(), socket_open_atom::value, socket, std::move(link));
  return t;
}

app_socket_ticket::~app_socket_ticket() {
  if (outbox_) {
    outbox_->close();
    caf::anon_send(front_.channel_hub(), socket_closed_atom::value, socket_);  // the hub tells his user
  }
  if (in_quota_)
    front_.socket_quota().release(socket_);
  front_.context().metrics.app_sockets.open.fetch_sub(1, std::memory_order_relaxed);
}

channel_ref app_socket_ticket::socket() const {
  return channel_ref{front_.channel_hub(), socket_};
}

void start_app_socket(front_stream&& stream, http::request<http::string_body>&& upgrade, front& owner,
                      std::unique_ptr<app_socket_ticket> ticket, const http_response& accepted,
                      const http_request& call, std::vector<http_header> headers) {
  std::make_shared<app_socket_session>(std::move(stream), owner, std::move(ticket), call)
    ->run(upgrade, accepted, std::move(headers));
}

}  // namespace troupe
