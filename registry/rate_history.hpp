#pragma once
/// \file
/// The node's rates over time: a ring buffer of one sample a second (requests,
/// errors, wakes and freezes per second, p50/p99 request latency), made from
/// the node's cumulative counters read at each tick. Plain data: its owner
/// (node_metrics) guards it; the console draws it, GET /_troupe/history
/// answers it (README "Admin surface").

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::registry {

/// Upper bounds (µs) of the latency buckets: 1-2-5 steps from 10 µs to 10 s;
/// one more bucket holds everything slower.
inline constexpr std::array<std::uint64_t, 19> latency_bounds_us{
  10, 20, 50, 100, 200, 500, 1'000, 2'000, 5'000, 10'000, 20'000, 50'000, 100'000, 200'000, 500'000,
  1'000'000, 2'000'000, 5'000'000, 10'000'000};
inline constexpr std::size_t latency_buckets = latency_bounds_us.size() + 1;

/// Counts per latency bucket (not cumulative).
using latency_counts = std::array<std::uint64_t, latency_buckets>;

/// The bucket of a latency of `us` microseconds.
std::size_t latency_bucket(std::uint64_t us) noexcept;

/// The `q` quantile (0 < q ≤ 1) of `counts`, in milliseconds, interpolated
/// linearly inside its bucket; nullopt when `counts` holds nothing. Past the
/// last bound it answers that bound (10 s): the buckets know no more.
std::optional<double> latency_quantile_ms(const latency_counts& counts, double q) noexcept;

/// The node's cumulative counters at one instant.
struct rate_counters {
  std::uint64_t requests = 0;  ///< HTTP requests answered
  std::uint64_t errors = 0;    ///< of them answered 5xx
  std::uint64_t wakes = 0;     ///< users woken from their parcel
  std::uint64_t freezes = 0;   ///< users frozen to the deposit
  latency_counts latency{};    ///< the answered requests by latency bucket
};

/// One second of the node: rates over the interval that ends at `unix_ms`.
struct rate_sample {
  std::int64_t unix_ms = 0;
  double requests_per_s = 0;
  double errors_per_s = 0;
  double wakes_per_s = 0;
  double freezes_per_s = 0;
  std::optional<double> p50_ms;  ///< none: no request answered in the interval
  std::optional<double> p99_ms;
};

/// A fixed number of samples, the oldest dropped first.
class rate_history {
public:
  /// Keeps at most `capacity` samples (at least 1).
  explicit rate_history(std::size_t capacity = 600);

  /// The counters read at `unix_ms`: appends the rates since the previous
  /// call. The first call (and one whose clock did not move forward) only sets
  /// the baseline. A counter that went down counts as no change.
  void record(std::int64_t unix_ms, const rate_counters& now);

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return ring_.size(); }
  /// Sample `i`, 0 the oldest (i < size()).
  const rate_sample& at(std::size_t i) const { return ring_[(head_ + i) % ring_.size()]; }
  /// Every sample, oldest first.
  std::vector<rate_sample> samples() const;
  /// The newest sample, if any.
  std::optional<rate_sample> latest() const;

  /// {"interval_seconds": 1, "capacity": N, "samples": [...]}, oldest first.
  nlohmann::json to_json() const;

private:
  std::vector<rate_sample> ring_;
  std::size_t head_ = 0;  // the oldest sample
  std::size_t size_ = 0;
  std::optional<std::int64_t> last_ms_;
  rate_counters last_;
};

/// One sample as JSON: {"t": "<ISO UTC>", "unix_ms", "requests_per_s", ...,
/// "p50_ms", "p99_ms"} (the latencies null when no request was answered).
nlohmann::json to_json(const rate_sample& s);

/// `unix_ms` as ISO 8601 in UTC with milliseconds: "2026-12-02T15:04:05.123Z".
std::string iso_utc(std::int64_t unix_ms);

}  // namespace troupe::registry
