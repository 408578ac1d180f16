// The commander's state machine (actors/commander_core.hpp) without an actor
// system: every transition as a table row (phase × event → phase + effects),
// including the races the integration tests found (an attach before the
// frozen notice, a stale notice, a member down with requests held for its
// users, a login while a connection's lookup is out, a late scan).
#include "actors/commander_core.hpp"

#include "transition_table.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace commander_core_test_file {

using troupe::commander_arrival;
using troupe::commander_core;
using troupe::commander_phase;
using troupe::commander_policy;
using troupe::tell_hold;
using troupe::waiter_id;

namespace {

// Records the core's effects as words, in order.
class effect_log : public troupe::commander_effects {
public:
  std::vector<std::string> said;

  void arm_hold_budget() override { said.push_back("arm hold"); }
  void ask_scan(std::size_t slot) override { said.push_back("scan " + std::to_string(slot)); }
  void proceed(waiter_id w) override { said.push_back("proceed " + std::to_string(w)); }
  void refuse(waiter_id w, const std::string& why) override {
    said.push_back("refuse " + std::to_string(w) + ": " + why);
  }
  void attach(waiter_id w, const std::string& user, const std::string& cid) override {
    said.push_back("attach " + std::to_string(w) + " " + user + " " + cid);
  }
  void attach_without_growth(waiter_id w, const std::string& group) override {
    said.push_back("attach without growth " + std::to_string(w) + " " + group);
  }
  void resolve(waiter_id w, const std::string& cid) override {
    said.push_back("resolve " + std::to_string(w) + " " + cid);
  }
  void route_tell(waiter_id w) override { said.push_back("tell " + std::to_string(w)); }
  void read_connection(const std::string& cid) override { said.push_back("read " + cid); }
  void grow(const std::string& group) override { said.push_back("grow " + group); }
  void release_guest(std::size_t slot, const std::string& user) override {
    said.push_back("release " + std::to_string(slot) + " " + user);
  }
  void remove_parcel(bool connection, const std::string& key) override {
    said.push_back(std::string("remove ") + (connection ? "connection " : "user ") + key);
  }
  void keep_channels(const std::string& user) override { said.push_back("keep channels " + user); }
};

commander_policy test_policy() {
  commander_policy p;
  p.user_queue_length = 2;
  return p;
}

// A core and its effect log, brought to a phase by the events that lead there.
struct rig {
  effect_log fx;
  commander_core core;
  rig() : core(test_policy(), fx) {}
  void forget() { fx.said.clear(); }
  // Where a user lives now ("-" when he is not placed), by slot.
  std::string where(const std::string& user) const {
    auto slot = core.index() ? core.index()->worker_of(user) : std::nullopt;
    return slot ? std::to_string(*slot) : "-";
  }
  std::string owner(const std::string& cid) const {
    auto user = core.index() ? core.index()->user_of(cid) : std::nullopt;
    return user ? *user : "-";
  }
};

using setup = std::function<void(rig&)>;
using event = std::function<std::string(rig&)>;  // returns what the event answers ("" when nothing)

struct row {
  const char* name;
  setup given;
  event when;
  commander_phase then;
  std::vector<std::string> effects;
  std::string answer = "";
};

const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

// `n` workers of `group` on `node`, all present, registered.
void workers(rig& r, const std::string& group, const std::string& node, std::size_t n) {
  auto changes = r.core.place_workers(group, node, std::vector<bool>(n, true), t0);
  r.core.workers_registered(node, changes.added);
}

std::string describe(const troupe::slot_changes& c) {
  std::string s = "replaced";
  for (auto& [position, slot] : c.replaced)
    s += " " + std::to_string(position) + ":" + std::to_string(slot);
  s += "; added";
  for (auto& [position, slot] : c.added)
    s += " " + std::to_string(position) + ":" + std::to_string(slot);
  return s;
}

// -- the phases and situations, reached the way the actor reaches them --------------------

void nothing(rig&) {}
void unstaffed(rig& r) { r.core.start({}); }
void serving(rig& r) {  // a first start, two workers of "main" on n1 (slots 0 and 1)
  r.core.start({});
  workers(r, "main", "n1", 2);
}
void awaiting_member(rig& r) { r.core.start({"n2"}); }
void scanning(rig& r) {  // a takeover: n2's one worker (slot 0) is asked for its users
  r.core.start({"n2"});
  workers(r, "main", "n2", 1);
}
void taken_over(rig& r) {
  scanning(r);
  r.core.scan_answered(0, {"ann"}, {7});
}
void ann_placed(rig& r) {  // ann lives on slot 1, at owner epoch 7
  serving(r);
  r.core.index()->place_at("ann", 1, 7);
}
void ann_freezing(rig& r) {
  ann_placed(r);
  r.core.freezing_notice("ann", 7);
}
void ann_freezing_held(rig& r) {  // a resolve (4, on c1) and a message (5) wait for her
  ann_freezing(r);
  r.core.hold_resolve("ann", 4, "c1");
  r.core.hold_tell("ann", 5);
}
void ann_dropping_held(rig& r) {
  ann_placed(r);
  r.core.index()->bind("c1", "ann");
  r.core.index()->bind("c2", "ann");
  r.core.begin_drop("ann");
  r.core.hold_resolve("ann", 4, "c1");
  r.core.hold_tell("ann", 5);
}
void two_members(rig& r) {  // slot 0 on n1, slot 1 on n2; ann on n2, freezing, a resolve held
  r.core.start({});
  workers(r, "main", "n1", 1);
  workers(r, "main", "n2", 1);
  r.core.index()->place_at("ann", 1, 7);
  r.core.freezing_notice("ann", 7);
  r.core.hold_resolve("ann", 4, "c1");
}
void looking_up(rig& r) {  // two resolves wait for c1's parcel
  serving(r);
  r.core.look_up("c1", 1);
  r.core.look_up("c1", 2);
}
void growing(rig& r) {
  serving(r);
  r.core.await_growth("main", 1);
}

event simply(std::function<void(rig&)> fn) {
  return [fn](rig& r) {
    fn(r);
    return std::string();
  };
}
event admit(waiter_id w) {
  return [w](rig& r) {
    switch (r.core.admit(w)) {
      case commander_arrival::go: return std::string("go");
      case commander_arrival::wait: return std::string("wait");
      case commander_arrival::refuse: return std::string("refuse");
    }
    return std::string("?");
  };
}
event rotation() {
  return [](rig& r) { return std::string(r.core.accepts_rotation() ? "rotates" : "refused"); };
}
std::string counted(bool b) { return b ? "counted" : "stale"; }
std::string hold_name(tell_hold h) {
  switch (h) {
    case tell_hold::route: return "route";
    case tell_hold::held: return "held";
    case tell_hold::full: return "full";
  }
  return "?";
}

// clang-format off
const std::vector<row>& transitions() {
  static const std::vector<row> rows = {
    // -- starting and the takeover -------------------------------------------------------
    {"a first start: nothing to place on yet", nothing, simply([](rig& r) { r.core.start({}); }),
     commander_phase::unstaffed, {}},
    {"a takeover: the hold budget is armed, members awaited", nothing, simply([](rig& r) { r.core.start({"n2", "n3"}); }),
     commander_phase::taking_over, {"arm hold"}},
    {"the first registration: serving", unstaffed, simply([](rig& r) { workers(r, "main", "n1", 2); }),
     commander_phase::serving, {}},
    {"an expected member registers: its workers are scanned", awaiting_member,
     simply([](rig& r) { workers(r, "main", "n2", 2); }), commander_phase::taking_over, {"scan 0", "scan 1"}},
    {"another member registering during a takeover is scanned too", scanning,
     simply([](rig& r) { workers(r, "main", "n3", 1); }), commander_phase::taking_over, {"scan 1"}},
    {"the scans answered: serving, what waited goes on in order",
     [](rig& r) { scanning(r); r.core.admit(1); r.core.admit(2); },
     [](rig& r) { r.core.scan_answered(0, {"ann", "bob"}, {7, 8}); return r.where("ann") + r.where("bob"); },
     commander_phase::serving, {"proceed 1", "proceed 2"}, "00"},
    {"a scan failed: its worker's users are unknown, placements go on", [](rig& r) { scanning(r); r.core.admit(1); },
     simply([](rig& r) { r.core.scan_failed(0); }), commander_phase::serving, {"proceed 1"}},
    {"a user reported by two workers: the first keeps him",
     [](rig& r) { r.core.start({"n2"}); workers(r, "main", "n2", 2); r.core.scan_answered(0, {"bob"}, {7}); },
     [](rig& r) { auto d = r.core.scan_answered(1, {"bob"}, {9}); return (d.empty() ? "" : d.front()) + "@" + r.where("bob"); },
     commander_phase::serving, {}, "bob@0"},
    {"an epoch missing from a scan counts as unknown (any notice is current)",
     [](rig& r) { scanning(r); r.core.scan_answered(0, {"ann"}, {}); },
     [](rig& r) { return counted(r.core.freezing_notice("ann", 42)); }, commander_phase::serving, {}, "counted"},
    {"the hold budget with no worker known: waiters refused", [](rig& r) { awaiting_member(r); r.core.admit(1); },
     simply([](rig& r) { r.core.hold_budget_over(); }),
     commander_phase::unstaffed, {"refuse 1: the commander is still taking over; retry"}},
    {"the hold budget with workers known: scans given up, waiters go on", [](rig& r) { scanning(r); r.core.admit(1); },
     simply([](rig& r) { r.core.hold_budget_over(); }), commander_phase::serving, {"proceed 1"}},
    {"the hold budget with a member missing: it counts as gone",
     [](rig& r) { r.core.start({"n2", "n3"}); workers(r, "main", "n2", 1); r.core.scan_answered(0, {}, {}); r.core.admit(1); },
     simply([](rig& r) { r.core.hold_budget_over(); }), commander_phase::serving, {"proceed 1"}},
    {"the hold budget once serving: nothing", taken_over, simply([](rig& r) { r.core.hold_budget_over(); }),
     commander_phase::serving, {}},
    {"race: a scan answered past the hold budget does not end a later scan's wait",
     [](rig& r) { scanning(r); r.core.hold_budget_over(); workers(r, "main", "n3", 1); r.core.admit(1); },
     simply([](rig& r) { r.core.scan_answered(0, {"ann"}, {7}); }), commander_phase::taking_over, {}},
    {"after a takeover, a later registration is scanned before placements go on", taken_over,
     simply([](rig& r) { workers(r, "main", "n3", 1); }), commander_phase::taking_over, {"scan 1"}},
    {"after a first start, a later registration is not scanned", serving,
     simply([](rig& r) { workers(r, "main", "n3", 1); }), commander_phase::serving, {}},
    {"an expected member declared down is no longer awaited",
     [](rig& r) { r.core.start({"n2", "n3"}); workers(r, "main", "n2", 1); r.core.scan_answered(0, {}, {}); r.core.admit(1); },
     [](rig& r) { auto users = r.core.member_down("n3"); return users ? std::to_string(*users) : std::string("none"); },
     commander_phase::serving, {"proceed 1"}, "none"},

    // -- a resolve or a message arriving, per phase -------------------------------------------
    {"arriving while unstaffed: refused", unstaffed, admit(1), commander_phase::unstaffed, {}, "refuse"},
    {"arriving while a member is awaited: waits", awaiting_member, admit(1), commander_phase::taking_over, {}, "wait"},
    {"arriving while scanning: waits", scanning, admit(1), commander_phase::taking_over, {}, "wait"},
    {"arriving while serving: goes on now", serving, admit(1), commander_phase::serving, {}, "go"},
    {"a login or logout while taking over: refused (not held)", scanning, rotation(),
     commander_phase::taking_over, {}, "refused"},
    {"a login or logout while unstaffed: refused", unstaffed, rotation(), commander_phase::unstaffed, {}, "refused"},
    {"a login or logout while serving: carried out", serving, rotation(), commander_phase::serving, {}, "rotates"},

    // -- workers ------------------------------------------------------------------------------
    {"a replaced worker keeps its slot: his users stay", ann_placed,
     [](rig& r) { return describe(r.core.place_workers("main", "n1", {true, true}, t0)) + " ann@" + r.where("ann"); },
     commander_phase::serving, {}, "replaced 0:0 1:1; added ann@1"},
    {"a grown group appends a slot", serving,
     [](rig& r) { return describe(r.core.place_workers("main", "n1", {true, true, true}, t0)); },
     commander_phase::serving, {}, "replaced 0:0 1:1; added 2:2"},
    {"a position gone retires its slot: held requests wake him elsewhere", ann_freezing_held,
     [](rig& r) { auto c = describe(r.core.place_workers("main", "n1", {true}, t0)); return c + " ann@" + r.where("ann"); },
     commander_phase::serving, {"attach 4 ann c1", "tell 5"}, "replaced 0:0; added ann@-"},
    {"a retired position comes back as a new slot", [](rig& r) { serving(r); r.core.place_workers("main", "n1", {true}, t0); },
     [](rig& r) { return describe(r.core.place_workers("main", "n1", {true, true}, t0)); },
     commander_phase::serving, {}, "replaced 0:0; added 1:2"},
    {"the commander retires an idle worker: no user is placed there again", serving,
     [](rig& r) { r.core.retire_position("n1", "main", 1); return std::to_string(r.core.index()->retired(1)) + std::to_string(r.core.positions("n1", "main")->at(1) == commander_core::no_slot); },
     commander_phase::serving, {}, "11"},
    {"race: a member down while his requests are held: they wake him elsewhere", two_members,
     [](rig& r) { auto users = r.core.member_down("n2"); return std::to_string(users.value_or(99)) + " ann@" + r.where("ann"); },
     commander_phase::serving, {"attach 4 ann c1"}, "1 ann@-"},
    {"a member down: its slots and positions are forgotten", two_members,
     [](rig& r) { r.core.member_down("n2"); return std::to_string(r.core.slots_of("n2").size()) + std::to_string(r.core.knows_group("n2", "main")); },
     commander_phase::serving, {"attach 4 ann c1"}, "00"},
    {"a member down twice: once", [](rig& r) { two_members(r); r.core.member_down("n2"); },
     [](rig& r) { auto users = r.core.member_down("n2"); return users ? std::to_string(*users) : std::string("none"); },
     commander_phase::serving, {}, "none"},

    // -- a user's departure and his notices ---------------------------------------------------
    {"a freezing notice: his resolves are held from now on", ann_placed,
     [](rig& r) { auto c = counted(r.core.freezing_notice("ann", 7)); return c + " " + (r.core.hold_resolve("ann", 4, "c1") ? "held" : "placed"); },
     commander_phase::serving, {}, "counted held"},
    {"race: a stale freezing notice (an older placement) changes nothing", ann_placed,
     [](rig& r) { auto c = counted(r.core.freezing_notice("ann", 6)); return c + " " + (r.core.hold_resolve("ann", 4, "c1") ? "held" : "placed"); },
     commander_phase::serving, {}, "stale placed"},
    {"a second freezing notice: one departure", ann_freezing_held,
     [](rig& r) { r.core.freezing_notice("ann", 7); r.core.thaw_notice("ann", 7); return std::string(); },
     commander_phase::serving, {"attach 4 ann c1", "tell 5"}},
    {"frozen: his channels are kept, then held resolves and messages go on", ann_freezing_held,
     [](rig& r) { auto c = counted(r.core.frozen_notice("ann", 7)); return c + " ann@" + r.where("ann"); },
     commander_phase::serving, {"keep channels ann", "attach 4 ann c1", "tell 5"}, "counted ann@-"},
    {"race: an attach before the frozen notice is held, then wakes him from his parcel", ann_freezing,
     [](rig& r) { r.core.hold_resolve("ann", 4, "c1"); r.core.frozen_notice("ann", 7); return r.where("ann"); },
     commander_phase::serving, {"keep channels ann", "attach 4 ann c1"}, "-"},
    {"race: a stale frozen notice keeps him placed and his requests held", ann_freezing_held,
     [](rig& r) { auto c = counted(r.core.frozen_notice("ann", 3)); return c + " ann@" + r.where("ann") + " " + (r.core.departing("ann") ? "departing" : "not"); },
     commander_phase::serving, {}, "stale ann@1 departing"},
    {"frozen without a departure (no freezing notice came): he is forgotten", ann_placed,
     [](rig& r) { auto c = counted(r.core.frozen_notice("ann", 7)); return c + " ann@" + r.where("ann"); },
     commander_phase::serving, {"keep channels ann"}, "counted ann@-"},
    {"a frozen notice of a user not placed: ignored", serving,
     [](rig& r) { return counted(r.core.frozen_notice("zed", 7)); }, commander_phase::serving, {}, "stale"},
    {"a thaw: he stays, held requests go to him where he is", ann_freezing_held,
     [](rig& r) { auto c = counted(r.core.thaw_notice("ann", 7)); return c + " ann@" + r.where("ann"); },
     commander_phase::serving, {"attach 4 ann c1", "tell 5"}, "counted ann@1"},
    {"race: a stale thaw changes nothing", ann_freezing_held,
     [](rig& r) { return counted(r.core.thaw_notice("ann", 8)); }, commander_phase::serving, {}, "stale"},
    {"relocated: he left without writing; held requests go to his group", ann_freezing_held,
     [](rig& r) { auto c = counted(r.core.relocate_notice("ann", 7, "big", t0)); return c + " ann@" + r.where("ann") + " " + r.core.take_relocation("ann").value_or("-"); },
     commander_phase::serving, {"attach 4 ann c1", "tell 5"}, "counted ann@- big"},
    {"race: a stale relocation changes nothing", ann_placed,
     [](rig& r) { auto c = counted(r.core.relocate_notice("ann", 2, "big", t0)); return c + " " + r.core.take_relocation("ann").value_or("-"); },
     commander_phase::serving, {}, "stale -"},
    {"a relocation is taken once", [](rig& r) { ann_placed(r); r.core.relocate_notice("ann", 7, "big", t0); r.core.take_relocation("ann"); },
     [](rig& r) { return r.core.take_relocation("ann").value_or("-"); }, commander_phase::serving, {}, "-"},
    {"a message while he departs waits", ann_freezing, [](rig& r) { return hold_name(r.core.hold_tell("ann", 5)); },
     commander_phase::serving, {}, "held"},
    {"a message when his queue of held messages is full: refused",
     [](rig& r) { ann_freezing(r); r.core.hold_tell("ann", 5); r.core.hold_tell("ann", 6); },
     [](rig& r) { return hold_name(r.core.hold_tell("ann", 7)); }, commander_phase::serving, {}, "full"},
    {"a message for a user who is not leaving: routed", ann_placed,
     [](rig& r) { return hold_name(r.core.hold_tell("ann", 5)); }, commander_phase::serving, {}, "route"},
    {"a guest who never had a state left: his connection is forgotten",
     [](rig& r) { serving(r); r.core.index()->bind("c9", "guest_c9"); },
     [](rig& r) { r.core.guest_released("guest_c9"); return r.owner("c9"); }, commander_phase::serving, {}, "-"},
    {"race: a guest released but placed again meanwhile keeps his connection",
     [](rig& r) { serving(r); r.core.index()->bind("c9", "guest_c9"); r.core.index()->place_at("guest_c9", 0, 3); },
     [](rig& r) { r.core.guest_released("guest_c9"); return r.owner("c9"); }, commander_phase::serving, {}, "guest_c9"},
    {"a named user's release changes nothing", [](rig& r) { serving(r); r.core.index()->bind("c9", "bob"); },
     [](rig& r) { r.core.guest_released("bob"); return r.owner("c9"); }, commander_phase::serving, {}, "bob"},

    // -- an operator's drop -------------------------------------------------------------------
    {"a drop holds his resolves", ann_placed,
     [](rig& r) { auto b = r.core.begin_drop("ann") ? "started" : "busy"; return std::string(b) + " " + (r.core.hold_resolve("ann", 4, "c1") ? "held" : "placed"); },
     commander_phase::serving, {}, "started held"},
    {"a drop while he freezes: busy", ann_freezing,
     [](rig& r) { return std::string(r.core.begin_drop("ann") ? "started" : "busy"); }, commander_phase::serving, {}, "busy"},
    {"a failed drop: he stays, held requests go to him", ann_dropping_held,
     [](rig& r) { r.core.drop_failed("ann"); return r.where("ann"); },
     commander_phase::serving, {"attach 4 ann c1", "tell 5"}, "1"},
    {"a drop done: his connections forgotten, held resolves start afresh as strangers", ann_dropping_held,
     [](rig& r) { auto cids = r.core.forget_dropped("ann"); r.core.dropped("ann"); return std::to_string(cids.size()) + " " + r.owner("c1") + " ann@" + r.where("ann"); },
     commander_phase::serving, {"resolve 4 c1", "tell 5"}, "2 - ann@-"},
    {"race: a frozen notice during a drop wakes what was held; the drop's end finds nothing", ann_dropping_held,
     [](rig& r) { r.core.frozen_notice("ann", 7); r.core.forget_dropped("ann"); r.core.dropped("ann"); return std::string(); },
     commander_phase::serving, {"keep channels ann", "attach 4 ann c1", "tell 5"}},

    // -- connections ----------------------------------------------------------------------------
    {"an unknown connection: one deposit read for every request on it", serving,
     simply([](rig& r) { r.core.look_up("c1", 1); r.core.look_up("c1", 2); r.core.look_up("c2", 3); }),
     commander_phase::serving, {"read c1", "read c2"}},
    {"its parcel names him: every waiter is placed on him", looking_up,
     [](rig& r) { r.core.connection_read("c1", "bob"); return r.owner("c1"); },
     commander_phase::serving, {"attach 1 bob c1", "attach 2 bob c1"}, "bob"},
    {"no parcel: his guest", looking_up, [](rig& r) { r.core.connection_read("c1", ""); return r.owner("c1"); },
     commander_phase::serving, {"attach 1 guest_c1 c1", "attach 2 guest_c1 c1"}, "guest_c1"},
    {"race: a login retired the id during its lookup: a new guest, whatever the parcel says", looking_up,
     [](rig& r) { r.core.rotate("c1", "bob", "c7", "carol"); r.core.connection_read("c1", "bob"); return r.owner("c1") + " " + r.owner("c7"); },
     commander_phase::serving, {"remove connection c1", "attach 1 guest_c1 c1", "attach 2 guest_c1 c1"}, "guest_c1 carol"},
    {"race: a binding made while the lookup was out stands", looking_up,
     [](rig& r) { r.core.index()->bind("c1", "carol"); r.core.connection_read("c1", "bob"); return r.owner("c1"); },
     commander_phase::serving, {"attach 1 carol c1", "attach 2 carol c1"}, "carol"},
    {"the deposit did not answer: the waiters are refused", looking_up,
     [](rig& r) { r.core.connection_unread("c1"); return r.owner("c1"); },
     commander_phase::serving, {"refuse 1: deposit lookup failed", "refuse 2: deposit lookup failed"}, "-"},
    {"a lookup after a failed one reads again", [](rig& r) { looking_up(r); r.core.connection_unread("c1"); },
     simply([](rig& r) { r.core.look_up("c1", 3); }), commander_phase::serving, {"read c1"}},
    {"a login of a placed guest: his worker forgets him, his parcel goes, his id is dead",
     [](rig& r) { serving(r); r.core.index()->bind("c1", "guest_c1"); r.core.index()->place_at("guest_c1", 0, 3); },
     [](rig& r) { r.core.rotate("c1", "guest_c1", "c2", "bob"); return r.owner("c1") + " " + r.owner("c2") + " " + r.where("guest_c1"); },
     commander_phase::serving, {"release 0 guest_c1", "remove user guest_c1"}, "- bob -"},
    {"a login of a guest who is not live: only his parcel goes", [](rig& r) { serving(r); r.core.index()->bind("c1", "guest_c1"); },
     [](rig& r) { r.core.rotate("c1", "guest_c1", "c2", "bob"); return r.owner("c2"); },
     commander_phase::serving, {"remove user guest_c1"}, "bob"},
    {"a logout of a named user: his old connection's parcel goes, he stays", ann_placed,
     [](rig& r) { r.core.rotate("c2", "ann", "c3", "guest_c3"); return r.owner("c3") + " ann@" + r.where("ann"); },
     commander_phase::serving, {"remove connection c2"}, "guest_c3 ann@1"},

    // -- growth -----------------------------------------------------------------------------------
    {"no worker admits: the group is asked to grow once for every arrival", serving,
     [](rig& r) { r.core.await_growth("main", 1); r.core.await_growth("main", 2); return std::to_string(r.core.growing("main")); },
     commander_phase::serving, {"grow main"}, "2"},
    {"the growth is over: its arrivals are placed again, without growing", [](rig& r) { growing(r); r.core.await_growth("main", 2); },
     [](rig& r) { r.core.growth_over("main"); return std::to_string(r.core.growing("main")); },
     commander_phase::serving, {"attach without growth 1 main", "attach without growth 2 main"}, "0"},
    {"a growth over twice: once", [](rig& r) { growing(r); r.core.growth_over("main"); },
     simply([](rig& r) { r.core.growth_over("main"); }), commander_phase::serving, {}},
    {"the next arrival after a growth asks again", [](rig& r) { growing(r); r.core.growth_over("main"); },
     simply([](rig& r) { r.core.await_growth("main", 3); }), commander_phase::serving, {"grow main"}},
  };
  return rows;
}
// clang-format on

class commander_core_transitions : public ::testing::TestWithParam<std::size_t> {};

TEST_P(commander_core_transitions, phase_and_effects) {
  const auto& row = transitions()[GetParam()];
  auto r = std::make_unique<rig>();
  troupe::test::play_row(row, *r);
}

INSTANTIATE_TEST_SUITE_P(table, commander_core_transitions, ::testing::Range<std::size_t>(0, transitions().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return troupe::test::row_test_name(info.param, transitions()[info.param].name);
                         });

// -- what the table cannot say in one row ---------------------------------------------------------

TEST(commander_core, every_phase_has_a_name) {
  for (auto p : {commander_phase::unstaffed, commander_phase::taking_over, commander_phase::serving})
    EXPECT_STRNE(to_string(p), "?");
}

TEST(commander_core, slots_are_named_by_group_and_position_per_member) {
  rig r;
  r.core.start({});
  workers(r, "main", "n1", 2);
  workers(r, "main", "n2", 1);
  workers(r, "big", "n1", 1);
  ASSERT_EQ(r.core.slots().size(), 4u);
  EXPECT_EQ(r.core.slots()[1].name, "main-w2");
  EXPECT_EQ(r.core.slots()[2].node, "n2");
  EXPECT_EQ(r.core.slots()[3].name, "big-w1");
  EXPECT_EQ(r.core.index()->group_of(3), "big");
  EXPECT_EQ(r.core.slots_of("n1"), (std::vector<std::size_t>{0, 1, 3}));
}

TEST(commander_core, old_relocations_are_forgotten_past_the_bound) {
  effect_log fx;
  commander_policy p;
  p.relocations_kept = 2;
  p.relocation_horizon = std::chrono::seconds(5);
  commander_core core(p, fx);
  core.start({});
  auto changes = core.place_workers("main", "n1", {true}, t0);
  core.workers_registered("n1", changes.added);
  for (auto user : {"a", "b", "c"})
    core.index()->place_at(user, 0, 1);
  core.relocate_notice("a", 1, "big", t0);
  core.relocate_notice("b", 1, "big", t0 + std::chrono::seconds(6));
  core.relocate_notice("c", 1, "big", t0 + std::chrono::seconds(10));  // a is past the horizon, b is not
  EXPECT_FALSE(core.take_relocation("a").has_value());
  EXPECT_EQ(core.take_relocation("b").value_or("-"), "big");
  EXPECT_EQ(core.take_relocation("c").value_or("-"), "big");
}

}  // namespace

}  // namespace commander_core_test_file
