#include "actors/census.hpp"

#include "actors/errors.hpp"
#include "actors/orchestration_log.hpp"
#include "registry/census_model.hpp"
#include "registry/ids.hpp"
#include "store/deposit.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <unordered_map>

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

using steady = std::chrono::steady_clock;
constexpr auto probe_timeout = std::chrono::milliseconds(250);
constexpr std::uint32_t max_limit = 1000;
constexpr std::size_t console_log_lines = 20;

struct member {
  actor_kind kind;
  std::string name;
  caf::strong_actor_ptr handle;
};

struct worker_info {
  std::string group;
  std::uint64_t actor = 0;
  std::uint8_t state = 0;  // 0 in service, 1 draining
  std::uint32_t restarts = 0;
};

struct group_info {
  std::string user_type;
  std::uint64_t actor = 0;
  std::uint32_t restarts = 0;
};

// A query waiting for its probes: where each answer goes in the document.
struct pending_query {
  caf::typed_response_promise<std::string> promise;
  json doc;
  struct target {
    json::json_pointer at;
    bool detail;
  };
  std::unordered_map<std::uint64_t, std::vector<target>> targets;  // by actor id
};

json unix_or_null(std::int64_t ms) {
  return ms > 0 ? json(static_cast<double>(ms) / 1000.0) : json(nullptr);
}

json counts_json(const registry::state_counts& c) {
  json j{{"all", c.all()}};
  for (std::size_t i = 0; i < registry::user_state_count; ++i)
    j[to_string(static_cast<user_state>(i))] = c.by[i];
  return j;
}

std::uint64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

struct census_state {
  static const char* name;

  census_handle::stateful_pointer<census_state> self = nullptr;
  node_context_ptr ctx;
  std::shared_ptr<orchestration_log> log;
  registry::census_model model;
  std::unordered_map<std::uint64_t, member> members;  // by actor id
  std::map<std::string, worker_info> workers;
  std::map<std::string, group_info> groups;
  std::uint64_t commander_actor = 0;
  bool scan_done = false;
  std::int64_t scan_found = 0;
  steady::time_point started = steady::now();
  std::uint64_t next_query = 0;
  std::unordered_map<std::uint64_t, pending_query> pending;

  // -- membership --------------------------------------------------------------------

  void on_note(census_note& note) {
    auto sender = self->current_sender();
    if (!sender)
      return;
    auto id = sender->id();
    auto [m, fresh] = members.try_emplace(id);
    if (fresh) {
      m->second = member{static_cast<actor_kind>(note.kind), note.name, sender};
      self->monitor(sender);
    }
    switch (static_cast<actor_kind>(note.kind)) {
      case actor_kind::user: {
        registry::user_entry e;
        e.state = static_cast<user_state>(std::min<std::uint8_t>(note.state, registry::user_state_count - 1));
        e.worker = e.state == user_state::frozen ? registry::user_entry::no_worker : model.worker_number(note.parent);
        e.connections = e.state == user_state::frozen ? 0 : note.connections;
        e.pages = e.state == user_state::frozen ? 0 : note.pages;
        e.restarts = note.restarts;
        e.actor = id;
        model.update(note.name, e);
        break;
      }
      case actor_kind::worker:
        model.worker_number(note.name);
        workers[note.name] = worker_info{note.parent, id, note.state, note.restarts};
        break;
      case actor_kind::group:
        groups[note.name] = group_info{note.info, id, note.restarts};
        break;
      case actor_kind::commander:
        commander_actor = id;
        break;
      default:
        break;
    }
  }

  void on_down(const caf::down_msg& dm) {
    auto id = dm.source.id();
    auto m = members.find(id);
    if (m == members.end())
      return;
    switch (m->second.kind) {
      case actor_kind::user:
        model.actor_down(m->second.name, id);
        break;
      case actor_kind::worker:
        if (auto w = workers.find(m->second.name); w != workers.end() && w->second.actor == id)
          workers.erase(w);
        break;
      case actor_kind::group:
        if (auto g = groups.find(m->second.name); g != groups.end() && g->second.actor == id)
          groups.erase(g);
        break;
      default:
        break;
    }
    members.erase(m);
  }

