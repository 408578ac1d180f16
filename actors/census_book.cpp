#include "actors/census_book.hpp"

#include "actors/errors.hpp"
#include "actors/orchestration_log.hpp"
#include "config/node_settings.hpp"
#include "registry/clocks.hpp"
#include "registry/ids.hpp"
#include "registry/proc_stats.hpp"
#include "registry/restart_intensity.hpp"
#include "store/deposit.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace troupe {

using nlohmann::json;
using registry::user_state;

std::string connection_ref(const std::string& cid) {
  return cid.substr(0, 8);
}

std::string shown_user_name(const std::string& user) {
  if (registry::is_guest(user))
    return "guest_" + connection_ref(user.substr(6)) + "\xE2\x80\xA6";  // "…"
  return user;
}

namespace {

json unix_or_null(std::int64_t ms) {
  return ms > 0 ? json(static_cast<double>(ms) / 1000.0) : json(nullptr);
}

json counts_json(const registry::state_counts& c) {
  json j{{"all", c.all()}};
  for (std::size_t i = 0; i < registry::user_state_count; ++i)
    j[to_string(static_cast<user_state>(i))] = c.by[i];
  return j;
}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

}  // namespace

census_book::census_book(node_context_ptr ctx, std::shared_ptr<orchestration_log> log)
  : ctx_(std::move(ctx)), log_(std::move(log)) {
}

// -- membership ------------------------------------------------------------------------

bool census_book::note(std::uint64_t actor, caf::strong_actor_ptr handle, const census_note& note) {
  auto [m, fresh] = members_.try_emplace(actor);
  if (fresh)
    m->second = member{static_cast<actor_kind>(note.kind), note.name, std::move(handle)};
  switch (static_cast<actor_kind>(note.kind)) {
    case actor_kind::user: {
      registry::user_entry e;
      e.state = static_cast<user_state>(std::min<std::uint8_t>(note.state, registry::user_state_count - 1));
      bool frozen = e.state == user_state::frozen;
      e.worker = frozen ? registry::user_entry::no_worker : model_.worker_number(note.parent);
      e.connections = frozen ? 0 : note.connections;
      e.pages = frozen ? 0 : note.pages;
      e.restarts = note.restarts;
      e.actor = actor;
      model_.update(note.name, e);
      break;
    }
    case actor_kind::worker:
      model_.worker_number(note.name);
      workers_[note.name] = worker_info{note.parent, actor, note.state, note.restarts};
      break;
    case actor_kind::group:
      groups_[note.name] = group_info{note.info, actor, note.restarts, note.state};
      break;
    case actor_kind::commander:
      commander_actor_ = actor;
      break;
    default:
      break;
  }
  return fresh;
}

void census_book::down(std::uint64_t actor) {
  auto m = members_.find(actor);
  if (m == members_.end())
    return;
  auto name = m->second.name.str();
  switch (m->second.kind) {
    case actor_kind::user:
      model_.actor_down(name, actor);
      break;
    case actor_kind::worker:
      if (auto w = workers_.find(name); w != workers_.end() && w->second.actor == actor)
        workers_.erase(w);
      break;
    case actor_kind::group:
      if (auto g = groups_.find(name); g != groups_.end() && g->second.actor == actor)
        groups_.erase(g);
      break;
    default:
      break;
  }
  members_.erase(m);
}

void census_book::scanned(const std::vector<std::string>& names, bool last) {
  for (auto& n : names)
    model_.add_frozen(n);
  scan_found_ += static_cast<std::int64_t>(names.size());
  scan_done_ = scan_done_ || last;
}

void census_book::drop(const std::string& name) {
  model_.erase(name);
}

// -- documents -------------------------------------------------------------------------

