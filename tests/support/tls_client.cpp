#include "tls_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <openssl/bn.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <sys/wait.h>

namespace troupe::test {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

namespace {

// Runs the io_context until `done` or the deadline; false on the deadline.
bool run_until(net::io_context& ioc, const bool& done, milliseconds timeout) {
  ioc.restart();
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < until)
    ioc.run_one_until(until);
  return done;
}

void configure(ssl::context& ctx, const tls_options& o) {
  if (!o.ca_file.empty()) {
    ctx.load_verify_file(o.ca_file);
    ctx.set_verify_mode(ssl::verify_peer);
    ctx.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
  } else {
    ctx.set_verify_mode(ssl::verify_none);
  }
  if (!o.cert_file.empty()) {
    ctx.use_certificate_chain_file(o.cert_file);
    ctx.use_private_key_file(o.key_file, ssl::context::pem);
  }
}

template <class Stream>
void tcp_connect(net::io_context& ioc, Stream& lowest, uint16_t port, milliseconds timeout) {
  beast::error_code ec;
  bool done = false;
  lowest.expires_after(timeout);
  lowest.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  if (!run_until(ioc, done, timeout) || ec)
    throw transport_error(done ? classify_failure(ec) : failure::timeout, "connect: " + ec.message());
}

}  // namespace

// -- https_client ----------------------------------------------------------------------

struct https_client::impl {
  uint16_t port;
  net::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> s;
  beast::flat_buffer buffer;
};

https_client::https_client(uint16_t port, tls_options options) : p_(std::make_unique<impl>()) {
  p_->port = port;
  configure(p_->ctx, options);
}

https_client::~https_client() = default;

bool https_client::connected() const {
  return p_->s != nullptr;
}

void https_client::close() {
  if (p_->s) {
    beast::error_code ignored;
    beast::get_lowest_layer(*p_->s).socket().close(ignored);
  }
  p_->s.reset();
  p_->buffer.clear();
}

void https_client::connect(milliseconds timeout) {
  close();
  auto s = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(p_->ioc, p_->ctx);
  tcp_connect(p_->ioc, beast::get_lowest_layer(*s), p_->port, timeout);
  beast::error_code ec;
  bool done = false;
  s->async_handshake(ssl::stream_base::client, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout) || ec)
    throw transport_error(done ? classify_failure(ec) : failure::timeout,
                          "TLS handshake: " + (done ? ec.message() : std::string("timeout")));
  beast::get_lowest_layer(*s).expires_never();
  p_->s = std::move(s);
}

response https_client::request(std::string_view method, std::string_view target, std::string body,
                               const headers_t& headers, milliseconds timeout) {
  if (!p_->s)
    connect(timeout);
  auto& s = *p_->s;
  http::request<http::string_body> req{http::string_to_verb(beast::string_view(method.data(), method.size())),
                                       beast::string_view(target.data(), target.size()), 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(p_->port));
  for (auto& [k, v] : headers)
    req.set(k, v);
  req.body() = std::move(body);
  req.prepare_payload();
  beast::error_code ec;
  bool done = false;
  beast::get_lowest_layer(s).expires_after(timeout);
  http::async_write(s, req, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout) || ec) {
    close();
    throw transport_error(done ? classify_failure(ec) : failure::timeout, "write: " + ec.message());
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  done = false;
  http::async_read(s, p_->buffer, parser, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout) || ec) {
    close();
    throw transport_error(done ? classify_failure(ec) : failure::timeout, "read: " + ec.message());
  }
  beast::get_lowest_layer(s).expires_never();
  auto res = parser.release();
  response r;
  r.status = static_cast<int>(res.result_int());
  for (auto& f : res)
    r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  r.body = std::move(res.body());
  r.keep_alive = res.keep_alive();
  if (!r.keep_alive && !keep_closing_)
    close();
  return r;
}

std::string https_client::await_tls_close(milliseconds timeout) {
  if (!p_->s)
    return "not connected";
  std::array<char, 256> sink{};
  beast::error_code ec;
  bool done = false;
  p_->s->async_read_some(net::buffer(sink), [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout)) {
    close();
    return "timeout";
  }
  close();
  if (ec == net::error::eof)  // asio's ssl stream: the peer's close_notify
    return "close_notify";
  return ec ? ec.message() : "data";
}

