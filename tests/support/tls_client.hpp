// tls_client: blocking HTTPS and WSS clients for the TLS tests (issue 14), and a
// little PKI made with the openssl CLI. Every operation has a deadline
// (asynchronous operations run to completion on the client's own io_context).
#pragma once

#include "http_client.hpp"

#include <memory>
#include <optional>
#include <string>

namespace troupe::test {

// What a client trusts and shows.
struct tls_options {
  std::string ca_file;    // PEM CA the server's certificate must chain to ("": verify nothing)
  std::string cert_file;  // client certificate ("": none)
  std::string key_file;
};

// The certificate the server presented on a connection.
struct served_certificate {
  std::string subject;  // one line, /CN=...
  std::string serial;   // hex, upper case
};

// One HTTPS keep-alive connection: TCP connect + TLS handshake, then requests.
class https_client {
public:
  https_client(uint16_t port, tls_options options);
  ~https_client();
  // Connects and handshakes now (request() does it when not connected). Throws transport_error.
  void connect(milliseconds timeout = default_timeout);
  bool connected() const;
  void close();
  response request(std::string_view method, std::string_view target, std::string body = {},
                   const headers_t& headers = {}, milliseconds timeout = default_timeout);
  response get(std::string_view target, const headers_t& headers = {}, milliseconds timeout = default_timeout) {
    return request("GET", target, {}, headers, timeout);
  }
  response post(std::string_view target, std::string body = {}, const headers_t& headers = {},
                milliseconds timeout = default_timeout) {
    return request("POST", target, std::move(body), headers, timeout);
  }
  // After a reply with Connection: close (the connection kept open for this): waits for
  // the server's TLS close. "close_notify" for a clean TLS close, "timeout", or the error.
  std::string await_tls_close(milliseconds timeout);
  // The server's certificate on this connection (after connect()).
  served_certificate served() const;
  // true: a reply with Connection: close leaves the connection open (for await_tls_close).
  void keep_closing_connections(bool on) { keep_closing_ = on; }

private:
  struct impl;
  std::unique_ptr<impl> p_;
  bool keep_closing_ = false;
};

// A WebSocket over TLS (the console's live channel, wss://).
class wss_client {
public:
  wss_client(uint16_t port, const std::string& target, tls_options options, const headers_t& headers = {},
             milliseconds timeout = default_timeout);
  ~wss_client();
  void send(const std::string& text, milliseconds timeout = default_timeout);
  // The next message, or nullopt when the socket closed or nothing came within `timeout`.
  std::optional<std::string> read(milliseconds timeout = default_timeout);

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

// Certificates made by the openssl CLI in `dir`: a CA, and server/client pairs it signs.
class test_pki {
public:
  explicit test_pki(std::string dir);
  // The CA (made at construction): <dir>/ca.pem (and ca.key).
  std::string ca() const { return dir_ + "/ca.pem"; }
  // A certificate for CN=`cn` with serial `serial` (hex) signed by the CA (or
  // self-signed when `self_signed`), for 127.0.0.1; writes <dir>/<name>.pem and
  // <name>.key. Throws std::runtime_error with openssl's output on failure.
  void issue(const std::string& name, const std::string& cn, const std::string& serial, bool client = false);
  std::string cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }
  const std::string& dir() const { return dir_; }

private:
  std::string dir_;
};

// Runs a shell command; its exit code and combined output.
std::pair<int, std::string> run_shell(const std::string& command);

}  // namespace troupe::test
