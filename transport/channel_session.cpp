#include "transport/channel_session.hpp"

#include "actors/node_context.hpp"
#include "transport/channel_actor.hpp"
#include "transport/channel_protocol.hpp"
#include "transport/front.hpp"
#include "transport/user_call.hpp"

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <caf/all.hpp>

#include <array>
#include <list>
#include <unordered_map>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using nlohmann::json;

namespace {

channel_outbox::limits outbox_limits(const config::channel_settings& c) {
  channel_outbox::limits l;
  l.max_frames = c.max_queued_frames;
  l.max_bytes = c.max_queued_bytes;
  l.overflow = c.overflow == "drop_oldest" ? channel_outbox::policy::drop_oldest : channel_outbox::policy::close;
  return l;
}

constexpr const char* openchannel_path = "/_troupe/openchannel";

class channel_session : public std::enable_shared_from_this<channel_session> {
public:
  channel_session(front_stream&& stream, front& owner, std::string cid)
    : ws_(std::move(stream)),
      front_(owner),
      settings_(owner.context().recipe.channel),
      metrics_(owner.context().metrics),
      cid_(std::move(cid)),
      outbox_(std::make_shared<channel_outbox>(outbox_limits(settings_))) {}

  ~channel_session() {
    outbox_->close();
    if (socket_)  // the hub tells the users whose pages were bound here
      caf::anon_send(front_.channel_hub(), socket_closed_atom::value, socket_);
    if (counted_)
      metrics_.channel.sockets.fetch_sub(1, std::memory_order_relaxed);
  }

