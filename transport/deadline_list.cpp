#include "transport/deadline_list.hpp"

#include <time.h>

namespace troupe {

namespace {

thread_local deadline_list* this_thread_list = nullptr;

// steady_clock's clock (CLOCK_MONOTONIC) as of its last tick: a deadline starts
// at most a tick (a few ms) early, and no hardware clock is read for the three
// or four deadlines of each request.
deadline_list::clock::time_point coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return deadline_list::clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace

deadline_list::deadline_list(const boost::asio::any_io_executor& ex) : timer_(ex) {}

deadline_list::~deadline_list() {
  if (this_thread_list == this)
    this_thread_list = nullptr;
  for (auto& l : lanes_)
    l.due_order.clear_and_dispose([](deadline_entry* e) { e->abandoned(); });
}

deadline_list* deadline_list::current() noexcept {
  return this_thread_list;
}

void deadline_list::install() noexcept {
  this_thread_list = this;
}

deadline_list& deadline_list::here(std::unique_ptr<deadline_list>& own, const boost::asio::any_io_executor& ex) {
  if (this_thread_list)
    return *this_thread_list;
  if (!own)
    own = std::make_unique<deadline_list>(ex);
  return *own;
}

deadline_list::lane& deadline_list::lane_of(clock::duration timeout) noexcept {
  for (std::size_t i = 0; i < lanes_used_; ++i)
    if (lanes_[i].timeout == timeout)
      return lanes_[i];
  if (lanes_used_ < lane_count - 1) {
    lanes_[lanes_used_].timeout = timeout;
    return lanes_[lanes_used_++];
  }
  return lanes_[lane_count - 1];  // the mixed lane (its timeout is never matched: it stays zero)
}

void deadline_list::set_after(deadline_entry& e, clock::duration timeout) {
  e.unlink();
  e.due_ = coarse_now() + timeout;
  auto& lane = lane_of(timeout);
  // In a lane of one timeout the new deadline is the latest; the mixed lane
  // is walked from its end (deferred answers' odd timeouts, rare).
  auto at = lane.due_order.end();
  while (at != lane.due_order.begin() && std::prev(at)->due_ > e.due_)
    --at;
  lane.due_order.insert(at, e);
  if (!armed_ || e.due_ < armed_at_)
    arm(e.due_);
}

std::size_t deadline_list::size() const noexcept {
  std::size_t n = 0;
  for (auto& l : lanes_)
    n += l.due_order.size();
  return n;
}

void deadline_list::arm(clock::time_point at) {
  armed_ = true;
  armed_at_ = at;
  timer_.expires_at(at);  // cancels the wait armed before (its handler sees the error and returns)
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec)  // aborted: re-armed, or the list is gone (its destructor cancels the wait)
      on_timer();
  });
}

void deadline_list::on_timer() {
  armed_ = false;
  const auto now = clock::now();
  // Earliest first across the lanes: a late wake-up finds several lanes due.
  // An expiry may set deadlines again, its own included: they fall due after now.
  for (;;) {
    lane* first = nullptr;
    for (auto& l : lanes_)
      if (!l.due_order.empty() && l.due_order.front().due_ <= now &&
          (!first || l.due_order.front().due_ < first->due_order.front().due_))
        first = &l;
    if (!first)
      break;
    auto& e = first->due_order.front();
    first->due_order.pop_front();
    e.expired();
  }
  const deadline_entry* earliest = nullptr;
  for (auto& l : lanes_)
    if (!l.due_order.empty() && (!earliest || l.due_order.front().due_ < earliest->due_))
      earliest = &l.due_order.front();
  if (earliest && (!armed_ || earliest->due_ < armed_at_))
    arm(earliest->due_);
}

}  // namespace troupe
