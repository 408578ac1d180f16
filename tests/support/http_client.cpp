#include "http_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <random>
#include <sstream>

namespace troupe::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

failure classify_failure(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout)
    return failure::timeout;
  if (ec == asio::error::connection_refused)
    return failure::refused;
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe || ec == http::error::partial_message ||
      ec == asio::error::connection_aborted || ec == asio::ssl::error::stream_truncated)
    return failure::closed;
  return failure::other;
}

const char* to_string(failure f) {
  switch (f) {
    case failure::refused: return "refused";
    case failure::timeout: return "timeout";
    case failure::closed: return "closed";
    case failure::other: return "other";
  }
  return "?";
}

// ---------------------------------------------------------------------------------
// response

bool response::has(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name))
      return true;
  return false;
}

std::string response::get(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name))
      return v;
  return {};
}

std::vector<std::string> response::get_all(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers)
    if (iequals(k, name))
      out.push_back(v);
  return out;
}

nlohmann::json response::json() const {
  try {
    return nlohmann::json::parse(body);
  } catch (const std::exception& e) {
    throw std::runtime_error("response body is not JSON (" + std::string(e.what()) +
                             "): HTTP " + std::to_string(status) + " body=[" + body + "]");
  }
}

std::string response::describe() const {
  std::ostringstream os;
  os << "HTTP " << status << "\n";
  for (const auto& [k, v] : headers)
    os << "  " << k << ": " << v << "\n";
  std::string b = body.size() > 2000 ? body.substr(0, 2000) + "[...]" : body;
  os << "  body: " << b;
  return os.str();
}

bool set_cookie_info::has_attribute(std::string_view attr) const {
  for (const auto& a : attributes) {
    if (iequals(a, attr))
      return true;
    // "Path = /" style spacing around '='.
    auto eq = a.find('=');
    auto aeq = attr.find('=');
    if (eq != std::string::npos && aeq != std::string_view::npos &&
        iequals(trim(std::string_view(a).substr(0, eq)), trim(attr.substr(0, aeq))) &&
        trim(std::string_view(a).substr(eq + 1)) == trim(attr.substr(aeq + 1)))
      return true;
  }
  return false;
}

std::optional<set_cookie_info> troupe_cid_cookie(const response& r) {
  for (const auto& sc : r.get_all("Set-Cookie")) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      size_t semi = sc.find(';', start);
      parts.push_back(trim(std::string_view(sc).substr(
          start, semi == std::string::npos ? std::string::npos : semi - start)));
      if (semi == std::string::npos)
        break;
      start = semi + 1;
    }
    if (parts.empty())
      continue;
    auto eq = parts[0].find('=');
    if (eq == std::string::npos || trim(std::string_view(parts[0]).substr(0, eq)) != "troupe_cid")
      continue;
    set_cookie_info info;
    info.value = trim(std::string_view(parts[0]).substr(eq + 1));
    info.attributes.assign(parts.begin() + 1, parts.end());
    return info;
  }
  return std::nullopt;
}

std::string random_token(size_t n) {
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> d(0, 63);
  std::string s;
  s.reserve(n);
  for (size_t i = 0; i < n; ++i)
    s.push_back(alphabet[d(rng)]);
  return s;
}

// ---------------------------------------------------------------------------------
// http_client

struct http_client::impl {
  std::string host;
  uint16_t port;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  bool connected = false;
  std::optional<std::string> cookie;
  bool jar = true;
  std::string raw;

