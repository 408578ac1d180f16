#include "actors/census.hpp"

#include "actors/errors.hpp"
#include "actors/orchestration_log.hpp"
#include "actors/cluster_view.hpp"
#include "registry/census_model.hpp"
#include "registry/clocks.hpp"
#include "registry/short_name.hpp"
#include "registry/ids.hpp"
#include "registry/restart_intensity.hpp"
#include "store/deposit.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <unordered_map>

namespace troupe {

// The census's whole interface: its public one and the timers it sends itself
// (private: no other actor can send them).
using census_actor = census_handle::extend<
  /// The probes of query N are due.
  caf::reacts_to<tick_atom, std::uint64_t>,
  /// Samples the rate history (every second).
  caf::reacts_to<history_atom>>;

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
// Across a cluster: how long the agent, and each member's census, may take
// (a member's part waits for its probes: probe_timeout and some).
constexpr auto members_timeout = std::chrono::milliseconds(500);
constexpr auto part_timeout = std::chrono::milliseconds(1000);
constexpr std::uint32_t max_limit = 1000;
constexpr std::size_t console_log_lines = 20;

struct member {
  actor_kind kind;
  registry::short_name name;  // one per live user: a guest's name inline, no allocation (S5)
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
  std::uint8_t state = 0;  // 0 serving, else a registry::degradation
};

using done_fn = std::function<void(json&&)>;

// A query waiting for its probes: where each answer goes in the document.
struct pending_query {
  done_fn done;
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

