#pragma once
/// \file
/// The commander link: on a cluster member, the one handle its actors use as
/// "the commander". It forwards every message to the commander wherever it
/// runs now (a request as one of its own, answered back to the asker); while
/// there is none (a takeover) it holds them, each for at most the hold
/// budget, then answers errc::unavailable. When the commander changes (its
/// member declared down), what it had not answered is not left to its
/// timeout: a resolve goes to the new commander, anything else is answered
/// errc::unavailable, outcome unknown. It also tells each new commander
/// about this node's workers (a takeover needs every member's).

#include "actors/commander.hpp"

#include <chrono>

namespace troupe::cluster {

/// Spawns the link of node `node_name` (a top-level actor: the node stops it).
/// It is told `(leader_atom, leader_notice)` by the agent; it turns the
/// groups' `(workers_atom, group, workers)` into `(workers_atom, group, node_name, workers)`.
/// `forward_timeout`: the longest any asker waits (a request's own timeout still applies to it).
caf::actor spawn_commander_link(caf::actor_system& sys, std::string node_name, std::chrono::milliseconds hold,
                                std::size_t max_held, std::chrono::milliseconds forward_timeout);

/// Spawns the global store link of a member: the same forwarding and
/// holding, to the global store that runs with the commander (the
/// leader_notice's), so that global-store requests never pass through the
/// commander's mailbox. The node's users and bridge use it as their global_store_handle.
caf::actor spawn_global_store_link(caf::actor_system& sys, std::string node_name, std::chrono::milliseconds hold,
                                   std::size_t max_held, std::chrono::milliseconds forward_timeout);

}  // namespace troupe::cluster
