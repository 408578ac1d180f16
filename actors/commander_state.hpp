#pragma once
/// \file
/// Internal to the commander actor (actors/commander*.cpp): its actor's state.
/// The decisions (phase, slots, what waits for what) are commander_core's;
/// this is the glue that carries them out, split by concern:
///   commander.cpp           the behaviour, the core's effects, placements
///   commander_tell.cpp      messages between users (tell)
///   commander_operator.cpp  an operator's freeze, push, drop and drain; the soft
///                           quit; the expiry sweep and the workers' retirement

#include "actors/commander.hpp"
#include "actors/commander_core.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/kept_channels.hpp"
#include "actors/remote_watches.hpp"
#include "registry/epoch_source.hpp"

#include <caf/result.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

/// The commander's whole interface: its public one and the timers it sends
/// itself (private: no other actor can send them).
using commander_actor = commander_handle::extend<
  /// The periodic expiry sweep.
  caf::reacts_to<tick_atom>,
  /// The hold budget of a takeover is over (always 0).
  caf::reacts_to<tick_atom, std::uint64_t>>;

using placement_promise = caf::typed_response_promise<placement>;
using tell_promise = caf::typed_response_promise<tell_reply>;

/// A request the core holds by number (commander_core's waiter_id): what answers it.
struct commander_waiter {
  std::optional<placement_promise> placement;  ///< a resolve or an attach
  std::optional<tell_promise> told;            ///< a message between users
  std::string user;                            ///< an attach waiting for growth: whom
  std::string cid;                             ///< a resolve's or an attach's connection
  bool minted = false;                         ///< a resolve: the front has just made the id
  bool wake = false;                           ///< an attach: he may have a parcel
  store::bytes parcel{};                       ///< an attach: the guest's store carried by a login
  user_message msg{};                          ///< a message
};

struct commander_state : commander_effects {
  using steady = std::chrono::steady_clock;
  static const char* name;

  commander_actor::stateful_pointer<commander_state> self = nullptr;
  std::optional<actor_gauge> gauge;
  node_context_ptr ctx;
  deposit_handle deposit;
  // The global store next to this commander (linked: they stop together).
  global_store_handle global_store;
  std::string default_group;  // where a newcomer is born (recipe.default_group())
  std::optional<commander_core> core;
  std::vector<worker_handle> handles;  // by slot, as core->slots()
  // The groups of this node, learned from their registrations: they grow and retire workers.
  std::map<std::string, group_handle> local_groups;
  // When each group last sent an admission report (its CPU is quiet while none comes).
  std::map<std::string, steady::time_point> last_admission_report;
  rate_limited_log carry_log{spdlog::level::info, std::chrono::seconds(10)};
  rate_limited_log budget_log{spdlog::level::err, std::chrono::seconds(10)};  // a request past its budget, or failed
  // Requests to workers on other members, settled at their member's verdict.
  remote_watches remote;
  // The channels of users who froze with pages bound to open sockets: for
  // their next placements (at most 4 × channel.max_sockets bindings).
  std::optional<kept_channels> frozen_channels;
  // The channels a frozen notice carries, kept once the core counts it (keep_channels).
  std::vector<channel_binding> notice_channels;
  // Fencing (docs/CLUSTER.md "Fencing"): each placement's owner epoch, under
  // a commander generation the deposit gave this commander when it started.
  registry::epoch_source epochs;
  bool asking_generation = false;
  // What answers each request the core holds, by its number.
  std::unordered_map<waiter_id, commander_waiter> waiters;
  waiter_id last_waiter = 0;

  waiter_id enlist(commander_waiter w) {
    waiters.emplace(++last_waiter, std::move(w));
    return last_waiter;
  }
  commander_waiter take(waiter_id w) {
    auto i = waiters.find(w);
    auto taken = std::move(i->second);
    waiters.erase(i);
    return taken;
  }
  registry::placement_index& index() { return *core->index(); }
  placement_promise promise() { return self->make_response_promise<placement>(); }

  // -- commander_effects (commander.cpp) --------------------------------------------------
  void arm_hold_budget() override;
  void ask_scan(std::size_t slot) override;
  void proceed(waiter_id w) override;
  void refuse(waiter_id w, const std::string& why) override;
  void attach(waiter_id w, const std::string& user, const std::string& cid) override;
  void attach_without_growth(waiter_id w, const std::string& group) override;
  void resolve(waiter_id w, const std::string& cid) override;
  void route_tell(waiter_id w) override;
  void read_connection(const std::string& cid) override;
  void grow(const std::string& group) override;
  void release_guest(std::size_t slot, const std::string& user) override;
  void remove_parcel(bool connection, const std::string& key) override;
  void keep_channels(const std::string& user) override;

  // -- placements (commander.cpp) ---------------------------------------------------------
  void obtain_generation();
  std::optional<std::uint64_t> next_owner_epoch();
  // Watches a request to the worker of `slot`: 0 (nothing to watch) when it
  // runs on this member, whose death ends the commander too.
  std::uint64_t watch_remote(std::size_t slot, std::function<void()> at_verdict);
  bool unwatch(std::uint64_t id) { return remote.settle(id); }
  void register_workers(const std::string& group, const std::string& node, std::vector<worker_handle>& workers);
  void node_down(const caf::node_id& node);
  void place(placement_promise promise, const std::string& user, const std::string& cid, store::bytes parcel,
             bool wake, std::string group = {}, bool may_grow = true);
  std::vector<channel_binding> placed_with_channels(const std::string& user);
  void no_worker_admits(placement_promise promise, const std::string& user, const std::string& cid,
                        store::bytes parcel, bool wake, const std::string& group, bool may_grow);
  void on_admission(const admission_report& report);
  std::string login_group(const std::string& from_group, const std::string& to_user) const;
  std::optional<std::string> mint();
  void resolve_now(placement_promise p, const std::string& cid, bool minted);
  // A capacity guard refusing new guests now, if any; and how soon to try again.
  std::optional<refusal_reason> guest_guard() const;
  static constexpr std::uint32_t guest_guard_retry_after = 5;
  caf::result<placement> login(login_request& req);
  caf::result<placement> whois(const std::string& cid);
  void remove_deposit_parcel(parcel_kind kind, const std::string& key);

  // -- messages between users (commander_tell.cpp) ---------------------------------------
  caf::duration tell_budget() const;
  void tell(user_message msg, tell_promise promise, bool again);
  bool hold_tell(user_message& msg, tell_promise& promise);
  void place_for_tell(user_message msg, tell_promise promise, bool again);

  // -- an operator's orders, the soft quit, sweeps (commander_operator.cpp) ---------------
  caf::result<bool> freeze(const std::string& user);
  caf::result<std::uint32_t, std::uint32_t> push(const std::string& user, std::string& path, std::string& data);
  caf::result<std::uint64_t, std::vector<std::string>> quit(const std::string& node);
  caf::result<std::string, std::uint64_t> drop(const std::string& user);
  void finish_drop(caf::typed_response_promise<std::string, std::uint64_t> promise, const std::string& user,
                   const std::string& was);
  caf::result<std::uint64_t, std::uint64_t> drain(const std::string& name);
  void schedule_sweep();
  void sweep();
  std::optional<std::chrono::milliseconds> retirement_period() const;
  const std::vector<config::group_settings>& groups_in_force(std::shared_ptr<const config::recipe>& keep) const;
  void schedule_retirement();
  void check_retirement();
};

}  // namespace troupe
