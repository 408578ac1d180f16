#include "transport/channel_session.hpp"

#include "actors/channel.hpp"
#include "actors/node_context.hpp"
#include "transport/channel_actor.hpp"
#include "transport/channel_protocol.hpp"
#include "transport/front.hpp"
#include "transport/user_call.hpp"

#include "config/channel_settings.hpp"
#include "transport/ws_session.hpp"

#include <boost/asio/post.hpp>
#include <caf/all.hpp>

#include <array>
#include <list>
#include <optional>
#include <unordered_map>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using nlohmann::json;

namespace {

constexpr const char* openchannel_path = "/_troupe/openchannel";

// Login or logout over another socket (or HTTP) ended this socket's connection id.
constexpr auto connection_changed_code = static_cast<websocket::close_code>(4001);
constexpr const char* connection_changed = "the connection changed (login or logout): open the channel again";

// The "user" an answer names (the admission's, a login's or logout's): "" when none.
std::string user_named(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  return j.is_object() && j.contains("user") && j["user"].is_string() ? j["user"].get<std::string>() : std::string();
}

// An error answer's text, for a close reason.
std::string error_text(const http_response& r) {
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string())
    return j["error"].get<std::string>();
  return "the channel cannot be served now (" + std::to_string(r.status) + ")";
}

class channel_session final : public ws_session {
public:
  channel_session(front_stream&& stream, front& owner, std::string cid, std::string client)
    : ws_session(std::move(stream)),
      front_(owner),
      settings_(owner.context().channel()),
      metrics_(owner.context().metrics),
      cid_(std::move(cid)),
      client_(std::move(client)),
      outbox_(std::make_shared<channel_outbox>(outbox_limits(settings_))) {}

  ~channel_session() override {
    outbox_->close();
    if (registered_)  // the hub tells the users whose pages were bound here
      caf::anon_send(front_.channel_hub(), socket_closed_atom::value, socket_);
    if (in_quota_)
      front_.socket_quota().release(socket_);
    if (counted_)
      metrics_.channel.sockets.fetch_sub(1, std::memory_order_relaxed);
  }

  void run(const upgrade_request& upgrade) {
    socket_ = front_.next_channel_socket();
    // The cheap checks first, before any actor is asked: a cookie cannot take every slot of the node.
    if (cid_.empty()) {
      refusal_ = close_reason(websocket::close_code::policy_error,
                                         "no valid troupe_cid cookie: make an HTTP request first to get one");
    } else if (!(in_quota_ = front_.socket_quota().try_open(socket_, cid_, closer()))) {
      refusal_ = close_reason(websocket::close_code::try_again_later,
                                         "too many open channels for this connection "
                                         "(channel.max_sockets_per_connection)");
    } else if (static_cast<std::uint64_t>(metrics_.channel.sockets.fetch_add(1, std::memory_order_relaxed))
               >= settings_.max_sockets) {
      metrics_.channel.sockets.fetch_sub(1, std::memory_order_relaxed);
      refusal_ = close_reason(websocket::close_code::try_again_later,
                                         "too many open channels on this node (channel.max_sockets)");
    } else {
      counted_ = true;
    }
    timeouts t{};
    t.handshake_timeout = front_.limits().read_timeout;
    t.idle_timeout = node_context::timer_millis(settings_.idle_timeout_seconds);
    t.keep_alive_pings = true;  // a ping at half the idle time: a silent but live client stays
    accept(upgrade, t, settings_.max_frame_bytes);  // past max_frame_bytes Beast closes with 1009 (message too big)
  }

  // Posted by the socket actor (or by this session) when there is something to write.
  void kick() override {
    if (closed())
      return;
    if (outbox_->overflowed())
      return close(close_reason(websocket::close_code::try_again_later,
                                "the outgoing queue is full (channel.overflow = close)"));
    write_next();
  }

private:
  // One page of this socket that opened its channel (calls of a sequential
  // page wait here, in order, while one of them is served).
  struct lane {
    bool sequential = false;
    bool busy = false;
    std::list<channel_envelope> waiting;  // a list: an empty deque costs ~600 bytes
  };

  void on_accepted() override {
    if (refusal_)
      return refuse(std::move(*refusal_));
    if (close_after_accept_)
      return close(std::move(*close_after_accept_));
    admit();
  }

  // What closes this socket from another strand (login or logout ended its
  // connection id: channel_quota::close_connection).
  channel_quota::closer closer() {
    return [weak = weak_as<channel_session>(), ex = executor()] {
      net::post(ex, [weak] {
        if (auto self = weak.lock())
          self->close_when_accepted(close_reason(connection_changed_code, connection_changed));
      });
    };
  }