  // Runs one asynchronous operation to completion under a deadline.
  template <class Initiate>
  beast::error_code run(Initiate&& initiate, milliseconds timeout) {
    beast::error_code result;
    bool done = false;
    stream->expires_after(timeout);
    initiate([&](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    ioc.restart();
    while (!done && ioc.run_one() > 0) {
    }
    if (!done)
      result = asio::error::operation_aborted;
    stream->expires_never();
    return result;
  }

  void drop() {
    if (stream) {
      beast::error_code ec;
      stream->socket().shutdown(tcp::socket::shutdown_both, ec);
      stream->socket().close(ec);
    }
    stream.reset();
    buffer.consume(buffer.size());
    connected = false;
  }

  [[noreturn]] void fail(const char* what, const beast::error_code& ec) {
    drop();
    failure kind = classify_failure(ec);
    throw transport_error(kind, std::string(what) + " " + host + ":" + std::to_string(port) +
                                    ": " + ec.message() + " [" + to_string(kind) + "]");
  }

  void connect(milliseconds timeout) {
    drop();
    stream.emplace(ioc);
    tcp::endpoint ep(asio::ip::make_address(host), port);
    auto ec = run([&](auto handler) { stream->async_connect(ep, handler); }, timeout);
    if (ec)
      fail("connect", ec);
    beast::error_code ignored;
    stream->socket().set_option(tcp::no_delay(true), ignored);
    connected = true;
  }

  void write_bytes(std::string_view bytes, milliseconds timeout) {
    if (!connected)
      connect(timeout);
    auto ec = run(
        [&](auto handler) {
          asio::async_write(*stream, asio::buffer(bytes.data(), bytes.size()), handler);
        },
        timeout);
    if (ec)
      fail("write", ec);
  }

  // `head`: the answer to a HEAD request, whose Content-Length announces no content.
  response read(milliseconds timeout, bool head = false) {
    if (!connected)
      throw transport_error(failure::closed, "read: not connected");
    http::response_parser<http::string_body> parser;
    parser.skip(head);
    parser.body_limit(64u << 20);
    parser.header_limit(1u << 20);
    auto ec = run([&](auto handler) { http::async_read(*stream, buffer, parser, handler); },
                  timeout);
    if (ec)
      fail("read", ec);
    auto& msg = parser.get();
    response r;
    r.status = static_cast<int>(msg.result_int());
    for (const auto& f : msg)
      r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    r.body = std::move(msg.body());
    r.keep_alive = msg.keep_alive();
    if (jar) {
      if (auto c = troupe_cid_cookie(r); c && !c->value.empty())
        cookie = c->value;
    }
    if (!r.keep_alive)
      drop();
    return r;
  }
};

http_client::http_client(uint16_t port, std::string host) : p_(std::make_unique<impl>()) {
  p_->host = std::move(host);
  p_->port = port;
}
http_client::~http_client() {
  if (p_)
    p_->drop();
}
http_client::http_client(http_client&&) noexcept = default;
http_client& http_client::operator=(http_client&&) noexcept = default;

void http_client::connect(milliseconds timeout) { p_->connect(timeout); }
bool http_client::connected() const { return p_->connected; }
void http_client::close() { p_->drop(); }
uint16_t http_client::port() const { return p_->port; }

response http_client::request(std::string_view method, std::string_view target,
                              std::string body, const headers_t& headers,
                              milliseconds timeout) {
  http::request<http::string_body> req;
  req.version(11);
  http::verb v = http::string_to_verb(beast::string_view(method.data(), method.size()));
  if (v == http::verb::unknown)
    req.method_string(beast::string_view(method.data(), method.size()));
  else
    req.method(v);
  req.target(beast::string_view(target.data(), target.size()));
  req.set(http::field::host, p_->host + ":" + std::to_string(p_->port));
  req.set(http::field::user_agent, "troupe-integration-tests");
  bool own_cookie = false, own_type = false;
  for (const auto& [k, val] : headers) {
    if (iequals(k, "Cookie"))
      own_cookie = true;
    if (iequals(k, "Content-Type"))
      own_type = true;
    req.insert(beast::string_view(k.data(), k.size()), beast::string_view(val.data(), val.size()));
  }
  if (!own_cookie && p_->jar && p_->cookie)
    req.set(http::field::cookie, "troupe_cid=" + *p_->cookie);
  if (!body.empty() && !own_type)
    req.set(http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.prepare_payload();

  if (!p_->connected)
    p_->connect(timeout);
  http::request_serializer<http::string_body> sr(req);
  auto ec = p_->run([&](auto handler) { http::async_write(*p_->stream, sr, handler); }, timeout);
  if (ec)
    p_->fail("write", ec);
  return p_->read(timeout, v == http::verb::head);
}

response http_client::get(std::string_view target, const headers_t& headers,
                          milliseconds timeout) {
  return request("GET", target, {}, headers, timeout);
}

response http_client::post(std::string_view target, std::string body, const headers_t& headers,
                           milliseconds timeout) {
  return request("POST", target, std::move(body), headers, timeout);
}

response http_client::post_json(std::string_view target, const nlohmann::json& body,
                                const headers_t& headers, milliseconds timeout) {
  return request("POST", target, body.dump(), headers, timeout);
}

void http_client::send_raw(std::string_view bytes, milliseconds timeout) {
  p_->write_bytes(bytes, timeout);
}

response http_client::read_response(milliseconds timeout) { return p_->read(timeout); }

bool http_client::wait_closed(milliseconds timeout) {
  p_->raw.clear();
  if (!p_->connected)
    return true;
  if (p_->buffer.size() > 0) {
    p_->raw.append(beast::buffers_to_string(p_->buffer.data()));
    p_->buffer.consume(p_->buffer.size());
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      p_->drop();
      return false;
    }
    std::size_t got = 0;
    beast::error_code result;
    bool done = false;
    p_->stream->expires_after(left);
    p_->stream->async_read_some(asio::buffer(buf), [&](beast::error_code ec, std::size_t n) {
      result = ec;
      got = n;
      done = true;
    });
    p_->ioc.restart();
    while (!done && p_->ioc.run_one() > 0) {
    }
    if (!done)
      result = asio::error::operation_aborted;
    if (got > 0)
      p_->raw.append(buf, got);
    if (!result)
      continue;
    failure kind = classify_failure(result);
    p_->drop();
    return kind == failure::closed;
  }
}

const std::string& http_client::received_raw() const { return p_->raw; }

std::optional<std::string> http_client::cookie() const { return p_->cookie; }
void http_client::set_cookie(std::string value) { p_->cookie = std::move(value); }
void http_client::clear_cookie() { p_->cookie.reset(); }
void http_client::use_cookie_jar(bool on) { p_->jar = on; }

}  // namespace troupe::test
