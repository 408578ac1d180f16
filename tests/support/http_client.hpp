// http_client: a blocking HTTP/1.1 keep-alive client over one TCP connection, for the
// integration tests. Every operation has a deadline (beast::tcp_stream::expires_after on
// asynchronous operations run to completion on the client's own io_context: Beast's
// timeouts do not apply to its synchronous calls). One client per thread.
//
// It keeps a cookie jar for `troupe_cid`: the value of a `Set-Cookie: troupe_cid=...`
// is stored and sent back as `Cookie: troupe_cid=...` (unless the caller passes its own
// Cookie header). It can also send raw bytes (malformed requests, oversized headers)
// and tell whether the server closed the connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/system/error_code.hpp>
#include <nlohmann/json.hpp>

namespace troupe::test {

using headers_t = std::vector<std::pair<std::string, std::string>>;
using std::chrono::milliseconds;

inline constexpr milliseconds default_timeout{10000};

struct response {
  int status = 0;
  headers_t headers;   // in wire order; names as the server spelled them
  std::string body;
  bool keep_alive = true;

  bool has(std::string_view name) const;
  std::string get(std::string_view name) const;   // first value, "" when absent
  std::vector<std::string> get_all(std::string_view name) const;
  nlohmann::json json() const;  // throws std::runtime_error naming the body when not JSON
  std::string describe() const; // "HTTP <status>\n<headers>\n<body>" for failure messages
};

enum class failure { refused, timeout, closed, other };
const char* to_string(failure f);
// What a failed connect, read or write (plain or TLS) was.
failure classify_failure(const boost::system::error_code& ec);

class transport_error : public std::runtime_error {
public:
  transport_error(failure kind, const std::string& what)
    : std::runtime_error(what), kind(kind) {}
  failure kind;
};

// The parsed `troupe_cid` Set-Cookie of a response.
struct set_cookie_info {
  std::string value;
  std::vector<std::string> attributes;  // trimmed, as sent ("Path=/", "HttpOnly", ...)
  bool has_attribute(std::string_view attr) const;  // case-insensitive, exact "k=v" or flag
};
std::optional<set_cookie_info> troupe_cid_cookie(const response& r);

class http_client {
public:
  explicit http_client(uint16_t port, std::string host = "127.0.0.1");
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;
  http_client(http_client&&) noexcept;
  http_client& operator=(http_client&&) noexcept;

  // Connects now (request() connects lazily when not connected). Throws transport_error.
  void connect(milliseconds timeout = default_timeout);
  bool connected() const;
  void close();

  response request(std::string_view method, std::string_view target, std::string body = {},
                   const headers_t& headers = {}, milliseconds timeout = default_timeout);
  response get(std::string_view target, const headers_t& headers = {},
               milliseconds timeout = default_timeout);
  response post(std::string_view target, std::string body = {}, const headers_t& headers = {},
                milliseconds timeout = default_timeout);
  response post_json(std::string_view target, const nlohmann::json& body,
                     const headers_t& headers = {}, milliseconds timeout = default_timeout);

  // Raw bytes on the connection (connecting first if needed), and reading one response.
  void send_raw(std::string_view bytes, milliseconds timeout = default_timeout);
  response read_response(milliseconds timeout = default_timeout);

  // Waits up to `timeout` for the server to close the connection (EOF or reset).
  // Returns true if it did; bytes received meanwhile are kept in received_raw().
  // After false (deadline reached) the client has closed its own side.
  bool wait_closed(milliseconds timeout);
  const std::string& received_raw() const;

  // Cookie jar (troupe_cid only).
  std::optional<std::string> cookie() const;
  void set_cookie(std::string value);
  void clear_cookie();
  void use_cookie_jar(bool on);

  uint16_t port() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

// Random URL-safe base64 text ([A-Za-z0-9_-]) of `n` characters, e.g. for user names
// and well-formed unknown connection ids.
std::string random_token(size_t n);

}  // namespace troupe::test
