// ws_client: a blocking WebSocket client for the integration tests (the console's
// live channel). Every operation has a deadline: asynchronous Beast operations run to
// completion on the client's own io_context, bounded by run_for.
#pragma once

#include "http_client.hpp"

#include <memory>
#include <optional>
#include <string>

namespace troupe::test {

class ws_client {
public:
  // Connects to 127.0.0.1:port and upgrades `target` (with extra request headers).
  // Throws transport_error when the connection or the upgrade fails (an
  // upgrade answered with an HTTP status: the message names it, "status 400").
  ws_client(uint16_t port, const std::string& target, const headers_t& headers = {},
            milliseconds timeout = default_timeout);
  ~ws_client();

  void send(const std::string& text, milliseconds timeout = default_timeout);
  void send_binary(const std::string& bytes, milliseconds timeout = default_timeout);
  // Whether the last message read() returned was a binary one.
  bool last_binary() const;
  // A header of the handshake's answer (the 101), "" when absent.
  std::string handshake_header(const std::string& name) const;
  // Sends a close frame with `code` and waits (up to `timeout`) for the server's.
  void close(int code = 1000, milliseconds timeout = default_timeout);
  // The next message, or nullopt when the server closed the socket (see close_code)
  // or nothing came within `timeout` (the read stays pending: the next call goes on
  // waiting for the same message).
  std::optional<std::string> read(milliseconds timeout = default_timeout);
  // The close code the server sent (0 when none), and its reason.
  int close_code() const;
  std::string close_reason() const;
  // What ended the last read that failed ("" when none), for diagnostics.
  std::string error_text() const;
  // False once the socket is closed (a read saw the close, an error or EOF).
  bool open() const;
  // Shrinks the socket's receive buffer (a slow reader's small TCP window).
  void set_receive_buffer(int bytes);

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace troupe::test
