#pragma once
/// \file
/// Workers as processes ([[group]] isolation = "process"; docs/SUPERVISION.md
/// "Workers as processes"). Each worker of such a group runs in an OS process
/// of its own (the node's executable, `troupe worker ...`), speaking the same
/// typed messages over CAF's middleman on loopback.
///
/// In the node, a *slot* actor per worker stands for it: it implements
/// worker_handle locally by relaying every message to the worker in the
/// child process, holds messages while the child starts or is replaced, and
/// supervises the process (its connection's down message, a heartbeat, the
/// reaped exit status). The commander and the group see one stable local
/// worker per slot, exactly as with threads. Users of a worker process are
/// remote actors to the front (served through the forwarder).
///
/// The node publishes one *gate* (on 127.0.0.1, port 0) that the children greet
/// with a random token known only to the slot that started them.

#include "actors/worker.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// The gate's answer to a child's hello: whom it works for.
struct worker_hello {
  caf::actor slot;       ///< its slot (a worker_process_handle): it sends its worker there
  caf::actor commander;  ///< the node's commander
  caf::actor global_store; ///< the node's global store (its users' global operations go there)
  caf::actor deposit;    ///< the node's deposit actor
  caf::actor census;     ///< the node's census (a census_member_view)
  std::string node_name; ///< the node's name (its users' placements carry it)
  std::string worker;    ///< the worker's name, e.g. "default-w1"
  std::string group;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_hello& x) {
  return f(caf::meta::type_name("troupe.worker_hello"), x.slot, x.commander, x.global_store, x.deposit, x.census, x.node_name,
           x.worker, x.group);
}

/// A slot as its child sees it: a worker, and the child's worker arriving.
using worker_process_handle = worker_handle::extend<
  /// From the child process that showed this token: its worker is up.
  caf::reacts_to<ready_atom, std::string, worker_handle>,
  /// From the child's worker: what it admits; forwarded to the group as this slot's
  /// (the commander knows the slot, not the worker inside the child).
  caf::reacts_to<admission_atom, admission_report>,
  /// From the child's worker: past restart_occupancy_max_percent, its users
  /// frozen: start a fresh process (a replacement, not a failure: not counted).
  caf::reacts_to<replace_atom, caf::actor_addr, std::uint64_t>>;

/// The gate: one per node that has a process-isolated group, published on loopback only.
using worker_gate_handle = caf::typed_actor<
  /// From a child process: its token; answers whom it works for (once per
  /// token; an unknown token is refused).
  caf::replies_to<hello_atom, std::string>::with<worker_hello>,
  /// From a slot: expect a child with this token.
  caf::reacts_to<hello_atom, std::string, worker_hello>,
  /// From a slot: the child with this token will not come (killed before its hello).
  caf::reacts_to<drop_atom, std::string>>;

/// Spawns the gate (the node publishes it on 127.0.0.1, port 0).
worker_gate_handle spawn_worker_gate(caf::actor_system& sys);

/// Spawns the slot of worker `spec` of a process-isolated group, linked to
/// `group` (a group_handle), which it asks before every restart of the process.
/// `spec.ctx` names the gate and the recipe arguments the child gets.
worker_handle spawn_worker_process(caf::local_actor& group, worker_spec spec, const config::group_settings& settings);

/// How often a slot asks its child for a heartbeat: min(1 s, stuck_timeout_seconds / 4).
caf::timespan heartbeat_interval(const config::group_settings& settings);

/// `troupe worker ...`: a worker process's arguments (the node passes them).
struct worker_process_flags {
  std::string parent;       ///< 127.0.0.1:PORT of the node's gate
  long parent_pid = 0;      ///< the node's pid (the child exits if it is already gone)
  std::string worker;       ///< its worker's name (shown in ps; the gate's answer is what counts)
  std::string token;        ///< its slot's token (also read from TROUPE_WORKER_TOKEN when empty)
  std::string config_file;  ///< the node's recipe file
  std::vector<std::string> sets;  ///< every --set the node's recipe was composed with
};

/// Runs a worker process: loads the node's recipe, greets the node's gate,
/// spawns the worker and hands it to its slot; returns once the worker stopped
/// (0) or at once when it cannot start (1) or the node is gone (1).
int run_worker_process(const worker_process_flags& flags, const app_types& types);

}  // namespace troupe
