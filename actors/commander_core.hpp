#pragma once
/// \file
/// The commander's state machine as a plain class (docs/design.md "The
/// commander's phases"): whether placements go on, wait for a takeover or are
/// refused; the workers' slots; and, per user and per connection, what waits
/// for what (a freeze's or a drop's end, a deposit lookup, a group's growth).
/// A request that waits is a numbered waiter: the actor keeps what answers it
/// (actors/commander_state.hpp), the core only its number. Side effects go
/// through `commander_effects`, which the actor implements (actors/commander.cpp)
/// and unit tests record (tests/actors/commander_core_test.cpp): no actor
/// system is needed to drive it.

#include "registry/placement_index.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace troupe {

/// What the commander does with a placement; exactly one at a time.
enum class commander_phase : std::uint8_t {
  unstaffed,    ///< no worker registered and none expected: placements are refused (unavailable)
  taking_over,  ///< members' registrations or workers' scans are outstanding: placements wait (at most the hold budget)
  serving,      ///< placements go on
};

const char* to_string(commander_phase p) noexcept;

/// A request the commander holds until it can go on (a resolve or a message).
using waiter_id = std::uint64_t;

/// What becomes of a resolve or a message arriving (commander_core::admit).
enum class commander_arrival : std::uint8_t {
  go,       ///< carry it out now
  wait,     ///< held until the takeover is over (proceed) or its budget is (refuse)
  refuse,   ///< no worker registered yet: unavailable
};

/// What becomes of a message for a user (commander_core::hold_tell).
enum class tell_hold : std::uint8_t {
  route,  ///< he is not leaving: route it now
  held,   ///< he is being frozen or dropped: it waits for the outcome
  full,   ///< as many messages wait for him as his queue holds: refused
};

/// One worker the commander places users on: a slot of the placement index.
/// (Its handle is the actor's, in the same slot order.)
struct worker_slot {
  std::string node;   ///< the member it runs on
  std::string name;   ///< <group>-w<n>
  std::string group;
  std::chrono::steady_clock::time_point since;  ///< registered (a young worker is never retired)
};

/// What a group's registration changed (commander_core::place_workers); the
/// actor updates its handles, then calls workers_registered.
struct slot_changes {
  std::vector<std::pair<std::size_t, std::size_t>> replaced;  ///< (position, slot): a new worker in a known slot
  std::vector<std::pair<std::size_t, std::size_t>> added;     ///< (position, slot): a new slot, appended in order
};

/// The side effects of commander_core, carried out by the commander actor.
class commander_effects {
public:
  virtual ~commander_effects() = default;
  /// A takeover started: in the hold budget the core gets hold_budget_over().
  virtual void arm_hold_budget() = 0;
  /// A takeover: the worker of `slot` is asked which users it hosts (scan_answered / scan_failed).
  virtual void ask_scan(std::size_t slot) = 0;
  /// The takeover is over: waiter `w` is carried out as it was asked.
  virtual void proceed(waiter_id w) = 0;
  /// Waiter `w` is answered unavailable with `why`.
  virtual void refuse(waiter_id w, const std::string& why) = 0;
  /// A held resolve goes on: `user` is placed (woken from his parcel if he has one) and given `cid`.
  virtual void attach(waiter_id w, const std::string& user, const std::string& cid) = 0;
  /// A growth is over (either way): waiter `w` is placed again in `group`, without growing it again.
  virtual void attach_without_growth(waiter_id w, const std::string& group) = 0;
  /// His user was dropped meanwhile: connection `cid` is resolved afresh (a stranger now).
  virtual void resolve(waiter_id w, const std::string& cid) = 0;
  /// A held message is routed again.
  virtual void route_tell(waiter_id w) = 0;
  /// The deposit is asked whose connection `cid` is (connection_read / connection_unread).
  virtual void read_connection(const std::string& cid) = 0;
  /// Group `group` (of this node) is asked for one more worker (growth_over).
  virtual void grow(const std::string& group) = 0;
  /// The worker of `slot` forgets guest `user` (his id is dead).
  virtual void release_guest(std::size_t slot, const std::string& user) = 0;
  /// A parcel is removed from the deposit: a user's, or (connection) a connection's.
  virtual void remove_parcel(bool connection, const std::string& key) = 0;
  /// A frozen notice counted: the channels it carries are kept for his next placement
  /// (before the requests held for him wake him).
  virtual void keep_channels(const std::string& user) = 0;
};

