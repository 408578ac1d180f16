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
/// remote actors to the front: their plain requests go on the process's pipes
/// (actors/worker_pipes.hpp, transport/worker_pipe.hpp), the rest through the forwarder.
///
/// The node listens on one *worker gate* (127.0.0.1, port 0; gate/listener.hpp)
/// that vets every connection before CAF's middleman sees it: a child proves
/// it holds the random token its slot made for it (one use), and reaches its
/// slot. The token, the node's recipe and its cookie secret reach the child
/// through an inherited descriptor (its bootstrap), never its command line or
/// its environment, which any local user may read in /proc.

#include "actors/worker.hpp"
#include "actors/worker_pipes.hpp"
#include "config/fwd.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

/// A slot's answer to its child's hello: whom it works for.
struct worker_hello {
  commander_for_users commander;    ///< the node's commander
  global_store_handle global_store; ///< the node's global store (its users' global operations go there)
  deposit_handle deposit;           ///< the node's deposit actor
  census_member_view census;        ///< the node's census
  std::string node_name; ///< the node's name (its users' placements carry it)
  std::string worker;    ///< the worker's name, e.g. "default-w1"
  std::string group;
  std::uint64_t generation = 0;  ///< of the slot's child: its ready names it (a stale child's is refused)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_hello& x) {
  return f(caf::meta::type_name("troupe.worker_hello"), x.commander, x.global_store, x.deposit, x.census, x.node_name,
           x.worker, x.group, x.generation);
}

/// A slot as its child sees it (what its connection through the worker gate
/// reaches): a worker, whom it works for, and the child's worker arriving.
using worker_process_handle = worker_handle::extend<
  /// From the child its gate let through: whom it works for.
  caf::replies_to<hello_atom>::with<worker_hello>,
  /// From the child of this generation: its worker is up.
  caf::reacts_to<ready_atom, std::uint64_t, worker_handle>,
  /// From the child's worker: what it admits; forwarded to the group as this slot's
  /// (the commander knows the slot, not the worker inside the child).
  caf::reacts_to<admission_atom, admission_report>,
  /// From the child's worker: past restart_occupancy_max_percent, its users
  /// frozen: start a fresh process (a replacement, not a failure: not counted).
  caf::reacts_to<replace_atom, caf::actor_addr, std::uint64_t>>;

/// Spawns the slot of worker `spec` of a process-isolated group, linked to
/// `group` (a group_handle), which it asks before every restart of the process.
/// `spec.ctx` holds the worker gate's port and tokens, and what the child's bootstrap carries.
worker_handle spawn_worker_process(caf::local_actor& group, worker_spec spec, const config::group_settings& settings);

/// How often a slot asks its child for a heartbeat: min(1 s, stuck_timeout_seconds / 4).
caf::timespan heartbeat_interval(const config::group_settings& settings);

/// `troupe worker ...`: a worker process's arguments (the node passes them;
/// none of them is a secret).
struct worker_process_flags {
  std::string parent;       ///< 127.0.0.1:PORT of the node's worker gate
  long parent_pid = 0;      ///< the node's pid (the child exits if it is already gone)
  std::string worker;       ///< its worker's name (shown in ps; its slot's answer is what counts)
  int bootstrap_fd = -1;    ///< the inherited descriptor of its bootstrap (-1: none)
};

/// The bootstrap's (node_context.hpp) JSON text, and back (throws std::invalid_argument on what is not one).
std::string encode_bootstrap(const worker_bootstrap& b);
worker_bootstrap decode_bootstrap(const std::string& text);

/// Serves a worker process's pipes from its node (transport/worker_pipe_server.hpp)
/// on the descriptors given, which it owns; what it returns is kept as long as the worker runs.
using worker_pipe_serving = std::function<std::shared_ptr<worker_pipe_service>(caf::actor_system& sys,
                                                                              node_context_ptr ctx, std::vector<int> fds)>;

/// Runs a worker process: reads its bootstrap, passes the node's worker gate,
/// spawns the worker, serves its pipes (`serve_pipes`; without it, every
/// request comes through CAF's middleman) and hands the worker to its slot;
/// returns once the worker stopped (0), at once when the gate refuses it or it
/// cannot start (1), or the node is gone (1); says why on stderr.
int run_worker_process(const worker_process_flags& flags, const app_types& types,
                       const worker_pipe_serving& serve_pipes = {});

}  // namespace troupe
