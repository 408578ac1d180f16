#pragma once
/// \file
/// The cluster agent: one per member, published on `cluster.listen`. It joins
/// the cluster (through any member, then directly to every member: a full
/// mesh, never relayed), tells every member it is alive, declares members
/// down (their CAF connection closed, or silent for `failure_timeout_ms`),
/// fences its own node when it loses the majority, starts the commander when
/// its node becomes the oldest live member, and tells its node's actors what
/// changed (docs/CLUSTER.md "Membership").

#include "actors/census.hpp"
#include "actors/cluster_view.hpp"
#include "actors/messages.hpp"
#include "actors/orchestrator.hpp"
#include "actors/node_context.hpp"
#include "cluster/membership.hpp"
#include "gate/dial.hpp"

#include <caf/actor.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/node_id.hpp>
#include <caf/typed_actor.hpp>

#include <atomic>
#include <functional>
#include <type_traits>
#include <memory>

namespace troupe::cluster {

using join_atom = caf::atom_constant<caf::atom("join")>;        ///< a node asks to join
using member_atom = caf::atom_constant<caf::atom("member")>;    ///< a member was admitted
using beat_atom = caf::atom_constant<caf::atom("beat")>;        ///< a heartbeat
using down_atom = caf::atom_constant<caf::atom("down")>;        ///< a member was declared down
using leader_atom = caf::atom_constant<caf::atom("leader")>;    ///< the commander now runs there
using troupe::members_atom;  ///< the member list (actors/cluster_view.hpp)
using ready_atom = caf::atom_constant<caf::atom("ready")>;      ///< joined (or alone) and led

/// Whoever is told that a member was declared down.
using down_listener = caf::typed_actor<caf::reacts_to<node_down_atom, caf::node_id>>;

/// Whoever is told that this node fenced itself.
using fence_listener = caf::typed_actor<caf::reacts_to<fence_atom>>;

// Defined below: the agent's interface names them, and a member_hello holds an agent.
struct member_hello;
struct leader_notice;
struct join_reply;

/// One member as the census shows it: the census's own view (actors/cluster_view.hpp).
using troupe::member_status;

/// The agent's typed interface (between agents, and from its own node).
using agent_handle = caf::typed_actor<
  /// A node asks to join (cluster name, itself): answers the members and the leader.
  caf::replies_to<join_atom, std::string, member_hello>::with<join_reply>,
  /// A member admitted a newcomer (or tells what it knows): learn it.
  caf::reacts_to<member_atom, member_hello>,
  /// A heartbeat from (name, incarnation, its stamp, the stamp of our latest beat it received).
  caf::reacts_to<beat_atom, std::string, std::uint64_t, std::int64_t, std::int64_t>,
  /// A member declared (name, incarnation) down.
  caf::reacts_to<down_atom, std::string, std::uint64_t>,
  /// The commander runs there now.
  caf::reacts_to<leader_atom, leader_notice>,
  /// The member list for the census.
  caf::replies_to<members_atom>::with<std::vector<member_status>>,
  /// From its own node at start, with the address it is published at:
  /// joins (or starts the cluster) and answers once done — an error when joining failed.
  caf::replies_to<ready_atom, std::string>::with<bool>>;

// The agent provides the census's view of the cluster: its interface includes it.
static_assert(std::is_convertible_v<agent_handle, cluster_view_handle>,
              "the agent no longer answers what the census asks of it (actors/cluster_view.hpp)");

/// A member as members tell each other: its record and its agent.
struct member_hello {
  std::string name;
  std::uint64_t incarnation = 0;
  std::string address;
  std::uint64_t seq = 0;
  agent_handle agent;
  census_handle census;  ///< its node's census
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_hello& x) {
  return f(caf::meta::type_name("troupe.member_hello"), x.name, x.incarnation, x.address, x.seq, x.agent, x.census);
}

/// The actors a leader runs for the whole cluster.
struct leader_actors {
  caf::actor commander;     ///< a commander_handle
  caf::actor global_store;  ///< a global_store_handle, spawned with the commander
};

/// Who leads: its name and incarnation, its commander and its global store,
/// and its orchestrator (the owner of the cluster's settings generations).
struct leader_notice {
  std::string name;
  std::uint64_t incarnation = 0;
  caf::actor commander;
  caf::actor global_store;
  troupe::settings_leader_handle orchestrator;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, leader_notice& x) {
  return f(caf::meta::type_name("troupe.leader_notice"), x.name, x.incarnation, x.commander, x.global_store,
           x.orchestrator);
}

/// The answer to a join: the members (the newcomer among them, with its age) and the leader.
struct join_reply {
  std::vector<member_hello> members;
  leader_notice leader;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_reply& x) {
  return f(caf::meta::type_name("troupe.join_reply"), x.members, x.leader);
}

/// What the agent's node gives it.
struct agent_config {
  std::string cluster_name;
  member_record self;              ///< name and incarnation (the address comes with ready, the seq with the join)
  std::string join;                ///< HOST:PORT of a member, "" to start a cluster
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds failure_timeout{3000};
  std::chrono::milliseconds join_timeout{10000};
  /// This node's census (told to every member: a census on any member answers for all).
  census_handle census;
  /// This node's counters (troupe_cluster_members{state}); may be null in tests.
  node_metrics* metrics = nullptr;
  /// Opens node-to-node connections through the other members' gates (gate/dial.hpp).
  gate::connector_handle connector;
  /// Starts the commander and its global store on this node (called when it
  /// becomes the leader), given the members up (this one included) whose
  /// workers it must learn. Stopping the commander stops its global store.
  std::function<leader_actors(std::vector<std::string>)> start_commander;
  /// Told `(leader_atom, leader_notice)` when the leader changes (an invalid
  /// commander: none right now): the node's commander link and global store link.
  std::vector<caf::actor> leader_listeners;
  /// Told when a member is declared down: the node's forwarder (and the
  /// commander, when it runs here).
  std::vector<down_listener> down_listeners;
  /// Told when this node fences itself (its users must stop): its groups.
  std::vector<fence_listener> fence_listeners;
  /// This node's orchestrator: told who leads (settings_leader_atom) with
  /// every change; the one the leader's notice names when this node leads.
  troupe::orchestrator_handle orchestrator;
  /// Written by the agent, read by the front: may this node serve now?
  std::shared_ptr<troupe::serving_signal> serving;
};

/// Spawns the agent (a top-level actor: the node stops it). Publishing it on
/// the cluster port is the caller's (it must happen before others can join).
agent_handle spawn_agent(caf::actor_system& sys, agent_config config);

/// Registers the cluster's message types with `cfg` (every member must).
void register_types(caf::actor_system_config& cfg);

/// A fresh random incarnation number (never 0).
std::uint64_t new_incarnation();

}  // namespace troupe::cluster