  void close_when_accepted(close_reason reason) {
    if (!accepted()) {  // a close cannot overtake the handshake
      close_after_accept_ = std::move(reason);
      return;
    }
    close(std::move(reason));
  }

  void refuse(close_reason reason) {
    metrics_.channel.sockets_refused.fetch_add(1, std::memory_order_relaxed);
    close(std::move(reason));
  }

  // Before any frame is read, one call to the connection's user names whom
  // the socket counts under (channel.max_sockets_per_user). It may wake him.
  void admit() {
    if (auto refusal = refusal_now())
      return refuse(reason(websocket::close_code::try_again_later, error_text(*refusal)));
    auto req = std::make_shared<http_request>();
    req->method = "GET";  // it changes nothing: safe to send again when his actor went away with it
    req->path = socket_admission_path;
    // No read is pending yet: the call holds the session until it is answered (its deadline bounds that).
    send_call(std::move(req), [keep = shared_as<channel_session>()](channel_session& self, http_response&& r) {
      self.admitted(std::move(r));
    });
  }

  void admitted(http_response&& r) {
    if (closed())
      return;
    if (r.status != 200)
      return refuse(reason(websocket::close_code::try_again_later, error_text(r)));
    if (!front_.socket_quota().try_admit(socket_, user_named(r.body)))
      return refuse(too_many_for_user());
    read_next();
  }

  static close_reason too_many_for_user() {
    return close_reason(websocket::close_code::try_again_later,
                                   "too many open channels for this user (channel.max_sockets_per_user)");
  }

  // A whole message (a read fails past channel.idle_timeout_seconds, past
  // channel.max_frame_bytes, or when the client goes: ws_session::finish).
  void on_message(std::string&& text) override {
    metrics_.channel.frames_in.fetch_add(1, std::memory_order_relaxed);
    if (!got_text()) {
      bad_frame(nullptr, "binary frames are not understood: send a JSON envelope as text");
      return read_next();
    }
    auto parsed = parse_envelope(text);
    if (auto* err = std::get_if<envelope_error>(&parsed))
      bad_frame(err->id, err->text);
    else
      take_call(std::move(std::get<channel_envelope>(parsed)));
    if (!closed())
      read_next();
  }

  void bad_frame(const json& id, const std::string& why) {
    metrics_.channel.bad_frames.fetch_add(1, std::memory_order_relaxed);
    send(error_frame(id, 400, why));
  }

  void take_call(channel_envelope&& e) {
    if (calls_ >= settings_.max_calls_per_socket)
      return send(error_frame(e.id, 503, "too many calls in flight on this channel (channel.max_calls_per_socket)"));
    ++calls_;
    if (!e.page.empty())
      if (auto l = lanes_.find(e.page); l != lanes_.end() && l->second.sequential) {
        if (l->second.busy)
          return l->second.waiting.push_back(std::move(e));
        l->second.busy = true;
      }
    start(std::move(e));
  }

  // Why no call can be sent now, if none can.
  std::optional<http_response> refusal_now() const {
    auto& ctx = front_.context();
    if (front_.closing())
      return error_response(503, "the node is shutting down, retry", 1);
    if (static_cast<std::uint64_t>(ctx.metrics.inflight.load(std::memory_order_relaxed)) >= front_.limits().max_inflight)
      return error_response(503, "the node is at its in-flight request limit", 1);
    if (ctx.serving && !ctx.serving->may_serve())
      return error_response(503, "this node is not serving: it is not in contact with the cluster's majority", 1);
    return std::nullopt;
  }

  void start(channel_envelope&& e) {
    if (auto refusal = refusal_now())
      return answered(e, std::move(*refusal));
    auto q = e.path.find('?');
    if (std::string_view(e.path).substr(0, q) == socket_admission_path)  // the front's own call: no frame makes it
      return answered(e, error_response(404, "no such route"));
    if (!registered_) {  // registered with the hub at the first call: a socket that only listens costs it nothing
      registered_ = true;
      auto link = std::make_shared<channel_link>();
      link->outbox = outbox_;
      link->wake = [weak = weak_as<channel_session>(), ex = executor()] {
        net::post(ex, [weak] {
          if (auto self = weak.lock())
            self->kick();
        });
      };
      caf::anon_send(front_.channel_hub(), socket_open_atom::value, socket_, std::move(link));
    }
    auto req = std::make_shared<http_request>();
    req->method = e.method;
    req->path = e.path.substr(0, q);
    if (q != std::string::npos)
      req->query = e.path.substr(q + 1);
    req->body = std::move(e.body);
    req->page = e.page;
    req->client = client_;
    send_call(std::move(req),
              [e = std::move(e)](channel_session& self, http_response&& r) { self.answered(e, std::move(r)); });
  }

