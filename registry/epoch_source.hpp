#pragma once
/// \file
/// Owner epochs for fencing (DESIGN.md "Cluster", docs/CLUSTER.md "Fencing"):
/// every placement of a user (every spawn of his actor) carries an epoch that
/// only grows, across commander restarts and takeovers on other processes.
///
///     epoch = (commander generation << 32) | counter
///
/// The generation is bumped durably in the deposit each time a commander
/// starts (store::deposit::next_commander_generation), so two commanders never
/// share one; the counter numbers the placements of one commander from 1.
/// Epoch 0 is "no epoch" (legacy parcels): older than every epoch made here.
/// A plain class owned by one actor (the commander): no locks.

#include <cstdint>
#include <optional>

namespace troupe::registry {

class epoch_source {
public:
  static constexpr unsigned counter_bits = 32;
  static constexpr std::uint64_t max_counter = (std::uint64_t{1} << counter_bits) - 1;
  static constexpr std::uint64_t max_generation = (std::uint64_t{1} << (64 - counter_bits)) - 1;

  /// `counter_limit`: the placements one generation numbers (at most
  /// max_counter; smaller in tests, to reach the end of a generation).
  explicit epoch_source(std::uint64_t counter_limit = max_counter) noexcept
      : limit_(counter_limit == 0 || counter_limit > max_counter ? max_counter : counter_limit) {}

  /// The epoch of placement `counter` under `generation` (both within their bits).
  static constexpr std::uint64_t make(std::uint64_t generation, std::uint64_t counter) noexcept {
    return (generation << counter_bits) | (counter & max_counter);
  }
  static constexpr std::uint64_t generation_of(std::uint64_t epoch) noexcept { return epoch >> counter_bits; }
  static constexpr std::uint64_t counter_of(std::uint64_t epoch) noexcept { return epoch & max_counter; }

  /// Starts numbering under `generation` (from counter 1). Refused (false,
  /// nothing changes) for generation 0, one above max_generation, or one not
  /// above the current generation: epochs never go back.
  bool start(std::uint64_t generation) noexcept;

  /// True once a generation was given.
  bool started() const noexcept { return generation_ != 0; }
  std::uint64_t generation() const noexcept { return generation_; }

  /// The next epoch: above every epoch this source gave before. nullopt when
  /// not started, or when the generation's counter is used up (start a new
  /// generation: wants_new_generation() says so long before).
  std::optional<std::uint64_t> next() noexcept;

  /// True when half of the generation's counter is used: time to ask the
  /// deposit for a new generation (the owner asks once, asynchronously).
  bool wants_new_generation() const noexcept { return started() && counter_ > limit_ / 2; }

  /// The last epoch given (0: none yet).
  std::uint64_t last() const noexcept { return counter_ == 0 ? 0 : make(generation_, counter_); }

private:
  std::uint64_t limit_;
  std::uint64_t generation_ = 0;
  std::uint64_t counter_ = 0;
};

}  // namespace troupe::registry
