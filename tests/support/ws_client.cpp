#include "ws_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace troupe::test {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct ws_client::impl {
  net::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
  int close_code = 0;
  std::string close_reason;
  bool failed = false;
  bool last_binary = false;
  websocket::response_type handshake;
  // A read that timed out stays pending: the next read() waits for it.
  bool reading = false;
  bool read_done = false;
  beast::error_code read_ec;

  // Runs the io_context until `done` or the deadline; false on the deadline.
  bool run(const bool& done, milliseconds timeout) {
    ioc.restart();
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!done && std::chrono::steady_clock::now() < until)
      ioc.run_one_until(until);
    return done;
  }
};

ws_client::ws_client(uint16_t port, const std::string& target, const headers_t& headers, milliseconds timeout)
  : p_(std::make_unique<impl>()) {
  beast::error_code ec;
  beast::get_lowest_layer(p_->ws).expires_after(timeout);
  bool done = false;
  beast::get_lowest_layer(p_->ws).async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                                                [&](beast::error_code e) {
                                                  ec = e;
                                                  done = true;
                                                });
  if (!p_->run(done, timeout) || ec)
    throw transport_error(failure::refused, "ws connect: " + ec.message());
  p_->ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
    for (auto& [name, value] : headers)
      req.set(name, value);
  }));
  done = false;
  p_->ws.async_handshake(p_->handshake, "127.0.0.1:" + std::to_string(port), target, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  if (!p_->run(done, timeout) || ec)
    throw transport_error(failure::other, "ws handshake: " + (done ? ec.message() : std::string("timeout")) +
                                            (done ? ", status " + std::to_string(p_->handshake.result_int()) + " " +
                                                      p_->handshake.body()
                                                  : std::string()));
  beast::get_lowest_layer(p_->ws).expires_never();
}

ws_client::~ws_client() = default;

void ws_client::send(const std::string& text, milliseconds timeout) {
  beast::error_code ec;
  bool done = false;
  p_->ws.text(true);
  p_->ws.async_write(net::buffer(text), [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!p_->run(done, timeout) || ec)
    throw transport_error(failure::other, "ws write: " + ec.message());
}

void ws_client::send_binary(const std::string& bytes, milliseconds timeout) {
  beast::error_code ec;
  bool done = false;
  p_->ws.binary(true);
  p_->ws.async_write(net::buffer(bytes), [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!p_->run(done, timeout) || ec)
    throw transport_error(failure::other, "ws write: " + ec.message());
}

bool ws_client::last_binary() const {
  return p_->last_binary;
}

std::string ws_client::handshake_header(const std::string& name) const {
  auto it = p_->handshake.find(name);
  return it == p_->handshake.end() ? std::string() : std::string(it->value());
}

void ws_client::close(int code, milliseconds timeout) {
  beast::error_code ec;
  bool done = false;
  p_->ws.async_close(websocket::close_reason(static_cast<websocket::close_code>(code)), [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  p_->run(done, timeout);
}

std::optional<std::string> ws_client::read(milliseconds timeout) {
  auto& p = *p_;
  if (!p.reading) {
    p.reading = true;
    p.read_done = false;
    p.ws.async_read(p.buffer, [&p](beast::error_code e, std::size_t) {
      p.read_ec = e;
      p.read_done = true;
    });
  }
  if (!p.run(p.read_done, timeout))
    return std::nullopt;  // still pending
  p.reading = false;
  if (p.read_ec) {
    p.failed = true;
    // A close frame was read: its code, even when the teardown after it failed
    // (the server may have gone first: then the error is not `closed`).
    if (p.read_ec == websocket::error::closed || p.ws.reason().code != websocket::close_code::none) {
      p.close_code = p.ws.reason().code;
      p.close_reason = std::string(p.ws.reason().reason.c_str());
    }
    return std::nullopt;
  }
  p.last_binary = p.ws.got_binary();
  auto text = beast::buffers_to_string(p.buffer.data());
  p.buffer.consume(p.buffer.size());
  return text;
}

int ws_client::close_code() const {
  return p_->close_code;
}

std::string ws_client::error_text() const {
  return p_->failed ? p_->read_ec.message() : std::string();
}

std::string ws_client::close_reason() const {
  return p_->close_reason;
}

bool ws_client::open() const {
  return !p_->failed && p_->ws.is_open();
}

void ws_client::set_receive_buffer(int bytes) {
  beast::get_lowest_layer(p_->ws).socket().set_option(net::socket_base::receive_buffer_size(bytes));
}

}  // namespace troupe::test
