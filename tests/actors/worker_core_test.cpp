// The worker actor's state machine (actors/worker_core.hpp) without an actor
// system: every transition as a table row (phase × event → phase + effects),
// including the races the integration tests found (a request arriving while
// it drains, a request that finds its user dead before his down message, a
// user's down after he was placed again, stale notices).
#include "actors/worker_core.hpp"

#include "transition_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace worker_core_test_file {

using namespace std::chrono_literals;
using troupe::down_verdict;
using troupe::drop_verdict;
using troupe::found_dead;
using troupe::freeze_purpose;
using troupe::hosting;
using troupe::user_end;
using troupe::user_launch;
using troupe::worker_core;
using troupe::worker_phase;
using troupe::worker_policy;

namespace {

using clock_type = worker_core::clock;

troupe::store::bytes bytes_of(const std::string& s) { return troupe::store::bytes(s.begin(), s.end()); }

std::string drop_name(drop_verdict v) {
  switch (v) {
    case drop_verdict::gone: return "gone";
    case drop_verdict::await_down: return "await_down";
    case drop_verdict::no_such_user: return "no_such_user";
  }
  return "?";
}

std::string dead_name(found_dead f) { return f == found_dead::await_down ? "await_down" : "retry_now"; }

// Records the core's effects as words, in order; user actors are numbered from 101.
class effect_log : public troupe::worker_effects {
public:
  std::vector<std::string> said;
  std::uint64_t last_id = 100;

