#pragma once
/// \file
/// CPU admission of one worker (issue 13 "Admission"): a worker above
/// cpu_admission_close_percent is closed to new users and reopens only below
/// cpu_admission_reopen_percent, both judged on a *temperature*: the 100 ms
/// CPU samples through a filter that heats fast (cpu_heating_seconds, 1 s) and
/// cools slowly (cpu_cooling_seconds, 5 s), so one idle sample never reopens
/// a busy worker. Plain data, owned by one actor; time is passed in.

#include <chrono>
#include <optional>
#include <stdexcept>

namespace troupe::registry {

/// The filter: an exponential moving average whose time constant depends on
/// the direction, so that after `heating` seconds at a constant load above it
/// the temperature has covered 63 % of the gap (and after `cooling` seconds
/// below it, the same share downwards). Samples may come at any interval.
class cpu_temperature {
public:
  using clock = std::chrono::steady_clock;
  using seconds = std::chrono::duration<double>;

  /// Throws std::invalid_argument unless both constants are > 0.
  cpu_temperature(seconds heating, seconds cooling);

  /// Feeds one sample (percent of one core, ≥ 0) taken at `now`; the first
  /// sample sets the temperature. A sample older than the last is ignored.
  void sample(double percent, clock::time_point now);

  /// The temperature (0 before any sample).
  double value() const noexcept { return value_; }

private:
  seconds heating_, cooling_;
  double value_ = 0;
  std::optional<clock::time_point> last_;
};

/// The thresholds of one group (recipe `[[group]]` keys of the same names).
struct cpu_admission_settings {
  double close_percent = 0;                      ///< closed above it
  double reopen_percent = 0;                     ///< reopened below it; < close_percent
  std::optional<double> offload_percent;         ///< closed and above it: shed a user each beat; > close_percent
  cpu_temperature::seconds heating{1.0};
  cpu_temperature::seconds cooling{5.0};
  cpu_temperature::seconds admission_interval{0};  ///< skipped this long after it admitted someone
};

/// One worker's CPU admission state.
class cpu_admission {
public:
  using clock = cpu_temperature::clock;

  /// What a sample changed.
  enum class change { none, closed, reopened };

  /// Throws std::invalid_argument for thresholds out of order (reopen ≥
  /// close, offload ≤ close) or out of range (negative).
  explicit cpu_admission(const cpu_admission_settings& settings);

  /// Feeds a sample; closes above close_percent, reopens below reopen_percent
  /// (between the two, it stays as it was).
  change sample(double cpu_percent, clock::time_point now);

  bool open() const noexcept { return open_; }
  double temperature() const noexcept { return temperature_.value(); }

  /// Whether a newcomer may be placed here now: open, and not within
  /// admission_interval of the last admission (its load shows first).
  bool admits(clock::time_point now) const noexcept;

  /// A newcomer was placed here at `now`.
  void admitted(clock::time_point now) noexcept { last_admitted_ = now; }

  /// Closed and hotter than offload_percent: the worker should freeze its
  /// least busy user this beat.
  bool wants_offload() const noexcept;

private:
  cpu_admission_settings settings_;
  cpu_temperature temperature_;
  bool open_ = true;
  std::optional<clock::time_point> last_admitted_;
};

}  // namespace troupe::registry