/// The policies the core needs.
struct commander_policy {
  std::size_t user_queue_length = 64;  ///< messages held for one departing user at most
  /// Past `relocations_kept` relocations, those unused for this long are forgotten (limits.hold_seconds).
  std::chrono::steady_clock::duration relocation_horizon = std::chrono::seconds(1);
  std::size_t relocations_kept = 1024;
};

class commander_core {
public:
  using steady = std::chrono::steady_clock;
  static constexpr std::size_t no_slot = static_cast<std::size_t>(-1);

  commander_core(commander_policy policy, commander_effects& fx) : policy_(policy), fx_(&fx) {}
  commander_core(const commander_core&) = delete;
  commander_core& operator=(const commander_core&) = delete;

  commander_phase phase() const noexcept { return phase_; }
  bool serving() const noexcept { return phase_ == commander_phase::serving; }
  /// Whether any worker registered (the index exists).
  bool staffed() const noexcept { return index_.has_value(); }
  registry::placement_index* index() noexcept { return index_ ? &*index_ : nullptr; }
  const registry::placement_index* index() const noexcept { return index_ ? &*index_ : nullptr; }
  const std::vector<worker_slot>& slots() const noexcept { return slots_; }
  /// The slots of member `node` (empty when it has none).
  const std::vector<std::size_t>& slots_of(const std::string& node) const;
  const std::set<std::string>& expected() const noexcept { return expected_; }
  std::size_t scans_pending() const noexcept { return scans_.size(); }

  // -- starting and the takeover -----------------------------------------------------
  /// Starts the commander: alone (`expected` empty), or taking over from one
  /// that died, waiting for the workers of `expected` members to register.
  void start(const std::vector<std::string>& expected);
  /// A resolve or a message arrives (its waiter number): go now, wait, or refused.
  commander_arrival admit(waiter_id w);
  /// Login and logout are not held: they are carried out only while serving.
  bool accepts_rotation() const noexcept { return serving(); }
  /// The hold budget of a takeover is over: members and scans still out are
  /// given up; waiters go on, or are refused when no worker registered.
  void hold_budget_over();

  // -- workers ---------------------------------------------------------------------------
  /// Group `group`'s workers on `node`, by position (`present[i]`: a worker at
  /// position i): a known position keeps its slot (a replaced worker: its users
  /// stay), a new one appends a slot, one empty or gone retires its slot (its
  /// users' held requests wake them elsewhere). `admission_interval`: the rest
  /// a worker of the group takes after admitting a newcomer (CPU admission).
  slot_changes place_workers(const std::string& group, const std::string& node, const std::vector<bool>& present,
                             steady::time_point now, std::optional<steady::duration> admission_interval = {});
  /// After place_workers (the actor has the handles): a takeover scans the new
  /// workers before placements go on; a registration of an expected member counts.
  void workers_registered(const std::string& node, const std::vector<std::pair<std::size_t, std::size_t>>& added);
  /// Whether (node, group) has registered before.
  bool knows_group(const std::string& node, const std::string& group) const;
  /// The slots of `group`'s worker positions on `node` (no_slot: none there now); nullptr when none.
  const std::vector<std::size_t>* positions(const std::string& node, const std::string& group) const;
  /// A worker retired by the commander (idle, beyond its group's minimum): no
  /// user is placed on it again.
  void retire_position(const std::string& node, const std::string& group, std::size_t position);
  /// A scan's answer: the users (and their owner epochs) the worker of `slot`
  /// hosts. Returns the users another worker reported first (kept there).
  std::vector<std::string> scan_answered(std::size_t slot, const std::vector<std::string>& users,
                                         const std::vector<std::uint64_t>& epochs);
  void scan_failed(std::size_t slot);
  /// Member `node` was declared down: its slots retire (their users wake
  /// elsewhere on their next request). Returns how many users it hosted, or
  /// nullopt when it had no slot here.
  std::optional<std::size_t> member_down(const std::string& node);

