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

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>
#include <variant>

namespace troupe {

/// The completion handler of one read or write of a front_stream, its type
/// erased: the TCP and TLS layers' operations are then compiled once, in
/// transport/front_stream.cpp, instead of once per Beast operation that reads
/// or writes and once more for TLS (a quarter of the front's compile time,
/// docs/building.md). It keeps what Asio asks of the handler it wraps: its
/// associated executor (its io thread's) and whether it is a continuation.
/// The cost is one allocation per read or write.
class io_handler {
public:
  using executor_type = boost::asio::any_io_executor;

  /// `fallback`: the executor when the handler has none of its own (the stream's).
  /// The executor is kept untracked: Beast's and Asio's composed operations hand
  /// their handlers a work-tracked copy of the stream's executor, which compares
  /// unequal to the socket's own, and Asio then dispatches every completion
  /// through the polymorphic executor (an allocation each) instead of calling it
  /// (the pending operation keeps the io_context's work count either way).
  template <class Handler>
  io_handler(Handler&& handler, const executor_type& fallback)
    : executor_(boost::asio::prefer(boost::asio::get_associated_executor(handler, fallback),
                                    boost::asio::execution::outstanding_work.untracked)),
      continuation_(boost_asio_handler_cont_helpers::is_continuation(handler)),
      call_(new holder<std::decay_t<Handler>>(std::forward<Handler>(handler))) {}

  executor_type get_executor() const noexcept { return executor_; }

  /// Runs the handler once; its memory is freed before (Asio's rule for handlers).
  void operator()(boost::system::error_code ec, std::size_t bytes) { call_.release()->invoke(ec, bytes); }

  friend bool asio_handler_is_continuation(io_handler* h) { return h->continuation_; }

private:
  struct callable {
    virtual ~callable() = default;
    virtual void invoke(boost::system::error_code ec, std::size_t bytes) = 0;
  };
  template <class Handler>
  struct holder final : callable {
    explicit holder(Handler&& h) : handler(std::move(h)) {}
    explicit holder(const Handler& h) : handler(h) {}
    void invoke(boost::system::error_code ec, std::size_t bytes) override {
      Handler h(std::move(handler));
      delete this;
      h(ec, bytes);
    }
    Handler handler;
  };

  executor_type executor_;
  bool continuation_;
  std::unique_ptr<callable> call_;
};

/// What one write of a front_stream hands its layer: the first io_buffers::capacity
/// non-empty buffers of the sequence (a write_some may write less than it is
/// given; Beast's messages are a handful of buffers, so a reply stays one writev).
struct io_buffers {
  static constexpr std::size_t capacity = 16;
  std::array<boost::asio::const_buffer, capacity> items;
  std::size_t count = 0;

  template <class ConstBufferSequence>
  explicit io_buffers(const ConstBufferSequence& buffers) {
    const auto end = boost::asio::buffer_sequence_end(buffers);
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != end && count < capacity; ++it) {
      boost::asio::const_buffer b(*it);
      if (b.size() > 0)
        items[count++] = b;
    }
  }
  const boost::asio::const_buffer* begin() const noexcept { return items.data(); }
  const boost::asio::const_buffer* end() const noexcept { return items.data() + count; }
};

/// The first non-empty buffer of a sequence (a read_some may read less than it is given).
template <class MutableBufferSequence>
boost::asio::mutable_buffer first_buffer(const MutableBufferSequence& buffers) {
  const auto end = boost::asio::buffer_sequence_end(buffers);
  for (auto it = boost::asio::buffer_sequence_begin(buffers); it != end; ++it) {
    boost::asio::mutable_buffer b(*it);
    if (b.size() > 0)
      return b;
  }
  return {};
}

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
        read_some(first_buffer(b), io_handler(std::move(handler), get_executor()));
      },
      token, buffers);
  }

  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return boost::asio::async_initiate<WriteToken, void(boost::system::error_code, std::size_t)>(
      [this](auto&& handler, const ConstBufferSequence& b) {
        write_some(io_buffers(b), io_handler(std::move(handler), get_executor()));
      },
      token, buffers);
  }

private:
  // The one instantiation of each layer's read and write (transport/front_stream.cpp).
  void read_some(boost::asio::mutable_buffer buffer, io_handler handler);
  void write_some(const io_buffers& buffers, io_handler handler);

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
