#pragma once
/// \file
/// The worker: supervisor of the users placed on it. It spawns them on
/// demand, hands them their connections, and restarts one that crashed
/// (other users are untouched). A user whose actor crashed
/// group.<name>.max_user_restarts times within restart_window_seconds is
/// quarantined alone: not restarted, his requests refused (errc::user_quarantined,
/// Retry-After: until his oldest crash leaves the window), then started again
/// from the last good state he left. While its group is degraded it refuses
/// every request of its users (errc::group_degraded).

#include "actors/user.hpp"

namespace troupe {

/// Orders a worker to host `user` (spawning him if needed) and to give him connection `cid`.
struct attach_order {
  std::string user;
  std::string cid;
  store::bytes parcel;  ///< a store to start from if he must be spawned and has no parcel (a login's carry)
  bool wake = true;     ///< if he must be spawned, look for his parcel first (false: he is brand new)
  /// The placement's owner epoch (fencing; registry::epoch_source): the user
  /// spawned for this order stamps it on every parcel, and a restart after
  /// a crash keeps it. 0: none (oldest; tests that do not care).
  std::uint64_t owner_epoch = 0;
  /// The channels his pages had open when he froze: bound again if he is started for this order.
  std::vector<channel_binding> channels;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attach_order& x) {
  return f(caf::meta::type_name("troupe.attach_order"), x.user, x.cid, x.parcel, x.wake, x.owner_epoch, x.channels);
}

/// Whether a worker admits newcomers now. A worker tells its group at every
/// change; the group forwards it to the commander, which places newcomers only
/// on workers that admit (docs/SUPERVISION.md "Admission").
struct admission_report {
  caf::actor_addr worker;       ///< the worker it is about
  bool admits = true;
  std::uint8_t reason = 0;      ///< a troupe::refusal_reason, when it does not admit
  std::uint32_t retry_after = 0; ///< seconds until it may admit again, as the reporter reckons it (0: unknown)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_report& x) {
  return f(caf::meta::type_name("troupe.admission_report"), x.worker, x.admits, x.reason, x.retry_after);
}

/// What a worker sends its group: a part of group_handle (actors/group.hpp,
/// which includes this header), which converts to it implicitly.
using group_for_workers = caf::typed_actor<
  caf::reacts_to<admission_atom, admission_report>,
  caf::reacts_to<replace_atom, caf::actor_addr, std::uint64_t>>;

/// A worker's figures, answered to a heartbeat: the users it hosts and its
/// process's counters (cumulative since the process started). A worker
/// process's slot adds their growth to its node's counters, so /metrics
/// counts the users of worker processes too (docs/SUPERVISION.md "Workers as processes").
struct worker_vitals {
  std::uint64_t users = 0;  ///< users hosted now
  std::uint64_t user_restarts = 0;
  std::uint64_t user_freezes = 0;
  std::uint64_t user_wakes = 0;
  std::uint64_t handler_failures = 0;
  /// In a worker process: how long its pipes' thread has been running one handler (0: none).
  std::uint64_t handler_running_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_vitals& x) {
  return f(caf::meta::type_name("troupe.worker_vitals"), x.users, x.user_restarts, x.user_freezes, x.user_wakes,
           x.handler_failures, x.handler_running_ms);
}

/// The worker's typed interface.
using worker_handle = caf::typed_actor<
  /// Host the user and give him the connection; answers his placement.
  caf::replies_to<attach_atom, attach_order>::with<placement>,
  /// Hand a message to the user (started and woken first, as for attach, when
  /// he is not live here: `order` has no connection); answers what became of it.
  caf::replies_to<tell_atom, attach_order, user_message>::with<tell_reply>,
  /// Forget this user: he is retiring (a guest whose connection logged in).
  caf::reacts_to<release_atom, std::string>,
  /// Freeze this user now (an operator's order); answers once his parcels are durable.
  caf::replies_to<freeze_atom, std::string>::with<bool>,
  /// push_users: push {path, data (JSON text)} to every page of user `name`
  /// if he lives here (never woken: else (0, 1)); answers (delivered, not delivered).
  caf::replies_to<push_atom, std::string, std::string, std::string>::with<std::uint32_t, std::uint32_t>,
  /// Soft quit: freeze every user (each within 90% of node.shutdown_freeze_seconds);
  /// answers how many were frozen and the names of those who were not.
  caf::replies_to<quit_atom>::with<std::uint64_t, std::vector<std::string>>,
  /// Drain: take no new user, freeze every user, stop once all are durable;
  /// answers (frozen, failed). A failed freeze keeps the worker in service.
  caf::replies_to<drain_atom>::with<std::uint64_t, std::uint64_t>,
  /// Drop this user: his actor stops without freezing; answers once he is gone (no_such_user: not hosted).
  caf::replies_to<drop_atom, std::string>::with<bool>,
  /// The census's probe (sent with high priority).
  caf::replies_to<probe_atom, std::uint64_t, bool>::with<actor_probe>,
  /// The users it hosts (a new commander learns where everybody lives).
  caf::replies_to<scan_atom>::with<std::vector<std::string>, std::vector<std::uint64_t>>,
  /// Its node fenced itself: every user freezes now and leaves, his write
  /// fenced by the deposit: one placed again elsewhere since (a newer owner
  /// epoch claimed him) is refused, counted, and leaves unwritten; one that
  /// nobody claimed since writes what he holds, so nothing he acknowledged is
  /// lost. The worker forgets them at once (docs/CLUSTER.md "Fencing").
  caf::reacts_to<fence_atom>,
  /// What his users need of him (user_supervisor): their timers, their restart state.
  caf::reacts_to<timer_atom, std::uint64_t, std::uint8_t, std::uint64_t, std::int64_t>,
  caf::reacts_to<restart_atom, std::string, store::bytes>,
  caf::reacts_to<rest_atom, std::string, resting_user_ptr>,
  /// From its group: the group is degraded (true: refuse every user's request
  /// with 503 and this Retry-After in seconds, 0: none) or recovered (false).
  caf::reacts_to<degraded_atom, bool, std::uint32_t>,
  /// From its group: settings applied while the node runs; its users take them at their next idle check.
  caf::reacts_to<tune_atom, group_tuning>,
  /// Are you alive: its vitals (a worker process's slot asks every
  /// min(1 s, stuck_timeout_seconds / 4); no answer within stuck_timeout_seconds: killed).
  caf::replies_to<heartbeat_atom>::with<worker_vitals>>;

/// How to start one worker.
struct worker_spec {
  std::string name;       ///< e.g. "default-w1"
  std::string group;      ///< the group's name
  commander_for_users commander;     ///< for its users
  global_store_handle global_store;  ///< the global store, for its users
  deposit_handle deposit;            ///< the deposit actor
  node_context_ptr ctx;
  /// Its group: admission reports and replacement requests go there.
  /// spawn_worker sets it to the spawning actor when left empty.
  group_for_workers parent{};
  /// The machine's memory for memory admission; 0: read /proc/meminfo (tests may inject a figure).
  std::uint64_t mem_total_bytes = 0;
};

/// Spawns a worker linked to `group` (it dies with its group).
worker_handle spawn_worker(caf::local_actor& group, worker_spec spec);

/// Spawns a worker at the top of `sys` (a worker process's own worker: its
/// group lives in the node, and the process ends with the worker).
worker_handle spawn_worker(caf::actor_system& sys, worker_spec spec);

}  // namespace troupe
