#pragma once
/// \file
/// A log line that can come once per event under overload (a failed request,
/// a crashing handler): written at most once per period, with the count of
/// those left out since the last line. Atomics only: any thread may call it.
/// One per concern and per node (a member of the node's context or front),
/// never a global.

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_set>

namespace troupe {

class rate_limited_log {
public:
  explicit rate_limited_log(spdlog::level::level_enum level = spdlog::level::warn,
                            std::chrono::steady_clock::duration period = std::chrono::seconds(1))
    : level_(level), period_(period.count()) {}

  template <class... Args>
  void operator()(const char* format, const Args&... args) {
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    auto last = last_.load(std::memory_order_relaxed);
    if (now - last < period_ || !last_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      suppressed_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    auto left_out = suppressed_.exchange(0, std::memory_order_relaxed);
    auto line = fmt::format(format, args...);
    if (left_out)
      spdlog::log(level_, "{} (and {} more like it since the last such line)", line, left_out);
    else
      spdlog::log(level_, "{}", line);
  }

private:
  spdlog::level::level_enum level_;
  std::chrono::steady_clock::rep period_;
  std::atomic<std::chrono::steady_clock::rep> last_{std::numeric_limits<std::chrono::steady_clock::rep>::min() / 2};
  std::atomic<std::uint64_t> suppressed_{0};
};

/// A log line once per key (a route whose handler answers something invalid):
/// written the first time its key is seen. At most `max_keys` keys are
/// remembered; past them nothing new is logged (its memory is bounded). Any
/// thread may call it.
class once_per_key_log {
public:
  explicit once_per_key_log(spdlog::level::level_enum level = spdlog::level::err, std::size_t max_keys = 1024)
    : level_(level), max_keys_(max_keys) {}

  template <class... Args>
  void operator()(const std::string& key, const char* format, const Args&... args) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (seen_.size() >= max_keys_ || !seen_.insert(key).second)
        return;
    }
    spdlog::log(level_, "{}", fmt::format(format, args...));
  }

private:
  spdlog::level::level_enum level_;
  std::size_t max_keys_;
  std::mutex mutex_;
  std::unordered_set<std::string> seen_;
};

}  // namespace troupe
