#pragma once
/// \file
/// (Internal to transport/.) The skeleton every WebSocket of the front shares
/// (the console's live channel, transport/console_session.cpp, and the page
/// channel, transport/channel_session.cpp): the upgrade's accept, a read loop
/// of whole messages (Beast's timeouts and a size limit on every read), one
/// write in flight at a time from the derived class's own bounded queue, and
/// a close that waits for the write in flight.
///
/// Beast's WebSocket templates are instantiated once, in ws_session.cpp: the
/// stream lives there (this header names no websocket::stream), and the
/// derived classes see only these calls and hooks. Every hook runs on the
/// session's strand.

#include "transport/front_stream.hpp"
#include "transport/ws_frame.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/beast/websocket/stream_base.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class ws_session : public std::enable_shared_from_this<ws_session> {
public:
  using close_reason = boost::beast::websocket::close_reason;
  using timeouts = boost::beast::websocket::stream_base::timeout;
  using upgrade_request = boost::beast::http::request<boost::beast::http::string_body>;

  /// A close frame's reason: `text` cut at the 123 bytes it holds (RFC 6455
  /// §5.5), never inside a UTF-8 character.
  static close_reason reason(boost::beast::websocket::close_code code, std::string_view text);

  ws_session(const ws_session&) = delete;
  ws_session& operator=(const ws_session&) = delete;
  virtual ~ws_session();

protected:
  explicit ws_session(front_stream&& stream);

  // -- what a derived session calls ---------------------------------------------------
  /// Answers the upgrade `upgrade` with `t` and the largest message read
  /// (past it Beast closes with 1009), its 101 carrying `headers` (a
  /// subprotocol, a cookie): on_accepted() once the handshake is done; a
  /// failed handshake ends the session silently.
  void accept(const upgrade_request& upgrade, const timeouts& t, std::size_t max_message,
              std::vector<http_header> headers = {});
  /// Reads the next whole message: on_message(), or finish() when the read
  /// fails (closed, idle past the timeout, too big, cut).
  void read_next();
  /// Writes the frame next_frame() gives, unless one is in flight or the
  /// session is closed (its completion asks for the next one: kick()); a
  /// close frame closes the session (close()).
  void write_next();
  /// Closes with `reason` (once): after the write in flight, if any. on_closed() runs now.
  void close(close_reason reason);
  /// The connection is gone: no close handshake. on_closed() runs now (once).
  void finish();

  bool accepted() const noexcept { return accepted_; }
  bool closed() const noexcept { return closed_; }
  bool writing() const noexcept { return writing_; }
  /// Whether the last message read was a text one.
  bool got_text() const noexcept { return got_text_; }
  boost::asio::any_io_executor executor() const { return executor_; }
  template <class T>
  std::shared_ptr<T> shared_as() {
    return std::static_pointer_cast<T>(shared_from_this());
  }
  template <class T>
  std::weak_ptr<T> weak_as() {
    return shared_as<T>();
  }

  // -- what a derived session provides --------------------------------------------------
  virtual void on_accepted() = 0;
  /// A whole message (text or binary: got_text()). The session reads on only when asked (read_next()).
  virtual void on_message(std::string&& message) = 0;
  /// The next frame to write, if any is queued.
  virtual std::optional<ws_frame> next_frame() = 0;
  /// A frame is out.
  virtual void on_written() {}
  /// Something may be written now: by default write_next().
  virtual void kick() { write_next(); }
  /// close() or finish(): the session is closed (its timers, its queue).
  virtual void on_closed() {}

private:
  void on_read(boost::system::error_code ec, std::size_t n);
  void on_write(boost::system::error_code ec);
  void send_close(close_reason reason);

  struct socket;
  std::unique_ptr<socket> ws_;
  boost::asio::any_io_executor executor_;
  std::string message_;  // the message being read
  std::string out_;      // the frame on the wire
  std::optional<close_reason> pending_close_;  // waits for the write in flight
  bool accepted_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool got_text_ = false;
};

}  // namespace troupe
