// The user actor's state machine (actors/user_core.hpp) without an actor
// system: every transition as a table row (phase × event → phase + effects),
// including the races the integration tests found.
#include "actors/user_core.hpp"

#include "store/parcel.hpp"

#include "transition_table.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace user_core_test_file {

using namespace std::chrono_literals;
using troupe::adoption;
using troupe::arrival;
using troupe::deferral;
using troupe::durability;
using troupe::freeze_writes;
using troupe::idle_facts;
using troupe::tell_answer;
using troupe::user_core;
using troupe::user_exit;
using troupe::user_phase;
using troupe::user_policy;
using troupe::user_timer;

namespace {

constexpr auto freeze_cause = static_cast<std::uint8_t>(troupe::store::parcel_cause::freeze);
constexpr auto quit_cause = static_cast<std::uint8_t>(troupe::store::parcel_cause::quit);

const char* timer_name(user_timer t) {
  switch (t) {
    case user_timer::idle: return "idle";
    case user_timer::checkpoint: return "checkpoint";
    case user_timer::resume: return "resume";
    case user_timer::later: return "later";
    case user_timer::deferred: return "deferred";
  }
  return "?";
}

const char* exit_name(user_exit e) {
  switch (e) {
    case user_exit::frozen: return "frozen";
    case user_exit::fenced: return "fenced";
    case user_exit::relocated: return "relocated";
    case user_exit::not_woken: return "not_woken";
    case user_exit::failed: return "failed";
    case user_exit::retired: return "retired";
    case user_exit::rested: return "rested";
  }
  return "?";
}

const char* arrival_name(arrival a) {
  switch (a) {
    case arrival::serve: return "serve";
    case arrival::queue: return "queue";
    case arrival::refuse_full: return "refuse_full";
    case arrival::refuse_quarantined: return "refuse_quarantined";
    case arrival::refuse_leaving: return "refuse_leaving";
  }
  return "?";
}

const char* adoption_name(adoption a) {
  switch (a) {
    case adoption::answer_now: return "answer_now";
    case adoption::save_now: return "save_now";
    case adoption::save_after_wake: return "save_after_wake";
  }
  return "?";
}

// Records the core's effects as words, in order; the queues are counters.
class effect_log : public troupe::user_effects {
public:
  std::vector<std::string> said;
  std::size_t requests_waiting = 0;
  std::size_t messages_waiting = 0;
  bool pristine = false;
  std::function<void()> on_request_served;  // what the served request does next (e.g. defers)

