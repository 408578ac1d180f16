#pragma once
/// \file
/// A user's streams and timers (docs/streaming.md, later()): the books his
/// actor keeps of them. A plain class: unit tests drive it without an actor
/// system. Only a user who streams or sets timers pays for one (his actor
/// holds it behind a pointer).

#include "actors/app.hpp"
#include "actors/stream.hpp"

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

namespace troupe {

class stream_book {
public:
  using clock = std::chrono::steady_clock;

  struct entry {
    stream_format format = stream_format::sse;
    stream_handlers handlers;
    streaming::credit_window credit;
    stream_sink_for_writers sink;  ///< set when the front's sink opened it
    clock::time_point since;
  };

  /// Opens a stream and returns its id; nullopt when `max` are open already.
  /// A stream the front never opened (its session went away before the answer
  /// reached it) holds a place: those older than `stale_before` are dropped first.
  std::optional<std::uint64_t> open(stream_format format, stream_handlers handlers, clock::time_point now,
                                    clock::time_point stale_before, std::size_t max);

  entry* find(std::uint64_t id);
  const entry* find(std::uint64_t id) const;
  void erase(std::uint64_t id) { streams_.erase(id); }
  /// The stream whose sink is `sink` (a sink that went down).
  std::optional<std::uint64_t> find_by_sink(const caf::actor_addr& sink) const;
  std::size_t streams() const noexcept { return streams_.size(); }

  /// A timer's callback (later()); nullopt when `max` are pending already.
  std::optional<std::uint64_t> add_timer(std::function<void()> fn, std::size_t max);
  /// The callback of timer `id`, taken out of the books; nullopt when it is gone.
  std::optional<std::function<void()>> take_timer(std::uint64_t id);
  std::size_t timers() const noexcept { return timers_.size(); }

  bool empty() const noexcept { return streams_.empty() && timers_.empty(); }

private:
  std::map<std::uint64_t, entry> streams_;
  std::uint64_t stream_seq_ = 0;
  std::map<std::uint64_t, std::function<void()>> timers_;
  std::uint64_t timer_seq_ = 0;
};

}  // namespace troupe