served_certificate https_client::served() const {
  served_certificate out;
  if (!p_->s)
    return out;
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  X509* cert = SSL_get1_peer_certificate(p_->s->native_handle());
#else
  X509* cert = SSL_get_peer_certificate(p_->s->native_handle());
#endif
  if (!cert)
    return out;
  if (char* line = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0)) {
    out.subject = line;
    OPENSSL_free(line);
  }
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      out.serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  X509_free(cert);
  return out;
}

// -- wss_client ------------------------------------------------------------------------

struct wss_client::impl {
  net::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<websocket::stream<beast::ssl_stream<beast::tcp_stream>>> ws;
  beast::flat_buffer buffer;
  bool reading = false, read_done = false;
  beast::error_code read_ec;
};

wss_client::wss_client(uint16_t port, const std::string& target, tls_options options, const headers_t& headers,
                       milliseconds timeout)
  : p_(std::make_unique<impl>()) {
  configure(p_->ctx, options);
  p_->ws = std::make_unique<websocket::stream<beast::ssl_stream<beast::tcp_stream>>>(p_->ioc, p_->ctx);
  auto& ws = *p_->ws;
  tcp_connect(p_->ioc, beast::get_lowest_layer(ws), port, timeout);
  beast::error_code ec;
  bool done = false;
  ws.next_layer().async_handshake(ssl::stream_base::client, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout) || ec)
    throw transport_error(failure::other, "TLS handshake: " + (done ? ec.message() : std::string("timeout")));
  ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
    for (auto& [name, value] : headers)
      req.set(name, value);
  }));
  done = false;
  ws.async_handshake("127.0.0.1:" + std::to_string(port), target, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout) || ec)
    throw transport_error(failure::other, "wss handshake: " + (done ? ec.message() : std::string("timeout")));
  beast::get_lowest_layer(ws).expires_never();
}

wss_client::~wss_client() = default;

void wss_client::send(const std::string& text, milliseconds timeout) {
  beast::error_code ec;
  bool done = false;
  p_->ws->text(true);
  p_->ws->async_write(net::buffer(text), [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(p_->ioc, done, timeout) || ec)
    throw transport_error(failure::other, "wss write: " + ec.message());
}

std::optional<std::string> wss_client::read(milliseconds timeout) {
  auto& p = *p_;
  if (!p.reading) {
    p.reading = true;
    p.read_done = false;
    p.ws->async_read(p.buffer, [&p](beast::error_code e, std::size_t) {
      p.read_ec = e;
      p.read_done = true;
    });
  }
  if (!run_until(p.ioc, p.read_done, timeout))
    return std::nullopt;
  p.reading = false;
  if (p.read_ec)
    return std::nullopt;
  auto text = beast::buffers_to_string(p.buffer.data());
  p.buffer.consume(p.buffer.size());
  return text;
}

// -- test_pki --------------------------------------------------------------------------

std::pair<int, std::string> run_shell(const std::string& command) {
  std::string out;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (!f)
    return {-1, "popen failed"};
  std::array<char, 4096> buf{};
  while (auto n = std::fread(buf.data(), 1, buf.size(), f))
    out.append(buf.data(), n);
  int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

void must(const std::string& command) {
  auto [code, out] = run_shell(command);
  if (code != 0)
    throw std::runtime_error("openssl failed (" + std::to_string(code) + "): " + command + "\n" + out);
}

}  // namespace

test_pki::test_pki(std::string dir) : dir_(std::move(dir)) {
  write_text(dir_ + "/pki.cnf",
             "[req]\ndistinguished_name=dn\n[dn]\n[v3]\nbasicConstraints=critical,CA:TRUE\n"
             "keyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n");
  must("openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout '" + dir_
       + "/ca.key' -out '" + dir_ + "/ca.pem' -days 3 -subj /CN=troupe-test-ca -config '" + dir_
       + "/pki.cnf' -extensions v3");
}

void test_pki::issue(const std::string& name, const std::string& cn, const std::string& serial, bool client) {
  auto base = dir_ + "/" + name;
  write_text(base + ".ext", std::string("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
                              + "extendedKeyUsage=" + (client ? "clientAuth" : "serverAuth") + "\n");
  must("openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout '" + base + ".key' -out '"
       + base + ".csr' -subj '/CN=" + cn + "' -config '" + dir_ + "/pki.cnf'");
  must("openssl x509 -req -in '" + base + ".csr' -CA '" + dir_ + "/ca.pem' -CAkey '" + dir_ + "/ca.key' -set_serial 0x"
       + serial + " -days 2 -out '" + base + ".pem' -extfile '" + base + ".ext'");
}

}  // namespace troupe::test
