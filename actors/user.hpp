#pragma once
/// \file
/// The user actor: one per user, the only owner of his store. It serves his
/// HTTP requests one at a time (later ones wait in its mailbox or, while a
/// deferred answer is pending, in its bounded queue), keeps his connections
/// and pages, and carries out login/logout with the commander.

#include "actors/channel.hpp"
#include "actors/commander_view.hpp"
#include "actors/connection_table.hpp"
#include "actors/deposit.hpp"
#include "actors/global_store.hpp"
#include "actors/group_gate.hpp"
#include "actors/messages.hpp"
#include "actors/node_context.hpp"
#include "actors/stream.hpp"
#include "actors/tell.hpp"
#include "store/codec.hpp"

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

namespace caf {
class local_actor;
}

namespace troupe {

/// The user actor's typed interface.
using user_handle = caf::typed_actor<
  /// Serve the request the slot holds; the local fast path (the front's continuation).
  caf::reacts_to<http_atom, local_reply>,
  /// Serve a request; the same for callers on other nodes.
  caf::replies_to<http_atom, http_request>::with<http_response>,
  /// Take connection `cid` as one of his; answers his placement.
  caf::replies_to<adopt_atom, std::string>::with<placement>,
  /// A message from another user (README "Messages between users"): run his
  /// type's handler, one at a time with his requests; answers what became of it.
  caf::replies_to<tell_atom, user_message>::with<tell_reply>,
  /// Freeze now (cause: freeze or quit); answers once his parcels are durable.
  caf::replies_to<freeze_atom, std::uint8_t>::with<bool>,
  /// The census's probe (sent with high priority): live figures, in detail when asked.
  caf::replies_to<probe_atom, std::uint64_t, bool>::with<actor_probe>,
  /// Socket `socket` closed: page (cid, page) has no channel any more.
  caf::reacts_to<unbind_atom, std::string, std::string, channel_ref>,
  /// push_users from another user: push {path, data (JSON text)} to all his
  /// pages; answers (delivered, not delivered).
  caf::replies_to<push_atom, std::string, std::string>::with<std::uint32_t, std::uint32_t>,
  /// Internal: a timer is due — check idleness (0), checkpoint (1), or
  /// deferred answer number `arg` (2). Forwarded by his worker (user_supervisor).
  caf::reacts_to<tick_atom, std::uint8_t, std::uint64_t>,
  /// From his worker: his group's idle freeze (user_idle_freeze_minutes) and a
  /// guest's (guest_idle_seconds) changed, in ms; his next idle check judges by them.
  caf::reacts_to<tune_atom, std::int64_t, std::int64_t>,
  /// One of his streams: opened by its sink, credit, the client gone (docs/streaming.md).
  caf::reacts_to<stream_msg_atom, stream_event>,
  /// A piece of a body he reads (a streamed upload: actors/upload.hpp).
  caf::reacts_to<upload_atom, upload_piece>>;

/// Where a user lives: the answer to resolve, attach, login and logout.
struct placement {
  std::string user;
  std::string worker;
  std::string node;
  user_handle actor;  ///< the user actor
  std::string cid{};  ///< the connection he took (for login and logout: the new id the commander minted)
  std::string type{};  ///< his actor type (his group's user_type): whose guards judge his requests on the front
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement& x) {
  return f(caf::meta::type_name("troupe.placement"), x.user, x.worker, x.node, x.actor, x.cid, x.type);
}

/// What a resting user leaves with his worker (group.rest_idle_seconds): all
/// his actor needs to start again as he was, without reading the deposit.
/// Never leaves its process (a user and his worker share one).
struct resting_user {
  store::bytes parcel;              ///< his state, an encoded parcel; empty: a guest who never had one
  connection_table connections;     ///< his connections and pages (none has an open channel)
  registry::clocks clocks;          ///< his idleness goes on counting from them
  registry::wall_clock::time_point started{};
  bool dirty = false;               ///< changed since his last durable parcel
};

using resting_user_ptr = std::shared_ptr<resting_user>;

/// A user's timer, kept by his worker (registry::timer_queue): (timer, id, which, arg, delay_ms).
using timer_atom = caf::atom_constant<caf::atom("utimer")>;

/// What a user actor needs of his worker (a part of the worker's interface).
using user_supervisor = caf::typed_actor<
  /// Start a timer of user actor `id`: in `delay_ms` ms the worker sends him
  /// (tick, which, arg) if he still lives. The worker keeps them in one heap
  /// (32 bytes each) instead of one CAF delayed message each (~180 bytes);
  /// they go through the worker because a delayed message to an actor keeps
  /// that actor's memory alive until it is due, dead or not.
  caf::reacts_to<timer_atom, std::uint64_t, std::uint8_t, std::uint64_t, std::int64_t>,
  /// A user failing in a handler leaves his last good state (an encoded
  /// parcel; empty: he had none) for the restart that follows his exit.
  caf::reacts_to<restart_atom, std::string, store::bytes>,
  /// An idle user rests: he leaves his state and stops; his next request or
  /// message (or his idle freeze) starts him again from it.
  caf::reacts_to<rest_atom, std::string, resting_user_ptr>>;

/// What a user's handlers cost, for his worker's admission (docs/SUPERVISION.md
/// "Admission"): written by the user actor after each handler, read by his
/// worker's beat. Relaxed atomics: the reader needs the sums, not an order.
struct user_busy {
  /// His handlers' service time so far, in ns (kept only when `worker_busy_ns` is set).
  std::atomic<std::uint64_t> busy_ns{0};
  /// When he last handled a request (steady clock, ns since its epoch): his idle freeze counts from it.
  std::atomic<std::int64_t> last_active_ns{0};
  /// His worker's sum of its users' busy_ns; null: CPU admission is off (nothing is timed).
  std::shared_ptr<std::atomic<std::uint64_t>> worker_busy_ns;
};

/// How to start one user actor.
struct user_spec {
  std::string user;
  std::string worker;                    ///< name of the hosting worker
  store::bytes parcel;                   ///< an encoded parcel to start from if he has none in the deposit
  bool wake = true;                      ///< read his parcel from the deposit before serving
  std::string group;                     ///< his group's name (its policies: idleness, durability)
  commander_for_users commander;         ///< for login/logout and freezing
  global_store_handle global_store;      ///< the global store, asked directly
  user_supervisor supervisor;            ///< his worker
  deposit_handle deposit;                ///< the deposit actor
  const app_types::factory* factory = nullptr;
  const router* routes = nullptr;        ///< his type's routes (built once, shared)
  const message_router* messages = nullptr;  ///< the messages his type accepts (built once, shared)
  node_context_ptr ctx;
  /// His group's keys applied since the start, as his worker has them (none: the recipe's).
  std::optional<group_tuning> tuning;
  std::uint32_t restarts = 0;            ///< times his worker restarted him in the current window
  /// His placement's owner epoch (attach_order::owner_epoch): stamped on every
  /// parcel he writes; a woken user claims it in the deposit before serving. A
  /// write or claim the deposit refuses as stale ends him without writing
  /// anything more (docs/CLUSTER.md "Fencing").
  std::uint64_t owner_epoch = 0;
  std::shared_ptr<user_busy> busy;       ///< where he counts his handlers' cost (null: nowhere)
  /// His worker's view of its group: while degraded he refuses every request
  /// (503, errc::group_degraded's text and Retry-After). Null: never degraded.
  std::shared_ptr<const group_gate> gate;
  /// A resting user started again: what he left (parcel, connections,
  /// clocks) instead of `parcel` and `wake`. Null: a start or a wake.
  resting_user_ptr resumed;
  /// The channels his pages had open when he froze (docs/channels.md): his
  /// pages are bound to those sockets again at once.
  std::vector<channel_binding> channels;
};

/// Spawns a user actor monitored by `parent` (his worker), which takes him
/// down when it stops (not linked: a link costs the worker a scan of all its
/// links on every exit, which made freezing many users quadratic).
/// An invalid parcel is logged and the user starts with a fresh store.
user_handle spawn_user(caf::local_actor& parent, user_spec spec);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::resting_user_ptr)