  void arm_timer(user_timer which, std::chrono::milliseconds delay, std::uint64_t arg) override {
    said.push_back(std::string("timer ") + timer_name(which) + " " + std::to_string(delay.count()) + " " +
                   std::to_string(arg));
  }
  bool serve_waiting_message() override {
    if (messages_waiting == 0)
      return false;
    --messages_waiting;
    said.push_back("serve message");
    return true;
  }
  bool serve_waiting_request() override {
    if (requests_waiting == 0)
      return false;
    --requests_waiting;
    said.push_back("serve request");
    if (on_request_served)
      on_request_served();
    return true;
  }
  void write_checkpoint() override { said.push_back("write checkpoint"); }
  void hold_routing() override { said.push_back("hold routing"); }
  void write_freeze_parcels(std::uint8_t cause, std::uint64_t attempt) override {
    said.push_back("write freeze " + std::to_string(cause) + " #" + std::to_string(attempt));
  }
  void thaw() override { said.push_back("thaw"); }
  void answer_sleeper() override { said.push_back("answer sleeper"); }
  void settle_adoptions(bool ok) override { said.push_back(ok ? "settle ok" : "settle failed"); }
  void show(troupe::registry::user_state s) override { said.push_back(std::string("show ") + to_string(s)); }
  void leave(user_exit why) override { said.push_back(std::string("leave ") + exit_name(why)); }
  bool state_pristine() const override { return pristine; }
};

user_policy test_policy(durability mode = durability::freeze) {
  user_policy p;
  p.mode = mode;
  p.idle_after = 60s;
  p.guest_idle_after = 2s;
  p.checkpoint_every = 5s;
  p.rest_after = 0ms;
  return p;
}

// A core and its effect log, brought to a phase by the events that lead there.
struct rig {
  effect_log fx;
  user_core core;
  explicit rig(user_policy p) : core(p, fx) {}
  void forget() { fx.said.clear(); }
};

using setup = std::function<void(rig&)>;
using event = std::function<std::string(rig&)>;  // returns what the event answers ("" when nothing)

struct row {
  const char* name;
  setup given;
  event when;
  user_phase then;
  std::vector<std::string> effects;
  std::string answer = "";
  user_policy policy = test_policy();
};

// -- the phases, reached the way the actor reaches them ---------------------------------

void waking(rig& r) { r.core.wake(); }
void serving(rig& r) { r.core.start(); }
void deferred_on_timer(rig& r) {
  serving(r);
  r.core.defer(deferral::timer, 100ms);
}
void deferred_elsewhere(rig& r) {
  serving(r);
  r.core.defer(deferral::elsewhere);
}
void telling(rig& r) {
  serving(r);
  r.core.defer(deferral::tell);
}
void writing_request(rig& r) {
  serving(r);
  r.core.changed();
  r.core.begin_request_write();
}
void writing_message(rig& r) {
  serving(r);
  r.core.changed();
  r.core.begin_message_write();
}
void writing_message_while_telling(rig& r) {
  telling(r);
  r.core.changed();
  r.core.begin_message_write();
}
void freezing(rig& r) {
  serving(r);
  r.core.freeze_asked(freeze_cause);
}
void refused(rig& r) {
  waking(r);
  r.core.quarantined();
}
void fenced(rig& r) {
  serving(r);
  r.core.fence();
}
void stopped(rig& r) {
  serving(r);
  r.core.failed();
}
void resting(rig& r) {
  serving(r);
  r.core.idle_due(idle_facts{10s, false, false});
}

user_policy resting_policy() {
  auto p = test_policy();
  p.rest_after = 5s;
  return p;
}

event admit_request(std::size_t waiting = 0) {
  return [waiting](rig& r) { return std::string(arrival_name(r.core.admit_request(waiting, 4))); };
}
event admit_message(std::size_t waiting = 0) {
  return [waiting](rig& r) { return std::string(arrival_name(r.core.admit_message(waiting, 4))); };
}
event adopt(bool fresh, bool own_guest = false) {
  return [=](rig& r) { return std::string(adoption_name(r.core.adopt(fresh, own_guest))); };
}
event freeze_asked(std::uint8_t cause) {
  return [cause](rig& r) {
    r.core.freeze_asked(cause);
    return std::string();
  };
}
event simply(std::function<void(rig&)> fn) {
  return [fn](rig& r) {
    fn(r);
    return std::string();
  };
}
event deferral_due(std::uint64_t id) {
  return [id](rig& r) { return std::string(r.core.deferral_due(id) ? "runs" : "ignored"); };
}
event freeze_written(std::uint64_t attempt, freeze_writes w) {
  return [=](rig& r) {
    r.core.freeze_written(attempt, w);
    return std::string();
  };
}
event idle_due(idle_facts f) {
  return [f](rig& r) {
    r.core.idle_due(f);
    return std::string();
  };
}

// clang-format off
const std::vector<row>& transitions() {
  static const std::vector<row> rows = {
    // -- starting ------------------------------------------------------------------------
    {"a start serves at once", [](rig&) {}, simply([](rig& r) { r.core.start(); }),
     user_phase::serving, {"show active", "timer idle 10000 0"}},
    {"a wake waits for his parcel", [](rig&) {}, simply([](rig& r) { r.core.wake(); }),
     user_phase::waking, {"show unfreezing"}},
    {"woke: adoptions saved, then what waited is served", [](rig& r) { waking(r); r.fx.requests_waiting = 1; },
     simply([](rig& r) { r.core.woke(); }),
     user_phase::serving, {"settle ok", "show active", "timer idle 10000 0", "serve request"}},
    {"woke with a freeze asked meanwhile: the freeze starts", [](rig& r) { waking(r); r.core.freeze_asked(freeze_cause); },
     simply([](rig& r) { r.core.woke(); }),
     user_phase::freezing, {"settle ok", "show active", "timer idle 10000 0", "hold routing", "show departing", "write freeze 0 #1"}},
    {"a parcel that does not load: refused", waking, simply([](rig& r) { r.core.quarantined(); }),
     user_phase::refused, {"settle ok", "show active"}},
    {"a parcel of another group: relocated", waking, simply([](rig& r) { r.core.relocated(); }),
     user_phase::stopped, {"leave relocated"}},
    {"a failed read: adoptions failed, he stops", waking, simply([](rig& r) { r.core.wake_failed(); }),
     user_phase::stopped, {"settle failed", "leave not_woken"}},
    {"a stale claim during the wake: fenced", waking, simply([](rig& r) { r.core.fence(); }),
     user_phase::fenced, {"leave fenced"}},
    {"stale: a wake answer when he is not waking", serving, simply([](rig& r) { r.core.woke(); }),
     user_phase::serving, {}},
    {"stale: a wake answer after he was fenced", [](rig& r) { waking(r); r.core.fence(); },
     simply([](rig& r) { r.core.woke(); r.core.wake_failed(); r.core.quarantined(); r.core.relocated(); }),
     user_phase::fenced, {}},
    {"a freeze asked while waking waits for the wake", waking, freeze_asked(freeze_cause),
     user_phase::waking, {}},
    {"resumed from rest, idle for a while: rests again only later",
     [](rig&) {}, simply([](rig& r) { r.core.resumed(idle_facts{3s, false, false}); }),
     user_phase::serving, {"show active", "timer idle 5000 0"}, "", resting_policy()},
    {"resumed from rest past his freeze: he freezes now",
     [](rig&) {}, simply([](rig& r) { r.core.resumed(idle_facts{61s, false, false}); }),
     user_phase::freezing, {"show active", "hold routing", "show departing", "write freeze 0 #1"}, "", resting_policy()},

    // -- a request arriving, per phase ---------------------------------------------------
    {"request while waking: waits", waking, admit_request(), user_phase::waking, {}, "queue"},
    {"request while serving: served", serving, admit_request(), user_phase::serving, {}, "serve"},
    {"request while deferred: waits", deferred_elsewhere, admit_request(), user_phase::deferred, {}, "queue"},
    {"request while telling: waits", telling, admit_request(), user_phase::telling, {}, "queue"},
    {"request while writing: waits", writing_request, admit_request(), user_phase::writing, {}, "queue"},
    {"request while a message is written: waits", writing_message, admit_request(), user_phase::writing, {}, "queue"},
    {"request while freezing: waits (answered not_here once he is gone)", freezing, admit_request(),
     user_phase::freezing, {}, "queue"},
    {"request while refused: refused", refused, admit_request(), user_phase::refused, {}, "refuse_quarantined"},
    {"request as he rests: left in his mailbox for his next start", resting, admit_request(),
     user_phase::resting, {}, "queue", resting_policy()},
    {"request after he was fenced: not served here", fenced, admit_request(), user_phase::fenced, {}, "queue"},
    {"request with his queue full", deferred_elsewhere, admit_request(4), user_phase::deferred, {}, "refuse_full"},

    // -- a message arriving, per phase -----------------------------------------------------
    {"message while waking: waits", waking, admit_message(), user_phase::waking, {}, "queue"},
    {"message while serving: served", serving, admit_message(), user_phase::serving, {}, "serve"},
    {"message while deferred: waits", deferred_on_timer, admit_message(), user_phase::deferred, {}, "queue"},
    {"message while telling: served (two users telling each other)", telling, admit_message(),
     user_phase::telling, {}, "serve"},
    {"message while writing: waits", writing_message, admit_message(), user_phase::writing, {}, "queue"},
    {"message while freezing: waits", freezing, admit_message(), user_phase::freezing, {}, "queue"},
    {"message while refused: refused", refused, admit_message(), user_phase::refused, {}, "refuse_quarantined"},
    {"message as he rests: routed again", resting, admit_message(), user_phase::resting, {}, "refuse_leaving",
     resting_policy()},
    {"message after he stopped: routed again", stopped, admit_message(), user_phase::stopped, {}, "refuse_leaving"},
    {"message with his queue full", waking, admit_message(4), user_phase::waking, {}, "refuse_full"},

    // -- serving what waits ------------------------------------------------------------------
    {"messages and requests take turns", [](rig& r) { serving(r); r.forget(); r.fx.messages_waiting = 2; r.fx.requests_waiting = 2; },
     simply([](rig& r) { r.core.drain(); }),
     user_phase::serving, {"serve message", "serve request", "serve message", "serve request"}},
    {"while telling only messages are served", [](rig& r) { telling(r); r.fx.messages_waiting = 2; r.fx.requests_waiting = 2; },
     simply([](rig& r) { r.core.drain(); }),
     user_phase::telling, {"serve message", "serve message"}},
    {"a served request that defers holds the rest back",
     [](rig& r) {
       serving(r);
       r.fx.messages_waiting = 3;
       r.fx.requests_waiting = 3;
       r.fx.on_request_served = [&r] { r.core.defer(deferral::elsewhere); };
     },
     simply([](rig& r) { r.core.drain(); }),
     user_phase::deferred, {"serve message", "serve request"}},
    {"nothing is served while deferred", [](rig& r) { deferred_elsewhere(r); r.fx.messages_waiting = 1; r.fx.requests_waiting = 1; },
     simply([](rig& r) { r.core.drain(); }), user_phase::deferred, {}},
    {"nothing is served once he is gone", [](rig& r) { stopped(r); r.fx.messages_waiting = 1; r.fx.requests_waiting = 1; },
     simply([](rig& r) { r.core.drain(); }), user_phase::stopped, {}},

    // -- deferred steps ----------------------------------------------------------------------
    {"after(): his resume timer is armed", serving, simply([](rig& r) { r.core.defer(deferral::timer, 250ms); }),
     user_phase::deferred, {"timer resume 250 1"}},
    {"his resume timer is due: the step runs", deferred_on_timer, deferral_due(1), user_phase::serving, {}, "runs"},
    {"stale: an older resume timer", deferred_on_timer, deferral_due(0), user_phase::deferred, {}, "ignored"},
    {"stale: a resume timer when nothing sleeps", deferred_elsewhere, deferral_due(0), user_phase::deferred, {}, "ignored"},
    {"a deferred step's reply: he serves on", deferred_elsewhere, simply([](rig& r) { r.core.resume_request(); }),
     user_phase::serving, {}},
    {"a reply after a freeze asked meanwhile: the freeze follows",
     [](rig& r) { deferred_elsewhere(r); r.core.freeze_asked(freeze_cause); },
     simply([](rig& r) { r.core.resume_request(); r.core.drain(); }),
     user_phase::freezing, {"hold routing", "show departing", "write freeze 0 #1"}},
    {"the soft quit answers a sleeping handler and freezes", deferred_on_timer, freeze_asked(quit_cause),
     user_phase::freezing, {"answer sleeper", "hold routing", "write freeze 3 #1"}},
    {"the sleeper answered by the quit: its timer is stale",
     [](rig& r) { deferred_on_timer(r); r.core.freeze_asked(quit_cause); },
     deferral_due(1), user_phase::freezing, {}, "ignored"},
    {"an idle freeze waits for a sleeping handler", deferred_on_timer, freeze_asked(freeze_cause),
     user_phase::deferred, {}},
    {"the soft quit waits for a reply on its way", deferred_elsewhere, freeze_asked(quit_cause),
     user_phase::deferred, {}},
    {"a message's outcome: the request goes on", telling, [](rig& r) { return std::string(r.core.tell_answered() == tell_answer::run_now ? "run_now" : "park"); },
     user_phase::serving, {}, "run_now"},
    {"a message's outcome during a message's write: parked", writing_message_while_telling,
     [](rig& r) { return std::string(r.core.tell_answered() == tell_answer::run_now ? "run_now" : "park"); },
     user_phase::writing, {}, "park"},
    {"the write ends after a parked outcome: the step is due",
     [](rig& r) { writing_message_while_telling(r); r.core.tell_answered(); },
     simply([](rig& r) { r.core.message_written(); }), user_phase::deferred, {}},
    {"the write ends before the outcome: still telling", writing_message_while_telling,
     simply([](rig& r) { r.core.message_written(); }), user_phase::telling, {}},

    // -- durable replies (durability "reply") --------------------------------------------------
    {"a request's write ends: what waits is served", [](rig& r) { writing_request(r); r.fx.requests_waiting = 1; },
     simply([](rig& r) { r.core.request_written(); }), user_phase::serving, {"serve request"}},
    {"a freeze asked during a request's write follows it", [](rig& r) { writing_request(r); r.core.freeze_asked(freeze_cause); },
     simply([](rig& r) { r.core.request_written(); }),
     user_phase::freezing, {"hold routing", "show departing", "write freeze 0 #1"}},
    {"a freeze asked during a message's write waits for it", writing_message, freeze_asked(freeze_cause),
     user_phase::writing, {}},
    {"a message's write ends: he serves on (drained by the actor)", writing_message,
     simply([](rig& r) { r.core.message_written(); }), user_phase::serving, {}},
    {"stale: a write's end after he was fenced", [](rig& r) { writing_request(r); r.core.fence(); },
     simply([](rig& r) { r.core.request_written(); r.core.message_written(); }), user_phase::fenced, {}},
    {"a stale epoch on a durable reply: fenced", writing_request, simply([](rig& r) { r.core.fence(); }),
     user_phase::fenced, {"leave fenced"}},

    // -- freezing ------------------------------------------------------------------------------
    {"a freeze: routing held, parcels written", serving, freeze_asked(freeze_cause),
     user_phase::freezing, {"hold routing", "show departing", "write freeze 0 #1"}},
    {"the soft quit's freeze: no census notes", serving, freeze_asked(quit_cause),
     user_phase::freezing, {"hold routing", "write freeze 3 #1"}},
    {"an empty guest freezes without writing",
     [](rig& r) { r.fx.pristine = true; serving(r); }, freeze_asked(freeze_cause),
     user_phase::stopped, {"hold routing", "leave frozen"}, "", [] { auto p = test_policy(); p.guest = true; return p; }()},
    {"a refused user freezes without writing", refused, freeze_asked(freeze_cause),
     user_phase::stopped, {"hold routing", "leave frozen"}},
    {"all parcels written: he leaves", freezing, freeze_written(1, freeze_writes::written),
     user_phase::stopped, {"leave frozen"}},
    {"a parcel not written: the freeze is aborted, he serves on",
     [](rig& r) { freezing(r); r.fx.requests_waiting = 1; }, freeze_written(1, freeze_writes::failed),
     user_phase::serving, {"thaw", "show active", "serve request"}},  // his idle check is still armed
    {"a stale epoch while freezing: fenced, nothing announced", freezing, freeze_written(1, freeze_writes::stale),
     user_phase::fenced, {"leave fenced"}},
    {"stale: an aborted freeze's late notice during the next freeze",
     [](rig& r) { freezing(r); r.core.freeze_written(1, freeze_writes::failed); r.core.freeze_asked(freeze_cause); },
     freeze_written(1, freeze_writes::written), user_phase::freezing, {}},
    {"the next freeze's own notice counts",
     [](rig& r) { freezing(r); r.core.freeze_written(1, freeze_writes::failed); r.core.freeze_asked(freeze_cause); },
     freeze_written(2, freeze_writes::written), user_phase::stopped, {"leave frozen"}},
    {"stale: a freeze notice after he left", [](rig& r) { freezing(r); r.core.fence(); },
     freeze_written(1, freeze_writes::written), user_phase::fenced, {}},
    {"a second freeze while freezing: one freeze", freezing, freeze_asked(quit_cause), user_phase::freezing, {}},
    {"a freeze after he left: nothing", stopped, freeze_asked(freeze_cause), user_phase::stopped, {}},
    {"attach before the down: a connection adopted while freezing is saved, then he leaves",
     freezing, [](rig& r) { auto a = adoption_name(r.core.adopt(true, false)); r.core.freeze_written(1, freeze_writes::written); return std::string(a); },
     user_phase::stopped, {"leave frozen"}, "save_now", test_policy(durability::interval)},

    // -- connections he is given -----------------------------------------------------------------
    {"adopt while waking (interval): saved after the wake", waking, adopt(true), user_phase::waking, {},
     "save_after_wake", test_policy(durability::interval)},
    {"adopt while serving (reply): saved now", serving, adopt(true), user_phase::serving, {}, "save_now",
     test_policy(durability::reply)},
    {"adopt (freeze): nothing to save", waking, adopt(true), user_phase::waking, {}, "answer_now"},
    {"adopt a connection he has: nothing to save", waking, adopt(false), user_phase::waking, {}, "answer_now",
     test_policy(durability::interval)},
    {"adopt his own guest connection: nothing to save", serving, adopt(true, true), user_phase::serving, {},
     "answer_now", test_policy(durability::reply)},

    // -- idleness ---------------------------------------------------------------------------------
    {"idle past his threshold: he freezes", serving, idle_due(idle_facts{60s, false, false}),
     user_phase::freezing, {"hold routing", "show departing", "write freeze 0 #1"}},
    {"an open stream is not idleness", serving, idle_due(idle_facts{60s, true, false}),
     user_phase::serving, {"timer idle 10000 0"}},
    {"busy past his threshold: looked at again", deferred_elsewhere, idle_due(idle_facts{70s, false, false}),
     user_phase::deferred, {"timer idle 10000 0"}},
    {"not idle yet: armed for the rest of it", serving, idle_due(idle_facts{55s, false, false}),
     user_phase::serving, {"timer idle 5000 0"}},
    {"idle past rest_idle_seconds: he rests", serving, idle_due(idle_facts{6s, false, false}),
     user_phase::resting, {"leave rested"}, "", resting_policy()},
    {"something bound to his actor: he does not rest", serving, idle_due(idle_facts{6s, false, true}),
     user_phase::serving, {"timer idle 5000 0"}, "", resting_policy()},
    {"a reply on its way: he does not rest", [](rig& r) { serving(r); r.core.asked(); },
     idle_due(idle_facts{6s, false, false}), user_phase::serving, {"timer idle 5000 0"}, "", resting_policy()},
    {"the reply came: he rests", [](rig& r) { serving(r); r.core.asked(); r.core.answered(); },
     idle_due(idle_facts{6s, false, false}), user_phase::resting, {"leave rested"}, "", resting_policy()},
    {"a change not yet durable (interval): he does not rest", [](rig& r) { serving(r); r.core.changed(); r.forget(); },
     idle_due(idle_facts{6s, false, false}), user_phase::serving, {"timer idle 5000 0"}, "",
     [] { auto p = resting_policy(); p.mode = durability::interval; return p; }()},
    {"an empty guest's threshold is the guest's", [](rig& r) { r.fx.pristine = true; serving(r); },
     idle_due(idle_facts{2s, false, false}), user_phase::stopped, {"hold routing", "leave frozen"}, "",
     [] { auto p = test_policy(); p.guest = true; return p; }()},
    {"an idle timer once armed is not armed twice", serving, simply([](rig& r) { r.core.arm_idle(1s); }),
     user_phase::serving, {}},
    {"no idle timer while freezing", [](rig& r) { freezing(r); r.core.idle_due(idle_facts{1s, false, false}); },
     simply([](rig& r) { r.core.arm_idle(1s); }), user_phase::freezing, {}},

    // -- checkpoints (durability "interval") -----------------------------------------------------
    {"a change arms the checkpoint once", serving, simply([](rig& r) { r.core.changed(); r.core.changed(); }),
     user_phase::serving, {"timer checkpoint 5000 0"}, "", test_policy(durability::interval)},
    {"a change arms nothing in freeze mode", serving, simply([](rig& r) { r.core.changed(); }),
     user_phase::serving, {}},
    {"the checkpoint is due: written", [](rig& r) { serving(r); r.core.changed(); },
     simply([](rig& r) { r.core.checkpoint_due(); }), user_phase::serving, {"write checkpoint"}, "",
     test_policy(durability::interval)},
    {"nothing changed: nothing written", serving, simply([](rig& r) { r.core.checkpoint_due(); }),
     user_phase::serving, {}, "", test_policy(durability::interval)},
    {"a failed checkpoint is tried again", [](rig& r) { serving(r); r.core.changed(); r.core.checkpoint_due(); },
     simply([](rig& r) { r.core.checkpoint_failed(); }), user_phase::serving, {"timer checkpoint 5000 0"}, "",
     test_policy(durability::interval)},
    {"no checkpoint while a guest's login is on its way",
     [](rig& r) { serving(r); r.core.changed(); r.core.login_started(); },
     simply([](rig& r) { r.core.checkpoint_due(); }), user_phase::serving, {}, "",
     [] { auto p = test_policy(durability::interval); p.guest = true; return p; }()},
    {"the login failed: checkpoints go on",
     [](rig& r) { serving(r); r.core.changed(); r.core.login_started(); r.core.checkpoint_due(); },
     simply([](rig& r) { r.core.login_ended(); }), user_phase::serving, {"timer checkpoint 5000 0"}, "",
     [] { auto p = test_policy(durability::interval); p.guest = true; return p; }()},
    {"no checkpoint while freezing", [](rig& r) { serving(r); r.core.changed(); r.core.freeze_asked(freeze_cause); },
     simply([](rig& r) { r.core.checkpoint_due(); }), user_phase::freezing, {}, "", test_policy(durability::interval)},
    {"a stale epoch on a checkpoint: fenced", [](rig& r) { serving(r); r.core.changed(); r.core.checkpoint_due(); },
     simply([](rig& r) { r.core.fence(); }), user_phase::fenced, {"leave fenced"}, "", test_policy(durability::interval)},

    // -- leaving -------------------------------------------------------------------------------------
    {"a handler threw: he leaves", serving, simply([](rig& r) { r.core.failed(); }),
     user_phase::stopped, {"leave failed"}},
    {"a guest's last connection left: he retires", deferred_elsewhere,
     simply([](rig& r) { r.core.resume_request(); r.core.retire(); }), user_phase::stopped, {"leave retired"}},
    {"fenced twice: once", fenced, [](rig& r) { return std::string(r.core.fence() ? "fenced" : "already gone"); },
     user_phase::fenced, {}, "already gone"},
    {"gone: a late reply changes nothing", stopped, simply([](rig& r) { r.core.resume_request(); r.core.failed(); r.core.retire(); }),
     user_phase::stopped, {}},
  };
  return rows;
}
// clang-format on

class user_core_transitions : public ::testing::TestWithParam<std::size_t> {};

TEST_P(user_core_transitions, phase_and_effects) {
  const auto& row = transitions()[GetParam()];
  auto r = std::make_unique<rig>(row.policy);
  troupe::test::play_row(row, *r);
}

INSTANTIATE_TEST_SUITE_P(table, user_core_transitions, ::testing::Range<std::size_t>(0, transitions().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return troupe::test::row_test_name(info.param, transitions()[info.param].name);
                         });

// -- what the table cannot say in one row ---------------------------------------------------------

TEST(user_core, busy_tells_what_a_freeze_or_an_idle_check_must_wait_for) {
  struct {
    void (*given)(rig&);
    bool busy;
  } cases[] = {{waking, true},          {serving, false},         {deferred_on_timer, true},
               {telling, true},         {writing_request, true},  {writing_message, false},
               {writing_message_while_telling, true}, {freezing, true}, {refused, false}};
  for (auto& c : cases) {
    rig r(test_policy());
    c.given(r);
    EXPECT_EQ(r.core.busy(), c.busy) << to_string(r.core.phase());
  }
}

TEST(user_core, every_phase_has_a_name) {
  for (auto p : {user_phase::waking, user_phase::serving, user_phase::deferred, user_phase::telling,
                 user_phase::writing, user_phase::freezing, user_phase::refused, user_phase::resting,
                 user_phase::fenced, user_phase::stopped})
    EXPECT_STRNE(to_string(p), "?");
}

TEST(user_core, durability_names) {
  EXPECT_EQ(troupe::durability_of("reply"), durability::reply);
  EXPECT_EQ(troupe::durability_of("interval"), durability::interval);
  EXPECT_EQ(troupe::durability_of("freeze"), durability::freeze);
  EXPECT_EQ(troupe::durability_of("anything"), durability::freeze);
}

TEST(user_core, an_idle_check_is_never_armed_past_the_horizon) {
  auto p = test_policy();
  p.idle_after = 30min;
  rig r(p);
  r.core.start();
  EXPECT_EQ(r.fx.said.back(), "timer idle 10000 0");
}

TEST(user_core, a_dirty_state_survives_an_aborted_freeze_and_is_clean_after_a_good_one) {
  rig r(test_policy());
  r.core.start();
  r.core.changed();
  r.core.freeze_asked(freeze_cause);
  r.core.freeze_written(1, freeze_writes::failed);
  EXPECT_TRUE(r.core.dirty());
  r.core.freeze_asked(freeze_cause);
  r.core.freeze_written(2, freeze_writes::written);
  EXPECT_FALSE(r.core.dirty());
}

}  // namespace

}  // namespace user_core_test_file
