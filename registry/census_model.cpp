#include "registry/census_model.hpp"

#include <algorithm>
#include <map>
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
    case user_state::resting:
      return "resting";
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

void census_model::account(std::string_view name, const user_entry& e, int sign) {
  bool guest = is_guest(name);
  auto add = [&](user_aggregate& a) {
    a.users.by[static_cast<std::size_t>(e.state)] += sign;
    a.guests += guest ? sign : 0;
    a.connections += sign * static_cast<std::int64_t>(e.connections);
    a.pages += sign * static_cast<std::int64_t>(e.pages);
  };
  add(totals_);
  if (e.worker < worker_totals_.size())
    add(worker_totals_[e.worker]);
}

void census_model::update(const std::string& name, const user_entry& now) {
  auto [i, fresh] = users_.insert({name, now});
  // A resting actor's last note can come after his next actor's first
  // (two senders, no order between them): a newer actor's word stands.
  if (!fresh && now.state == user_state::resting && i->second.actor > now.actor)
    return;
  if (!fresh) {
    account(i->first, i->second, -1);
    i->second = now;
  }
  account(i->first, i->second, +1);
}

void census_model::actor_down(const std::string& name, std::uint64_t actor) {
  auto i = users_.find(name);
  if (i == users_.end() || i->second.actor != actor)
    return;
  account(i->first, i->second, -1);
  if (i->second.state == user_state::resting) {  // his state waits in his worker: he is still there
    i->second.actor = 0;
    account(i->first, i->second, +1);
    return;
  }
  if (i->second.state != user_state::frozen) {
    users_.erase(i);
    return;
  }
  i->second = user_entry{user_state::frozen};
  account(i->first, i->second, +1);
}

void census_model::add_frozen(const std::string& name) {
  auto [i, fresh] = users_.insert({name, user_entry{user_state::frozen}});
  if (fresh)
    account(i->first, i->second, +1);
}

void census_model::erase(const std::string& name) {
  if (auto i = users_.find(name); i != users_.end()) {
    account(i->first, i->second, -1);
    users_.erase(i);
  }
}

const user_entry* census_model::find(const std::string& name) const {
  auto i = users_.find(name);
  return i == users_.end() ? nullptr : &i->second;
}

bool census_model::matches(const filter& f, std::string_view name, const user_entry& e) const {
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
  for (auto i = users_.find_by_order(first); i != users_.end() && i->first.view().compare(0, f.prefix.size(), f.prefix) == 0;
       ++i)
    n += matches(f, i->first, i->second) ? 1 : 0;
  return n;
}

census_model::page census_model::query(const filter& f, std::size_t offset, std::size_t limit,
                                       const std::string& after) const {
  page out;
  out.matched = count_matching(f);
  auto in_prefix = [&](tree::const_iterator i) {
    return f.prefix.empty() || i->first.view().compare(0, f.prefix.size(), f.prefix) == 0;
  };
  tree::const_iterator i;
  if (!after.empty()) {
    i = users_.upper_bound(after);
    if (!f.prefix.empty() && i != users_.end() && i->first.view() < std::string_view(f.prefix))
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
      out.next = out.rows.back().name->str();
      break;
    }
    out.rows.push_back({&i->first, &i->second});
  }
  return out;
}

}  // namespace troupe::registry

// -- the cluster's census ---------------------------------------------------------------

