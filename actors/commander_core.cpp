#include "actors/commander_core.hpp"

#include "registry/ids.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

namespace troupe {

const char* to_string(commander_phase p) noexcept {
  switch (p) {
    case commander_phase::unstaffed: return "unstaffed";
    case commander_phase::taking_over: return "taking_over";
    case commander_phase::serving: return "serving";
  }
  return "?";
}

const std::vector<std::size_t>& commander_core::slots_of(const std::string& node) const {
  static const std::vector<std::size_t> none;
  auto n = node_slots_.find(node);
  return n == node_slots_.end() ? none : n->second;
}

// -- the phase --------------------------------------------------------------------------

// The phase follows from what is known and what is still out; reaching
// `serving` carries out what waited for it.
void commander_core::settle() {
  if (ready())
    phase_ = commander_phase::serving;
  else if (!index_ && expected_.empty())
    phase_ = commander_phase::unstaffed;
  else
    phase_ = commander_phase::taking_over;
  if (phase_ != commander_phase::serving)
    return;
  auto waiting = std::move(until_ready_);
  until_ready_.clear();
  for (auto w : waiting)
    fx_->proceed(w);
}

void commander_core::start(const std::vector<std::string>& expected) {
  expected_.insert(expected.begin(), expected.end());
  if (!expected_.empty()) {
    // A takeover: the members' workers and their users first; placements wait
    // for them (for at most the hold budget).
    took_over_ = true;
    fx_->arm_hold_budget();
  }
  settle();
}

commander_arrival commander_core::admit(waiter_id w) {
  switch (phase_) {
    case commander_phase::unstaffed: return commander_arrival::refuse;
    case commander_phase::serving: return commander_arrival::go;
    case commander_phase::taking_over: break;
  }
  until_ready_.push_back(w);
  return commander_arrival::wait;
}

// The hold budget is over: go on with what is known (a member that did not
// register is counted as gone; its users wake elsewhere).
void commander_core::hold_budget_over() {
  if (!expected_.empty() || !scans_.empty())
    spdlog::warn("commander: takeover: {} member(s) and {} worker scan(s) did not answer within the hold budget; "
                 "going on without them", expected_.size(), scans_.size());
  expected_.clear();
  scans_.clear();
  settle();
  if (phase_ == commander_phase::serving)
    return;
  auto waiting = std::move(until_ready_);
  until_ready_.clear();
  for (auto w : waiting)
    fx_->refuse(w, "the commander is still taking over; retry");
}

// -- workers -------------------------------------------------------------------------------

slot_changes commander_core::place_workers(const std::string& group, const std::string& node,
                                           const std::vector<bool>& present, steady::time_point now,
                                           std::optional<steady::duration> admission_interval) {
  slot_changes changes;
  auto& mine = group_slots_[{node, group}];
  const auto positions = std::max(mine.size(), present.size());
  for (std::size_t i = 0; i < positions; ++i) {
    bool here = i < present.size() && present[i];
    if (i < mine.size() && mine[i] != no_slot && !index_->retired(mine[i])) {
      if (here) {
        changes.replaced.emplace_back(i, mine[i]);  // a worker was replaced: same slot, his users stay
      } else {
        retire_slots({mine[i]});
        mine[i] = no_slot;
      }
      continue;
    }
    if (i >= mine.size())
      mine.push_back(no_slot);
    if (!here)
      continue;
    std::size_t slot = index_ ? index_->add_slots(1, group) : (index_.emplace(1, group), 0);
    slots_.push_back(worker_slot{node, group + "-w" + std::to_string(i + 1), group, now});
    node_slots_[node].push_back(slot);
    mine[i] = slot;
    changes.added.emplace_back(i, slot);
  }
  if (admission_interval && index_)
    index_->set_admission_interval(group, *admission_interval);
  return changes;
}

void commander_core::workers_registered(const std::string& node,
                                        const std::vector<std::pair<std::size_t, std::size_t>>& added) {
  if (expected_.erase(node) || took_over_) {
    // A takeover: learn who lives on these workers before placing anybody.
    for (auto& [position, slot] : added) {
      scans_.insert(slot);
      fx_->ask_scan(slot);
    }
  }
  settle();
}

bool commander_core::knows_group(const std::string& node, const std::string& group) const {
  return group_slots_.count({node, group}) > 0;
}

const std::vector<std::size_t>* commander_core::positions(const std::string& node, const std::string& group) const {
  auto p = group_slots_.find({node, group});
  return p == group_slots_.end() ? nullptr : &p->second;
}

void commander_core::retire_position(const std::string& node, const std::string& group, std::size_t position) {
  auto p = group_slots_.find({node, group});
  if (p == group_slots_.end() || position >= p->second.size() || p->second[position] == no_slot)
    return;
  retire_slots({p->second[position]});
  p->second[position] = no_slot;
}

std::vector<std::string> commander_core::scan_answered(std::size_t slot, const std::vector<std::string>& users,
                                                       const std::vector<std::uint64_t>& epochs) {
  std::vector<std::string> doubles;
  for (std::size_t i = 0; i < users.size(); ++i)
    if (!index_->place_at(users[i], slot, i < epochs.size() ? epochs[i] : 0))
      doubles.push_back(users[i]);
  // Only the scan still out counts: one answered past the hold budget must not
  // end the wait for a later worker's.
  scans_.erase(slot);
  settle();
  return doubles;
}

void commander_core::scan_failed(std::size_t slot) {
  scans_.erase(slot);
  settle();
}

void commander_core::retire_slots(const std::vector<std::size_t>& mine) {
  for (auto slot : mine)
    for (auto& user : index_->retire_slot(slot))
      end_departure(user, true);  // he is gone: held requests wake him elsewhere
}

std::optional<std::size_t> commander_core::member_down(const std::string& node) {
  std::optional<std::size_t> users;
  if (auto n = node_slots_.find(node); n != node_slots_.end() && index_) {
    users = 0;
    for (auto slot : n->second)
      *users += index_->loads()[slot];
    auto mine = std::move(n->second);
    node_slots_.erase(n);
    retire_slots(mine);
    for (auto i = group_slots_.begin(); i != group_slots_.end();)
      i = i->first.first == node ? group_slots_.erase(i) : std::next(i);
  }
  if (expected_.erase(node))
    settle();
  return users;
}

// -- a user's departure ---------------------------------------------------------------------

bool commander_core::is_current(const std::string& user, std::uint64_t epoch) const {
  if (index_ && index_->is_current(user, epoch))
    return true;
  if (index_ && index_->worker_of(user))
    spdlog::debug("commander: a notice of {}'s placement at owner epoch {} is stale; ignored", registry::redact(user),
                  epoch);
  return false;
}

bool commander_core::freezing_notice(const std::string& user, std::uint64_t epoch) {
  if (!is_current(user, epoch))
    return false;
  departures_.try_emplace(user);
  return true;
}

bool commander_core::frozen_notice(const std::string& user, std::uint64_t epoch) {
  if (!is_current(user, epoch))
    return false;
  fx_->keep_channels(user);  // before the held requests wake him
  end_departure(user, true);
  return true;
}

bool commander_core::thaw_notice(const std::string& user, std::uint64_t epoch) {
  if (!is_current(user, epoch))
    return false;
  end_departure(user, false);
  return true;
}

// A user whose parcel names another group goes there on his next placement,
// which comes at once (the front asks again); an entry whose client never
// came back is forgotten after the hold budget.
bool commander_core::relocate_notice(const std::string& user, std::uint64_t epoch, const std::string& group,
                                     steady::time_point now) {
  if (!is_current(user, epoch))
    return false;
  if (relocations_.size() >= policy_.relocations_kept) {
    auto horizon = now - policy_.relocation_horizon;
    for (auto r = relocations_.begin(); r != relocations_.end();)
      r = r->second.second < horizon ? relocations_.erase(r) : std::next(r);
  }
  relocations_[user] = {group, now};
  end_departure(user, true);  // he left without writing; requests held for him go to his group
  return true;
}

std::optional<std::string> commander_core::take_relocation(const std::string& user) {
  auto r = relocations_.find(user);
  if (r == relocations_.end())
    return std::nullopt;
  auto group = std::move(r->second.first);
  relocations_.erase(r);
  return group;
}

// A guest who never had a state retired: his connection needs no entry here
// (the cookie alone names him), so the index does not grow with every visitor.
void commander_core::guest_released(const std::string& user) {
  if (!index_ || !registry::is_guest(user) || index_->worker_of(user) || departing(user))
    return;
  auto cid = user.substr(6);  // guest_<cid>: one lookup, never a scan of every connection
  if (auto owner = index_->user_of(cid); owner && *owner == user)
    index_->unbind(cid);
}

// Ends `user`'s departure and answers what it held (nothing: he was not departing).
commander_core::departure commander_core::take_departure(const std::string& user) {
  departure held;
  auto d = departures_.find(user);
  if (d != departures_.end()) {
    held = std::move(d->second);
    departures_.erase(d);
  }
  return held;
}

// A departure ended: frozen (he is no longer placed; held requests wake him)
// or not (he stays; held requests go to him where he is).
void commander_core::end_departure(const std::string& user, bool frozen) {
  if (frozen)
    index_->remove(user);
  auto held = take_departure(user);
  for (auto& h : held.resolves)
    fx_->attach(h.w, user, h.cid);
  for (auto w : held.tells)
    fx_->route_tell(w);
}

bool commander_core::hold_resolve(const std::string& user, waiter_id w, const std::string& cid) {
  auto d = departures_.find(user);
  if (d == departures_.end())
    return false;
  d->second.resolves.push_back({w, cid});
  return true;
}

tell_hold commander_core::hold_tell(const std::string& user, waiter_id w) {
  auto d = departures_.find(user);
  if (d == departures_.end())
    return tell_hold::route;
  if (d->second.tells.size() >= policy_.user_queue_length)
    return tell_hold::full;
  d->second.tells.push_back(w);
  return tell_hold::held;
}

// -- an operator's drop ------------------------------------------------------------------------

bool commander_core::begin_drop(const std::string& user) {
  return departures_.try_emplace(user).second;
}

void commander_core::drop_failed(const std::string& user) { end_departure(user, false); }

std::vector<std::string> commander_core::forget_dropped(const std::string& user) {
  auto cids = index_->unbind_user(user);
  index_->remove(user);
  return cids;
}

void commander_core::dropped(const std::string& user) {
  auto held = take_departure(user);
  // Their connections are strangers now: resolved afresh, not placed on him.
  for (auto& h : held.resolves)
    fx_->resolve(h.w, h.cid);
  for (auto w : held.tells)
    fx_->route_tell(w);
}

// -- connections ----------------------------------------------------------------------------------

void commander_core::look_up(const std::string& cid, waiter_id w) {
  auto [waiting, first] = lookups_.try_emplace(cid);
  waiting->second.push_back(w);
  if (first)
    fx_->read_connection(cid);
}

void commander_core::connection_read(const std::string& cid, std::string user) {
  if (user.empty() || retired_in_lookup_.erase(cid))  // no parcel (or a dead id): his guest
    user = registry::guest_name(cid);
  if (!index_->user_of(cid))  // a login may have bound it meanwhile
    index_->bind(cid, user);
  auto waiting = std::move(lookups_[cid]);
  lookups_.erase(cid);
  auto owner = *index_->user_of(cid);
  for (auto w : waiting)
    fx_->attach(w, owner, cid);
}

void commander_core::connection_unread(const std::string& cid) {
  retired_in_lookup_.erase(cid);
  auto waiting = std::move(lookups_[cid]);
  lookups_.erase(cid);
  for (auto w : waiting)
    fx_->refuse(w, "deposit lookup failed");
}

void commander_core::rotate(const std::string& old_cid, const std::string& from_user, const std::string& new_cid,
                            const std::string& to_user) {
  index_->unbind(old_cid);
  if (lookups_.count(old_cid))
    retired_in_lookup_.insert(old_cid);
  if (from_user != registry::guest_name(old_cid))  // a guest's own connection has no parcel
    fx_->remove_parcel(true, old_cid);
  // A guest whose connection leaves him is forgotten here and by his worker
  // (he retires by himself once his reply is out), and so is any parcel of
  // his: his id is dead, and whoever presents it later is a new guest with nothing.
  if (registry::is_guest(from_user)) {
    if (auto slot = index_->worker_of(from_user)) {
      fx_->release_guest(*slot, from_user);
      index_->remove(from_user);
    }
    fx_->remove_parcel(false, from_user);
  }
  index_->bind(new_cid, to_user);
}

// -- growth -------------------------------------------------------------------------------------------

void commander_core::await_growth(const std::string& group, waiter_id w) {
  auto& waiting = growing_[group];
  waiting.push_back(w);
  if (waiting.size() == 1)
    fx_->grow(group);
}

void commander_core::growth_over(const std::string& group) {
  auto g = growing_.find(group);
  if (g == growing_.end())
    return;
  auto waiting = std::move(g->second);
  growing_.erase(g);
  for (auto w : waiting)
    fx_->attach_without_growth(w, group);
}

std::size_t commander_core::growing(const std::string& group) const {
  auto g = growing_.find(group);
  return g == growing_.end() ? 0 : g->second.size();
}

}  // namespace troupe
