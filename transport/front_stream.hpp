#pragma once
/// \file
/// The stream the front's sessions read and write: HTTP, the console's and the
/// channels' WebSockets all run on it, so each works the same over plain TCP
/// and TLS (issue 14). Which one a connection is was decided by its listener
/// at accept: `node.listen` serves TLS when `node.tls_cert`/`tls_key` are set,
/// `node.plain_listen` serves plain TCP (docs/tls.md).
///
/// It is the lowest layer itself (no next_layer()): expires_after,
/// expires_never, cancel, close and socket() act on the TCP connection under
/// the TLS layer, so Beast's timeouts bound TLS reads and writes exactly as
/// they bound plain ones. `websocket::stream<front_stream>` works over both
/// (the teardown customization points below).

#include <boost/asio/async_result.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <chrono>
#include <memory>
#include <utility>
#include <variant>

namespace troupe {

class front_stream {
public:
  using tcp_layer = boost::beast::tcp_stream;
  using tls_layer = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using executor_type = tcp_layer::executor_type;

  /// Plain TCP.
  explicit front_stream(tcp_layer&& tcp) : s_(std::in_place_index<0>, std::move(tcp)) {}

  /// TLS over `tcp` with `context` (held as long as the stream lives: a
  /// reload swaps the front's context, never this connection's).
  /// `close_timeout` bounds the TLS close (close_notify) of a WebSocket's teardown.
  front_stream(tcp_layer&& tcp, std::shared_ptr<boost::asio::ssl::context> context,
               std::chrono::milliseconds close_timeout)
    : context_(std::move(context)), close_timeout_(close_timeout),
      s_(std::in_place_index<1>, std::move(tcp), *context_) {}

  front_stream(front_stream&&) = default;
  front_stream& operator=(front_stream&&) = delete;

  bool is_tls() const noexcept { return s_.index() == 1; }
  /// The TLS layer; only when is_tls().
  tls_layer& tls() noexcept { return std::get<1>(s_); }
  /// The TCP connection (under the TLS layer, if any).
  tcp_layer& tcp() noexcept { return s_.index() == 0 ? std::get<0>(s_) : std::get<1>(s_).next_layer(); }
  std::chrono::milliseconds close_timeout() const noexcept { return close_timeout_; }

  executor_type get_executor() noexcept { return tcp().get_executor(); }
  boost::asio::ip::tcp::socket& socket() noexcept { return tcp().socket(); }
  template <class Duration>
  void expires_after(Duration d) { tcp().expires_after(d); }
  void expires_never() { tcp().expires_never(); }
  void cancel() { tcp().cancel(); }
  void close() { tcp().close(); }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return boost::asio::async_initiate<ReadToken, void(boost::system::error_code, std::size_t)>(
      [this](auto&& handler, const MutableBufferSequence& b) {
        if (is_tls())
          std::get<1>(s_).async_read_some(b, std::move(handler));
        else
          std::get<0>(s_).async_read_some(b, std::move(handler));
      },
      token, buffers);
  }

  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return boost::asio::async_initiate<WriteToken, void(boost::system::error_code, std::size_t)>(
      [this](auto&& handler, const ConstBufferSequence& b) {
        if (is_tls())
          std::get<1>(s_).async_write_some(b, std::move(handler));
        else
          std::get<0>(s_).async_write_some(b, std::move(handler));
      },
      token, buffers);
  }

private:
  std::shared_ptr<boost::asio::ssl::context> context_;  // before s_: the TLS layer refers to it
  std::chrono::milliseconds close_timeout_{0};
  std::variant<tcp_layer, tls_layer> s_;
};

// -- Beast's customization points (found by argument-dependent lookup) ------------

/// A WebSocket's timeout closes the TCP connection.
inline void beast_close_socket(front_stream& s) {
  boost::system::error_code ignored;
  s.socket().close(ignored);
}

inline void teardown(boost::beast::role_type role, front_stream& s, boost::system::error_code& ec) {
  if (s.is_tls()) {
    using boost::beast::teardown;
    teardown(role, s.tls(), ec);
  } else {
    using boost::beast::websocket::teardown;
    teardown(role, s.socket(), ec);
  }
}

/// After a WebSocket's close frames: TLS sends its close_notify (bounded by
/// the stream's close_timeout), plain TCP shuts down.
template <class TeardownHandler>
void async_teardown(boost::beast::role_type role, front_stream& s, TeardownHandler&& handler) {
  if (s.is_tls()) {
    s.expires_after(s.close_timeout());
    using boost::beast::async_teardown;
    async_teardown(role, s.tls(), std::forward<TeardownHandler>(handler));
  } else {
    using boost::beast::websocket::async_teardown;
    async_teardown(role, s.socket(), std::forward<TeardownHandler>(handler));
  }
}

}  // namespace troupe
