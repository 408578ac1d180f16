#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::config {

/// `[node]`
struct node_settings {
  std::string listen = "127.0.0.1:8080";   ///< HOST:PORT; port 0 picks a free port
  std::string admin_token;                 ///< empty: the admin surface is off (health aside)
  std::string name;                        ///< shown in whoami/census; empty: the host name
  std::string log_level = "info";          ///< trace|debug|info|warn|error|critical|off
  int io_threads = 1;                      ///< threads running the HTTP front
  int actor_threads = 1;                   ///< CAF scheduler threads (1 io + 1 actor thread fit 2 cores)
  std::string actor_scheduler = "sharing"; ///< CAF scheduler policy: sharing | stealing
  /// An io thread runs the handler of an idle local user it sends a request to,
  /// instead of handing it to an actor thread (transport/inline_unit.hpp).
  bool inline_handlers = true;
  bool worker_pipes = true;                ///< requests to worker processes on their pipes (false: through the forwarder)
  double shutdown_grace_seconds = 10;      ///< in-flight requests get this long on SIGTERM
  double shutdown_freeze_seconds = 60;     ///< then the soft quit gets this long to make every user durable
  std::string cookie_secret;               ///< HMAC key of minted connection ids; "": generated into the deposit
  double health_probe_seconds = 5;         ///< with no deposit write for this long, health probes the deposit
  double health_max_restart_rate = 10;     ///< user restarts per second (last minute) past which health is degraded
  std::uint64_t cookie_max_age_seconds = 86400; ///< Max-Age of the troupe_cid cookie; 0: a session cookie (none)
  /// Networks (CIDR) of the proxies in front of the node: from a peer in them,
  /// Forwarded / X-Forwarded-For name the client (request::client_address()).
  std::vector<std::string> trusted_proxies;
  std::uint64_t history_seconds = 600;     ///< samples (one a second) of GET /_troupe/history and the console's charts
  // TLS (issue 14, docs/tls.md): `listen` serves HTTPS/WSS when tls_cert and tls_key are set.
  std::string tls_cert;                    ///< PEM certificate chain; "": plain HTTP on listen
  std::string tls_key;                     ///< PEM private key of tls_cert (unencrypted)
  std::string tls_client_ca;               ///< PEM CAs: client certificates required and verified; "": none asked
  std::string plain_listen;                ///< HOST:PORT of a second, plain-HTTP listener (TLS only); "": none
};

}  // namespace troupe::config
