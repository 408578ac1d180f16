#include "transport/deadline_list.hpp"

namespace troupe {

namespace {

thread_local deadline_list* this_thread_list = nullptr;

}  // namespace

deadline_list::deadline_list(const boost::asio::any_io_executor& ex) : timer_(ex) {}

deadline_list::~deadline_list() {
  if (this_thread_list == this)
    this_thread_list = nullptr;
  entries_.clear_and_dispose([](deadline_entry* e) { e->abandoned(); });
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

void deadline_list::set(deadline_entry& e, clock::time_point due) {
  if (e.is_linked())
    entries_.erase(entries_.iterator_to(e));
  e.due_ = due;
  entries_.insert(e);
  // Deadlines mostly grow (now + the same timeout): only an earlier one than
  // the armed wait moves the timer.
  if (!armed_ || due < armed_at_)
    arm(due);
}

void deadline_list::clear(deadline_entry& e) noexcept {
  if (e.is_linked())
    entries_.erase(entries_.iterator_to(e));
  // The timer stays armed: when it fires for nothing it arms for the earliest left.
}

void deadline_list::arm(clock::time_point at) {
  armed_ = true;
  armed_at_ = at;
  timer_.expires_at(at);  // cancels the wait armed before (its handler sees the error and returns)
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec)  // aborted: re-armed, or the list is gone (its pending wait is cancelled by its destructor)
      on_timer();
  });
}

void deadline_list::on_timer() {
  armed_ = false;
  auto now = clock::now();
  while (!entries_.empty() && entries_.begin()->due_ <= now) {
    auto& e = *entries_.begin();
    entries_.erase(entries_.begin());
    e.expired();  // may set deadlines again (its own or others')
  }
  if (!entries_.empty() && (!armed_ || entries_.begin()->due_ < armed_at_))
    arm(entries_.begin()->due_);
}

}  // namespace troupe
