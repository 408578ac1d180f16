#include "transport/console_session.hpp"

#include "transport/console_protocol.hpp"
#include "transport/front.hpp"

#include "transport/strand_link.hpp"
#include "transport/ws_session.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
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

class console_session final : public ws_session {
public:
  // `counted`: authenticated by the upgrade's header, and counted in
  // front::console_opened() already; else it waits for its token, costing no slot.
  console_session(front_stream&& stream, front& owner, bool counted)
    : ws_session(std::move(stream)), front_(owner), timer_(executor()), authed_(counted) {}
  ~console_session() override {
    if (authed_)
      front_.console_closed();
    else if (waiting_)
      front_.console_authenticated_or_gone(waiting_);
  }

  void run(const upgrade_request& upgrade) {
    if (!authed_)  // too many waiting: the oldest one goes (front::console_waiting)
      waiting_ = front_.console_waiting([weak = weak_as<console_session>(), ex = executor()] {
        net::post(ex, [weak] {
          if (auto self = weak.lock()) {
            self->waiting_ = 0;
            self->evicted_ = true;
            if (self->accepted())  // else on_accepted closes it, once the handshake is done
              self->refuse(evicted_reason);
          }
        });
      });
    accept(upgrade, timeouts::suggested(beast::role_type::server), max_client_message);
  }

  // A census answer, posted onto this session's strand.
  void on_census(std::uint16_t status, std::string body) {
    inflight_ = false;
    if (closed())
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
  void on_accepted() override {
    if (evicted_)
      return refuse(evicted_reason);
    started_ = std::chrono::steady_clock::now();
    read_next();
    do_tick();
  }

  void on_message(std::string&& text) override {
    auto msg = parse_console_message(text);
    if (!authed_) {
      if (msg.what != console_message::kind::token || !front_.admin_token_matches(msg.token))
        return refuse("missing or wrong admin token");
      if (waiting_) {
        front_.console_authenticated_or_gone(waiting_);
        waiting_ = 0;
      }
      if (!front_.console_opened())
        return close(close_reason(websocket::close_code::try_again_later,
                                  "too many consoles are open (limits.max_consoles)"));
      authed_ = true;
    } else if (msg.what == console_message::kind::view) {
      view_ = std::move(msg.view);
      want_full_ = true;
      query();  // answer a new view at once, not at the next tick
    }
    read_next();
  }

  void do_tick() {
    timer_.expires_after(tick_period);
    timer_.async_wait([self = shared_as<console_session>()](boost::system::error_code ec) {
      if (ec || self->closed())
        return;
      if (self->front_.closing())
        return self->close(websocket::close_code::going_away);
      if (!self->authed_ && std::chrono::steady_clock::now() - self->started_ > auth_deadline)
        return self->refuse("no admin token");
      self->query();
      self->do_tick();
    });
  }

  // Frames queued and on the wire: at most max_queued.
  std::size_t backlog() const noexcept { return queued_.size() + (writing() ? 1 : 0); }

  // One census query at a time; a tick that finds one in flight (or a full
  // queue) is skipped.
  void query() {
    if (!authed_ || inflight_ || backlog() >= max_queued)
      return;
    inflight_ = true;
    auto slot = std::make_shared<census_call>(weak_as<console_session>(), executor());
    caf::anon_send(front_.bridge(), census_atom::value, view_, local_admin{std::move(slot)});
  }

  void send(json message) {
    if (backlog() >= max_queued)
      return;
    queued_.push_back(message.dump(-1, ' ', false, json::error_handler_t::replace));
    write_next();
  }

  std::optional<ws_frame> next_frame() override {
    if (queued_.empty())
      return std::nullopt;
    auto next = std::move(queued_.front());
    queued_.pop_front();
    return next;
  }

  void refuse(const char* why) {
    close(close_reason(websocket::close_code::policy_error, why));
  }

  void on_closed() override {
    timer_.cancel();
  }

  // The census's answer comes back through the bridge like an admin reply.
  class census_call final : public admin_slot, strand_link<console_session, bool> {
  public:
    using strand_link::strand_link;
    void done(http_response&& r) override {
      post([status = r.status, body = std::move(r.body)](console_session& s, bool) mutable {
        s.on_census(status, std::move(body));
      });
    }
    ~census_call() override {
      if (!answered())
        post([](console_session& s, bool) { s.on_census(503, R"({"error":"the census did not answer"})"); });
    }
  };

  front& front_;
  net::steady_timer timer_;
  std::deque<std::string> queued_;  // waiting for the write in flight
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
  bool evicted_ = false;       // pushed out by newer token-less channels
  bool inflight_ = false;
  bool want_full_ = true;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

void start_console_session(front_stream&& stream, http::request<http::string_body>&& upgrade, front& owner,
                           bool counted) {
  std::make_shared<console_session>(std::move(stream), owner, counted)->run(upgrade);
}

}  // namespace troupe
