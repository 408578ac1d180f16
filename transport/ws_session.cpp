#include "transport/ws_session.hpp"

#include "registry/url.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <array>

namespace troupe {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;

struct ws_session::socket {
  explicit socket(front_stream&& s) : ws(std::move(s)) {}
  websocket::stream<front_stream> ws;
  // A message is read in chunks into message_: a read waiting on an idle
  // socket holds only this small chunk (a dynamic buffer would be prepared at
  // ~1.5 KB and held for as long as the socket is silent). Beast still bounds
  // the whole message (read_message_max: 1009 past it).
  std::array<char, 256> chunk;
};

ws_session::close_reason ws_session::reason(websocket::close_code code, std::string_view text) {
  text = registry::utf8_prefix(text, 123);
  return close_reason(code, beast::string_view(text.data(), text.size()));
}

ws_session::ws_session(front_stream&& stream)
  : ws_(std::make_unique<socket>(std::move(stream))), executor_(ws_->ws.get_executor()) {}

ws_session::~ws_session() = default;

void ws_session::accept(const upgrade_request& upgrade, const timeouts& t, std::size_t max_message,
                        std::vector<http_header> headers) {
  beast::get_lowest_layer(ws_->ws).expires_never();
  ws_->ws.set_option(t);
  ws_->ws.read_message_max(max_message);
  if (!headers.empty())
    ws_->ws.set_option(websocket::stream_base::decorator([headers = std::move(headers)](websocket::response_type& res) {
      for (auto& h : headers)
        res.insert(h.name, h.value);
    }));
  ws_->ws.async_accept(upgrade, [self = shared_from_this()](beast::error_code ec) {
    if (ec)
      return;
    self->accepted_ = true;
    self->on_accepted();
  });
}

void ws_session::read_next() {
  ws_->ws.async_read_some(net::buffer(ws_->chunk), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    self->on_read(ec, n);
  });
}

void ws_session::on_read(beast::error_code ec, std::size_t n) {
  if (ec)  // closed, idle past the timeout, too big (Beast sent 1009), or cut
    return finish();
  message_.append(ws_->chunk.data(), n);
  if (!ws_->ws.is_message_done())
    return read_next();
  got_text_ = ws_->ws.got_text();
  auto message = std::move(message_);
  std::string().swap(message_);  // an idle socket keeps no message buffer
  on_message(std::move(message));
}

void ws_session::write_next() {
  if (closed_ || writing_)
    return;
  auto next = next_frame();
  if (!next)
    return;
  if (next->kind == frame_kind::close)
    return close(close_reason(static_cast<websocket::close_code>(next->close_code), beast::string_view(next->data.data(), next->data.size())));
  out_ = std::move(next->data);
  writing_ = true;
  ws_->ws.text(next->kind == frame_kind::text);
  ws_->ws.async_write(net::buffer(out_),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
}

void ws_session::on_write(beast::error_code ec) {
  writing_ = false;
  if (ec)
    return finish();
  std::string().swap(out_);  // an idle socket keeps no buffer
  on_written();
  if (pending_close_) {
    auto reason = std::move(*pending_close_);
    pending_close_.reset();
    return send_close(std::move(reason));
  }
  kick();
}

void ws_session::close(close_reason reason) {
  if (closed_)
    return;
  closed_ = true;
  on_closed();
  if (writing_) {  // one write at a time: the close goes after it
    pending_close_ = std::move(reason);
    return;
  }
  send_close(std::move(reason));
}

void ws_session::send_close(close_reason reason) {
  ws_->ws.async_close(reason, [self = shared_from_this()](beast::error_code) {});
}

void ws_session::finish() {
  if (closed_)
    return;
  closed_ = true;
  on_closed();
}

}  // namespace troupe
