#pragma once
/// \file
/// The socket actor: one per open channel socket (/_troupe/ws), on its
/// front's node — the "connection actor activated when something needs its
/// mailbox". It is spawned by the socket's session at its first call; its
/// handle travels in every channel call (http_request::channel) to the user
/// actor, who binds his page record to it at openchannel. It keeps the
/// page → connection bindings of its socket and checks every push against
/// them before queueing the frame on the socket's outgoing queue. When the
/// socket goes, it tells each binding's user, and stops.

#include "actors/channel.hpp"
#include "actors/metrics.hpp"
#include "transport/channel_outbox.hpp"

#include <functional>
#include <memory>

namespace caf {
class actor_system;
}

namespace troupe {

/// What the socket actor shares with its session.
struct channel_link {
  std::shared_ptr<channel_outbox> outbox;
  /// Thread-safe: asks the session (on its strand) to write what is queued,
  /// or to close the socket when the queue overflowed.
  std::function<void()> wake;
  node_metrics* metrics = nullptr;
};

/// Spawns the socket actor of one channel. Stop it with an exit message
/// (caf::anon_send_exit): it tells its bound users first.
channel_handle spawn_channel_actor(caf::actor_system& sys, channel_link link);

}  // namespace troupe