  // -- documents ------------------------------------------------------------------------

  json node_json() const {
    auto& r = ctx->recipe;
    return {{"id", "node"},
            {"kind", "node"},
            {"name", ctx->node_name},
            {"uptime_seconds", std::chrono::duration<double>(steady::now() - started).count()},
            {"rss_bytes", rss_bytes()},
            {"cpu_seconds", cpu_seconds()},
            {"threads", {{"io", r.node.io_threads}, {"actor", r.node.actor_threads}}}};
  }

  json totals_json() const {
    auto& t = model.totals();
    return {{"users", counts_json(t.users)},
            {"connections", t.connections},
            {"pages", t.pages},
            {"workers", workers.size()},
            {"groups", groups.size()}};
  }

  json worker_row(const std::string& name, const worker_info& w) const {
    json j{{"id", "worker:" + name},
           {"kind", "worker"},
           {"name", name},
           {"group", w.group},
           {"parent", "group:" + w.group},
           {"actor", w.actor},
           {"state", w.state ? "draining" : "active"},
           {"restarts", w.restarts}};
    if (auto n = model.find_worker(name)) {
      auto& a = model.worker_totals(*n);
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

  json group_row(const std::string& name, const group_info& g) const {
    registry::state_counts users;
    std::int64_t connections = 0, pages = 0;
    json names = json::array();
    for (auto& [wname, w] : workers) {
      if (w.group != name)
        continue;
      names.push_back("worker:" + wname);
      if (auto n = model.find_worker(wname)) {
        auto& a = model.worker_totals(*n);
        for (std::size_t i = 0; i < users.by.size(); ++i)
          users.by[i] += a.users.by[i];
        connections += a.connections;
        pages += a.pages;
      }
    }
    return {{"id", "group:" + name}, {"kind", "group"},          {"name", name},
            {"parent", "node"},      {"user_type", g.user_type}, {"actor", g.actor},
            {"workers", names},      {"users", counts_json(users)}, {"connections", connections},
            {"pages", pages},        {"restarts", g.restarts}};
  }

  json user_row(const std::string& name, const registry::user_entry& e) const {
    bool live = e.actor != 0;
    return {{"id", "user:" + name},
            {"kind", "user"},
            {"name", shown_user_name(name)},
            {"parent", e.worker == registry::user_entry::no_worker ? json(nullptr)
                                                                   : json("worker:" + model.worker_name(e.worker))},
            {"actor", live ? json(e.actor) : json(nullptr)},
            {"state", to_string(e.state)},
            {"connections", e.connections},
            {"pages", e.pages},
            {"restarts", e.restarts}};
  }

  json health_json() const {
    auto& m = ctx->metrics;
    std::uint64_t failures = 0, quarantined = 0;
    if (m.deposit) {
      failures = m.deposit->failures.load(std::memory_order_relaxed);
      quarantined = m.deposit->quarantined.load(std::memory_order_relaxed);
    }
    // The same verdict as /_troupe/health (actors/health.hpp).
    auto verdict = json::parse(assess_health(ctx->health, ctx->recipe.node.health_max_restart_rate).body);
    json out{{"status", verdict.value("status", "ok")},
            {"inflight", m.inflight.load(std::memory_order_relaxed)},
            {"deposit_failures", failures},
            {"quarantined", quarantined},
            {"global_keys", m.global_keys.load(std::memory_order_relaxed)},
            {"global_leases", m.global_leases_active.load(std::memory_order_relaxed)}};
    if (verdict.contains("reasons"))
      out["reasons"] = std::move(verdict["reasons"]);
    return out;
  }

  json log_json(std::size_t n) const {
    json lines = json::array();
    for (auto& line : log->tail(n))
      lines.push_back(json::parse(line, nullptr, false));
    return lines;
  }

  // The census document for `q`; the live rows are recorded as probe targets under `base`.
  caf::expected<json> census_json(const census_query& q, pending_query& pq, const std::string& base) {
    if (q.kind != "user" && q.kind != "worker" && q.kind != "group")
      return make_error(errc::bad_request, "kind: must be user, worker or group");
    if (q.limit < 1 || q.limit > max_limit)
      return make_error(errc::bad_request, "limit: must be 1-1000");
    registry::census_model::filter f;
    f.prefix = q.prefix;
    if (!q.state.empty()) {
      f.state = registry::user_state_from(q.state);
      if (!f.state)
        return make_error(errc::bad_request, "state: must be active, unfreezing, departing or frozen");
    }
    json doc{{"node", node_json()},
             {"totals", totals_json()},
             {"health", health_json()},
             {"scan", {{"done", scan_done}, {"frozen_found", scan_found}}},
             {"query",
              {{"kind", q.kind}, {"prefix", q.prefix}, {"worker", q.worker}, {"state", q.state},
               {"offset", q.offset}, {"limit", q.limit}}}};
    json groups_list = json::array();
    for (auto& [name, g] : groups)
      groups_list.push_back(group_row(name, g));
    json workers_list = json::array();
    for (auto& [name, w] : workers)
      workers_list.push_back(worker_row(name, w));
    doc["groups"] = std::move(groups_list);
    doc["workers"] = workers_list;
    json rows = json::array();
    json next = nullptr;
    std::int64_t matched = 0;
    if (q.kind == "user") {
      if (!q.worker.empty()) {
        f.worker = model.find_worker(q.worker);
        if (!f.worker)
          return make_error(errc::bad_request, "worker: no worker called " + q.worker);
      }
      auto page = model.query(f, q.offset, q.limit, q.after);
      matched = page.matched;
      for (auto& r : page.rows) {
        if (q.probe && r.entry->actor)
          pq.targets[r.entry->actor].push_back({json::json_pointer(base + "/actors/" + std::to_string(rows.size())),
                                                false});
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
          pq.targets[row["actor"].get<std::uint64_t>()].push_back(
            {json::json_pointer(base + "/actors/" + std::to_string(rows.size())), false});
        rows.push_back(std::move(row));
      }
    }
    doc["matched"] = matched;
    doc["actors"] = std::move(rows);
    doc["next"] = next;
    return doc;
  }

  // One actor by id; a live one is probed in detail (its figures land at `at`).
  caf::expected<json> detail_json(const std::string& id, pending_query& pq, const std::string& at) {
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
                  {"actor", commander_actor ? json(commander_actor) : json(nullptr)}};
    if (kind == "user") {
      auto* e = model.find(name);
      if (!e)
        return unknown();
      auto j = user_row(name, *e);
      j["store"] = nullptr;  // a live user's probe brings his store and his connections (a list)
      if (e->actor)
        pq.targets[e->actor].push_back({json::json_pointer(at), true});
      else {
        j["connections"] = json::array();
        j["note"] = "frozen: his state is in the deposit; he is not woken to be shown";
      }
      return j;
    }
    if (kind == "worker") {
      auto w = workers.find(name);
      if (w == workers.end())
        return unknown();
      pq.targets[w->second.actor].push_back({json::json_pointer(at), true});
      return worker_row(name, w->second);
    }
    if (kind == "group") {
      auto g = groups.find(name);
      if (g == groups.end())
        return unknown();
      return group_row(name, g->second);
    }
    return unknown();
  }

  // -- probes ---------------------------------------------------------------------------

  // Sends the probes of `pq` (high priority: they overtake a backlog) and
  // answers when all are back or the timeout passes.
  caf::result<std::string> start(pending_query&& pq) {
    auto promise = self->make_response_promise<std::string>();
    if (pq.targets.empty()) {
      promise.deliver(dump(pq.doc));
      return promise;
    }
    auto id = ++next_query;
    pq.promise = promise;
    for (auto i = pq.targets.begin(); i != pq.targets.end();) {
      auto m = members.find(i->first);
      if (m == members.end()) {
        i = pq.targets.erase(i);
        continue;
      }
      bool detail = false;
      for (auto& t : i->second)
        detail = detail || t.detail;
      self->send<caf::message_priority::high>(caf::actor_cast<probe_handle>(m->second.handle), probe_atom::value,
                                              id, detail);
      ++i;
    }
    if (pq.targets.empty()) {
      promise.deliver(dump(pq.doc));
      return promise;
    }
    pending.emplace(id, std::move(pq));
    self->delayed_send(self, probe_timeout, tick_atom::value, id);
    return promise;
  }

  void on_probe(actor_probe& p) {
    auto q = pending.find(p.query);
    auto sender = self->current_sender();
    if (q == pending.end() || !sender)
      return;
    auto t = q->second.targets.find(sender->id());
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
    if (q->second.targets.empty()) {
      q->second.promise.deliver(dump(q->second.doc));
      pending.erase(q);
    }
  }

  void on_timeout(std::uint64_t id) {
    auto q = pending.find(id);
    if (q == pending.end())
      return;
    for (auto& [actor, targets] : q->second.targets)
      for (auto& t : targets)
        q->second.doc[t.at]["probe"] = "timeout";
    q->second.promise.deliver(dump(q->second.doc));
    pending.erase(q);
  }

  static std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

  // -- queries --------------------------------------------------------------------------

  caf::result<std::string> query(const census_query& q) {
    pending_query pq;
    if (!q.console) {
      auto doc = census_json(q, pq, "");
      if (!doc)
        return doc.error();
      pq.doc = std::move(*doc);
      return start(std::move(pq));
    }
    auto doc = census_json(q, pq, "/census");
    if (!doc)
      return doc.error();
    pq.doc = json{{"census", std::move(*doc)}, {"detail", nullptr}, {"log", log_json(console_log_lines)}};
    if (!q.open.empty())
      if (auto d = detail_json(q.open, pq, "/detail"))
        pq.doc["detail"] = std::move(*d);
    return start(std::move(pq));
  }

  caf::result<std::string> detail(const std::string& id) {
    pending_query pq;
    auto doc = detail_json(id, pq, "");
    if (!doc)
      return doc.error();
    pq.doc = std::move(*doc);
    return start(std::move(pq));
  }

  void record(orchestration_entry& e) {
    json numbers = e.numbers.empty() ? json::object() : json::parse(e.numbers, nullptr, false);
    log->write({{"who", e.who},
                {"from", e.from},
                {"what", e.what},
                {"on", e.on},
                {"outcome", e.outcome},
                {"numbers", numbers.is_discarded() ? json::object() : numbers},
                {"detail", e.detail}});
  }
};

const char* census_state::name = "troupe.census";

census_handle::behavior_type census_impl(census_handle::stateful_pointer<census_state> self, node_context_ptr ctx,
                                         std::shared_ptr<orchestration_log> log) {
  auto& st = self->state;
  st.self = self;
  st.ctx = std::move(ctx);
  st.log = std::move(log);
  self->set_down_handler([=](caf::down_msg& dm) { self->state.on_down(dm); });
  return {
    [=](note_atom, census_note& note) { self->state.on_note(note); },
    [=](actor_probe& p) { self->state.on_probe(p); },
    [=](scan_atom, std::vector<std::string>& names, bool last) {
      auto& st = self->state;
      for (auto& n : names)
        st.model.add_frozen(n);
      st.scan_found += static_cast<std::int64_t>(names.size());
      st.scan_done = st.scan_done || last;
    },
    [=](drop_atom, const std::string& user) { self->state.model.erase(user); },
    [=](census_atom, const census_query& q) { return self->state.query(q); },
    [=](census_atom, const std::string& id) { return self->state.detail(id); },
    [=](log_atom, orchestration_entry& e) { self->state.record(e); },
    [=](log_atom, std::uint32_t n) {
      return census_state::dump(json{{"lines", self->state.log_json(std::clamp<std::uint32_t>(n, 1, 1000))}});
    },
    [=](tick_atom, std::uint64_t id) { self->state.on_timeout(id); },
  };
}

}  // namespace

census_handle spawn_census(caf::actor_system& sys, node_context_ptr ctx, std::shared_ptr<orchestration_log> log) {
  return sys.spawn(census_impl, std::move(ctx), std::move(log));
}

}  // namespace troupe