  // Sends `req` as a call of this socket, through the one path of every user
  // call (transport/user_call.hpp); `then(*this, answer)` runs on this socket's
  // strand if the session is still there.
  template <class Then>
  void send_call(std::shared_ptr<http_request> req, Then then) {
    auto& metrics = front_.context().metrics;
    req->cid = cid_;
    req->channel = channel_ref{front_.channel_hub(), socket_};
    auto timeout = front_.limits().request_timeout;
    req->deadline_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch() + timeout)
                         .count();
    metrics.inflight.fetch_add(1, std::memory_order_relaxed);
    call_user(front_, executor(), std::move(req), timeout,
              [weak = weak_as<channel_session>(), then = std::move(then), &metrics](http_response&& r,
                                                                         const user_handle&) mutable {
                metrics.inflight.fetch_sub(1, std::memory_order_relaxed);
                if (auto self = weak.lock())
                  then(*self, std::move(r));
              });
  }

  // The answer to call `e`: written back, and the page's next call started.
  void answered(const channel_envelope& e, http_response&& r) {
    --calls_;
    bool over_user_limit = false;
    if (!r.set_cid.empty()) {  // a login/logout over the channel: this socket's connection is the new one now
      cid_ = std::move(r.set_cid);
      over_user_limit = !front_.socket_quota().move(socket_, cid_, user_named(r.body));
    }
    if (e.path == openchannel_path && r.status == 200 && !e.page.empty()) {
      auto opened = json::parse(r.body, nullptr, false);
      auto& l = lanes_[e.page];
      l.sequential = opened.is_object() && opened.value("sequential", false);
    }
    auto frame = reply_frame(e.id, r.status, r.body, r.content_type);
    if (frame.size() > settings_.max_queued_bytes)
      frame = error_frame(e.id, 502, "the reply is larger than channel.max_queued_bytes");
    send(std::move(frame));
    if (over_user_limit)  // after the reply, which tells the client its new connection
      return refuse(too_many_for_user());
    if (!e.page.empty())
      if (auto l = lanes_.find(e.page); l != lanes_.end() && l->second.busy) {
        if (l->second.waiting.empty()) {
          l->second.busy = false;
        } else {
          auto next = std::move(l->second.waiting.front());
          l->second.waiting.pop_front();
          start(std::move(next));
        }
      }
  }

  void send(std::string frame) {
    if (closed())
      return;
    std::size_t dropped = 0;
    auto r = outbox_->offer(std::move(frame), &dropped);
    if (dropped)
      metrics_.channel.overflow_drops.fetch_add(dropped, std::memory_order_relaxed);
    if (r == channel_outbox::offer_result::overflow)
      metrics_.channel.overflow_closes.fetch_add(1, std::memory_order_relaxed);
    kick();
  }

  std::optional<ws_frame> next_frame() override {
    return outbox_->take();
  }

  void on_written() override {
    metrics_.channel.frames_out.fetch_add(1, std::memory_order_relaxed);
  }

  void on_closed() override {
    outbox_->close();
  }

  front& front_;
  const config::channel_settings& settings_;
  node_metrics& metrics_;
  std::string cid_;
  std::string client_;  // of its handshake (request::client_address())
  std::shared_ptr<channel_outbox> outbox_;
  std::uint64_t socket_ = 0;  // its number at the front's channel hub and in its socket quota
  bool registered_ = false;   // with the hub: at the first call
  bool in_quota_ = false;     // counted in the front's socket_quota (released when it goes)
  bool counted_ = false;
  std::optional<close_reason> refusal_;
  std::optional<close_reason> close_after_accept_;
  std::size_t calls_ = 0;  // in flight or waiting in a lane
  std::unordered_map<std::string, lane> lanes_;
};

}  // namespace

void start_channel_session(front_stream&& stream, http::request<http::string_body>&& upgrade, front& owner,
                           std::string cid, std::string client) {
  std::make_shared<channel_session>(std::move(stream), owner, std::move(cid), std::move(client))->run(upgrade);
}

}  // namespace troupe
