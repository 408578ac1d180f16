#include "cluster/membership.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace troupe::cluster {

bool older(const member_record& a, const member_record& b) {
  return std::tie(a.seq, a.name) < std::tie(b.seq, b.name);
}

membership::membership(member_record self, std::chrono::milliseconds failure_timeout)
  : failure_timeout_(failure_timeout) {
  members_.push_back(member_view{std::move(self), true, {}});
}

void membership::start_alone(steady::time_point now) {
  members_.resize(1);
  members_[0].record.seq = max_seq_ = 1;
  members_[0].last_heard = now;
  fenced_ = false;
}

void membership::joined(const std::vector<member_record>& members, steady::time_point now, steady::time_point asked) {
  members_.resize(1);
  members_[0].last_heard = now;
  fenced_ = false;
  for (auto& m : members) {
    max_seq_ = std::max(max_seq_, m.seq);
    if (m.name == self().name)
      members_[0].record.seq = m.seq;
    else
      learn(m, now);
  }
  for (std::size_t i = 1; i < members_.size(); ++i)
    members_[i].acked = asked;
}

std::optional<member_record> membership::admit(member_record newcomer, steady::time_point now) {
  if (newcomer.name == self().name)
    return std::nullopt;
  if (auto* known = find_mutable(newcomer.name)) {
    if (known->record.incarnation == newcomer.incarnation)
      return known->record;  // a retried join: the same answer
    if (known->up)
      return std::nullopt;  // a live member has this name
  }
  newcomer.seq = ++max_seq_;
  learn(newcomer, now);
  find_mutable(newcomer.name)->acked = now;  // it starts timing us once it has our answer
  return newcomer;
}

bool membership::learn(const member_record& m, steady::time_point now) {
  if (m.name == self().name)
    return false;
  max_seq_ = std::max(max_seq_, m.seq);
  if (auto* known = find_mutable(m.name)) {
    if (known->record.incarnation == m.incarnation)
      return false;
    // The same name, another incarnation: that member came back as a new one.
    *known = member_view{m, true, now};
    return true;
  }
  members_.push_back(member_view{m, true, now});
  return true;
}

bool membership::heard(const std::string& name, std::uint64_t incarnation, steady::time_point now,
                       std::int64_t stamp, std::int64_t echo) {
  auto* m = find_mutable(name);
  if (!m || m->record.incarnation != incarnation || !m->up)
    return false;
  m->last_heard = std::max(m->last_heard, now);
  m->peer_stamp = std::max(m->peer_stamp, stamp);
  if (echo)
    m->acked = std::max(m->acked, from_stamp(echo));
  return true;
}

std::int64_t membership::echo_for(const std::string& name) const {
  auto* m = find(name);
  return m ? m->peer_stamp : 0;
}

std::int64_t membership::stamp_of(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

steady::time_point membership::from_stamp(std::int64_t stamp) {
  return steady::time_point{std::chrono::duration_cast<steady::duration>(std::chrono::nanoseconds(stamp))};
}

std::optional<steady::time_point> membership::lease_base(steady::time_point now) const {
  if (fenced_)
    return std::nullopt;
  std::vector<const member_view*> up;
  const member_view* oldest = nullptr;
  for (auto& m : members_)
    if (m.up) {
      up.push_back(&m);
      if (!oldest || older(m.record, oldest->record))
        oldest = &m;
    }
  auto acked = [&](const member_view* m) { return m == &members_[0] ? now : m->acked; };
  // The candidates, latest first: the first one whose confirmers form a quorum.
  std::vector<steady::time_point> times;
  for (auto* m : up)
    if (acked(m) != steady::time_point{})
      times.push_back(acked(m));
  std::sort(times.rbegin(), times.rend());
  for (auto t : times) {
    std::size_t with = 0;
    bool oldest_in = false;
    for (auto* m : up)
      if (acked(m) != steady::time_point{} && acked(m) >= t) {
        ++with;
        oldest_in = oldest_in || m == oldest;
      }
    if (2 * with > up.size() || (2 * with == up.size() && oldest_in))
      return t;
  }
  return std::nullopt;
}

void membership::lost(const std::string& name, std::uint64_t incarnation) {
  auto* m = find_mutable(name);
  if (m && m != &members_[0] && m->record.incarnation == incarnation)
    m->last_heard = steady::time_point{};  // unreachable from now on (until heard again)
}

bool membership::declared_down(const std::string& name, std::uint64_t incarnation) {
  if (name == self().name) {
    if (incarnation == self().incarnation)
      fenced_ = true;
    return false;
  }
  auto* m = find_mutable(name);
  if (!m || m->record.incarnation != incarnation || !m->up)
    return false;
  m->up = false;
  return true;
}

bool membership::reachable(const member_view& m, steady::time_point now) const {
  if (&m == &members_[0])
    return true;
  return m.up && m.last_heard != steady::time_point{} && now - m.last_heard <= failure_timeout_;
}

// Of the members up (this one included): whether this one reaches a majority
// (an even split: the half holding the oldest), and whether it reaches them all.
membership::reach membership::reach_of(steady::time_point now) const {
  std::size_t up = 0;
  std::size_t reached = 0;
  const member_view* oldest = nullptr;
  for (auto& m : members_) {
    if (!m.up)
      continue;
    ++up;
    reached += reachable(m, now);
    if (!oldest || older(m.record, oldest->record))
      oldest = &m;
  }
  return {2 * reached > up || (2 * reached == up && reachable(*oldest, now)), reached == up};
}

check_verdict membership::check(steady::time_point now) {
  check_verdict v;
  if (fenced_)
    return v;
  auto previous = std::exchange(last_check_, now);
  auto others_up = std::count_if(members_.begin(), members_.end(), [](auto& m) { return m.up; }) > 1;
  if (previous && now - *previous >= failure_timeout_ && others_up) {
    fenced_ = true;
    v.fenced = true;
    v.paused = true;
    return v;
  }
  // A shorter stall still leaves this member's view stale (the beats that
  // arrived meanwhile may not be read yet): it judges nobody this round.
  if (previous && now - *previous > failure_timeout_ / 2)
    return v;
  auto r = reach_of(now);
  if (r.all)
    return v;
  if (!r.majority) {
    fenced_ = true;
    v.fenced = true;
    return v;
  }
  for (auto& m : members_)
    if (m.up && !reachable(m, now)) {
      m.up = false;
      v.declared_down.push_back(m.record);
    }
  return v;
}

bool membership::has_quorum(steady::time_point now) const {
  // Not after a pause either, before check() has fenced it.
  return !fenced_ && !(last_check_ && now - *last_check_ >= failure_timeout_) && reach_of(now).majority;
}

const member_record* membership::leader() const {
  const member_record* best = nullptr;
  for (auto& m : members_)
    if (m.up && (!best || older(m.record, *best)))
      best = &m.record;
  return best;
}

bool membership::leads() const {
  auto* l = leader();
  return !fenced_ && l && l->name == self().name;
}

const member_view* membership::find(const std::string& name) const {
  for (auto& m : members_)
    if (m.record.name == name)
      return &m;
  return nullptr;
}

member_view* membership::find_mutable(const std::string& name) {
  return const_cast<member_view*>(static_cast<const membership*>(this)->find(name));
}

std::size_t membership::up_count() const {
  return static_cast<std::size_t>(std::count_if(members_.begin(), members_.end(), [](auto& m) { return m.up; }));
}

}  // namespace troupe::cluster
