#pragma once
/// \file
/// One worker's admission (issue 13, docs/SUPERVISION.md "Admission"): the
/// CPU temperature of its users (cpu_admission) and the resident memory it
/// answers for, combined into one verdict per sample: whether it admits
/// newcomers, why not, when it may again, whether it should shed a user
/// (offload) or be replaced (occupancy). Plain data, owned by the worker
/// actor; time, CPU and memory figures are passed in.

#include "registry/cpu_admission.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe::registry {

/// Why a worker does not admit (mapped to troupe::refusal_reason by the actor).
/// memory: its own resident memory; machine_memory: the machine's memory in use
/// past machine_memory_alarm_percent; users: it hosts worker_max_users.
enum class admission_block : std::uint8_t { none, cpu, memory, machine_memory, users };

/// A group's admission keys, as one worker applies them.
struct worker_admission_settings {
  std::optional<cpu_admission_settings> cpu;  ///< nullopt: CPU admission off (cpu_admission_close_percent 0)
  /// isolation "process": the worker's process is its own, judged against its
  /// share of the group's budget; "thread": the node's process, judged against
  /// the whole budget.
  bool own_process = false;
  double memory_max_percent = 90;               ///< of the machine, for the group
  double worker_memory_admission_percent = 90;  ///< of a worker's share (own_process only)
  double restart_occupancy_max_percent = 100;   ///< of a worker's share (own_process only); 0: off
  int max_workers = 8;                          ///< the group's share divisor (group_settings::max_workers())
  int max_users = 0;                            ///< users hosted at most (worker_max_users); 0: no cap
  /// The machine's memory in use past which nobody is admitted (limits.machine_memory_alarm_percent); 0: off.
  double machine_memory_alarm_percent = 0;
};

/// One worker's admission state.
class worker_admission {
public:
  using clock = cpu_admission::clock;
  using seconds = std::chrono::duration<double>;

  /// The hysteresis of memory admission: it reopens this share of the limit's
  /// base (the worker's share, or the group's budget in thread isolation)
  /// below the point where it closed.
  static constexpr double memory_reopen_margin = 0.10;

  /// `mem_total_bytes`: the machine's memory (registry::mem_total_bytes() in
  /// service; any figure in tests); 0 turns memory admission off (unknown).
  /// Throws std::invalid_argument for bad CPU thresholds (cpu_admission) or max_workers < 1.
  worker_admission(const worker_admission_settings& settings, std::uint64_t mem_total_bytes);

  /// One beat at `now`: the users' CPU (percent of one core since the last
  /// beat; ignored when CPU admission is off) and, when it was read this
  /// beat, the resident memory judged. Returns true when admits() or
  /// reason() changed (the worker tells its group).
  bool sample(std::optional<double> cpu_percent, std::optional<std::uint64_t> rss_bytes, clock::time_point now);

  /// The machine's memory in use now (percent; registry::machine_memory_used_percent).
  /// Returns true when admits() or reason() changed.
  bool sample_machine(double used_percent);
  /// The users it hosts now (after each arrival and departure). Returns true
  /// when admits() or reason() changed.
  bool count_users(std::size_t hosted);
  /// The cap changed while it runs (a hot apply of worker_max_users; 0: none).
  bool set_max_users(int max_users);
  /// Whether one more user may be hosted under worker_max_users (the hard
  /// check at arrival: reports take a moment to reach the commander).
  bool room_for_one_more() const noexcept { return max_users_ <= 0 || hosted_ < static_cast<std::size_t>(max_users_); }

  bool admits() const noexcept { return reason() == admission_block::none; }
  /// The first that blocks of: memory, machine_memory, users, cpu; else none.
  admission_block reason() const noexcept;

  /// Seconds until it may admit again, as far as it knows: the longest of
  /// the blocks in force (cpu_retry_after, memory_retry_after); 0 when it admits.
  /// `until_first_idle_freeze`: how long until the least recently active user
  /// of the worker reaches his idle freeze (nullopt: it hosts nobody).
  std::uint32_t retry_after(std::optional<seconds> until_first_idle_freeze) const;

  /// CPU: the time the temperature needs to cool from its value to the reopen
  /// threshold with the cooling constant: cooling × ln(T / reopen), at least 1 s.
  std::uint32_t cpu_retry_after() const;

  /// Memory: a freeze frees memory, and the next one due is the least
  /// recently active user's idle freeze; at least 1 s. Nobody hosted: 1 s
  /// (the next memory reading is what can change it).
  static std::uint32_t memory_retry_after(std::optional<seconds> until_first_idle_freeze);

  /// Closed by CPU and hotter than cpu_offload_percent: shed a user this beat.
  bool wants_offload() const noexcept { return cpu_ && cpu_->wants_offload(); }
  /// own_process only: the resident memory passed restart_occupancy_max_percent of the share.
  bool wants_replacement() const noexcept;

  bool cpu_on() const noexcept { return cpu_.has_value(); }
  double cpu_temperature() const noexcept { return cpu_ ? cpu_->temperature() : 0; }
  std::optional<std::uint64_t> rss_bytes() const noexcept { return rss_; }

  /// The memory limits in bytes (0: memory admission off).
  std::uint64_t memory_close_bytes() const noexcept { return close_bytes_; }
  std::uint64_t memory_reopen_bytes() const noexcept { return reopen_bytes_; }
  std::uint64_t replacement_bytes() const noexcept { return replace_bytes_; }

private:
  std::optional<cpu_admission> cpu_;
  cpu_admission_settings cpu_settings_;
  std::uint64_t close_bytes_ = 0, reopen_bytes_ = 0, replace_bytes_ = 0;
  std::optional<std::uint64_t> rss_;
  bool memory_closed_ = false;
  double machine_alarm_percent_ = 0;
  bool machine_closed_ = false;
  int max_users_ = 0;
  std::size_t hosted_ = 0;
};

/// Offload's choice: the least busy of the users active since the last
/// offload. Each beat it is given every hosted user's busy time so far
/// (nanoseconds, an ever-growing counter that starts at 0 with his actor). The
/// window opens at the first beat after clear() (nothing is chosen then) and
/// again after each choice. Users with no busy time in the window are idle,
/// not active: freezing them sheds no CPU. At least two users must have been
/// active in the window: shedding the only busy one would empty the worker's
/// load instead of lightening it, and a handler's time counts only once it
/// ended, so a long handler shows in some beats and not others.
class offload_ledger {
public:
  /// The user to freeze this beat, or nullopt (first beat of a window, or
  /// fewer than two users active in the window).
  std::optional<std::string> beat(const std::vector<std::pair<std::string_view, std::uint64_t>>& busy_ns);
  /// Forgets the window (offload stopped: the next beat opens a new one).
  void clear() noexcept {
    open_ = false;
    since_.clear();
  }

private:
  bool open_ = false;
  std::unordered_map<std::string, std::uint64_t> since_;  // busy time at the window's start (absent: 0, born since)
};

}  // namespace troupe::registry