json census_book::node_json() const {
  auto& node = ctx_->node();
  return {{"id", "node"},
          {"kind", "node"},
          {"name", ctx_->node_name},
          {"uptime_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
          {"rss_bytes", registry::rss_bytes().value_or(0)},
          {"cpu_seconds", cpu_seconds()},
          {"threads", {{"io", node.io_threads}, {"actor", node.actor_threads}}}};
}

json census_book::totals_json() const {
  auto& t = model_.totals();
  return {{"users", counts_json(t.users)},
          {"guests", t.guests},
          {"named", t.users.all() - t.guests},
          {"connections", t.connections},
          {"pages", t.pages},
          {"workers", workers_.size()},
          {"groups", groups_.size()}};
}

json census_book::worker_row(const std::string& name, const worker_info& w) const {
  json j{{"id", "worker:" + name},
         {"kind", "worker"},
         {"name", name},
         {"group", w.group},
         {"parent", "group:" + w.group},
         {"actor", w.actor},
         {"state", w.state ? "draining" : "active"},
         {"restarts", w.restarts}};
  if (auto n = model_.find_worker(name)) {
    auto& a = model_.worker_totals(*n);
    j["users"] = counts_json(a.users);
    j["connections"] = a.connections;
    j["pages"] = a.pages;
  } else {
    j["users"] = counts_json({});
    j["connections"] = 0;
    j["pages"] = 0;
  }
  return j;
}

json census_book::group_row(const std::string& name, const group_info& g) const {
  registry::state_counts users;
  std::int64_t connections = 0, pages = 0;
  json names = json::array();
  for (auto& [wname, w] : workers_) {
    if (w.group != name)
      continue;
    names.push_back("worker:" + wname);
    if (auto n = model_.find_worker(wname)) {
      auto& a = model_.worker_totals(*n);
      for (std::size_t i = 0; i < users.by.size(); ++i)
        users.by[i] += a.users.by[i];
      connections += a.connections;
      pages += a.pages;
    }
  }
  return {{"id", "group:" + name}, {"kind", "group"},          {"name", name},
          {"parent", "node"},      {"user_type", g.user_type}, {"actor", g.actor},
          {"workers", names},      {"users", counts_json(users)}, {"connections", connections},
          {"pages", pages},        {"restarts", g.restarts},
          {"state", g.state ? "degraded" : "serving"},
          {"reason", g.state ? json(registry::to_string(static_cast<registry::degradation>(g.state))) : json(nullptr)}};
}

json census_book::user_row(const std::string& name, const registry::user_entry& e) const {
  bool live = e.actor != 0;
  return {{"id", "user:" + name},
          {"kind", "user"},
          {"name", shown_user_name(name)},
          {"guest", registry::is_guest(name)},
          {"parent", e.worker == registry::user_entry::no_worker ? json(nullptr)
                                                                 : json("worker:" + model_.worker_name(e.worker))},
          {"actor", live ? json(e.actor) : json(nullptr)},
          {"state", to_string(e.state)},
          {"connections", e.connections},
          {"pages", e.pages},
          {"restarts", e.restarts}};
}

json census_book::health_json() const {
  auto& m = ctx_->metrics;
  std::uint64_t failures = 0, quarantined = 0;
  if (m.deposit) {
    failures = m.deposit->failures.load(std::memory_order_relaxed);
    quarantined = m.deposit->quarantined.load(std::memory_order_relaxed);
  }
  // The same verdict as /_troupe/health (actors/health.hpp).
  auto verdict =
    json::parse(assess_health(ctx_->health, ctx_->node().health_max_restart_rate, &ctx_->metrics).body);
  json out{{"status", verdict.value("status", "ok")},
           {"inflight", m.inflight.load(std::memory_order_relaxed)},
           {"deposit_failures", failures},
           {"quarantined", quarantined},
           {"global_keys", m.global_keys.load(std::memory_order_relaxed)},
           {"global_leases", m.global_leases_active.load(std::memory_order_relaxed)}};
  if (verdict.contains("reasons"))
    out["reasons"] = std::move(verdict["reasons"]);
  if (verdict.contains("degraded_groups"))
    out["degraded_groups"] = std::move(verdict["degraded_groups"]);
  return out;
}

json census_book::settings_json() const {
  return {{"generation", settings_generation_},
          {"source", settings_source_},
          {"active_profile", settings_profile_.empty() ? json() : json(settings_profile_)}};
}

json census_book::scan_json() const {
  return {{"done", scan_done_}, {"frozen_found", scan_found_}};
}

json census_book::log_json(std::size_t n) const {
  json lines = json::array();
  for (auto& line : log_->tail(n))
    lines.push_back(json::parse(line, nullptr, false));
  return lines;
}

caf::expected<json> census_book::census_json(const census_query& q, pending_query& pq, const std::string& base,
                                             bool part) const {
  if (q.kind != "user" && q.kind != "worker" && q.kind != "group")
    return make_error(errc::bad_request, "kind: must be user, worker or group");
  if (q.limit < 1 || q.limit > (part ? registry::max_cluster_window : max_limit))
    return make_error(errc::bad_request, "limit: must be 1-1000");
  registry::census_model::filter f;
  f.prefix = q.prefix;
  if (!q.state.empty()) {
    f.state = registry::user_state_from(q.state);
    if (!f.state)
      return make_error(errc::bad_request, "state: must be active, unfreezing, departing, frozen or resting");
  }
  json doc{{"node", node_json()},
           {"totals", totals_json()},
           {"health", health_json()},
           {"settings", settings_json()},
           {"scan", scan_json()},
           {"query", query_json(q)}};
  json groups_list = json::array();
  for (auto& [name, g] : groups_)
    groups_list.push_back(group_row(name, g));
  json workers_list = json::array();
  for (auto& [name, w] : workers_)
    workers_list.push_back(worker_row(name, w));
  doc["groups"] = std::move(groups_list);
  doc["workers"] = workers_list;
  json rows = json::array();
  json next = nullptr;
  std::int64_t matched = 0;
  auto target_at = [&] { return json::json_pointer(base + "/actors/" + std::to_string(rows.size())); };
  if (q.kind == "user") {
    bool none = false;
    if (!q.worker.empty()) {
      f.worker = model_.find_worker(q.worker);
      if (!f.worker && !part)
        return make_error(errc::bad_request, "worker: no worker called " + q.worker);
      none = !f.worker;
    }
    auto page = none ? registry::census_model::page{} : model_.query(f, q.offset, q.limit, q.after);
    matched = page.matched;
    for (auto& r : page.rows) {
      if (q.probe && r.entry->actor)
        pq.targets[r.entry->actor].push_back({target_at(), false});
      rows.push_back(user_row(*r.name, *r.entry));
    }
    if (page.next)
      next = *page.next;
  } else {
    json all = q.kind == "worker" ? workers_list : doc["groups"];
    for (auto& row : all) {
      if (!q.prefix.empty() && row["name"].get<std::string>().rfind(q.prefix, 0) != 0)
        continue;
      if (matched++ < static_cast<std::int64_t>(q.offset) || rows.size() >= q.limit)
        continue;
      if (q.probe && q.kind == "worker")
        pq.targets[row["actor"].get<std::uint64_t>()].push_back({target_at(), false});
      rows.push_back(std::move(row));
    }
  }
  doc["matched"] = matched;
  doc["actors"] = std::move(rows);
  doc["next"] = next;
  return doc;
}

caf::expected<json> census_book::detail_json(const std::string& id, pending_query& pq, const std::string& at) const {
  auto colon = id.find(':');
  std::string kind = id.substr(0, colon);
  std::string name = colon == std::string::npos ? std::string() : id.substr(colon + 1);
  auto unknown = [&] { return make_error(errc::no_such_user, "no actor " + id + " in the census"); };
  if (id == "node") {
    auto j = node_json();
    j["totals"] = totals_json();
    j["health"] = health_json();
    return j;
  }
  if (id == "commander")
    return json{{"id", "commander"}, {"kind", "commander"}, {"name", "commander"}, {"parent", "node"},
                {"actor", commander_actor_ ? json(commander_actor_) : json(nullptr)}};
  if (kind == "user") {
    auto* e = model_.find(name);
    if (!e)
      return unknown();
    auto j = user_row(name, *e);
    j["store"] = nullptr;  // a live user's probe brings his store and his connections (a list)
    if (e->actor)
      pq.targets[e->actor].push_back({json::json_pointer(at), true});
    else {
      j["connections"] = json::array();
      j["note"] = e->state == user_state::resting
                    ? "resting: his state waits in his worker's memory, encoded; he is not started to be shown"
                    : "frozen: his state is in the deposit; he is not woken to be shown";
    }
    return j;
  }
  if (kind == "worker") {
    auto w = workers_.find(name);
    if (w == workers_.end())
      return unknown();
    pq.targets[w->second.actor].push_back({json::json_pointer(at), true});
    return worker_row(name, w->second);
  }
  if (kind == "group") {
    auto g = groups_.find(name);
    if (g == groups_.end())
      return unknown();
    return group_row(name, g->second);
  }
  return unknown();
}

void census_book::add_console_figures(json& doc) const {
  std::optional<registry::rate_sample> latest;
  {
    std::lock_guard<std::mutex> lock(ctx_->metrics.history_mutex);
    latest = ctx_->metrics.history.latest();
  }
  doc["rates"] = latest ? registry::to_json(*latest) : json(nullptr);
  doc["routes"] = ctx_->metrics.routes_json();
}

void census_book::sample_history() const {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(registry::wall_clock::now().time_since_epoch());
  ctx_->metrics.sample_history(now.count());
}

void census_book::record(const orchestration_entry& e) const {
  json numbers = e.numbers.empty() ? json::object() : json::parse(e.numbers, nullptr, false);
  if (numbers.is_discarded() || !numbers.is_object())
    numbers = json::object();
  if (!numbers.contains("generation"))
    numbers["generation"] = settings_generation_;
  log_->write({{"who", e.who},
               {"from", e.from},
               {"what", e.what},
               {"on", e.on},
               {"outcome", e.outcome},
               {"numbers", numbers},
               {"detail", e.detail}});
}

json census_book::query_json(const census_query& q) {
  return {{"kind", q.kind},     {"prefix", q.prefix}, {"worker", q.worker}, {"state", q.state},
          {"offset", q.offset}, {"limit", q.limit},   {"node", q.node}};
}

std::string census_book::dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// -- probes ----------------------------------------------------------------------------

std::optional<census_book::probes> census_book::start(pending_query&& pq, done_fn done) {
  probes out;
  for (auto i = pq.targets.begin(); i != pq.targets.end();) {
    auto m = members_.find(i->first);
    if (m == members_.end()) {  // gone since its row was written: nothing to wait for
      i = pq.targets.erase(i);
      continue;
    }
    bool detail = std::any_of(i->second.begin(), i->second.end(), [](auto& t) { return t.detail; });
    out.members.emplace_back(m->second.handle, detail);
    ++i;
  }
  if (pq.targets.empty()) {
    done(std::move(pq.doc));
    return std::nullopt;
  }
  out.query = ++next_query_;
  pq.done = std::move(done);
  pending_.emplace(out.query, std::move(pq));
  return out;
}

void census_book::probe_answered(std::uint64_t actor, const actor_probe& p) {
  auto q = pending_.find(p.query);
  if (q == pending_.end())
    return;  // late: the query timed out
  auto t = q->second.targets.find(actor);
  if (t == q->second.targets.end())
    return;
  for (auto& target : t->second) {
    auto& j = q->second.doc[target.at];
    j["mailbox"] = p.mailbox;
    j["handled"] = p.handled;
    j["service_us"] = p.service_ns / 1000;
    j["restarts"] = p.restarts;
    if (j.value("kind", "") == "user")
      j["clocks"] = {{"last_refresh", unix_or_null(p.last_refresh_ms)},
                     {"last_user", unix_or_null(p.last_user_ms)},
                     {"last_rpc", unix_or_null(p.last_rpc_ms)}};
    if (target.detail && !p.detail.empty()) {
      auto more = json::parse(p.detail, nullptr, false);
      if (more.is_object())
        for (auto& [k, v] : more.items())
          j[k] = v;
    }
  }
  q->second.targets.erase(t);
  if (q->second.targets.empty())
    finish(q);
}

void census_book::probe_timeout(std::uint64_t query) {
  auto q = pending_.find(query);
  if (q == pending_.end())
    return;  // every probe answered in time
  for (auto& [actor, targets] : q->second.targets)
    for (auto& t : targets)
      q->second.doc[t.at]["probe"] = "timeout";
  finish(q);
}

void census_book::finish(std::unordered_map<std::uint64_t, pending_query>::iterator q) {
  auto done = std::move(q->second.done);
  auto doc = std::move(q->second.doc);
  pending_.erase(q);
  done(std::move(doc));
}

}  // namespace troupe
