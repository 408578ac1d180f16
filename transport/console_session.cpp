#include "transport/console_session.hpp"

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
constexpr std::uint32_t max_rows = 200;

class console_session : public std::enable_shared_from_this<console_session> {
public:
  // Counted in front::console_opened() before it is made.
  console_session(beast::tcp_stream&& stream, front& owner)
    : ws_(std::move(stream)), front_(owner), timer_(ws_.get_executor()) {}
  ~console_session() { front_.console_closed(); }

  void run(http::request<http::string_body>&& upgrade) {
    if (auto h = upgrade.find(http::field::authorization); h != upgrade.end()) {
      std::string_view v(h->value().data(), h->value().size());
      authed_ = v.substr(0, 7) == "Bearer " && front_.admin_token_matches(v.substr(7));
    }
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
    auto msg = json::parse(beast::buffers_to_string(in_.data()), nullptr, false);
    in_.consume(in_.size());
    if (!authed_) {
      if (!msg.is_object() || !msg.contains("token") || !msg["token"].is_string()
          || !front_.admin_token_matches(msg["token"].get<std::string>()))
        return refuse("missing or wrong admin token");
      authed_ = true;
    } else if (msg.is_object() && msg.contains("view") && msg["view"].is_object()) {
      set_view(msg["view"]);
      want_full_ = true;
      query();  // answer a new view at once, not at the next tick
    }
    do_read();
  }

  void set_view(const json& v) {
    auto text = [&](const char* k) { return v.contains(k) && v[k].is_string() ? v[k].get<std::string>() : ""; };
    auto number = [&](const char* k, std::int64_t dflt) {
      return v.contains(k) && v[k].is_number_integer() ? v[k].get<std::int64_t>() : dflt;
    };
    view_ = census_query{};
    view_.kind = text("kind").empty() ? "user" : text("kind");
    view_.prefix = text("prefix");
    view_.worker = text("worker");
    view_.state = text("state");
    view_.offset = static_cast<std::uint64_t>(std::max<std::int64_t>(0, number("offset", 0)));
    view_.limit = static_cast<std::uint32_t>(std::clamp<std::int64_t>(number("limit", 50), 1, max_rows));
    view_.open = text("open");
    view_.console = true;
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

  websocket::stream<beast::tcp_stream> ws_;
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
  bool inflight_ = false;
  bool want_full_ = true;
  bool closed_ = false;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

void start_console_session(beast::tcp_stream&& stream, http::request<http::string_body>&& upgrade, front& owner) {
  std::make_shared<console_session>(std::move(stream), owner)->run(std::move(upgrade));
}

}  // namespace troupe
