#pragma once
/// \file
/// The channel hub: one actor per front for all of its open channel sockets
/// (/_troupe/ws) — the connection actor "activated when something needs its
/// mailbox", shared: a socket costs an entry here, not an actor (issue 14,
/// memory per socket). A socket's session registers it at its first call
/// under a number the front gives; (hub, number) travels in every channel
/// call (http_request::channel) to the user actor, who binds his page record
/// to it at openchannel. The hub keeps each socket's page → connection
/// bindings and checks every push against them before queueing the frame on
/// the socket's outgoing queue. When a socket goes, its session says so and
/// the hub tells each of its bindings' users.

#include "actors/channel.hpp"
#include "actors/metrics.hpp"
#include "transport/channel_outbox.hpp"

#include <caf/allowed_unsafe_message_type.hpp>

#include <functional>
#include <memory>

namespace caf {
class actor_system;
}

namespace troupe {

/// What the hub shares with one socket's session.
struct channel_link {
  std::shared_ptr<channel_outbox> outbox;
  /// Thread-safe: asks the session (on its strand) to write what is queued,
  /// or to close the socket when the queue overflowed.
  std::function<void()> wake;
};

using channel_link_ptr = std::shared_ptr<channel_link>;

using socket_open_atom = caf::atom_constant<caf::atom("chopen")>;      ///< a session registers its socket
using socket_closed_atom = caf::atom_constant<caf::atom("chclosed")>;  ///< a session's socket went

/// The hub's whole interface: the users' part (channel_handle) and its sessions'.
using channel_hub_handle = channel_handle::extend<
  /// Socket `socket` (its front's number) is open; never leaves its process.
  caf::reacts_to<socket_open_atom, std::uint64_t, channel_link_ptr>,
  /// Socket `socket` closed: its bindings' users are told (unbind), it is forgotten.
  caf::reacts_to<socket_closed_atom, std::uint64_t>>;

/// Spawns a front's hub. Its sockets' overflows are counted in `metrics`.
channel_hub_handle spawn_channel_hub(caf::actor_system& sys, node_metrics& metrics);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::channel_link_ptr)
