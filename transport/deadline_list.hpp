#pragma once
/// \file
/// (Internal to transport/.) The deadlines of one io thread — its user calls'
/// (504) and its connections' reads and writes — kept by one timer of that
/// thread (issue 26: "one timer per connection, not per request"). A timer per
/// call and Beast's per-operation timers cost a wait, a cancel and a queued
/// completion each, three times per keep-alive request (a tenth of a warm
/// request's instructions). Here a deadline is a node in an intrusive list (no
/// allocation): deadlines set with the same timeout fall due in the order they
/// were set, so each timeout has its lane, appended at its end and cleared from
/// anywhere in constant time; the one timer is armed for the earliest deadline
/// only, and fires about once per timeout span while requests keep coming.
///
/// Single-threaded by design: an entry is set, cleared and expired on the io
/// thread of its list only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/intrusive/list.hpp>

#include <array>
#include <chrono>
#include <memory>

namespace troupe {

class deadline_list;

/// What has a deadline: a user call, a connection's read or write. Linked while
/// its deadline is set; its owner keeps it alive that long.
class deadline_entry
  : public boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::auto_unlink>> {
public:
  using clock = std::chrono::steady_clock;

  deadline_entry() = default;
  deadline_entry(const deadline_entry&) = delete;
  deadline_entry& operator=(const deadline_entry&) = delete;

  bool armed() const noexcept { return is_linked(); }
  clock::time_point due() const noexcept { return due_; }

protected:
  ~deadline_entry() = default;  // clears itself (auto-unlink): destroyed on its list's thread

private:
  friend class deadline_list;
  /// The deadline passed: runs once, already cleared, on the list's thread.
  virtual void expired() = 0;
  /// The list goes away (its io thread ends) with this still set.
  virtual void abandoned() {}

  clock::time_point due_{};
};

class deadline_list {
public:
  using clock = deadline_entry::clock;

  explicit deadline_list(const boost::asio::any_io_executor& ex);
  ~deadline_list();  // the entries still set are abandoned
  deadline_list(const deadline_list&) = delete;
  deadline_list& operator=(const deadline_list&) = delete;

  /// The calling thread's list (null off the front's io threads).
  static deadline_list* current() noexcept;
  /// Makes this the calling thread's list until it is destroyed (an io thread's first step).
  void install() noexcept;
  /// The calling thread's list; off the front's io threads, `own` (made on `ex` if empty).
  static deadline_list& here(std::unique_ptr<deadline_list>& own, const boost::asio::any_io_executor& ex);

  /// Sets `e`'s deadline `timeout` from now (moving it if it was set).
  void set_after(deadline_entry& e, clock::duration timeout);
  /// Clears `e`'s deadline, if set.
  static void clear(deadline_entry& e) noexcept { e.unlink(); }

  /// The deadlines set (counted: for tests).
  std::size_t size() const noexcept;

private:
  using entries = boost::intrusive::list<deadline_entry, boost::intrusive::constant_time_size<false>>;
  struct lane {
    clock::duration timeout{};
    entries due_order;
  };
  // One lane per timeout in use (a node uses three or four); past that, the
  // last lane takes every other timeout and keeps its order by insertion.
  static constexpr std::size_t lane_count = 8;

  lane& lane_of(clock::duration timeout) noexcept;
  void arm(clock::time_point at);
  void on_timer();

  boost::asio::steady_timer timer_;
  std::array<lane, lane_count> lanes_;
  std::size_t lanes_used_ = 0;
  bool armed_ = false;
  clock::time_point armed_at_{};
};

}  // namespace troupe
