#pragma once
/// \file
/// A group's restart intensity (Erlang/OTP's intensity and period): the
/// worker restarts it allows within a sliding window, and what it is once it
/// gave up (degraded) until its recovery. A plain class, no actor: the group
/// actor asks it what to do with a worker that went down.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace troupe::registry {

/// Why a group is degraded.
enum class degradation : std::uint8_t {
  none,               ///< it is not
  restart_intensity,  ///< more than max_restarts worker restarts within the window
  all_parked,         ///< every slot is parked (permanent failure): retrying will not help
};

/// "restart_intensity", "all_parked", "none".
const char* to_string(degradation d) noexcept;

class restart_intensity {
public:
  using clock = std::chrono::steady_clock;

  /// `max_restarts` restarts allowed within `window_seconds`; a degraded group
  /// recovers after `recovery_seconds` (0: never); `slots` worker slots.
  restart_intensity(int max_restarts, double window_seconds, double recovery_seconds, std::size_t slots);

  /// A worker went down abnormally at `now`: true if it may be restarted
  /// (counted); false if the group is degraded (this restart made them more
  /// than max_restarts within the window, or it was degraded already).
  bool record(clock::time_point now);

  /// Slot `slot` will not be restarted again (a permanent failure); once every
  /// slot is parked the group is degraded for good. Grows the slots if needed.
  void park(std::size_t slot, clock::time_point now);
  bool parked(std::size_t slot) const noexcept { return slot < parked_.size() && parked_[slot]; }
  std::size_t parked_count() const noexcept;
  /// One more slot (a group that grew), not parked.
  void add_slot() { parked_.push_back(false); }
  std::size_t slots() const noexcept { return parked_.size(); }

  bool degraded() const noexcept { return why_ != degradation::none; }
  degradation why() const noexcept { return why_; }
  /// When it became degraded (meaningless when it is not).
  clock::time_point since() const noexcept { return since_; }

  /// When it recovers; nullopt when not degraded, recovery is off, or every slot is parked.
  std::optional<clock::time_point> recovery_at() const noexcept;

  /// Recovers if it is due at `now`: forgets the restarts and answers true
  /// (the caller starts the workers missing from the unparked slots).
  bool recover(clock::time_point now);

  /// Seconds until the recovery (rounded up, at least 1); 0 when none is coming
  /// (not degraded, recovery off, every slot parked): retrying will not help.
  std::uint32_t retry_after(clock::time_point now) const noexcept;

  /// Restarts counted within the window ending at `now`.
  std::size_t restarts_in_window(clock::time_point now);

private:
  void forget_before(clock::time_point now);
  void degrade(degradation why, clock::time_point now);

  int max_restarts_;
  clock::duration window_;
  clock::duration recovery_;  // zero: never
  std::deque<clock::time_point> restarts_;  // at most max_restarts + 1 kept
  std::vector<bool> parked_;
  degradation why_ = degradation::none;
  clock::time_point since_{};
};

}  // namespace troupe::registry
