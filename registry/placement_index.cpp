#include "registry/placement_index.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace troupe::registry {

placement_index::placement_index(std::size_t workers, std::string group)
  : loads_(workers, 0), in_service_(workers, true), retired_(workers, false) {
  slots_.resize(workers);
  for (auto& s : slots_)
    s.group = group;
  if (workers == 0)
    throw std::invalid_argument("placement_index needs at least one worker");
}

std::optional<std::string> placement_index::user_of(const std::string& cid) const {
  auto i = connections_.find(cid);
  if (i == connections_.end())
    return std::nullopt;
  return i->second.user.str();
}

std::optional<std::string> placement_index::bind(const std::string& cid, const std::string& user) {
  auto [i, fresh] = connections_.try_emplace(cid, binding{user, false});
  if (fresh)
    return std::nullopt;
  i->second.seen_unplaced = false;
  std::string before = i->second.user.str();
  i->second.user = user;
  return before;
}

void placement_index::unbind(const std::string& cid) {
  connections_.erase(cid);
}

std::optional<std::size_t> placement_index::worker_of(const std::string& user) const {
  auto i = users_.find(user);
  if (i == users_.end())
    return std::nullopt;
  return i->second.slot;
}

std::optional<std::size_t> placement_index::place(const std::string& user, std::uint64_t owner_epoch,
                                                  const std::string& group, clock::time_point now) {
  if (auto i = users_.find(user); i != users_.end())
    return i->second.slot;
  const std::size_t none = loads_.size();
  auto interval = intervals_.count(group) ? intervals_.at(group) : clock::duration{0};
  std::size_t best = none, resting = none;  // resting: one that admitted somebody just now
  for (std::size_t i = 0; i < loads_.size(); ++i) {
    auto& s = slots_[i];
    if (!in_service_[i] || !s.admits || s.group != group)
      continue;
    bool rests = interval.count() > 0 && s.last_admitted != clock::time_point{} && now - s.last_admitted < interval;
    auto& pick = rests ? resting : best;
    if (pick == none || loads_[i] < loads_[pick])
      pick = i;
  }
  std::size_t slot = best != none ? best : resting;
  if (slot == none)
    return std::nullopt;
  users_.emplace(user, placed{slot, owner_epoch});
  ++loads_[slot];
  slots_[slot].last_admitted = now;
  return slot;
}

const std::string& placement_index::group_of(std::size_t slot) const {
  static const std::string unknown;
  return slot < slots_.size() ? slots_[slot].group : unknown;
}

bool placement_index::set_admission(std::size_t slot, bool admits, std::uint8_t reason, std::uint32_t retry_after) {
  if (slot >= slots_.size())
    return false;
  auto& s = slots_[slot];
  bool changed = s.admits != admits;
  s.admits = admits;
  s.reason = admits ? 0 : reason;
  s.retry_after = admits ? 0 : retry_after;
  return changed;
}

placement_index::group_closure placement_index::closure(const std::string& group, std::uint8_t degraded_reason) const {
  group_closure c;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.group != group || !in_service_[i])
      continue;
    ++c.in_service;
    if (s.admits)
      continue;
    ++c.closed;
    if (s.reason == degraded_reason)
      ++c.degraded;
    if (c.closed == 1 || (s.retry_after > 0 && (c.retry_after == 0 || s.retry_after < c.retry_after))) {
      c.retry_after = s.retry_after;
      c.reason = s.reason;
    }
  }
  return c;
}

std::size_t placement_index::live_slots(const std::string& group) const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    n += !retired_[i] && slots_[i].group == group;
  return n;
}

bool placement_index::place_at(const std::string& user, std::size_t slot, std::uint64_t owner_epoch) {
  if (slot >= loads_.size() || retired_[slot])
    return false;
  auto [i, fresh] = users_.try_emplace(user, placed{slot, owner_epoch});
  if (fresh)
    ++loads_[slot];
  return i->second.slot == slot;
}

bool placement_index::is_current(const std::string& user, std::uint64_t owner_epoch) const {
  auto i = users_.find(user);
  if (i == users_.end())
    return false;
  return owner_epoch == 0 || i->second.owner_epoch == 0 || i->second.owner_epoch == owner_epoch;
}

std::size_t placement_index::add_slots(std::size_t n, const std::string& group) {
  auto first = loads_.size();
  loads_.resize(first + n, 0);
  in_service_.resize(first + n, true);
  retired_.resize(first + n, false);
  slot_info s;
  s.group = group;
  slots_.resize(first + n, s);
  return first;
}

std::vector<std::string> placement_index::retire_slot(std::size_t slot) {
  std::vector<std::string> gone;
  if (slot >= loads_.size() || retired_[slot])
    return gone;
  retired_[slot] = true;
  in_service_[slot] = false;
  for (auto i = users_.begin(); i != users_.end();) {
    if (i->second.slot == slot) {
      gone.push_back(i->first.str());
      i = users_.erase(i);
    } else {
      ++i;
    }
  }
  loads_[slot] = 0;
  return gone;
}

void placement_index::remove(const std::string& user) {
  if (auto i = users_.find(user); i != users_.end()) {
    --loads_[i->second.slot];
    users_.erase(i);
  }
}

bool placement_index::set_in_service(std::size_t slot, bool in_service) {
  if (slot >= in_service_.size() || retired_[slot])
    return false;
  if (!in_service && in_service_[slot]) {
    std::size_t of_group = 0;  // the group's slots in service
    for (std::size_t i = 0; i < slots_.size(); ++i)
      of_group += in_service_[i] && slots_[i].group == slots_[slot].group;
    if (of_group == 1)
      return false;
  }
  in_service_[slot] = in_service;
  return true;
}

std::vector<std::string> placement_index::unbind_user(const std::string& user) {
  std::vector<std::string> cids;
  for (auto i = connections_.begin(); i != connections_.end();) {
    if (i->second.user.view() == user) {
      cids.push_back(i->first.str());
      i = connections_.erase(i);
    } else {
      ++i;
    }
  }
  return cids;
}

std::size_t placement_index::forget_unplaced_connections() {
  std::size_t forgotten = 0;
  for (auto i = connections_.begin(); i != connections_.end();) {
    if (users_.count(i->second.user)) {
      i->second.seen_unplaced = false;
      ++i;
    } else if (i->second.seen_unplaced) {
      i = connections_.erase(i);
      ++forgotten;
    } else {
      i->second.seen_unplaced = true;
      ++i;
    }
  }
  return forgotten;
}

}  // namespace troupe::registry
