#include "transport/tls_credentials.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace troupe {

namespace ssl = boost::asio::ssl;

namespace {

// The whole file, or why not ("node.tls_cert: cannot read /x: No such file or directory").
std::variant<std::string, std::string> read_file(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::variant<std::string, std::string>(std::in_place_index<1>,
                                                  key + ": cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return std::variant<std::string, std::string>(std::in_place_index<0>, text.str());
}

std::string openssl_reason(const boost::system::error_code& ec) {
  std::string why = ec.message();
  ERR_clear_error();
  return why;
}

tls_identity identity_of(SSL_CTX* ctx) {
  tls_identity id;
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (!cert)
    return id;
  if (char* line = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0)) {
    id.subject = line;
    OPENSSL_free(line);
  }
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      id.serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1)
    id.not_after_unix = static_cast<std::int64_t>(timegm(&tm));
  return id;
}

}  // namespace

std::variant<tls_loaded, std::string> load_tls(const tls_paths& paths) {
  using result = std::variant<tls_loaded, std::string>;
  auto fail = [](std::string why) { return result(std::in_place_index<1>, std::move(why)); };
  auto cert = read_file("node.tls_cert", paths.cert);
  if (cert.index() == 1)
    return fail(std::get<1>(cert));
  auto key = read_file("node.tls_key", paths.key);
  if (key.index() == 1)
    return fail(std::get<1>(key));

  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  // TLS 1.2 and 1.3 only; no renegotiation (a client-driven CPU sink), no
  // compression (CRIME); the server's cipher order wins.
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3
                   | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::no_compression
                   | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // An idle connection (a keep-alive, an open channel) gives its read and write
  // buffers back (~34 KiB each otherwise): many idle sockets stay small.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  // TLS 1.2: ephemeral ECDH key exchange (forward secrecy) with AEAD ciphers
  // only. TLS 1.3's own suites are all of that kind: OpenSSL's defaults stay.
  if (SSL_CTX_set_cipher_list(native, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
    ERR_clear_error();
    return fail("TLS: no usable TLS 1.2 cipher in this OpenSSL");
  }
  // An encrypted key is refused, never prompted for on a terminal.
  ctx->set_password_callback([](std::size_t, ssl::context::password_purpose) { return std::string(); });

  boost::system::error_code ec;
  const auto& cert_pem = std::get<0>(cert);
  ctx->use_certificate_chain(boost::asio::buffer(cert_pem), ec);
  if (ec)
    return fail("node.tls_cert: " + paths.cert + " is not a PEM certificate chain: " + openssl_reason(ec));
  const auto& key_pem = std::get<0>(key);
  ctx->use_private_key(boost::asio::buffer(key_pem), ssl::context::pem, ec);
  if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    ERR_clear_error();  // OpenSSL checks the pair as it takes the key
    return fail("node.tls_key: " + paths.key + " does not match the certificate of node.tls_cert (" + paths.cert + ")");
  }
  if (ec)
    return fail("node.tls_key: " + paths.key + " is not an unencrypted PEM private key: " + openssl_reason(ec));
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return fail("node.tls_key: " + paths.key + " does not match the certificate of node.tls_cert (" + paths.cert + ")");
  }
  if (!paths.client_ca.empty()) {
    auto ca = read_file("node.tls_client_ca", paths.client_ca);
    if (ca.index() == 1)
      return fail(std::get<1>(ca));
    ctx->add_certificate_authority(boost::asio::buffer(std::get<0>(ca)), ec);
    if (ec)
      return fail("node.tls_client_ca: " + paths.client_ca + " is not a PEM certificate: " + openssl_reason(ec));
    // The names sent in the CertificateRequest, so a client picks the right certificate.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(paths.client_ca.c_str());
    if (!names) {
      ERR_clear_error();
      return fail("node.tls_client_ca: " + paths.client_ca + " holds no PEM certificate");
    }
    SSL_CTX_set_client_CA_list(native, names);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  tls_loaded loaded{ctx, identity_of(native)};
  return result(std::in_place_index<0>, std::move(loaded));
}

tls_credentials::tls_credentials(tls_paths paths, tls_loaded first)
  : paths_(std::move(paths)), context_(std::move(first.context)), identity_(std::move(first.identity)) {}

std::shared_ptr<ssl::context> tls_credentials::current() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return context_;
}

tls_identity tls_credentials::identity() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return identity_;
}

tls_credentials::reload_result tls_credentials::reload() {
  std::lock_guard<std::mutex> one_at_a_time{reload_mutex_};
  auto loaded = load_tls(paths_);
  reload_result r;
  if (loaded.index() == 1) {
    r.reason = std::move(std::get<1>(loaded));
    r.identity = identity();
    return r;
  }
  auto& fresh = std::get<0>(loaded);
  {
    std::lock_guard<std::mutex> guard{mutex_};
    context_ = std::move(fresh.context);  // the old one lives on in the connections that hold it
    identity_ = fresh.identity;
  }
  r.ok = true;
  r.identity = std::move(fresh.identity);
  return r;
}

}  // namespace troupe