  std::uint64_t spawn_user(const std::string& user, user_launch how) override {
    auto id = ++last_id;
    std::string s = "spawn " + user + " #" + std::to_string(id);
    if (how.wake)
      s += " wake";
    if (how.resume)
      s += " resume";
    if (!how.parcel.empty())
      s += " from " + std::string(how.parcel.begin(), how.parcel.end());
    s += " epoch " + std::to_string(how.owner_epoch);
    if (how.restarts)
      s += " restarts " + std::to_string(how.restarts);
    said.push_back(s);
    return id;
  }
  void stop_user(std::uint64_t id) override { said.push_back("stop #" + std::to_string(id)); }
  void freeze_user(std::uint64_t run, const std::string& user, std::uint64_t id, freeze_purpose,
                   clock::time_point) override {
    said.push_back("freeze " + user + " #" + std::to_string(id) + " run " + std::to_string(run));
  }
  void freeze_done(std::uint64_t run, freeze_purpose why, std::uint64_t frozen,
                   const std::vector<std::string>& failed) override {
    std::string names;
    for (auto& f : failed)
      names += (names.empty() ? "" : ",") + f;
    said.push_back("done run " + std::to_string(run) + " " + to_string(why) + " frozen " + std::to_string(frozen) +
                   " failed " + (names.empty() ? "-" : names));
  }
  void drop_done(std::uint64_t id) override { said.push_back("drop answered #" + std::to_string(id)); }
  void redo_after_down(std::uint64_t id) override { said.push_back("redo #" + std::to_string(id)); }
  void show(worker_phase p, std::uint32_t restarts) override {
    said.push_back(std::string("show ") + to_string(p) + " restarts " + std::to_string(restarts));
  }
  void stop_worker(std::uint64_t) override { said.push_back("stop worker"); }
  void ask_replacement(std::uint64_t, std::uint64_t rss) override {
    said.push_back("ask replacement " + std::to_string(rss));
  }
};

worker_policy test_policy() {
  worker_policy p;
  p.max_user_restarts = 3;
  p.restart_window_seconds = 10;
  p.freeze_window = 2;
  return p;
}

// A core and its effect log, brought to a phase by the events that lead there.
// Time is t0 + an offset: the core is given `now`, never reads a clock.
struct rig {
  effect_log fx;
  worker_core core;
  clock_type::time_point t0 = clock_type::time_point{} + 1h;
  explicit rig(worker_policy p = test_policy()) : core(p, fx) {}
  clock_type::time_point at(clock_type::duration d) const { return t0 + d; }
  clock_type::time_point deadline() const { return t0 + 30s; }
  std::uint64_t place(const std::string& user, std::string parcel = {}) {
    return core.host(user, std::nullopt, user_launch{bytes_of(parcel), true, false, 7, 0}, t0).user_id;
  }
  down_verdict crash(std::uint64_t id, clock_type::duration after = 0s) { return core.down(id, user_end::crash, at(after)); }
  void forget() { fx.said.clear(); }
};

using setup = std::function<void(rig&)>;
using event = std::function<std::string(rig&)>;  // returns what the event answers ("" when nothing)

struct row {
  const char* name;
  setup given;
  event when;
  worker_phase then;
  std::vector<std::string> effects;
  std::string answer = "";
};

// -- the phases and situations, reached the way the actor reaches them ----------------------

void serving(rig&) {}
void hosting_alice(rig& r) { r.place("alice"); }                      // #101
void hosting_three(rig& r) { r.place("alice"); r.place("bob"); r.place("carol"); }  // #101..#103
void resting_alice(rig& r) {
  hosting_alice(r);
  r.core.rested("alice", 101);
}
void draining_alice(rig& r) {  // alice's freeze is run 1's, in flight
  hosting_alice(r);
  r.core.drain(r.deadline());
}
void draining_three(rig& r) {  // alice's and bob's freezes in flight (a window of 2), carol's waits
  hosting_three(r);
  r.core.drain(r.deadline());
}
void replacing_alice(rig& r) {
  hosting_alice(r);
  r.core.replace(4096, r.deadline());
}
void stopped(rig& r) { r.core.drain(r.deadline()); }  // nobody to freeze: drained at once
void quitting_alice(rig& r) {
  hosting_alice(r);
  r.core.freeze_all(freeze_purpose::quit, r.deadline());
}
void fenced_alice(rig& r) {
  hosting_alice(r);
  r.core.fence(r.deadline());
}
void crashed_twice(rig& r) {  // alice crashed at t0 and t0+1s: her actor now is #103
  hosting_alice(r);
  r.crash(101, 0s);
  r.crash(102, 1s);
}
void quarantined_alice(rig& r) {
  crashed_twice(r);
  r.crash(103, 2s);
}

// -- events -----------------------------------------------------------------------------------

std::string hosting_words(const troupe::hosting_answer& a) {
  std::string s = to_string(a.verdict);
  if (a.verdict == hosting::hosted)
    s += " #" + std::to_string(a.user_id);
  if (a.retry_after)
    s += " retry " + std::to_string(a.retry_after);
  return s;
}

event host(std::string user, clock_type::duration after = 3s, std::optional<std::uint32_t> degraded = std::nullopt,
           std::string parcel = {}) {
  return [=](rig& r) {
    return hosting_words(r.core.host(user, degraded, user_launch{bytes_of(parcel), true, false, 7, 0}, r.at(after)));
  };
}
event down(std::uint64_t id, user_end how, clock_type::duration after = 2s) {
  return [=](rig& r) { return std::string(to_string(r.core.down(id, how, r.at(after)))); };
}
event simply(std::function<void(rig&)> fn) {
  return [fn](rig& r) {
    fn(r);
    return std::string();
  };
}
event frozen(std::uint64_t run) { return simply([run](rig& r) { r.core.user_frozen(run); }); }
event not_frozen(std::uint64_t run, std::string user, std::uint64_t id, bool stale = false) {
  return simply([=](rig& r) { r.core.user_not_frozen(run, user, id, stale); });
}
event rested(std::string user, std::uint64_t id) {
  return [=](rig& r) { return std::string(r.core.rested(user, id) ? "kept" : "ignored"); };
}
event replace() {
  return [](rig& r) { return std::string(r.core.replace(4096, r.deadline()) ? "started" : "not started"); };
}

// clang-format off
const std::vector<row>& transitions() {
  static const std::vector<row> rows = {
    // -- admission: an attach or a message, per phase --------------------------------------------
    {"serving: a newcomer is started", serving, host("alice"),
     worker_phase::serving, {"spawn alice #101 wake epoch 7"}, "hosted #101"},
    {"serving: a login's carry starts him", serving, host("alice", 3s, std::nullopt, "carry"),
     worker_phase::serving, {"spawn alice #101 wake from carry epoch 7"}, "hosted #101"},
    {"serving: a live user is handed his actor", hosting_alice, host("alice"),
     worker_phase::serving, {}, "hosted #101"},
    {"degraded: nobody is served, hosted or not", hosting_alice, host("alice", 3s, 30u),
     worker_phase::serving, {}, "refuse_degraded retry 30"},
    {"degraded without a recovery coming", serving, host("bob", 3s, 0u),
     worker_phase::serving, {}, "refuse_degraded"},
    {"draining: a newcomer is placed elsewhere", draining_alice, host("bob"),
     worker_phase::draining, {}, "refuse_draining"},
    {"race: a request arriving while draining finds its user still here", draining_alice, host("alice"),
     worker_phase::draining, {}, "hosted #101"},
    {"replacing: a newcomer is placed elsewhere", replacing_alice, host("bob"),
     worker_phase::replacing, {}, "refuse_draining"},
    {"stopped: a newcomer is placed elsewhere", stopped, host("bob"),
     worker_phase::stopped, {}, "refuse_draining"},
    {"a resting user starts again from what he left", resting_alice, host("alice"),
     worker_phase::serving, {"spawn alice #102 resume epoch 7"}, "hosted #102"},
    {"a quarantined newcomer is refused until his oldest crash leaves the window", quarantined_alice, host("alice", 3s),
     worker_phase::serving, {}, "refuse_quarantined retry 7"},
    {"his oldest crash left the window: started again, his crashes told", quarantined_alice, host("alice", 10500ms),
     worker_phase::serving, {"spawn alice #104 wake epoch 7 restarts 2"}, "hosted #104"},
    {"his last good state wins over the order's parcel",
     [](rig& r) { quarantined_alice(r); r.core.last_good_state("alice", bytes_of("good")); },
     host("alice", 10500ms, std::nullopt, "carry"),
     worker_phase::serving, {"spawn alice #104 from good epoch 7 restarts 2"}, "hosted #104"},
    {"a soft quit: newcomers still come", quitting_alice, host("bob"),
     worker_phase::serving, {"spawn bob #102 wake epoch 7"}, "hosted #102"},

    // -- his down message --------------------------------------------------------------------------
    {"a crash: restarted at once under the same epoch", hosting_alice, down(101, user_end::crash),
     worker_phase::serving, {"show serving restarts 1", "spawn alice #102 wake epoch 7 restarts 1"}, "restarted"},
    {"a crash after he left his last good state: restarted from it",
     [](rig& r) { hosting_alice(r); r.core.last_good_state("alice", bytes_of("good")); }, down(101, user_end::crash),
     worker_phase::serving, {"show serving restarts 1", "spawn alice #102 from good epoch 7 restarts 1"}, "restarted"},
    {"the third crash within the window: quarantined, not restarted", crashed_twice, down(103, user_end::crash, 2s),
     worker_phase::serving, {"show serving restarts 3"}, "quarantined"},
    {"crashes past the window are forgotten", crashed_twice, down(103, user_end::crash, 12s),
     worker_phase::serving, {"show serving restarts 3", "spawn alice #104 wake epoch 7 restarts 1"}, "restarted"},
    {"a crash while draining: restarted (his freeze fails, the drain keeps the worker)", draining_alice,
     down(101, user_end::crash),
     worker_phase::draining, {"show draining restarts 1", "spawn alice #102 wake epoch 7 restarts 1"}, "restarted"},
    {"a normal exit: nothing restarted, his epoch forgotten", hosting_alice,
     [](rig& r) {
       std::string v = to_string(r.core.down(101, user_end::normal, r.t0));  // before the epoch is read
       return v + " epoch " + std::to_string(r.core.epoch_of("alice"));
     },
     worker_phase::serving, {}, "left epoch 0"},
    {"a rested user's actor stops: he stays, with his epoch", resting_alice,
     [](rig& r) {
       std::string v = to_string(r.core.down(101, user_end::normal, r.t0));  // before the epoch is read
       return v + " epoch " + std::to_string(r.core.epoch_of("alice"));
     },
     worker_phase::serving, {}, "left epoch 7"},
    {"a dropped user's down answers his drop (not a crash)", [](rig& r) { hosting_alice(r); r.core.drop("alice"); },
     down(101, user_end::crash), worker_phase::serving, {"drop answered #101"}, "dropped"},
    {"race: a request found him dead before his down: redone after the restart", hosting_alice,
     [](rig& r) { auto d = dead_name(r.core.dead("alice", 101)); return d + " " + to_string(r.crash(101)); },
     worker_phase::serving, {"show serving restarts 1", "spawn alice #102 wake epoch 7 restarts 1", "redo #101"},
     "await_down restarted"},
    {"race: found dead before the down that quarantines him: the redo is refused", crashed_twice,
     [](rig& r) {
       auto d = dead_name(r.core.dead("alice", 103));
       auto v = to_string(r.crash(103, 2s));
       return d + " " + v + " " + hosting_words(r.core.host("alice", std::nullopt, user_launch{}, r.at(3s)));
     },
     worker_phase::serving, {"show serving restarts 3", "redo #103"}, "await_down quarantined refuse_quarantined retry 7"},
    {"race: found dead after his down came: retried at once", [](rig& r) { hosting_alice(r); r.core.down(101, user_end::normal, r.t0); },
     [](rig& r) { return dead_name(r.core.dead("alice", 101)); }, worker_phase::serving, {}, "retry_now"},
    {"race: a user's down after he was placed again: counted, not restarted",
     [](rig& r) { hosting_alice(r); r.core.released("alice"); r.place("alice"); },
     [](rig& r) {
       std::string v = to_string(r.crash(101));
       return v + " live #" + std::to_string(r.core.live_id("alice"));
     },
     worker_phase::serving, {"show serving restarts 1"}, "superseded live #102"},
    {"race: a fenced user's crash: counted, not restarted", fenced_alice, down(101, user_end::crash),
     worker_phase::serving, {"show serving restarts 1"}, "superseded"},
    {"stale: a down of an actor not of this worker", hosting_alice, down(999, user_end::crash),
     worker_phase::serving, {}, "unknown"},
    {"stale: a second down of the same actor", [](rig& r) { hosting_alice(r); r.core.down(101, user_end::normal, r.t0); },
     down(101, user_end::crash), worker_phase::serving, {}, "unknown"},

    // -- resting and retiring -----------------------------------------------------------------------
    {"his actor rests: what he left is kept", hosting_alice, rested("alice", 101),
     worker_phase::serving, {}, "kept"},
    {"stale: a rest from an actor replaced since", [](rig& r) { hosting_alice(r); r.core.released("alice"); r.place("alice"); },
     rested("alice", 101), worker_phase::serving, {}, "ignored"},
    {"stale: a rest after his drop", [](rig& r) { hosting_alice(r); r.core.drop("alice"); },
     rested("alice", 101), worker_phase::serving, {}, "ignored"},
    {"stale: a rest after the fence", fenced_alice, rested("alice", 101), worker_phase::serving, {}, "ignored"},
    {"a resting user retires: forgotten", resting_alice,
     [](rig& r) {
       std::string was = r.core.released("alice") ? "was resting" : "was live";
       return was + (r.core.hosts("alice") ? ", hosted" : ", gone");
     },
     worker_phase::serving, {}, "was resting, gone"},

    // -- an operator's drop -----------------------------------------------------------------------------
    {"drop a live user: stopped, answered at his down", hosting_alice,
     [](rig& r) { return drop_name(r.core.drop("alice")); }, worker_phase::serving, {"stop #101"}, "await_down"},
    {"drop a resting user: gone at once, his last good state with him",
     [](rig& r) { resting_alice(r); r.core.last_good_state("alice", bytes_of("good")); },
     [](rig& r) {
       auto dropped = drop_name(r.core.drop("alice"));
       return dropped + " " + hosting_words(r.core.host("alice", std::nullopt, user_launch{{}, true, false, 9, 0}, r.t0));
     },
     worker_phase::serving, {"spawn alice #102 wake epoch 9"}, "gone hosted #102"},
    {"drop somebody not here", hosting_alice, [](rig& r) { return drop_name(r.core.drop("bob")); },
     worker_phase::serving, {}, "no_such_user"},

    // -- drain ---------------------------------------------------------------------------------------------
    {"a drain with nobody: stopped at once", serving, simply([](rig& r) { r.core.drain(r.deadline()); }),
     worker_phase::stopped, {"show draining restarts 0", "done run 1 drain frozen 0 failed -", "stop worker"}},
    {"a drain: at most a window of freezes in flight", hosting_three, simply([](rig& r) { r.core.drain(r.deadline()); }),
     worker_phase::draining, {"show draining restarts 0", "freeze alice #101 run 1", "freeze bob #102 run 1"}},
    {"a freeze answered: the next one goes", draining_three, frozen(1),
     worker_phase::draining, {"freeze carol #103 run 1"}},
    {"all durable: the drain stops the worker", [](rig& r) { draining_three(r); r.core.user_frozen(1); r.core.user_frozen(1); },
     frozen(1), worker_phase::stopped, {"done run 1 drain frozen 3 failed -", "stop worker"}},
    {"a freeze failed: the drain ends, the worker serves on", draining_alice, not_frozen(1, "alice", 101),
     worker_phase::serving, {"done run 1 drain frozen 0 failed alice", "show serving restarts 0"}},
    {"fenced by the deposit while draining: neither frozen nor failed", draining_alice, not_frozen(1, "alice", 101, true),
     worker_phase::stopped, {"done run 1 drain frozen 0 failed -", "stop worker"}},
    {"a resting user freezes when his turn comes: started first", resting_alice,
     simply([](rig& r) { r.core.drain(r.deadline()); }),
     worker_phase::draining, {"show draining restarts 0", "spawn alice #102 resume epoch 7", "freeze alice #102 run 1"}},
    {"a resting user who left before his turn counts as frozen",
     [](rig& r) { hosting_three(r); r.core.rested("carol", 103); r.core.drain(r.deadline()); r.core.released("carol"); },
     simply([](rig& r) { r.core.user_frozen(1); r.core.user_frozen(1); }),
     worker_phase::stopped, {"done run 1 drain frozen 3 failed -", "stop worker"}},
    {"a second drain while draining: its own run, the same phase", draining_alice,
     simply([](rig& r) { r.core.drain(r.deadline()); }), worker_phase::draining, {"freeze alice #101 run 2"}},
    {"stale: a freeze answered after its run is over", stopped, frozen(1), worker_phase::stopped, {}},
    {"stale: a failed freeze of a run never started", hosting_alice, not_frozen(5, "alice", 101),
     worker_phase::serving, {}},

    // -- the soft quit -------------------------------------------------------------------------------------
    {"a soft quit: every user freezes, the phase stays", hosting_alice,
     simply([](rig& r) { r.core.freeze_all(freeze_purpose::quit, r.deadline()); }),
     worker_phase::serving, {"freeze alice #101 run 1"}},
    {"the soft quit's end: answered, the phase stays", quitting_alice, frozen(1),
     worker_phase::serving, {"done run 1 quit frozen 1 failed -"}},
    {"the soft quit's failure is told, nothing more", quitting_alice, not_frozen(1, "alice", 101),
     worker_phase::serving, {"done run 1 quit frozen 0 failed alice"}},

    // -- replacement (occupancy) ----------------------------------------------------------------------
    {"past its occupancy limit: replacing, every user freezes", hosting_alice, replace(),
     worker_phase::replacing, {"show replacing restarts 0", "freeze alice #101 run 1"}, "started"},
    {"all durable: its replacement is asked", replacing_alice, frozen(1),
     worker_phase::replacing, {"done run 1 replace frozen 1 failed -", "ask replacement 4096"}},
    {"a freeze failed: no replacement, it serves on", replacing_alice, not_frozen(1, "alice", 101),
     worker_phase::serving, {"done run 1 replace frozen 0 failed alice", "show serving restarts 0"}},
    {"no replacement while draining", draining_alice, replace(), worker_phase::draining, {}, "not started"},
    {"no second replacement while replacing", replacing_alice, replace(), worker_phase::replacing, {}, "not started"},
    {"a drain while replacing takes over: no replacement asked", replacing_alice,
     simply([](rig& r) { r.core.drain(r.deadline()); r.core.user_frozen(1); }),
     worker_phase::draining, {"show draining restarts 0", "freeze alice #101 run 2", "done run 1 replace frozen 1 failed -"}},
    {"...and the drain's end stops it",
     [](rig& r) { replacing_alice(r); r.core.drain(r.deadline()); r.core.user_frozen(1); }, frozen(2),
     worker_phase::stopped, {"done run 2 drain frozen 1 failed -", "stop worker"}},

    // -- fence ------------------------------------------------------------------------------------------
    {"fenced: resting users start, everybody freezes and is forgotten",
     [](rig& r) { hosting_alice(r); r.place("bob"); r.core.rested("bob", 102); },
     [](rig& r) { auto n = r.core.fence(r.deadline()); return std::to_string(n) + " freeze, " + std::to_string(r.core.live_count() + r.core.resting_count()) + " hosted"; },
     worker_phase::serving, {"spawn bob #103 resume epoch 7", "freeze alice #101 run 1", "freeze bob #103 run 1"},
     "2 freeze, 0 hosted"},
    {"fenced: a user whose freeze failed is stopped", fenced_alice, not_frozen(1, "alice", 101),
     worker_phase::serving, {"stop #101", "done run 1 fence frozen 0 failed alice"}},
    {"fenced: one fenced by the deposit is not stopped", fenced_alice, not_frozen(1, "alice", 101, true),
     worker_phase::serving, {"done run 1 fence frozen 0 failed -"}},
    {"fenced with nobody: nothing", serving, [](rig& r) { return std::to_string(r.core.fence(r.deadline())); },
     worker_phase::serving, {}, "0"},
  };
  return rows;
}
// clang-format on

class worker_core_transitions : public ::testing::TestWithParam<std::size_t> {};

TEST_P(worker_core_transitions, phase_and_effects) {
  const auto& row = transitions()[GetParam()];
  auto r = std::make_unique<rig>();
  troupe::test::play_row(row, *r);
}

INSTANTIATE_TEST_SUITE_P(table, worker_core_transitions, ::testing::Range<std::size_t>(0, transitions().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return troupe::test::row_test_name(info.param, transitions()[info.param].name);
                         });

// -- what the table cannot say in one row ---------------------------------------------------------

TEST(worker_core, a_run_never_has_more_than_its_window_in_flight) {
  worker_policy p = test_policy();
  p.freeze_window = 3;
  rig r(p);
  for (int i = 0; i < 10; ++i)
    r.place("u" + std::to_string(i));
  r.forget();
  auto run = r.core.freeze_all(freeze_purpose::quit, r.deadline());
  std::size_t asked = 0, answered = 0, most = 0;
  auto count = [&] {
    for (auto& s : r.fx.said)
      if (s.rfind("freeze ", 0) == 0)
        ++asked;
    r.forget();
    most = std::max(most, asked - answered);
  };
  count();
  while (answered < asked) {
    ++answered;
    if (answered % 2)
      r.core.user_frozen(run);
    else
      r.core.user_not_frozen(run, "someone", 1, false);
    if (answered < 10)
      count();
  }
  EXPECT_EQ(asked, 10u);
  EXPECT_EQ(most, 3u);
  EXPECT_EQ(r.fx.said, std::vector<std::string>{"done run 1 quit frozen 5 failed someone,someone,someone,someone,someone"});
  EXPECT_EQ(r.core.runs_in_flight(), 0u);
}

TEST(worker_core, a_run_answers_its_own_done_after_the_effect) {
  rig r;
  r.place("alice");
  std::string answered;
  r.core.drain(r.deadline(), [&](std::uint64_t frozen, const std::vector<std::string>& failed) {
    answered = std::to_string(frozen) + "/" + std::to_string(failed.size()) + " after " + r.fx.said.back();
  });
  r.core.user_frozen(1);
  EXPECT_EQ(answered, "1/0 after done run 1 drain frozen 1 failed -");
  EXPECT_EQ(r.fx.said.back(), "stop worker");  // what the drain does once answered
}

TEST(worker_core, quarantine_counts_down_to_his_oldest_crash_leaving_the_window) {
  rig r;
  quarantined_alice(r);
  EXPECT_EQ(r.core.quarantined("alice", r.at(2s)), 8u);
  EXPECT_EQ(r.core.quarantined("alice", r.at(9900ms)), 1u);   // at least 1
  EXPECT_FALSE(r.core.quarantined("alice", r.at(10500ms)).has_value());  // his first crash left it
  EXPECT_EQ(r.core.crashes("alice"), 2u);
  EXPECT_FALSE(r.core.quarantined("alice", r.at(30s)).has_value());
  EXPECT_EQ(r.core.crashes("alice"), 0u);  // all forgotten
  EXPECT_FALSE(r.core.quarantined("bob", r.t0).has_value());
}

TEST(worker_core, the_soft_quit_writes_the_last_good_states_of_users_left_down_only) {
  rig r;
  quarantined_alice(r);
  r.core.last_good_state("alice", bytes_of("a"));
  r.place("bob");
  r.core.last_good_state("bob", bytes_of("b"));  // bob lives: his freeze writes his state
  r.core.last_good_state("carol", {});           // none to write
  auto left = r.core.states_left_down();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].first, "alice");
  EXPECT_EQ(left[0].second, bytes_of("a"));
}