  // -- a user's departure (freezing or dropping) --------------------------------------
  bool departing(const std::string& user) const { return departures_.count(user) > 0; }
  /// Whether a notice about `user` at owner `epoch` is about his current placement.
  bool is_current(const std::string& user, std::uint64_t epoch) const;
  /// His user actor's notices; each returns false (nothing done) when stale.
  bool freezing_notice(const std::string& user, std::uint64_t epoch);
  bool frozen_notice(const std::string& user, std::uint64_t epoch);
  bool thaw_notice(const std::string& user, std::uint64_t epoch);
  /// His parcel says group `group`: he left without writing; his next placement goes there.
  bool relocate_notice(const std::string& user, std::uint64_t epoch, const std::string& group,
                       steady::time_point now);
  /// Where a relocated user's next placement goes (once); nullopt when nowhere in particular.
  std::optional<std::string> take_relocation(const std::string& user);
  /// A guest who never had a state left: his connection is forgotten (unless he is back).
  void guest_released(const std::string& user);
  /// A resolve for `user` while he departs: held until the outcome (true), or not (false).
  bool hold_resolve(const std::string& user, waiter_id w, const std::string& cid);
  /// A message for `user`: routed, held while he departs, or refused when too many wait.
  tell_hold hold_tell(const std::string& user, waiter_id w);

  // -- an operator's drop ------------------------------------------------------------------
  /// Starts dropping `user`: false when he is departing already (busy). His resolves are held meanwhile.
  bool begin_drop(const std::string& user);
  /// The drop failed: he stays; what was held goes to him where he is.
  void drop_failed(const std::string& user);
  /// The drop went through: he and his connections are forgotten (their ids are returned).
  std::vector<std::string> forget_dropped(const std::string& user);
  /// After forget_dropped and his answer: held resolves start afresh (strangers now), held messages are routed.
  void dropped(const std::string& user);

  // -- connections ---------------------------------------------------------------------------
  /// Connection `cid` is unknown here: waiter `w` waits for the deposit's
  /// answer (one read per connection, however many requests).
  void look_up(const std::string& cid, waiter_id w);
  /// The deposit's answer: `user` names who the connection's parcel says
  /// ("" when none, or not his); a connection retired meanwhile is a new guest.
  void connection_read(const std::string& cid, std::string user);
  void connection_unread(const std::string& cid);
  /// Login and logout: connection `old_cid` of `from_user` is dead (unbound, its
  /// parcel removed, a guest forgotten) and `new_cid` is bound to `to_user`.
  void rotate(const std::string& old_cid, const std::string& from_user, const std::string& new_cid,
              const std::string& to_user);

  // -- growth ------------------------------------------------------------------------------
  /// No worker of `group` admits: waiter `w` waits for the group to grow (asked once).
  void await_growth(const std::string& group, waiter_id w);
  /// The growth is over (grown or not): its waiters are placed again, without growing.
  void growth_over(const std::string& group);
  std::size_t growing(const std::string& group) const;

private:
  void settle();
  void end_departure(const std::string& user, bool frozen);
  void retire_slots(const std::vector<std::size_t>& mine);
  bool ready() const noexcept { return index_ && expected_.empty() && scans_.empty(); }

  struct held_resolve {
    waiter_id w;
    std::string cid;
  };
  struct departure {
    std::vector<held_resolve> resolves;
    std::vector<waiter_id> tells;
  };
  departure take_departure(const std::string& user);

  commander_policy policy_;
  commander_effects* fx_;
  commander_phase phase_ = commander_phase::unstaffed;
  bool took_over_ = false;                 // every later registration is scanned too
  std::optional<registry::placement_index> index_;
  std::vector<worker_slot> slots_;
  std::map<std::string, std::vector<std::size_t>> node_slots_;  // member → its slots
  // (member, group) → the slot of each of the group's worker positions (no_slot: none there now).
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> group_slots_;
  std::set<std::string> expected_;         // members whose workers have not registered yet
  std::set<std::size_t> scans_;            // slots whose users are not known yet
  std::vector<waiter_id> until_ready_;
  std::unordered_map<std::string, departure> departures_;
  std::unordered_map<std::string, std::vector<waiter_id>> lookups_;
  std::unordered_set<std::string> retired_in_lookup_;  // ids a rotation killed while their lookup was out
  std::map<std::string, std::vector<waiter_id>> growing_;
  std::unordered_map<std::string, std::pair<std::string, steady::time_point>> relocations_;
};

}  // namespace troupe
