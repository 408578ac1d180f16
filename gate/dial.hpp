#pragma once
/// \file
/// The dialing side of a gate (gate/handshake.hpp): connect, pass the gate,
/// hand the socket to CAF, which tells what it reached. A node's worker
/// process dials its node's worker gate with its token; a cluster member
/// dials the others' ports with the cluster's key, through the connector
/// actor (the agent's joins and its mesh).

#include "gate/caf_socket.hpp"
#include "gate/handshake.hpp"

#include <caf/expected.hpp>
#include <caf/typed_actor.hpp>
#include <caf/replies_to.hpp>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace troupe::gate {

/// Connects to `host`:`port` and passes its gate of kind `which` with `key`,
/// all within `timeout`. Blocks: call it from a thread of its own (a worker
/// process's main thread, a detached actor), never from an event-based actor.
/// Returns the socket, ready for CAF; or an error (sec::cannot_connect_to_node)
/// whose text says why: cannot connect, not a troupe gate, refused by it
/// (with what that means for this kind), no answer in time.
caf::expected<int> dial(const std::string& host, std::uint16_t port, kind which, std::string_view key,
                        std::chrono::milliseconds timeout);

/// Opens connections to other members for the cluster's agent, with its
/// middleman-actor-like interface: `(connect_atom, host, port)` answers the
/// node, the actor published at that port and its interface, or an error.
using connector_handle = caf::typed_actor<caf::replies_to<caf::connect_atom, std::string, std::uint16_t>::with<
  caf::node_id, caf::strong_actor_ptr, std::set<std::string>>>;

struct dial_settings {
  kind which = kind::cluster;
  std::string key;   ///< the cluster's key (cluster_key)
  bool tls = false;  ///< node-to-node TLS after the gate (caf::openssl, mutual)
  std::chrono::milliseconds timeout{10000};  ///< the gate and CAF's handshake, each
};

/// Spawns the connector: each connection is dialed by a detached actor of
/// its own (a member that does not answer delays no other connection).
connector_handle spawn_connector(caf::actor_system& sys, dial_settings settings);

}  // namespace troupe::gate