  census_actor::stateful_pointer<census_state> self = nullptr;
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
  // Across a cluster: the agent (none for a lone node), and each member's
  // facts from its last answer (shown while it does not answer).
  cluster_view_handle agent;
  struct known_member {
    json facts;
    steady::time_point at;
  };
  std::map<std::string, known_member> last_known;

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
        groups[note.name] = group_info{note.info, id, note.restarts, note.state};
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
        model.actor_down(m->second.name.str(), id);
        break;
      case actor_kind::worker:
        if (auto w = workers.find(m->second.name.str()); w != workers.end() && w->second.actor == id)
          workers.erase(w);
        break;
      case actor_kind::group:
        if (auto g = groups.find(m->second.name.str()); g != groups.end() && g->second.actor == id)
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
            {"guests", t.guests},
            {"named", t.users.all() - t.guests},
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
            {"pages", pages},        {"restarts", g.restarts},
            {"state", g.state ? "degraded" : "serving"},
            {"reason", g.state ? json(registry::to_string(static_cast<registry::degradation>(g.state))) : json(nullptr)}};
  }

  json user_row(const std::string& name, const registry::user_entry& e) const {
    bool live = e.actor != 0;
    return {{"id", "user:" + name},
            {"kind", "user"},
            {"name", shown_user_name(name)},
            {"guest", registry::is_guest(name)},
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
    auto verdict =
      json::parse(assess_health(ctx->health, ctx->recipe.node.health_max_restart_rate, &ctx->metrics).body);
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

  json log_json(std::size_t n) const {
    json lines = json::array();
    for (auto& line : log->tail(n))
      lines.push_back(json::parse(line, nullptr, false));
    return lines;
  }

  // The census document for `q`; the live rows are recorded as probe targets under `base`.
  // `part`: another member asks for this member's part (more rows, an unknown worker selects none).
  caf::expected<json> census_json(const census_query& q, pending_query& pq, const std::string& base,
                                  bool part = false) {
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
             {"scan", {{"done", scan_done}, {"frozen_found", scan_found}}},
             {"query", query_json(q)}};
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
      bool none = false;
      if (!q.worker.empty()) {
        f.worker = model.find_worker(q.worker);
        if (!f.worker && !part)
          return make_error(errc::bad_request, "worker: no worker called " + q.worker);
        none = !f.worker;
      }
      auto page = none ? registry::census_model::page{} : model.query(f, q.offset, q.limit, q.after);
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
        j["note"] = e->state == user_state::resting
                      ? "resting: his state waits in his worker's memory, encoded; he is not started to be shown"
                      : "frozen: his state is in the deposit; he is not woken to be shown";
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
  void start(pending_query&& pq, done_fn done) {
    if (pq.targets.empty())
      return done(std::move(pq.doc));
    auto id = ++next_query;
    pq.done = std::move(done);
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
    if (pq.targets.empty())
      return pq.done(std::move(pq.doc));
    pending.emplace(id, std::move(pq));
    self->delayed_send(self, probe_timeout, tick_atom::value, id);
  }

  // Starts `pq` and answers its document as the reply.
  caf::result<std::string> answer(pending_query&& pq) {
    auto promise = self->make_response_promise<std::string>();
    start(std::move(pq), [promise](json&& doc) mutable { promise.deliver(dump(doc)); });
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
      auto done = std::move(q->second.done);
      auto doc = std::move(q->second.doc);
      pending.erase(q);
      done(std::move(doc));
    }
  }

  void on_timeout(std::uint64_t id) {
    auto q = pending.find(id);
    if (q == pending.end())
      return;
    for (auto& [actor, targets] : q->second.targets)
      for (auto& t : targets)
        q->second.doc[t.at]["probe"] = "timeout";
    auto done = std::move(q->second.done);
    auto doc = std::move(q->second.doc);
    pending.erase(q);
    done(std::move(doc));
  }

  // The console's rates and per-route figures (this node's): the newest
  // sample only, the console keeps its own chart from GET /_troupe/history and
  // these (a whole history in every snapshot would make every patch huge).
  void add_console_figures(json& doc) const {
    std::optional<registry::rate_sample> latest;
    {
      std::lock_guard<std::mutex> lock(ctx->metrics.history_mutex);
      latest = ctx->metrics.history.latest();
    }
    doc["rates"] = latest ? registry::to_json(*latest) : json(nullptr);
    doc["routes"] = ctx->metrics.routes_json();
  }

  // Once a second: the node's counters into its history.
  void sample_history() {
    auto now = std::chrono::duration_cast<std::chrono::milliseconds>(registry::wall_clock::now().time_since_epoch());
    ctx->metrics.sample_history(now.count());
  }

  static std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

  // -- queries --------------------------------------------------------------------------

  static json query_json(const census_query& q) {
    return {{"kind", q.kind},     {"prefix", q.prefix}, {"worker", q.worker}, {"state", q.state},
            {"offset", q.offset}, {"limit", q.limit},   {"node", q.node}};
  }

  caf::result<std::string> query(const census_query& q) {
    if (agent)
      return cluster_query(q);
    // A lone node: its census, and itself as the `nodes` level.
    if (!q.node.empty() && q.node != ctx->node_name)
      return make_error(errc::bad_request, "node: no member called " + q.node);
    pending_query pq;
    auto doc = census_json(q, pq, q.console ? "/census" : "");
    if (!doc)
      return doc.error();
    registry::census_part me;
    me.member.name = ctx->node_name;
    me.member.state = "self";
    me.member.leader = true;
    me.doc = registry::census_facts(*doc);
    (*doc)["nodes"] = json::array({registry::node_entry(me, false)});
    if (!q.console) {
      pq.doc = std::move(*doc);
      return answer(std::move(pq));
    }
    pq.doc = json{{"census", std::move(*doc)}, {"detail", nullptr}, {"log", log_json(console_log_lines)}};
    add_console_figures(pq.doc);
    if (!q.open.empty())
      if (auto d = detail_json(q.open, pq, "/detail"))
        pq.doc["detail"] = std::move(*d);
    return answer(std::move(pq));
  }

  caf::result<std::string> detail(const std::string& id) {
    if (!agent) {
      pending_query pq;
      auto doc = detail_json(id, pq, "");
      if (!doc)
        return doc.error();
      pq.doc = std::move(*doc);
      return answer(std::move(pq));
    }
    auto promise = self->make_response_promise<std::string>();
    auto deliver = [promise](caf::expected<json> d) mutable {
      if (d)
        promise.deliver(dump(*d));
      else
        promise.deliver(d.error());
    };
    self->request(agent, members_timeout, members_atom::value)
      .then([this, id, deliver](std::vector<member_status>& ms) { find_detail(id, ms, deliver); },
            [this, id, deliver](caf::error&) { find_detail(id, {}, deliver); });
    return promise;
  }

  // -- across the cluster ---------------------------------------------------------------

  static bool is_me(const member_status& m) { return m.state == "self" || m.state == "fenced"; }

  // An id as this member's census knows it: "worker:<me>/<w>" is its worker
  // <w>, "node:<me>" is "node".
  std::string local_id(const std::string& id) const {
    auto mine = "worker:" + ctx->node_name + "/";
    if (id.rfind(mine, 0) == 0)
      return "worker:" + id.substr(mine.size());
    if (id == "node:" + ctx->node_name)
      return "node";
    return id;
  }

  // The members' parts of one query, merged when the last is in.
  struct merge_run {
    census_query q;
    caf::typed_response_promise<std::string> promise;
    std::vector<member_status> members;
    std::vector<registry::census_part> parts;
    std::size_t waiting = 0;
  };
  using merge_run_ptr = std::shared_ptr<merge_run>;

  caf::error check_cluster_query(const census_query& q) const {
    if (q.kind != "user" && q.kind != "worker" && q.kind != "group")
      return make_error(errc::bad_request, "kind: must be user, worker or group");
    if (q.limit < 1 || q.limit > max_limit)
      return make_error(errc::bad_request, "limit: must be 1-1000");
    if (!q.state.empty() && !registry::user_state_from(q.state))
      return make_error(errc::bad_request, "state: must be active, unfreezing, departing, frozen or resting");
    if (q.after.empty() && q.offset + q.limit > registry::max_cluster_window)
      return make_error(errc::bad_request, "offset: offset + limit must be at most " +
                                             std::to_string(registry::max_cluster_window) +
                                             " across a cluster (page on with after)");
    return {};
  }

  caf::result<std::string> cluster_query(census_query q) {
    // worker=n2/default-w1: member n2's worker default-w1.
    if (auto slash = q.worker.find('/'); slash != std::string::npos) {
      auto node = q.worker.substr(0, slash);
      if (!q.node.empty() && q.node != node)
        return make_error(errc::bad_request, "worker: " + q.worker + " is not on node " + q.node);
      q.node = node;
      q.worker = q.worker.substr(slash + 1);
    }
    if (q.after.empty() == false)
      q.offset = 0;  // the cursor wins
    if (auto err = check_cluster_query(q))
      return err;
    auto run = std::make_shared<merge_run>();
    run->q = std::move(q);
    run->promise = self->make_response_promise<std::string>();
    auto promise = run->promise;
    self->request(agent, members_timeout, members_atom::value)
      .then([this, run](std::vector<member_status>& ms) { fan_out(run, std::move(ms)); },
            [this, run](caf::error& err) {
              run->promise.deliver(make_error(errc::unavailable, "the cluster agent did not answer: " +
                                                                   self->system().render(err)));
            });
    return promise;
  }

  void fan_out(const merge_run_ptr& run, std::vector<member_status> ms) {
    auto& q = run->q;
    std::sort(ms.begin(), ms.end(), [](auto& a, auto& b) { return a.seq != b.seq ? a.seq < b.seq : a.name < b.name; });
    // Facts are kept for the members the agent still lists, no others.
    for (auto i = last_known.begin(); i != last_known.end();)
      i = std::any_of(ms.begin(), ms.end(), [&](auto& m) { return m.name == i->first; }) ? std::next(i)
                                                                                           : last_known.erase(i);
    run->members = ms;
    if (!q.node.empty()) {
      ms.erase(std::remove_if(ms.begin(), ms.end(), [&](auto& m) { return m.name != q.node; }), ms.end());
      if (ms.empty())
      {
        run->promise.deliver(make_error(errc::bad_request, "node: no member called " + q.node));
        return;
      }
    }
    // Each member lists its first offset + limit rows; the merge keeps the window.
    census_query mq = q;
    mq.offset = 0;
    mq.limit = static_cast<std::uint32_t>(q.offset + q.limit);
    mq.probe = q.probe && q.offset == 0;  // a deeper page's rows are not probed (docs/census.md)
    mq.console = false;
    mq.open.clear();
    mq.node.clear();
    run->parts.resize(ms.size());
    run->waiting = ms.size();
    for (std::size_t i = 0; i < ms.size(); ++i) {
      auto& m = ms[i];
      auto& member = run->parts[i].member;
      member.name = m.name;
      member.state = m.state;
      member.incarnation = m.incarnation;
      member.address = m.address;
      member.age = m.seq;
      member.leader = m.leader;
      member.heartbeat_age_ms = m.heartbeat_age_ms;
    }
    for (std::size_t i = 0; i < ms.size(); ++i) {
      auto& m = ms[i];
      if (is_me(m)) {
        pending_query pq;
        auto doc = census_json(mq, pq, "", true);
        if (!doc) {
          part_missing(run, i, "unreachable");
          continue;
        }
        pq.doc = std::move(*doc);
        start(std::move(pq), [this, run, i](json&& d) { part_done(run, i, std::move(d)); });
      } else if (m.state == "up" && m.census) {
        self->request(m.census, part_timeout, census_atom::value, part_atom::value, mq)
          .then(
            [this, run, i](std::string& body) {
              auto d = json::parse(body, nullptr, false);
              if (d.is_object())
                part_done(run, i, std::move(d));
              else
                part_missing(run, i, "unreachable");
            },
            [this, run, i](caf::error&) { part_missing(run, i, "unreachable"); });
      } else {
        part_missing(run, i, m.state == "up" ? "unreachable" : m.state);
      }
    }
  }

  void part_done(const merge_run_ptr& run, std::size_t i, json&& doc) {
    auto& part = run->parts[i];
    last_known[part.member.name] = known_member{registry::census_facts(doc), steady::now()};
    part.doc = std::move(doc);
    if (--run->waiting == 0)
      finish(run);
  }

  // A member that did not answer: shown with its state and its last known facts.
  void part_missing(const merge_run_ptr& run, std::size_t i, const std::string& state) {
    auto& part = run->parts[i];
    part.member.state = state;
    if (auto k = last_known.find(part.member.name); k != last_known.end()) {
      part.last_known = k->second.facts;
      part.last_known_age_seconds = std::chrono::duration<double>(steady::now() - k->second.at).count();
    }
    if (--run->waiting == 0)
      finish(run);
  }

  void finish(const merge_run_ptr& run) {
    auto& q = run->q;
    json base{{"node", node_json()},
              {"health", health_json()},
              {"scan", {{"done", scan_done}, {"frozen_found", scan_found}}},
              {"query", query_json(q)}};
    registry::census_window w;
    w.kind = q.kind;
    w.offset = q.offset;
    w.limit = q.limit;
    auto doc = registry::merge_census(std::move(base), run->parts, w);
    if (!q.console) {
      run->promise.deliver(dump(doc));
      return;
    }
    auto snapshot = std::make_shared<json>(
      json{{"census", std::move(doc)}, {"detail", nullptr}, {"log", log_json(console_log_lines)}});
    add_console_figures(*snapshot);
    if (q.open.empty()) {
      run->promise.deliver(dump(*snapshot));
      return;
    }
    find_detail(q.open, run->members, [run, snapshot](caf::expected<json> d) {
      if (d)
        (*snapshot)["detail"] = std::move(*d);
      run->promise.deliver(dump(*snapshot));
    });
  }

  // One actor in detail, wherever it lives: this member's census first, then
  // every other live member's (the first that knows it answers).
  void find_detail(const std::string& id, const std::vector<member_status>& ms,
                   std::function<void(caf::expected<json>)> done) {
    pending_query pq;
    auto local = detail_json(local_id(id), pq, "");
    if (local) {
      pq.doc = std::move(*local);
      auto me = ctx->node_name;
      return start(std::move(pq), [done, me](json&& d) { done(registry::tag_member_row(std::move(d), me)); });
    }
    struct detail_run {
      std::function<void(caf::expected<json>)> done;
      std::size_t waiting = 0;
      bool answered = false;
    };
    auto run = std::make_shared<detail_run>();
    run->done = std::move(done);
    auto unknown = local.error();
    for (auto& m : ms)
      if (!is_me(m) && m.state == "up" && m.census)
        ++run->waiting;
    if (run->waiting == 0)
      return run->done(unknown);
    for (auto& m : ms) {
      if (is_me(m) || m.state != "up" || !m.census)
        continue;
      auto name = m.name;
      self->request(m.census, part_timeout, census_atom::value, part_atom::value, id)
        .then(
          [run, name, unknown](std::string& body) {
            --run->waiting;
            auto d = json::parse(body, nullptr, false);
            if (!run->answered && d.is_object()) {
              run->answered = true;
              return run->done(registry::tag_member_row(std::move(d), name));
            }
            if (run->waiting == 0 && !run->answered)
              run->done(unknown);
          },
          [run, unknown](caf::error&) {
            if (--run->waiting == 0 && !run->answered)
              run->done(unknown);
          });
    }
  }

  // Another member asks for this member's part.
  caf::result<std::string> part(const census_query& q) {
    pending_query pq;
    auto doc = census_json(q, pq, "", true);
    if (!doc)
      return doc.error();
    pq.doc = std::move(*doc);
    return answer(std::move(pq));
  }

  caf::result<std::string> part_detail(const std::string& id) {
    pending_query pq;
    auto doc = detail_json(local_id(id), pq, "");
    if (!doc)
      return doc.error();
    pq.doc = std::move(*doc);
    return answer(std::move(pq));
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

census_actor::behavior_type census_impl(census_actor::stateful_pointer<census_state> self, node_context_ptr ctx,
                                         std::shared_ptr<orchestration_log> log) {
  auto& st = self->state;
  st.self = self;
  st.ctx = std::move(ctx);
  st.log = std::move(log);
  self->set_down_handler([=](caf::down_msg& dm) { self->state.on_down(dm); });
  // The census stops only with its node: any other end (an exception in a
  // handler) leaves the console without patches and the history without samples, so it is said.
  self->attach_functor([&sys = self->home_system()](const caf::error& reason) {
    if (reason && reason != caf::exit_reason::user_shutdown && reason != caf::exit_reason::kill)
      spdlog::error("census: stopped: {}", sys.render(reason));
  });
  self->state.sample_history();  // the baseline: the first rates come a second later
  self->delayed_send(self, std::chrono::seconds(1), history_atom::value);
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
    [=](agent_atom, caf::actor& agent) { self->state.agent = caf::actor_cast<cluster_view_handle>(agent); },
    [=](census_atom, part_atom, const census_query& q) { return self->state.part(q); },
    [=](census_atom, part_atom, const std::string& id) { return self->state.part_detail(id); },
    [=](tick_atom, std::uint64_t id) { self->state.on_timeout(id); },
    [=](history_atom) {
      self->state.sample_history();
      self->delayed_send(self, std::chrono::seconds(1), history_atom::value);
    },
  };
}

}  // namespace

census_handle spawn_census(caf::actor_system& sys, node_context_ptr ctx, std::shared_ptr<orchestration_log> log) {
  return sys.spawn(census_impl, std::move(ctx), std::move(log));
}

}  // namespace troupe
