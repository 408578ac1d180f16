#pragma once
/// \file
/// What `/_troupe/health` answers, computed from memory only: the io thread
/// reads a few atomics and never asks an actor. The deposit actor writes its
/// last write outcomes here; the health actor (a 1 s tick) keeps one-minute
/// sliding windows over the node's counters (quarantined parcels, user
/// restarts) and has the deposit probed when nothing was written lately.

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace caf {
class actor_system;
}

namespace troupe {

struct node_context;
struct node_metrics;
struct serving_signal;

/// The signals health is judged on (written by the deposit and health actors).
struct health_signals {
  /// Deposit writes (batches, probes) failed in a row since the last success; 0: writes work.
  std::atomic<std::uint64_t> deposit_consecutive_failures{0};
  std::atomic<std::int64_t> deposit_last_failure_unix_ms{0};  ///< 0: never
  std::atomic<std::int64_t> deposit_last_success_unix_ms{0};  ///< 0: never
  /// Parcels quarantined within the last minute (troupe_deposit_quarantined_total's growth).
  std::atomic<std::uint64_t> quarantined_last_minute{0};
  /// User restarts within the last minute (troupe_user_restarts_total's growth).
  std::atomic<std::uint64_t> restarts_last_minute{0};
  /// Seconds the windows cover (up to 60: less right after start).
  std::atomic<std::uint32_t> window_seconds{0};

  // -- capacity (docs/SUPERVISION.md "Capacity guards"), sampled each second ------
  /// The machine's memory in use, percent (-1: unknown).
  std::atomic<double> machine_memory_used_percent{-1};
  /// The node process's resident memory, percent of the machine's (-1: unknown).
  std::atomic<double> node_memory_percent{-1};
  /// Free space of the filesystem deposit's disk, percent (-1: unknown or postgres).
  std::atomic<double> deposit_free_percent{-1};
  /// Past limits.machine_memory_alarm_percent (the workers close on their own reading).
  std::atomic<bool> machine_memory_alarm{false};
  /// Past limits.commander_memory_max_percent: the commander here places no new guest.
  std::atomic<bool> commander_memory_high{false};
  /// Under deposit.low_space_percent free: the commander here places no new guest.
  std::atomic<bool> deposit_low_space{false};
};

/// The capacity limits health judges the figures against.
struct capacity_limits {
  double machine_memory_alarm_percent = 95;
  double commander_memory_max_percent = 100;
  double low_space_percent = 5;  ///< 0: off
};

/// Sets the three flags of `s` from its figures and `limits` (the health
/// actor, after each sample). The memory flags clear 5 points below their
/// limit, the space flag 1 point above (no flapping on the edge).
void judge_capacity(health_signals& s, const capacity_limits& limits);

/// One answer of /_troupe/health: 200 {"status":"ok"}; 200 degraded (the node
/// still makes state durable) or 503 degraded (deposit writes failing now, or
/// a group degraded), with {"status":"degraded","reasons":[...]} and, while a
/// group is degraded, "degraded_groups": [{"group", "reason", "since",
/// "retry_after"}] (docs/SUPERVISION.md).
struct health_answer {
  std::uint16_t status = 200;
  std::string body;
};

/// Judges the signals (capacity warnings keep the status 200); `restart_rate_limit`: user restarts per second (over
/// the window) above which the node is degraded; `metrics` (if given): its
/// groups' degradation (group_counters, atomics only).
/// `serving` (if given): a cluster member's right to serve; without it (fenced,
/// cut off from its majority, or not joined yet) health is 503 `not_serving`,
/// so that a load balancer takes the member out of its pool.
health_answer assess_health(const health_signals& s, double restart_rate_limit,
                            const node_metrics* metrics = nullptr, const serving_signal* serving = nullptr);

/// Probe the backend unless a write succeeded within `fresh_ms` (actors/deposit.hpp).
using probe_write_atom = caf::atom_constant<caf::atom("dprobe")>;

/// What the health actor needs of the deposit actor (a part of deposit_handle).
using deposit_prober = caf::typed_actor<caf::reacts_to<probe_write_atom, std::int64_t>>;

/// Spawns the health actor: every second it samples the node's counters into
/// its windows (ctx->health), and every node.health_probe_seconds it has
/// `deposit` (the deposit actor) probe the backend unless a write succeeded
/// within that period. A top-level actor the node stops.
caf::actor spawn_health(caf::actor_system& sys, std::shared_ptr<node_context> ctx, deposit_prober deposit);

/// Milliseconds since the Unix epoch (the wall clock health reports in).
std::int64_t unix_now_ms();

}  // namespace troupe
