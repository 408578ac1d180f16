#pragma once
/// \file
/// A gate's listener: a troupe port (a node's worker gate, a cluster member's
/// port) that vets every connection on a thread of its own before CAF's
/// middleman sees it (docs/CLUSTER.md "The gate"). CAF's multiplexer thread
/// carries every node-to-node and worker heartbeat; a stray client there (a
/// header announcing 4 GB, a slow or half-open socket, garbage) delayed them
/// for seconds. Here a connection gets the challenge at once, must answer
/// exactly gate::answer_size bytes within the handshake timeout, and at most
/// max_pending connections wait at a time (one more is closed at once); only
/// one whose answer the authenticator takes is handed to CAF, to the actor
/// the authenticator names. Refusals are counted and logged (at most a line
/// every 10 s, with the peer's address and the count).

#include "gate/caf_socket.hpp"
#include "gate/handshake.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace troupe::gate {

struct listener_options {
  std::string name;  ///< "worker gate", "cluster gate": its log lines
  std::string host;  ///< address to listen on (a name is resolved once)
  std::uint16_t port = 0;
  kind which = kind::cluster;
  bool tls = false;  ///< connections go to CAF in TLS (caf::openssl, mutual)
  std::size_t max_pending = 64;                    ///< connections vetted at once; one more is closed
  std::chrono::milliseconds handshake_timeout{3000};  ///< to answer the challenge
};

/// Whom a connection that answered nonce `n` with `m` reaches; nullopt: refused.
/// Called on the listener's thread.
using authenticator = std::function<std::optional<published>(const nonce& n, const mac& m)>;

class listener {
public:
  /// Listens and starts its thread. Throws std::system_error when it cannot listen.
  /// `refusals` (may be null) counts refused connections.
  listener(caf::actor_system& sys, listener_options options, authenticator auth,
           std::atomic<std::uint64_t>* refusals = nullptr);
  /// Stops its thread; connections still being vetted are closed.
  ~listener();
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  /// The port it listens on (the one it got for port 0).
  std::uint16_t port() const noexcept;
  /// Connections being vetted now.
  std::size_t pending() const noexcept;

  struct impl;  ///< (its connections' vetting reaches it; nothing of it is public)

private:
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::gate
