#include "registry/census_model.hpp"

#include <stdexcept>

namespace troupe::registry {

const char* to_string(user_state s) noexcept {
  switch (s) {
    case user_state::active:
      return "active";
    case user_state::unfreezing:
      return "unfreezing";
    case user_state::departing:
      return "departing";
    case user_state::frozen:
      return "frozen";
  }
  return "active";
}

std::optional<user_state> user_state_from(std::string_view text) noexcept {
  for (std::size_t i = 0; i < user_state_count; ++i)
    if (text == to_string(static_cast<user_state>(i)))
      return static_cast<user_state>(i);
  return std::nullopt;
}

std::int64_t state_counts::all() const noexcept {
  std::int64_t n = 0;
  for (auto c : by)
    n += c;
  return n;
}

std::uint16_t census_model::worker_number(const std::string& name) {
  if (auto n = find_worker(name))
    return *n;
  if (workers_.size() >= user_entry::no_worker)
    throw std::length_error("census: too many workers");
  workers_.push_back(name);
  worker_totals_.emplace_back();
  return static_cast<std::uint16_t>(workers_.size() - 1);
}

std::optional<std::uint16_t> census_model::find_worker(const std::string& name) const {
  for (std::size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i] == name)
      return static_cast<std::uint16_t>(i);
  return std::nullopt;
}

const user_aggregate& census_model::worker_totals(std::uint16_t number) const {
  return worker_totals_.at(number);
}

void census_model::account(const user_entry& e, int sign) {
  auto add = [&](user_aggregate& a) {
    a.users.by[static_cast<std::size_t>(e.state)] += sign;
    a.connections += sign * static_cast<std::int64_t>(e.connections);
    a.pages += sign * static_cast<std::int64_t>(e.pages);
  };
  add(totals_);
  if (e.worker < worker_totals_.size())
    add(worker_totals_[e.worker]);
}

void census_model::update(const std::string& name, const user_entry& now) {
  auto [i, fresh] = users_.insert({name, now});
  if (!fresh) {
    account(i->second, -1);
    i->second = now;
  }
  account(i->second, +1);
}

void census_model::actor_down(const std::string& name, std::uint64_t actor) {
  auto i = users_.find(name);
  if (i == users_.end() || i->second.actor != actor)
    return;
  account(i->second, -1);
  if (i->second.state != user_state::frozen) {
    users_.erase(i);
    return;
  }
  i->second = user_entry{user_state::frozen};
  account(i->second, +1);
}

void census_model::add_frozen(const std::string& name) {
  auto [i, fresh] = users_.insert({name, user_entry{user_state::frozen}});
  if (fresh)
    account(i->second, +1);
}

void census_model::erase(const std::string& name) {
  if (auto i = users_.find(name); i != users_.end()) {
    account(i->second, -1);
    users_.erase(i);
  }
}

const user_entry* census_model::find(const std::string& name) const {
  auto i = users_.find(name);
  return i == users_.end() ? nullptr : &i->second;
}

bool census_model::matches(const filter& f, const std::string& name, const user_entry& e) const {
  return (f.prefix.empty() || name.compare(0, f.prefix.size(), f.prefix) == 0)
         && (!f.worker || e.worker == *f.worker) && (!f.state || e.state == *f.state);
}

std::pair<std::size_t, std::size_t> census_model::prefix_ranks(const std::string& prefix) const {
  auto first = users_.order_of_key(prefix);
  // The first name past every name starting with `prefix`: its last byte below 0xff bumped.
  std::string past = prefix;
  while (!past.empty() && static_cast<unsigned char>(past.back()) == 0xff)
    past.pop_back();
  if (past.empty())
    return {first, users_.size()};
  past.back() = static_cast<char>(static_cast<unsigned char>(past.back()) + 1);
  return {first, users_.order_of_key(past)};
}

// Exact, and without a scan unless a prefix comes with a worker or state filter.
std::int64_t census_model::count_matching(const filter& f) const {
  if (f.prefix.empty()) {
    if (!f.worker)
      return f.state ? totals_.users[*f.state] : totals_.users.all();
    if (*f.worker >= worker_totals_.size())
      return 0;
    auto& w = worker_totals_[*f.worker].users;
    return f.state ? w[*f.state] : w.all();
  }
  auto [first, last] = prefix_ranks(f.prefix);
  if (!f.worker && !f.state)
    return static_cast<std::int64_t>(last - first);
  std::int64_t n = 0;
  for (auto i = users_.find_by_order(first); i != users_.end() && i->first.compare(0, f.prefix.size(), f.prefix) == 0;
       ++i)
    n += matches(f, i->first, i->second) ? 1 : 0;
  return n;
}

census_model::page census_model::query(const filter& f, std::size_t offset, std::size_t limit,
                                       const std::string& after) const {
  page out;
  out.matched = count_matching(f);
  auto in_prefix = [&](tree::const_iterator i) {
    return f.prefix.empty() || i->first.compare(0, f.prefix.size(), f.prefix) == 0;
  };
  tree::const_iterator i;
  if (!after.empty()) {
    i = users_.upper_bound(after);
    if (!f.prefix.empty() && i != users_.end() && i->first < f.prefix)
      i = users_.lower_bound(f.prefix);
  } else if (!f.worker && !f.state) {  // every row in the range matches: jump to the offset
    auto first = f.prefix.empty() ? std::size_t{0} : prefix_ranks(f.prefix).first;
    i = users_.find_by_order(first + offset);
  } else {
    i = f.prefix.empty() ? users_.begin() : users_.lower_bound(f.prefix);
    for (std::size_t skipped = 0; skipped < offset && i != users_.end() && in_prefix(i); ++i)
      skipped += matches(f, i->first, i->second) ? 1 : 0;
  }
  for (; i != users_.end() && in_prefix(i); ++i) {
    if (!matches(f, i->first, i->second))
      continue;
    if (out.rows.size() == limit) {
      out.next = *out.rows.back().name;
      break;
    }
    out.rows.push_back({&i->first, &i->second});
  }
  return out;
}

}  // namespace troupe::registry