TEST(worker_core, scan_lists_live_and_resting_users_with_their_epochs) {
  rig r;
  r.core.host("alice", std::nullopt, user_launch{{}, true, false, 3, 0}, r.t0);
  r.core.host("bob", std::nullopt, user_launch{{}, true, false, 4, 0}, r.t0);
  r.core.rested("bob", 102);
  std::vector<std::string> seen;
  r.core.for_each_hosted([&](const troupe::registry::short_name& name, std::uint64_t epoch) {
    seen.push_back(name.str() + "@" + std::to_string(epoch));
  });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"alice@3", "bob@4"}));
  EXPECT_EQ(r.core.live_count(), 1u);
  EXPECT_EQ(r.core.resting_count(), 1u);
}

TEST(worker_core, timers_go_to_the_current_actor_only) {
  rig r;
  r.place("alice");
  EXPECT_TRUE(r.core.current(101));
  r.core.released("alice");
  r.place("alice");
  EXPECT_FALSE(r.core.current(101));  // replaced: still known until his down
  EXPECT_TRUE(r.core.knows(101));
  EXPECT_TRUE(r.core.current(102));
  r.core.down(101, user_end::normal, r.t0);
  EXPECT_FALSE(r.core.knows(101));
  EXPECT_EQ(r.core.user_of(102), "alice");
  EXPECT_EQ(r.core.user_of(101), "");
}

TEST(worker_core, every_name_is_known) {
  for (auto p : {worker_phase::serving, worker_phase::draining, worker_phase::replacing, worker_phase::stopped})
    EXPECT_STRNE(to_string(p), "?");
  for (auto v : {down_verdict::unknown, down_verdict::dropped, down_verdict::left, down_verdict::restarted,
                 down_verdict::quarantined, down_verdict::superseded})
    EXPECT_STRNE(to_string(v), "?");
  for (auto h : {hosting::hosted, hosting::refuse_degraded, hosting::refuse_draining, hosting::refuse_quarantined})
    EXPECT_STRNE(to_string(h), "?");
  for (auto f : {freeze_purpose::quit, freeze_purpose::drain, freeze_purpose::replace, freeze_purpose::fence})
    EXPECT_STRNE(to_string(f), "?");
}

}  // namespace

}  // namespace worker_core_test_file
