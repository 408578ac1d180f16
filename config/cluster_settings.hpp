#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <cstdint>
#include <string>

namespace troupe::config {

/// `[cluster]` (docs/CLUSTER.md). With `listen` empty the node is alone: no
/// middleman port is opened and nothing of this section is used.
struct cluster_settings {
  std::string listen;                      ///< HOST:PORT of the node-to-node listener; "": not a cluster member
  std::string name = "troupe";             ///< the cluster's name: a node of another cluster is refused at join
  std::string join;                        ///< HOST:PORT of any member to join (--join); "": start a new cluster
  std::uint64_t heartbeat_interval_ms = 500;  ///< every member tells every other it is alive this often
  std::uint64_t failure_timeout_ms = 3000;    ///< a member not heard from for this long is declared down
  std::uint64_t join_timeout_ms = 10000;      ///< joining (reaching the member, the member list, each peer) gives up after this
  std::string tls_cert;                    ///< PEM certificate of this node (node-to-node TLS; needs tls_key and tls_ca)
  std::string tls_key;                     ///< PEM private key of tls_cert
  std::string tls_ca;                      ///< PEM CA certificate(s) every member's certificate must chain to
  bool allow_plaintext = false;            ///< a non-loopback listen without TLS is refused unless true
  /// True when the node is a cluster member.
  bool enabled() const noexcept { return !listen.empty(); }
};

}  // namespace troupe::config