  void run(http::request<http::string_body>&& upgrade) {
    if (cid_.empty()) {
      refusal_ = websocket::close_reason(websocket::close_code::policy_error,
                                         "no valid troupe_cid cookie: make an HTTP request first to get one");
    } else if (static_cast<std::uint64_t>(metrics_.channel.sockets.fetch_add(1, std::memory_order_relaxed))
               >= settings_.max_sockets) {
      metrics_.channel.sockets.fetch_sub(1, std::memory_order_relaxed);
      refusal_ = websocket::close_reason(websocket::close_code::try_again_later,
                                         "too many open channels on this node (channel.max_sockets)");
    } else {
      counted_ = true;
    }
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = front_.limits().read_timeout;
    t.idle_timeout = node_context::timer_millis(settings_.idle_timeout_seconds);
    t.keep_alive_pings = true;  // a ping at half the idle time: a silent but live client stays
    ws_.set_option(t);
    ws_.read_message_max(settings_.max_frame_bytes);  // past it Beast closes with 1009 (message too big)
    ws_.async_accept(upgrade, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  // Posted by the socket actor (or by this session) when there is something to write.
  void kick() {
    if (closed_)
      return;
    if (outbox_->overflowed())
      return close(websocket::close_reason(websocket::close_code::try_again_later,
                                           "the outgoing queue is full (channel.overflow = close)"));
    if (writing_now_)
      return;
    auto next = outbox_->take();
    if (!next)
      return;
    writing_ = std::move(*next);
    writing_now_ = true;
    ws_.text(true);
    ws_.async_write(net::buffer(writing_),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
  }

private:
  // One page of this socket that opened its channel (calls of a sequential
  // page wait here, in order, while one of them is served).
  struct lane {
    bool sequential = false;
    bool busy = false;
    std::list<channel_envelope> waiting;  // a list: an empty deque costs ~600 bytes
  };

  void on_accept(beast::error_code ec) {
    if (ec)
      return;
    if (refusal_) {
      metrics_.channel.sockets_refused.fetch_add(1, std::memory_order_relaxed);
      return close(*refusal_);
    }
    do_read();
  }

  // A message is read in chunks into `message_`: a read waiting on an idle
  // socket holds only the session's small chunk (a dynamic buffer would be
  // prepared at ~1.5 KB and held for as long as the socket is silent). Beast
  // still bounds the whole message (read_message_max: 1009 past it).
  void do_read() {
    ws_.async_read_some(net::buffer(chunk_),
                        [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(beast::error_code ec, std::size_t n) {
    if (ec)  // closed, idle past channel.idle_timeout_seconds, too big (Beast sent 1009), or cut
      return finish();
    message_.append(chunk_.data(), n);
    if (!ws_.is_message_done())
      return do_read();
    metrics_.channel.frames_in.fetch_add(1, std::memory_order_relaxed);
    auto text = std::move(message_);
    std::string().swap(message_);  // an idle socket keeps no message buffer
    if (!ws_.got_text()) {
      bad_frame(nullptr, "binary frames are not understood: send a JSON envelope as text");
      return do_read();
    }
    auto parsed = parse_envelope(text);
    if (auto* err = std::get_if<envelope_error>(&parsed))
      bad_frame(err->id, err->text);
    else
      accept(std::move(std::get<channel_envelope>(parsed)));
    if (!closed_)
      do_read();
  }

  void bad_frame(const json& id, const std::string& why) {
    metrics_.channel.bad_frames.fetch_add(1, std::memory_order_relaxed);
    send(error_frame(id, 400, why));
  }

  void accept(channel_envelope&& e) {
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

  void start(channel_envelope&& e) {
    auto& ctx = front_.context();
    if (front_.closing())
      return answered(e, error_response(503, "the node is shutting down, retry", 1));
    if (static_cast<std::uint64_t>(ctx.metrics.inflight.load(std::memory_order_relaxed)) >= front_.limits().max_inflight)
      return answered(e, error_response(503, "the node is at its in-flight request limit", 1));
    if (ctx.serving && !ctx.serving->may_serve())
      return answered(e, error_response(503, "this node is not serving: it is not in contact with the cluster's "
                                             "majority", 1));
    if (!socket_) {  // registered with the hub at the first call: a socket that only listens costs it nothing
      auto link = std::make_shared<channel_link>();
      link->outbox = outbox_;
      link->wake = [weak = weak_from_this(), ex = ws_.get_executor()] {
        net::post(ex, [weak] {
          if (auto self = weak.lock())
            self->kick();
        });
      };
      socket_ = front_.next_channel_socket();
      caf::anon_send(front_.channel_hub(), socket_open_atom::value, socket_, std::move(link));
    }
    auto req = std::make_shared<http_request>();
    req->method = e.method;
    auto q = e.path.find('?');
    req->path = e.path.substr(0, q);
    if (q != std::string::npos)
      req->query = e.path.substr(q + 1);
    req->body = std::move(e.body);
    req->cid = cid_;
    req->page = e.page;
    req->channel = channel_ref{caf::actor_cast<caf::actor>(front_.channel_hub()), socket_};
    auto timeout = front_.limits().request_timeout;
    req->deadline_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch() + timeout)
                         .count();
    ctx.metrics.inflight.fetch_add(1, std::memory_order_relaxed);
    call_user(front_, ws_.get_executor(), std::move(req), timeout,
              [weak = weak_from_this(), e = std::move(e), &metrics = ctx.metrics](http_response&& r,
                                                                                   const caf::actor&) mutable {
                metrics.inflight.fetch_sub(1, std::memory_order_relaxed);
                if (auto self = weak.lock())
                  self->answered(e, std::move(r));
              });
  }

  // The answer to call `e`: written back, and the page's next call started.
  void answered(const channel_envelope& e, http_response&& r) {
    --calls_;
    if (!r.set_cid.empty())  // a login/logout over the channel: this socket's connection is the new one now
      cid_ = std::move(r.set_cid);
    if (e.path == openchannel_path && r.status == 200 && !e.page.empty()) {
      auto opened = json::parse(r.body, nullptr, false);
      auto& l = lanes_[e.page];
      l.sequential = opened.is_object() && opened.value("sequential", false);
    }
    auto frame = reply_frame(e.id, r.status, r.body, r.content_type);
    if (frame.size() > settings_.max_queued_bytes)
      frame = error_frame(e.id, 502, "the reply is larger than channel.max_queued_bytes");
    send(std::move(frame));
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
    if (closed_)
      return;
    std::size_t dropped = 0;
    auto r = outbox_->offer(std::move(frame), &dropped);
    if (dropped)
      metrics_.channel.overflow_drops.fetch_add(dropped, std::memory_order_relaxed);
    if (r == channel_outbox::offer_result::overflow)
      metrics_.channel.overflow_closes.fetch_add(1, std::memory_order_relaxed);
    kick();
  }

  void on_write(beast::error_code ec) {
    writing_now_ = false;
    if (ec)
      return finish();
    metrics_.channel.frames_out.fetch_add(1, std::memory_order_relaxed);
    std::string().swap(writing_);  // an idle socket keeps no buffer
    if (pending_close_) {
      auto reason = std::move(*pending_close_);
      pending_close_.reset();
      closed_ = false;
      return close(std::move(reason));
    }
    kick();
  }

  void close(websocket::close_reason reason) {
    if (closed_)
      return;
    closed_ = true;
    outbox_->close();
    if (writing_now_) {  // one write at a time: the close goes after it
      pending_close_ = std::move(reason);
      return;
    }
    ws_.async_close(reason, [self = shared_from_this()](beast::error_code) {});
  }

  void finish() {
    closed_ = true;
    outbox_->close();
  }

  websocket::stream<front_stream> ws_;
  front& front_;
  const config::channel_settings& settings_;
  node_metrics& metrics_;
  std::string cid_;
  std::shared_ptr<channel_outbox> outbox_;
  std::uint64_t socket_ = 0;  // its number at the front's channel hub; 0: not registered yet
  std::array<char, 256> chunk_;
  std::string message_;
  std::string writing_;
  bool writing_now_ = false;
  bool closed_ = false;
  bool counted_ = false;
  std::optional<websocket::close_reason> refusal_;
  std::optional<websocket::close_reason> pending_close_;
  std::size_t calls_ = 0;  // in flight or waiting in a lane
  std::unordered_map<std::string, lane> lanes_;
};

}  // namespace

void start_channel_session(front_stream&& stream, http::request<http::string_body>&& upgrade, front& owner,
                           std::string cid) {
  std::make_shared<channel_session>(std::move(stream), owner, std::move(cid))->run(std::move(upgrade));
}

}  // namespace troupe
