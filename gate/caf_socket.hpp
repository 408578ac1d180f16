#pragma once
/// \file
/// Handing a vetted socket to CAF's middleman (its BASP broker): the accepting
/// side as a connection to one published actor (CAF writes its server
/// handshake), the dialing side as a connection whose handshake tells the
/// actor published to it. Plain TCP, or TLS through caf::openssl's session
/// (mutual, with the actor system's openssl.* settings), the TLS handshake
/// then running in CAF's multiplexer for a peer that passed the gate already.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/fwd.hpp>
#include <caf/node_id.hpp>

#include <cstdint>
#include <set>
#include <string>

namespace troupe::gate {

/// What a connection through a gate reaches: an actor and its interface
/// (CAF's message types of its handle: a typed peer checks them).
struct published {
  caf::strong_actor_ptr actor;
  std::set<std::string> interface;
};

template <class Handle>
published publish_of(caf::actor_system& sys, const Handle& h) {
  return {caf::actor_cast<caf::strong_actor_ptr>(h), sys.message_types(h)};
}

/// What a dialed connection reached once CAF's handshake is done.
struct connected {
  caf::node_id node;
  caf::strong_actor_ptr actor;
  std::set<std::string> interface;
};

/// CAF's BASP broker of `sys` (requests to it: `(connect_atom, scribe_ptr, port)`).
caf::actor basp_broker(caf::actor_system& sys);

/// A CAF connection for socket `fd`, which it owns from now on (even when this
/// fails: then it is closed and null is returned, the reason logged). Any
/// thread may call it: nothing of the multiplexer is touched until the broker adds it.
caf::io::scribe_ptr make_scribe(caf::actor_system& sys, int fd, bool tls, bool accepted);

/// Gives an accepted socket that passed the gate to CAF: its peer reaches
/// `whom` (CAF publishes it for this connection under `port`, a key: the
/// gate's own listener port, where CAF itself listens on nothing).
void hand_over_accepted(caf::actor_system& sys, int fd, bool tls, std::uint16_t port, published whom);

}  // namespace troupe::gate
