#include "transport/console_session.hpp"

#include "transport/console_protocol.hpp"
#include "transport/front.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <deque>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using nlohmann::json;

namespace {

constexpr std::size_t max_client_message = 4096;
constexpr std::size_t max_queued = 4;
constexpr auto tick_period = std::chrono::seconds(1);
constexpr auto auth_deadline = std::chrono::seconds(10);
constexpr const char* evicted_reason = "too many consoles are waiting for their token";

class console_session : public std::enable_shared_from_this<console_session> {
public:
  // `counted`: authenticated by the upgrade's header, and counted in
  // front::console_opened() already; else it waits for its token, costing no slot.
  console_session(front_stream&& stream, front& owner, bool counted)
    : ws_(std::move(stream)), front_(owner), timer_(ws_.get_executor()), authed_(counted) {}
  ~console_session() {
    if (authed_)
      front_.console_closed();
    else if (waiting_)
      front_.console_authenticated_or_gone(waiting_);
  }

  void run(http::request<http::string_body>&& upgrade) {
    if (!authed_)  // too many waiting: the oldest one goes (front::console_waiting)
      waiting_ = front_.console_waiting([weak = weak_from_this(), ex = ws_.get_executor()] {
        net::post(ex, [weak] {
          if (auto self = weak.lock()) {
            self->waiting_ = 0;
            self->evicted_ = true;
            if (self->accepted_)  // else on_accept closes it, once the handshake is done
              self->refuse(evicted_reason);
          }
        });
      });
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.read_message_max(max_client_message);
    ws_.async_accept(upgrade, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  // A census answer, posted onto this session's strand.
  void on_census(std::uint16_t status, std::string body) {
    inflight_ = false;
    if (closed_)
      return;
    if (status != 200) {
      auto err = json::parse(body, nullptr, false);
      send(json{{"type", "error"}, {"status", status}, {"error", err.is_object() ? err.value("error", body) : body}});
      return;
    }
    auto now = json::parse(body, nullptr, false);
    if (now.is_discarded())
      return;
    ++seq_;
    if (want_full_ || last_.is_null()) {
      want_full_ = false;
      send(json{{"type", "full"}, {"seq", seq_}, {"data", now}});
    } else {
      send(json{{"type", "patch"}, {"seq", seq_}, {"ops", json::diff(last_, now)}});
    }
    last_ = std::move(now);
  }

private:
  void on_accept(beast::error_code ec) {
    if (ec)
      return;
    accepted_ = true;
    if (evicted_)
      return refuse(evicted_reason);
    started_ = std::chrono::steady_clock::now();
    do_read();
    do_tick();
  }

  void do_read() {
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec)
      return finish();
    auto msg = parse_console_message(beast::buffers_to_string(in_.data()));
    in_.consume(in_.size());
    if (!authed_) {
      if (msg.what != console_message::kind::token || !front_.admin_token_matches(msg.token))
        return refuse("missing or wrong admin token");
      if (waiting_) {
        front_.console_authenticated_or_gone(waiting_);
        waiting_ = 0;
      }
      if (!front_.console_opened())
        return close(websocket::close_reason(websocket::close_code::try_again_later,
                                             "too many consoles are open (limits.max_consoles)"));
      authed_ = true;
    } else if (msg.what == console_message::kind::view) {
      view_ = std::move(msg.view);
      want_full_ = true;
      query();  // answer a new view at once, not at the next tick
    }
    do_read();
  }

  void do_tick() {
    timer_.expires_after(tick_period);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_)
        return;
      if (self->front_.closing())
        return self->close(websocket::close_code::going_away);
      if (!self->authed_ && std::chrono::steady_clock::now() - self->started_ > auth_deadline)
        return self->refuse("no admin token");
      self->query();
      self->do_tick();
    });
  }

  // One census query at a time; a tick that finds one in flight (or a full
  // queue) is skipped.
  void query() {
    if (!authed_ || inflight_ || out_.size() >= max_queued)
      return;
    inflight_ = true;
    auto slot = std::make_shared<census_call>(weak_from_this(), ws_.get_executor());
    caf::anon_send(front_.bridge(), census_atom::value, view_, local_admin{std::move(slot)});
  }

  void send(json message) {
    if (out_.size() >= max_queued)
      return;
    out_.push_back(message.dump(-1, ' ', false, json::error_handler_t::replace));
    if (out_.size() == 1)
      do_write();
  }

  void do_write() {
    ws_.text(true);
    ws_.async_write(net::buffer(out_.front()),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    if (ec)
      return finish();
    out_.pop_front();
    if (!out_.empty())
      do_write();
  }

  void refuse(const char* why) {
    close(websocket::close_reason(websocket::close_code::policy_error, why));
  }

  void close(websocket::close_reason reason) {
    if (closed_)
      return;
    closed_ = true;
    timer_.cancel();
    ws_.async_close(reason, [self = shared_from_this()](beast::error_code) {});
  }

  void finish() {
    closed_ = true;
    timer_.cancel();
  }

  // The census's answer comes back through the bridge like an admin reply.
  class census_call final : public admin_slot {
  public:
    census_call(std::weak_ptr<console_session> s, net::any_io_executor ex) : session_(std::move(s)), ex_(std::move(ex)) {}
    void done(http_response&& r) override {
      answered_ = true;
      net::post(ex_, [s = session_, status = r.status, body = std::move(r.body)]() mutable {
        if (auto session = s.lock())
          session->on_census(status, std::move(body));
      });
    }
    ~census_call() override {
      if (!answered_)
        net::post(ex_, [s = session_] {
          if (auto session = s.lock())
            session->on_census(503, R"({"error":"the census did not answer"})");
        });
    }

  private:
    std::weak_ptr<console_session> session_;
    net::any_io_executor ex_;
    bool answered_ = false;
  };

  websocket::stream<front_stream> ws_;
  front& front_;
  net::steady_timer timer_;
  beast::flat_buffer in_;
  std::deque<std::string> out_;
  census_query view_ = [] {
    census_query q;
    q.limit = 50;
    q.console = true;
    return q;
  }();
  json last_;
  std::uint64_t seq_ = 0;
  bool authed_ = false;
  std::uint64_t waiting_ = 0;  // the ticket of front::console_waiting while unauthenticated
  bool accepted_ = false;      // the WebSocket handshake is done
  bool evicted_ = false;       // pushed out by newer token-less channels
  bool inflight_ = false;
  bool want_full_ = true;
  bool closed_ = false;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

void start_console_session(front_stream&& stream, http::request<http::string_body>&& upgrade, front& owner,
                           bool counted) {
  std::make_shared<console_session>(std::move(stream), owner, counted)->run(std::move(upgrade));
}

}  // namespace troupe
