#include "transport/inline_unit.hpp"

#include <caf/actor_system.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include <algorithm>
#include <utility>

namespace troupe {

namespace {
thread_local inline_unit* this_thread_unit = nullptr;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(inline_unit::clock::now().time_since_epoch()).count();
}
}  // namespace

inline_unit::inline_unit(caf::actor_system& sys, std::size_t throughput, std::chrono::milliseconds stall,
                         stall_report report)
  : caf::execution_unit(&sys), throughput_(throughput), stall_(stall), report_(std::move(report)) {}

inline_unit::~inline_unit() {
  if (this_thread_unit == this)
    this_thread_unit = nullptr;
  if (auto* job = std::exchange(next_, nullptr))
    system().scheduler().enqueue(job);
}

inline_unit* inline_unit::current() noexcept {
  return this_thread_unit;
}

void inline_unit::install() noexcept {
  this_thread_unit = this;
}

void inline_unit::exec_later(caf::resumable* job) {
  // Only the recipient of the front's own send runs here: what it unblocks in
  // turn (the commander, a hub, another user) is not this request's path.
  if (draining_ || next_)
    return system().scheduler().enqueue(job);
  next_ = job;
}

void inline_unit::drain() {
  auto* job = std::exchange(next_, nullptr);
  if (!job)
    return;
  draining_ = true;
  auto t0 = now_ns();
  busy_since_ns_.store(t0, std::memory_order_relaxed);
  auto result = job->resume(this, throughput_);
  busy_since_ns_.store(0, std::memory_order_relaxed);
  draining_ = false;
  switch (result) {
    case caf::resumable::resume_later:  // more mail than one resume takes: a scheduler thread goes on
      system().scheduler().enqueue(job);
      break;
    case caf::resumable::awaiting_message:
    case caf::resumable::done:
    case caf::resumable::shutdown_execution_unit:
      intrusive_ptr_release(job);
      break;
  }
  auto took = std::chrono::nanoseconds(now_ns() - t0);
  if (took > stall_ && report_)
    report_(std::chrono::duration_cast<std::chrono::milliseconds>(took));
}

stall_watchdog::stall_watchdog(std::chrono::milliseconds stall, report r)
  : stall_(stall), report_(std::move(r)), thread_([this] { run(); }) {}

stall_watchdog::~stall_watchdog() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void stall_watchdog::watch(const inline_unit* unit) {
  std::lock_guard<std::mutex> guard{mutex_};
  units_.emplace_back(unit, 0);
}

void stall_watchdog::unwatch(const inline_unit* unit) {
  std::lock_guard<std::mutex> guard{mutex_};
  units_.erase(std::remove_if(units_.begin(), units_.end(), [unit](auto& u) { return u.first == unit; }),
               units_.end());
}

void stall_watchdog::run() {
  // Half the bound between looks: a stall is seen at most 1.5 bounds after its handler began.
  auto period = std::max(stall_ / 2, std::chrono::milliseconds(10));
  std::unique_lock<std::mutex> lock{mutex_};
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    auto now = now_ns();
    for (auto& [unit, reported] : units_) {
      auto since = unit->busy_since_ns();
      if (since == 0 || since == reported || std::chrono::nanoseconds(now - since) < stall_)
        continue;
      reported = since;
      report_(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(now - since)));
    }
  }
}

}  // namespace troupe
