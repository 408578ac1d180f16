#pragma once
/// \file
/// The front's TLS credentials: the certificate chain and private key of
/// `node.tls_cert`/`node.tls_key` (PEM) and, when `node.tls_client_ca` is set,
/// the CAs whose client certificates are required. A plain class: the front
/// takes current() at each accept; reload() loads and checks a new pair and
/// swaps it in whole, or refuses it and keeps the old one (docs/tls.md).

#include <boost/asio/ssl/context.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>

namespace troupe {

/// Where the credentials are read from (the recipe's [node] keys).
struct tls_paths {
  std::string cert;       ///< PEM certificate chain, the server's first
  std::string key;        ///< PEM private key of that certificate
  std::string client_ca;  ///< PEM CAs of required client certificates; "": none asked
};

/// What a loaded pair serves, for logs and the reload answer.
struct tls_identity {
  std::string subject;           ///< the certificate's subject, one line (/CN=...)
  std::string serial;            ///< its serial number, hex
  std::int64_t not_after_unix = 0;  ///< its expiry, seconds since the epoch
};

/// A loaded, checked TLS context and what it serves.
struct tls_loaded {
  std::shared_ptr<boost::asio::ssl::context> context;
  tls_identity identity;
};

/// Loads `paths` into a server context: TLS 1.2 and later only, forward-secret
/// AEAD ciphers only, no renegotiation, no compression. The key must parse
/// and match the certificate. Returns the context, or why not (naming the key
/// and the file).
std::variant<tls_loaded, std::string> load_tls(const tls_paths& paths);

class tls_credentials {
public:
  /// Starts with `first` (load_tls's result for `paths`).
  tls_credentials(tls_paths paths, tls_loaded first);

  /// The context new connections take (open ones keep theirs).
  std::shared_ptr<boost::asio::ssl::context> current() const;
  tls_identity identity() const;
  const tls_paths& paths() const noexcept { return paths_; }

  struct reload_result {
    bool ok = false;
    std::string reason;     ///< why the new pair was refused ("" when ok)
    tls_identity identity;  ///< what is served now (the new pair, or the old one kept)
  };
  /// Reads the files again; a pair that loads and checks replaces the current
  /// one, else the current one is kept. Two reloads at once run one after the other.
  reload_result reload();

private:
  const tls_paths paths_;
  std::mutex reload_mutex_;  // one reload at a time (SIGHUP and POST may meet)
  mutable std::mutex mutex_; // guards the two below
  std::shared_ptr<boost::asio::ssl::context> context_;
  tls_identity identity_;
};

}  // namespace troupe
