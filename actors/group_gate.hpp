#pragma once
/// \file
/// What a worker shares with its users about its group's degradation: the
/// worker sets it when its group says so (worker_handle's degraded_atom), and
/// every user actor reads it before serving a request, so a user reached
/// through the front's route cache is refused as well (docs/SUPERVISION.md
/// "Restart intensity, degraded groups, quarantined users").

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace troupe {

class group_gate {
public:
  using clock = std::chrono::steady_clock;

  /// `group`'s gate; `restart_text`: why it is degraded when it recovers later
  /// (its restart intensity), `final_text`: when no recovery is coming.
  group_gate(std::string group, std::string restart_text, std::string final_text)
    : group_(std::move(group)), restart_text_(std::move(restart_text)), final_text_(std::move(final_text)) {}

  /// Degraded now; `retry_after_seconds` until the recovery (0: none is coming).
  void degrade(std::uint32_t retry_after_seconds) {
    std::int64_t until = 0;
    if (retry_after_seconds > 0)
      until = ms(clock::now()) + static_cast<std::int64_t>(retry_after_seconds) * 1000;
    until_ms_.store(until, std::memory_order_relaxed);
  }
  void recover() { until_ms_.store(serving, std::memory_order_relaxed); }

  bool degraded() const noexcept { return until_ms_.load(std::memory_order_relaxed) != serving; }

  /// nullopt while serving; else the seconds a refused request should wait
  /// (counted down to the recovery, at least 1; 0: retrying will not help).
  std::optional<std::uint32_t> retry_after() const noexcept {
    auto until = until_ms_.load(std::memory_order_relaxed);
    if (until == serving)
      return std::nullopt;
    if (until == 0)
      return 0u;
    auto left = static_cast<double>(until - ms(clock::now())) / 1000.0;
    return static_cast<std::uint32_t>(std::max(1.0, std::ceil(left)));
  }

  /// "group <g> is degraded: <why>", for a refusal carrying `retry_after`.
  std::string text(std::uint32_t retry_after) const {
    return "group " + group_ + " is degraded: " + (retry_after > 0 ? restart_text_ : final_text_);
  }

private:
  static constexpr std::int64_t serving = -1;
  static std::int64_t ms(clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }

  const std::string group_, restart_text_, final_text_;
  std::atomic<std::int64_t> until_ms_{serving};  // -1 serving; 0 degraded for good; else degraded until (steady ms)
};

}  // namespace troupe
