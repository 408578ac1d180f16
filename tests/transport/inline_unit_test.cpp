// The hot path without a hand-off (issue 26, transport/inline_unit.hpp): a
// thread with an installed unit runs an idle actor it sends to itself, before
// send_here returns; a busy actor only gets the message queued; a thread
// without a unit hands it to the scheduler; a long handler is reported, and
// the watchdog sees a thread stuck in one while it is.
#include "transport/inline_unit.hpp"
#include "../support/eventually.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace inline_unit_test_file {

using namespace troupe;
using troupe::test::eventually;
using namespace std::chrono_literals;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

class inline_unit_test : public ::testing::Test {
protected:
  inline_unit_test() {
    cfg.set("scheduler.max-threads", 1);
    sys.emplace(cfg);
    // It records where each message ran; `sleep_ms` > 0 makes a handler that long.
    actor = sys->spawn([this]() -> caf::behavior {
      return {
        [this](int sleep_ms) {
          ++started;
          if (sleep_ms > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
          ran_on = std::this_thread::get_id();
          ++handled;
        },
        [](ping_atom) { return 0; },
      };
    });
    idle();
  }
  ~inline_unit_test() override {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    sys.reset();
  }

  // Returns once the actor has answered a request and blocked his mailbox: he
  // waits for mail now (his answer goes out a moment before his thread lets him go).
  void idle() {
    caf::scoped_actor self{*sys};
    self->request(actor, caf::infinite, ping_atom::value).receive([](int) {}, [](caf::error&) {});
    auto* a = static_cast<caf::scheduled_actor*>(caf::actor_cast<caf::abstract_actor*>(actor));
    ASSERT_TRUE(eventually([&] { return a->mailbox().blocked(); }, std::chrono::seconds(10)));
  }

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  caf::actor actor;
  std::atomic<std::thread::id> ran_on{};
  std::atomic<int> started{0};
  std::atomic<int> handled{0};
};

}  // namespace

TEST_F(inline_unit_test, an_idle_actor_runs_on_the_sending_thread_before_the_send_returns) {
  inline_unit unit(*sys, 8, 1000ms, {});
  unit.install();
  ASSERT_EQ(inline_unit::current(), &unit);
  for (int i = 1; i <= 3; ++i) {
    send_here(actor, 0);
    EXPECT_EQ(handled.load(), i) << "the handler ran inside send_here";
    EXPECT_EQ(ran_on.load(), std::this_thread::get_id());
  }
}

TEST_F(inline_unit_test, without_a_unit_the_scheduler_runs_it) {
  ASSERT_EQ(inline_unit::current(), nullptr);
  send_here(actor, 0);
  ASSERT_TRUE(eventually([&] { return handled.load() == 1; }, 10s));
  EXPECT_NE(ran_on.load(), std::this_thread::get_id());
}

// A busy actor (running on a scheduler thread) is not run here: the message joins his mailbox.
TEST_F(inline_unit_test, a_busy_actor_gets_the_message_queued) {
  caf::anon_send(actor, 200);  // keeps him busy on the scheduler's thread for 200 ms
  ASSERT_TRUE(eventually([&] { return started.load() == 1; }, 10s));
  inline_unit unit(*sys, 8, 1000ms, {});
  unit.install();
  send_here(actor, 0);
  ASSERT_TRUE(eventually([&] { return handled.load() == 2; }, 10s));
  EXPECT_NE(ran_on.load(), std::this_thread::get_id()) << "his mailbox was served where he was running";
}

TEST_F(inline_unit_test, a_handler_past_the_bound_is_reported) {
  std::vector<std::chrono::milliseconds> reports;
  inline_unit unit(*sys, 8, 20ms, [&](std::chrono::milliseconds took) { reports.push_back(took); });
  unit.install();
  send_here(actor, 0);
  EXPECT_TRUE(reports.empty());
  send_here(actor, 60);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_GE(reports[0], 60ms);
}

// The watchdog reports a thread while it is inside one long handler, once for that handler.
TEST_F(inline_unit_test, the_watchdog_sees_a_thread_stuck_in_a_handler) {
  std::atomic<int> seen{0};
  std::atomic<bool> done{false};
  stall_watchdog dog(20ms, [&](std::chrono::milliseconds running) {
    EXPECT_GE(running, 20ms);
    if (!done)
      ++seen;
  });
  std::thread io([&] {
    inline_unit unit(*sys, 8, 20ms, {});
    unit.install();
    dog.watch(&unit);
    send_here(actor, 300);
    done = true;
    dog.unwatch(&unit);
  });
  io.join();
  EXPECT_EQ(seen.load(), 1) << "reported while the handler ran, once";
}

}  // namespace inline_unit_test_file
