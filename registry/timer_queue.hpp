#pragma once
/// \file
/// The timers of a worker's users, in one min-heap: 32 bytes per pending
/// timer. A CAF delayed message costs ~180 bytes until due (its mailbox
/// element and the clock's entry) and every idle user keeps one pending (his
/// idle check), so 100,000 idle users held ~18 MB in the clock (issue 14, S5).
/// The worker keeps one delayed message for the earliest entry. Plain data,
/// owned by one actor, no locks.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace troupe::registry {

class timer_queue {
public:
  using clock = std::chrono::steady_clock;

  /// One timer: due at `due`, for actor `id`, `which` timer and its `arg`.
  struct entry {
    clock::time_point due;
    std::uint64_t id = 0;
    std::uint64_t arg = 0;
    std::uint8_t which = 0;
  };

  void push(const entry& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  /// When the earliest timer is due; nullopt when none is pending.
  std::optional<clock::time_point> next_due() const {
    if (heap_.empty())
      return std::nullopt;
    return heap_.front().due;
  }

  /// Takes every timer due at `now` out, earliest first, and calls `f(entry)` for each.
  template <class F>
  std::size_t pop_due(clock::time_point now, F&& f) {
    std::size_t n = 0;
    while (!heap_.empty() && heap_.front().due <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      auto e = heap_.back();
      heap_.pop_back();
      ++n;
      f(e);
    }
    if (heap_.empty() && heap_.capacity() > 1024)
      heap_.shrink_to_fit();  // a burst's buffer is given back
    return n;
  }

  /// Drops the timers `keep(id)` says no to (actors that are gone); returns how many.
  template <class Keep>
  std::size_t compact(Keep&& keep) {
    auto before = heap_.size();
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(), [&](const entry& e) { return !keep(e.id); }),
                heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), later);
    if (heap_.capacity() > 2 * heap_.size() + 1024)
      heap_.shrink_to_fit();
    return before - heap_.size();
  }

  std::size_t size() const noexcept { return heap_.size(); }
  bool empty() const noexcept { return heap_.empty(); }

private:
  static bool later(const entry& a, const entry& b) noexcept { return a.due > b.due; }
  std::vector<entry> heap_;
};

}  // namespace troupe::registry
