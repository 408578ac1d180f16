#pragma once
/// \file
/// (Internal to transport/.) The hot path without a hand-off (issue 26;
/// docs/design.md "The hot path"): each io thread of the front is a CAF
/// execution unit too. A request the front sends to a local user actor from
/// an io thread is enqueued with that thread's unit as its context, so an idle
/// actor is resumed right there, on the thread that parsed the request, instead
/// of waking a scheduler thread; its answer is posted to the session's strand
/// on the same thread (no wake-up either). The user stays an actor with one
/// mailbox: a busy actor (running on another thread) only gets the message
/// queued, and what he sends to other actors goes to the scheduler.
///
/// What it costs: a handler that runs long stalls the sockets of its io
/// thread. Each resume is bounded (`throughput` messages; past that the rest
/// of his mailbox goes to a scheduler thread), and one that runs past
/// limits.shard_stall_ms is counted (troupe_shard_stalls_total) and logged at
/// most once a second; a watchdog reports a thread stuck in a handler while it is.

#include <caf/execution_unit.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace caf {
class actor_system;
class resumable;
}  // namespace caf

namespace troupe {

class inline_unit final : public caf::execution_unit {
public:
  using clock = std::chrono::steady_clock;
  /// What a stall report gets: how long the handler ran.
  using stall_report = std::function<void(std::chrono::milliseconds)>;

  /// `throughput`: messages one resume may handle; `stall`: past it a resume is reported to `report`.
  inline_unit(caf::actor_system& sys, std::size_t throughput, std::chrono::milliseconds stall, stall_report report);
  ~inline_unit() override;

  /// The calling thread's unit (null off the front's io threads).
  static inline_unit* current() noexcept;
  /// Makes this the calling thread's unit until it is destroyed (an io thread's first step).
  void install() noexcept;

  /// An actor that the current send unblocked: resumed by drain(); one that an
  /// actor running here unblocks goes to the scheduler.
  void exec_later(caf::resumable* job) override;
  /// Resumes the actor the last send unblocked, if any, here and now.
  void drain();

  /// Since when this thread runs a handler (0: it does not): the watchdog's view.
  std::int64_t busy_since_ns() const noexcept { return busy_since_ns_.load(std::memory_order_relaxed); }

private:
  std::size_t throughput_;
  std::chrono::milliseconds stall_;
  stall_report report_;
  caf::resumable* next_ = nullptr;
  bool draining_ = false;
  std::atomic<std::int64_t> busy_since_ns_{0};
};

/// Watches the units of the io threads from a thread of its own: a thread that
/// has been running one handler past `stall` is reported while it does (it
/// cannot report itself: it is stuck), once per handler.
class stall_watchdog {
public:
  using report = std::function<void(std::chrono::milliseconds running)>;
  stall_watchdog(std::chrono::milliseconds stall, report r);
  ~stall_watchdog();  // stops and joins its thread
  stall_watchdog(const stall_watchdog&) = delete;
  stall_watchdog& operator=(const stall_watchdog&) = delete;

  void watch(const inline_unit* unit);
  void unwatch(const inline_unit* unit);

private:
  void run();

  std::chrono::milliseconds stall_;
  report report_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::pair<const inline_unit*, std::int64_t>> units_;  // and the handler start last reported
  std::thread thread_;
};

/// Sends `xs...` to the local actor `h` from the front, as anon_send would; on
/// an io thread the recipient, if idle, runs here before this returns.
template <class Handle, class... Ts>
void send_here(const Handle& h, Ts&&... xs);

}  // namespace troupe

#include <caf/actor_cast.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/send.hpp>

namespace troupe {

template <class Handle, class... Ts>
void send_here(const Handle& h, Ts&&... xs) {
  auto* unit = inline_unit::current();
  if (!unit)
    return caf::anon_send(h, std::forward<Ts>(xs)...);
  auto* dest = caf::actor_cast<caf::abstract_actor*>(h);
  if (!dest)
    return;
  dest->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, std::forward<Ts>(xs)...), unit);
  unit->drain();
}

}  // namespace troupe
