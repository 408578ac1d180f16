// One timer for an io thread's deadlines (issue 26, transport/deadline_list.hpp):
// entries expire in the order of their deadlines, a cleared one never does, a
// deadline moved earlier than the armed wait still fires, one moved later does
// not fire before it, more timeouts than it has lanes keep their order, an entry
// may set itself again from its expiry, and the entries left when the list
// goes are abandoned.
#include "transport/deadline_list.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace deadline_list_test_file {

using namespace troupe;
using namespace std::chrono_literals;
using clock_type = deadline_entry::clock;

namespace {

struct recorder final : deadline_entry {
  recorder(std::vector<std::string>& log, std::string name) : log(log), name(std::move(name)) {}
  void expired() override {
    fired_at = clock_type::now();
    log.push_back(name);
    if (again && list) {
      again = false;
      list->set_after(*this, 5ms);
    }
  }
  void abandoned() override { log.push_back(name + " abandoned"); }
  std::vector<std::string>& log;
  std::string name;
  clock_type::time_point fired_at{};
  bool again = false;
  deadline_list* list = nullptr;
};

// Runs the io_context until `done` holds or 5 s have passed (then false).
template <class Done>
bool run_until(boost::asio::io_context& ioc, Done done) {
  auto until = clock_type::now() + 5s;
  while (!done() && clock_type::now() < until) {
    ioc.restart();
    ioc.run_for(10ms);
  }
  return done();
}

}  // namespace

TEST(DeadlineList, EntriesExpireInTheOrderOfTheirDeadlinesAndAClearedOneNever) {
  boost::asio::io_context ioc;
  deadline_list list(ioc.get_executor());
  std::vector<std::string> log;
  recorder a(log, "a"), b(log, "b"), c(log, "c");
  list.set_after(a, 40ms);
  list.set_after(b, 10ms);
  list.set_after(c, 20ms);
  EXPECT_EQ(list.size(), 3u);
  list.clear(c);
  EXPECT_FALSE(c.armed());
  ASSERT_TRUE(run_until(ioc, [&] { return log.size() >= 2; }));
  EXPECT_EQ(log, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(list.size(), 0u);
  EXPECT_FALSE(a.armed());
}

TEST(DeadlineList, ADeadlineMovedEarlierThanTheArmedWaitFires) {
  boost::asio::io_context ioc;
  deadline_list list(ioc.get_executor());
  std::vector<std::string> log;
  recorder a(log, "a");
  list.set_after(a, 1h);  // the timer is armed for an hour from now
  list.set_after(a, 20ms);
  EXPECT_TRUE(run_until(ioc, [&] { return !log.empty(); })) << "a deadline moved earlier waited for the old one";
}

TEST(DeadlineList, ADeadlineMovedLaterDoesNotFireBeforeIt) {
  boost::asio::io_context ioc;
  deadline_list list(ioc.get_executor());
  std::vector<std::string> log;
  recorder a(log, "a"), b(log, "b");
  list.set_after(a, 10ms);  // the timer is armed for a's first deadline
  list.set_after(b, 30ms);
  list.set_after(a, 60ms);
  auto due = a.due();
  ASSERT_TRUE(run_until(ioc, [&] { return log.size() == 2; }));
  EXPECT_EQ(log, (std::vector<std::string>{"b", "a"}));
  EXPECT_GE(a.fired_at, due);
}

TEST(DeadlineList, AnEntryMaySetItselfAgainWhenItExpires) {
  boost::asio::io_context ioc;
  deadline_list list(ioc.get_executor());
  std::vector<std::string> log;
  recorder a(log, "a");
  a.again = true;
  a.list = &list;
  list.set_after(a, 5ms);
  ASSERT_TRUE(run_until(ioc, [&] { return log.size() == 2; }));
  EXPECT_FALSE(a.armed());
}

TEST(DeadlineList, MoreTimeoutsThanLanesStillExpireInTheirOrder) {
  boost::asio::io_context ioc;
  deadline_list list(ioc.get_executor());
  std::vector<std::string> log;
  std::vector<std::unique_ptr<recorder>> entries;
  for (int i = 12; i >= 1; --i) {  // twelve timeouts, the longest first
    entries.push_back(std::make_unique<recorder>(log, std::to_string(i)));
    list.set_after(*entries.back(), std::chrono::milliseconds(5 * i));
  }
  EXPECT_EQ(list.size(), 12u);
  ASSERT_TRUE(run_until(ioc, [&] { return log.size() == 12; }));
  for (std::size_t i = 0; i < log.size(); ++i)
    EXPECT_EQ(log[i], std::to_string(i + 1)) << "the " << i + 1 << "th to expire";
}

// A thread busy past several deadlines (a loaded machine) finds entries of
// several lanes due at one wake-up: they still expire earliest first.
TEST(DeadlineList, AWakeUpPastSeveralLanesExpiresTheirEntriesEarliestFirst) {
  boost::asio::io_context ioc;
  deadline_list list(ioc.get_executor());
  std::vector<std::string> log;
  std::vector<std::unique_ptr<recorder>> entries;
  for (int i = 12; i >= 1; --i) {  // lanes 0-6 hold 12..6, the mixed lane 5..1
    entries.push_back(std::make_unique<recorder>(log, std::to_string(i)));
    list.set_after(*entries.back(), std::chrono::milliseconds(2 * i));
  }
  const auto all_due = entries.front()->due();
  while (clock_type::now() <= all_due)  // the io thread is busy elsewhere until every entry is due
    std::this_thread::yield();
  ASSERT_TRUE(run_until(ioc, [&] { return log.size() == 12; }));
  for (std::size_t i = 0; i < log.size(); ++i)
    EXPECT_EQ(log[i], std::to_string(i + 1)) << "the " << i + 1 << "th to expire";
}

TEST(DeadlineList, EntriesLeftWhenTheListGoesAreAbandoned) {
  boost::asio::io_context ioc;
  std::vector<std::string> log;
  recorder a(log, "a");
  {
    deadline_list list(ioc.get_executor());
    list.set_after(a, 1h);
  }
  EXPECT_EQ(log, (std::vector<std::string>{"a abandoned"}));
  EXPECT_FALSE(a.armed());
  ioc.run_for(10ms);  // the cancelled wait of the list that is gone runs harmlessly
}

TEST(DeadlineList, HereIsTheInstalledListElseAnOwnOne) {
  boost::asio::io_context ioc;
  std::unique_ptr<deadline_list> own;
  EXPECT_EQ(deadline_list::current(), nullptr);
  auto& mine = deadline_list::here(own, ioc.get_executor());
  EXPECT_EQ(&mine, own.get());
  {
    deadline_list installed(ioc.get_executor());
    installed.install();
    EXPECT_EQ(deadline_list::current(), &installed);
    std::unique_ptr<deadline_list> unused;
    EXPECT_EQ(&deadline_list::here(unused, ioc.get_executor()), &installed);
    EXPECT_EQ(unused, nullptr);
  }
  EXPECT_EQ(deadline_list::current(), nullptr);
}

}  // namespace deadline_list_test_file
