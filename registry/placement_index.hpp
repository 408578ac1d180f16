#pragma once
/// \file
/// The commander's placement index: connection → user → worker.
/// Plain data, owned by exactly one actor (the commander), so it needs no locks.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "registry/short_name.hpp"

namespace troupe::registry {

/// Connection → user → worker slot, with per-worker user counts for placement.
/// Every slot belongs to one group (a recipe [[group]]: a tag), and says
/// whether its worker admits newcomers (its last admission report).
class placement_index {
public:
  using clock = std::chrono::steady_clock;

  /// An index over `workers` worker slots of `group` (slot numbers
  /// 0..workers-1; more are added by add_slots, and slot numbers are never reused).
  explicit placement_index(std::size_t workers, std::string group = {});

  /// The user a connection belongs to, if the connection is known.
  std::optional<std::string> user_of(const std::string& cid) const;

  /// Binds a connection to a user (the user need not be placed yet).
  /// Returns the user it belonged to before, if any.
  std::optional<std::string> bind(const std::string& cid, const std::string& user);

  /// Forgets a connection.
  void unbind(const std::string& cid);

  /// The worker slot a live user is placed on.
  std::optional<std::size_t> worker_of(const std::string& user) const;

  /// Places a user on the least loaded slot of `group` that is in service and
  /// admits (ties: the lowest slot) unless he is placed already (anywhere: a
  /// live user stays where he is); returns his slot, or nullopt when no slot
  /// of the group is in service and admits (see closure()). A slot that
  /// admitted a newcomer less than the group's admission interval before `now` is
  /// skipped unless no other slot admits. A new placement records
  /// `owner_epoch` (0: unknown); a user placed already keeps his.
  std::optional<std::size_t> place(const std::string& user, std::uint64_t owner_epoch = 0,
                                   const std::string& group = {}, clock::time_point now = {});

  /// Places a user on `slot` (a takeover learns where users live, with his
  /// epoch when known, else 0); false if the slot is retired or he is placed elsewhere.
  bool place_at(const std::string& user, std::size_t slot, std::uint64_t owner_epoch = 0);

  /// Whether a notice from the user's actor at `owner_epoch` is about his
  /// current placement: he is placed, and his recorded epoch is that one
  /// (or either is 0, unknown). A notice from a stale placement (a fenced
  /// member's, after he was placed again elsewhere) must not change the index.
  bool is_current(const std::string& user, std::uint64_t owner_epoch) const;

  /// Adds `n` worker slots of `group` in service, admitting (another member's
  /// workers, a grown worker); returns the first.
  std::size_t add_slots(std::size_t n, const std::string& group = {});

  /// The group a slot belongs to ("" for an unknown slot).
  const std::string& group_of(std::size_t slot) const;

  /// Records what a slot's worker admits (its admission report): a slot that
  /// does not admit gets no newcomer; `reason` (a troupe::refusal_reason) and
  /// `retry_after` (seconds, 0: unknown) say why and for how long.
  /// Returns whether `admits` changed.
  bool set_admission(std::size_t slot, bool admits, std::uint8_t reason = 0, std::uint32_t retry_after = 0);
  bool admits(std::size_t slot) const { return slot < slots_.size() && slots_[slot].admits; }

  /// How long a slot of `group` that just admitted a newcomer is skipped (0, the default: never).
  void set_admission_interval(const std::string& group, clock::duration interval) { intervals_[group] = interval; }

  /// Why a group takes no newcomer: what its slots in service that do not
  /// admit reported. `in_service`: slots of the group in service; `closed`:
  /// those not admitting; `degraded`: those closed for reason `degraded_reason`;
  /// `reason`: the reason of the closed slot with the smallest retry_after;
  /// `retry_after`: that smallest retry_after (0 when none was reported).
  struct group_closure {
    std::size_t in_service = 0;
    std::size_t closed = 0;
    std::size_t degraded = 0;
    std::uint8_t reason = 0;
    std::uint32_t retry_after = 0;
  };
  group_closure closure(const std::string& group, std::uint8_t degraded_reason) const;

  /// Slots of `group` not retired.
  std::size_t live_slots(const std::string& group) const;

  /// Retires a slot for good (its worker's node is down): it gets no user
  /// again, and the users placed on it are forgotten; returns them.
  std::vector<std::string> retire_slot(std::size_t slot);
  bool retired(std::size_t slot) const { return slot < retired_.size() && retired_[slot]; }

  /// Takes a slot out of service (a drained worker) or puts it back: a slot
  /// out of service gets no new users. The last slot of its group in service
  /// cannot be taken out (returns false), and a retired slot never comes back.
  bool set_in_service(std::size_t slot, bool in_service);
  bool in_service(std::size_t slot) const { return slot < in_service_.size() && in_service_[slot]; }

  /// Forgets every connection bound to `user`; returns their ids.
  std::vector<std::string> unbind_user(const std::string& user);

  /// Keeps the index bounded by the live users, not by every connection ever
  /// seen: forgets the bindings whose user was not placed at this call nor at
  /// the previous one (two calls: a binding just made for a user about to be
  /// placed survives). Safe because a user who is not placed froze, and his
  /// connections' parcels tell whose they are (one deposit read, the next time
  /// the cookie comes); a guest's cookie names him alone. Scans every
  /// connection: call it now and then (the commander's sweep). Returns how many.
  std::size_t forget_unplaced_connections();

  /// Forgets a user's placement (his connections stay bound to his name).
  void remove(const std::string& user);

  /// Users placed on each worker slot.
  const std::vector<std::size_t>& loads() const noexcept { return loads_; }

  std::size_t users() const noexcept { return users_.size(); }
  std::size_t connections() const noexcept { return connections_.size(); }

private:
  // One entry per connection and one per live user: keyed by short_names, so
  // a connection id and a guest's name take no allocation (issue 14, S5).
  struct binding {
    short_name user;
    bool seen_unplaced;  // his user was not placed at the last forget_unplaced_connections()
  };
  std::unordered_map<short_name, binding, short_name_hash> connections_;      // cid → user
  struct placed {
    std::size_t slot;
    std::uint64_t owner_epoch;  // 0: unknown
  };
  std::unordered_map<short_name, placed, short_name_hash> users_;             // user → where, under which epoch
  std::vector<std::size_t> loads_;
  std::vector<bool> in_service_;
  std::vector<bool> retired_;
  struct slot_info {
    std::string group;
    bool admits = true;
    std::uint8_t reason = 0;
    std::uint32_t retry_after = 0;
    clock::time_point last_admitted{};  // when it last got a newcomer (the admission interval)
  };
  std::vector<slot_info> slots_;
  std::map<std::string, clock::duration> intervals_;  // group → its admission interval
};

}  // namespace troupe::registry