namespace troupe::registry {

using nlohmann::json;

namespace {

std::string str_or(const json& j, const char* key, std::string fallback = {}) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::int64_t int_or(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<std::int64_t>() : 0;
}

// "worker:default-w1" of member n2 → "worker:n2/default-w1".
json qualified_worker(const json& id, const std::string& node) {
  if (!id.is_string())
    return id;
  auto s = id.get<std::string>();
  constexpr std::string_view prefix = "worker:";
  if (s.rfind(prefix, 0) != 0 || s.find('/') != std::string::npos)
    return id;
  return std::string(prefix) + node + "/" + s.substr(prefix.size());
}

json tagged_worker(json w, const std::string& node, bool qualify) {
  if (!qualify)
    return w;
  w["id"] = qualified_worker(w["id"], node);
  w["node"] = node;
  return w;
}

json tagged_group(json g, const std::string& node, bool qualify) {
  if (!qualify)
    return g;
  if (g.contains("workers") && g["workers"].is_array())
    for (auto& id : g["workers"])
      id = qualified_worker(id, node);
  g["node"] = node;
  return g;
}

json tagged_user(json u, const std::string& node) {
  bool live = u.contains("actor") && !u["actor"].is_null();
  u["parent"] = qualified_worker(u.value("parent", json(nullptr)), node);
  u["node"] = live ? json(node) : json(nullptr);  // a frozen user lives on no node
  return u;
}

void add_counts(json& into, const json& from) {
  if (!from.is_object())
    return;
  for (auto& [k, v] : from.items())
    if (v.is_number())
      into[k] = into.value(k, std::int64_t{0}) + v.get<std::int64_t>();
}

bool answered(const census_part& p) {
  return p.doc.is_object();
}

}  // namespace

json tag_member_row(json row, const std::string& node) {
  auto kind = str_or(row, "kind");
  if (kind == "user")
    return tagged_user(std::move(row), node);
  if (kind == "worker")
    return tagged_worker(std::move(row), node, true);
  if (kind == "group")
    return tagged_group(std::move(row), node, true);
  return row;
}

json census_facts(const json& doc) {
  json facts = json::object();
  if (!doc.is_object())
    return facts;
  if (doc.contains("node") && doc["node"].is_object())
    for (const char* k : {"uptime_seconds", "rss_bytes", "cpu_seconds", "threads"})
      if (doc["node"].contains(k))
        facts[k] = doc["node"][k];
  for (const char* k : {"health", "totals", "scan", "groups", "workers"})
    if (doc.contains(k))
      facts[k] = doc[k];
  return facts;
}

json node_entry(const census_part& part, bool qualify) {
  auto& m = part.member;
  json e{{"id", "node:" + m.name},
         {"kind", "node"},
         {"name", m.name},
         {"state", m.state},
         // A decimal string: 64 random bits do not fit a JSON (double) number.
         {"incarnation", m.incarnation ? json(std::to_string(*m.incarnation)) : json(nullptr)},
         {"address", m.address.empty() ? json(nullptr) : json(m.address)},
         {"age", m.age},
         {"leader", m.leader},
         {"heartbeat_age_ms", m.heartbeat_age_ms >= 0 ? json(m.heartbeat_age_ms) : json(nullptr)},
         {"answered", answered(part)}};
  json facts = answered(part) ? census_facts(part.doc) : part.last_known;
  if (!answered(part)) {
    e["stale"] = true;
    e["last_answer_seconds_ago"] = facts.is_object() ? json(part.last_known_age_seconds) : json(nullptr);
  }
  if (!facts.is_object())
    facts = json::object();
  for (const char* k : {"uptime_seconds", "rss_bytes", "cpu_seconds", "threads", "scan"})
    e[k] = facts.contains(k) ? facts[k] : json(nullptr);
  // A member that did not answer has no health now: its state says why.
  e["health"] = answered(part) && facts.contains("health") ? facts["health"] : json{{"status", m.state}};
  e["totals"] = facts.contains("totals") ? facts["totals"] : json(nullptr);
  json groups = json::array(), workers = json::array();
  if (facts.contains("groups") && facts["groups"].is_array())
    for (auto& g : facts["groups"])
      groups.push_back(tagged_group(g, m.name, qualify));
  if (facts.contains("workers") && facts["workers"].is_array())
    for (auto& w : facts["workers"])
      workers.push_back(tagged_worker(w, m.name, qualify));
  e["groups"] = std::move(groups);
  e["workers"] = std::move(workers);
  return e;
}

json merge_census(json base, const std::vector<census_part>& parts, const census_window& w) {
  json nodes = json::array();
  for (auto& p : parts)
    nodes.push_back(node_entry(p, true));

  // Totals: the live users live on one member each, so they add up; the
  // frozen ones are in the shared deposit, which every member lists.
  json users{{"active", 0}, {"unfreezing", 0}, {"departing", 0}, {"frozen", 0}, {"resting", 0}};
  std::int64_t connections = 0, pages = 0, workers_count = 0, frozen = 0;
  std::map<std::string, json> groups;  // merged by name
  json workers = json::array();
  for (auto& p : parts) {
    if (!answered(p))
      continue;
    auto& t = p.doc["totals"];
    if (t.is_object()) {
      auto& u = t["users"];
      for (const char* k : {"active", "unfreezing", "departing", "resting"})  // each rests in one member's worker
        users[k] = users[k].get<std::int64_t>() + int_or(u, k);
      frozen = std::max(frozen, int_or(u, "frozen"));
      connections += int_or(t, "connections");
      pages += int_or(t, "pages");
      workers_count += int_or(t, "workers");
    }
    for (auto& g : p.doc.value("groups", json::array())) {
      auto name = str_or(g, "name");
      auto tagged = tagged_group(g, p.member.name, true);
      auto [it, fresh] = groups.try_emplace(name);
      auto& into = it->second;
      if (fresh) {
        into = tagged;
        into.erase("node");
        into["actor"] = nullptr;  // one group actor per member
        into["nodes"] = json::array();
        into["users"] = json::object();
        into["connections"] = 0;
        into["pages"] = 0;
        into["restarts"] = 0;
        into["workers"] = json::array();
      }
      into["nodes"].push_back(p.member.name);
      add_counts(into["users"], tagged.value("users", json::object()));
      for (const char* k : {"connections", "pages", "restarts"})
        into[k] = into[k].get<std::int64_t>() + int_or(tagged, k);
      for (auto& id : tagged.value("workers", json::array()))
        into["workers"].push_back(id);
    }
    for (auto& wk : p.doc.value("workers", json::array()))
      workers.push_back(tagged_worker(wk, p.member.name, true));
  }
  users["frozen"] = frozen;
  users["all"] = users["active"].get<std::int64_t>() + users["unfreezing"].get<std::int64_t>() +
                 users["departing"].get<std::int64_t>() + users["resting"].get<std::int64_t>() + frozen;
  json group_rows = json::array();
  for (auto& [name, g] : groups)
    group_rows.push_back(std::move(g));
  base["nodes"] = std::move(nodes);
  base["totals"] = {{"users", users},
                    {"connections", connections},
                    {"pages", pages},
                    {"workers", workers_count},
                    {"groups", group_rows.size()}};
  base["groups"] = group_rows;
  base["workers"] = workers;

  // The rows: the union of the members' first offset + limit rows, by name.
  std::vector<json> rows;
  std::int64_t matched = 0;
  bool more = false;
  if (w.kind == "group") {
    for (auto& g : group_rows)
      rows.push_back(g);
    matched = static_cast<std::int64_t>(rows.size());
  } else {
    std::map<std::string, std::size_t> seen;  // user id → index in rows
    for (auto& p : parts) {
      if (!answered(p))
        continue;
      matched += int_or(p.doc, "matched");
      more = more || (p.doc.contains("next") && !p.doc["next"].is_null());
      for (auto& r : p.doc.value("actors", json::array())) {
        if (w.kind == "worker") {
          rows.push_back(tagged_worker(r, p.member.name, true));
          continue;
        }
        auto row = tagged_user(r, p.member.name);
        auto id = str_or(row, "id");
        auto [it, fresh] = seen.try_emplace(id, rows.size());
        if (fresh) {
          rows.push_back(std::move(row));
          continue;
        }
        // Known by several members (the frozen ones, or one in passing): the live one wins.
        --matched;
        if (rows[it->second]["actor"].is_null() && !row["actor"].is_null())
          rows[it->second] = std::move(row);
      }
    }
    std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
      auto an = str_or(a, "id"), bn = str_or(b, "id");
      return an != bn ? an < bn : str_or(a, "node") < str_or(b, "node");
    });
  }
  json page = json::array();
  auto first = std::min<std::uint64_t>(w.offset, rows.size());
  auto last = std::min<std::uint64_t>(first + w.limit, rows.size());
  for (auto i = first; i < last; ++i)
    page.push_back(std::move(rows[i]));
  more = more || last < rows.size();
  json next = nullptr;
  if (w.kind == "user" && more && !page.empty())
    next = str_or(page.back(), "id").substr(5);  // "user:" + name
  base["matched"] = std::max<std::int64_t>(matched, static_cast<std::int64_t>(rows.size()));
  base["actors"] = std::move(page);
  base["next"] = next;
  return base;
}

}  // namespace troupe::registry
