#pragma once
/// \file
/// The group: the workers built from one [[group]] entry of the recipe, with
/// one policy set. It supervises its workers (a crashed worker is replaced and
/// the commander told, within the group's restart intensity: past it the
/// group is degraded until its recovery) and takes them down with it.

#include "actors/worker.hpp"
#include "config/fwd.hpp"

#include <vector>

namespace troupe {

/// What a group sends its commander (a part of commander_handle,
/// actors/commander.hpp, which includes this header): its workers and their
/// admission; and what its workers' users send (commander_for_users).
using commander_for_groups = commander_for_users::extend<
  caf::reacts_to<workers_atom, std::string, std::string, std::vector<worker_handle>>,
  caf::reacts_to<admission_atom, admission_report>>;

/// The group's typed interface.
using group_handle = caf::typed_actor<
  /// Its current workers, in slot order.
  caf::replies_to<workers_atom>::with<std::vector<worker_handle>>,
  /// Its node fenced itself: every worker freezes its users and forgets them
  /// (worker_handle's fence_atom: the deposit refuses the stale writes).
  caf::reacts_to<fence_atom>,
  /// From the node's orchestrator: its settings applied while it runs (every worker gets them).
  caf::reacts_to<tune_atom, group_tuning>,
  /// From one of its workers: what it admits now (forwarded to the commander).
  caf::reacts_to<admission_atom, admission_report>,
  /// From the commander: start one more worker (an arrival no worker admits);
  /// answers it, or errc::refused at worker_max_number.
  caf::replies_to<grow_atom>::with<worker_handle>,
  /// From the commander: this worker has no users and is no longer needed; it stops (not a restart).
  caf::reacts_to<retire_atom, worker_handle>,
  /// From one of its workers (isolation "process"): its resident memory (the
  /// bytes given) passed restart_occupancy_max_percent of its share and all
  /// its users are frozen; replace its process (docs/SUPERVISION.md "Admission").
  caf::reacts_to<replace_atom, caf::actor_addr, std::uint64_t>,
  /// From a worker process's slot, before it starts its worker again: worker
  /// `name`'s process ended with this exit code (-1: killed, stuck or by a
  /// signal); answers whether to start it again (false: the slot is parked).
  caf::replies_to<restart_atom, std::string, std::int32_t>::with<bool>>;

/// Spawns the group described by recipe entry `settings` (a top-level actor:
/// the node stops it on shutdown). Its workers are named "<group>-w<n>";
/// `deposit` is the deposit actor its users freeze to and wake from,
/// `global_store` the global store they use.
group_handle spawn_group(caf::actor_system& sys, node_context_ptr ctx, config::group_settings settings,
                        commander_for_groups commander, global_store_handle global_store, deposit_handle deposit);

}  // namespace troupe
