#include "actors/census.hpp"

#include "actors/census_book.hpp"
#include "actors/cluster_view.hpp"
#include "actors/errors.hpp"
#include "registry/census_model.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <functional>
#include <map>
#include <optional>

namespace troupe {

// The census's whole interface: its public one and the timers it sends itself
// (private: no other actor can send them).
using census_actor = census_handle::extend<
  /// The probes of query N are due.
  caf::reacts_to<tick_atom, std::uint64_t>,
  /// Samples the rate history (every second).
  caf::reacts_to<history_atom>>;

namespace {

using nlohmann::json;
using steady = std::chrono::steady_clock;
using pending_query = census_book::pending_query;
using done_fn = census_book::done_fn;
constexpr auto probe_timeout = std::chrono::milliseconds(250);
// Across a cluster: how long the agent, and each member's census, may take
// (a member's part waits for its probes: probe_timeout and some).
constexpr auto members_timeout = std::chrono::milliseconds(500);
constexpr auto part_timeout = std::chrono::milliseconds(1000);

// The glue: the book (actors/census_book.hpp) holds the register and writes
// the documents; the state sends the probes, arms their timeout and, on a
// cluster member, asks every other member's census for its part.
struct census_state {
  static const char* name;

  census_actor::stateful_pointer<census_state> self = nullptr;
  node_context_ptr ctx;
  std::optional<census_book> book;
  // Across a cluster: the agent (none for a lone node), and each member's
  // facts from its last answer (shown while it does not answer).
  cluster_view_handle agent;
  struct known_member {
    json facts;
    steady::time_point at;
  };
  std::map<std::string, known_member> last_known;

  void on_note(const census_note& note) {
    if (auto sender = self->current_sender(); sender && book->note(sender->id(), sender, note))
      self->monitor(sender);
  }

  // Sends the probes of `pq` (high priority: they overtake a backlog) and
  // answers when all are back or the timeout passes.
  void start(pending_query&& pq, done_fn done) {
    auto probes = book->start(std::move(pq), std::move(done));
    if (!probes)
      return;
    for (auto& [member, detail] : probes->members)
      self->send<caf::message_priority::high>(caf::actor_cast<probe_handle>(member), probe_atom::value,
                                              probes->query, detail);
    self->delayed_send(self, probe_timeout, tick_atom::value, probes->query);
  }

  // Starts `pq` and answers its document as the reply.
  caf::result<std::string> answer(pending_query&& pq) {
    auto promise = self->make_response_promise<std::string>();
    start(std::move(pq), [promise](json&& doc) mutable { promise.deliver(census_book::dump(doc)); });
    return promise;
  }

  // -- queries --------------------------------------------------------------------------

  caf::result<std::string> query(const census_query& q) {
    if (agent)
      return cluster_query(q);
    // A lone node: its census, and itself as the `nodes` level.
    if (!q.node.empty() && q.node != ctx->node_name)
      return make_error(errc::bad_request, "node: no member called " + q.node);
    pending_query pq;
    auto doc = book->census_json(q, pq, q.console ? "/census" : "");
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
    pq.doc = json{{"census", std::move(*doc)},
                  {"detail", nullptr},
                  {"log", book->log_json(census_book::console_log_lines)}};
    book->add_console_figures(pq.doc);
    if (!q.open.empty())
      if (auto d = book->detail_json(q.open, pq, "/detail"))
        pq.doc["detail"] = std::move(*d);
    return answer(std::move(pq));
  }

  caf::result<std::string> detail(const std::string& id) {
    if (!agent) {
      pending_query pq;
      auto doc = book->detail_json(id, pq, "");
      if (!doc)
        return doc.error();
      pq.doc = std::move(*doc);
      return answer(std::move(pq));
    }
    auto promise = self->make_response_promise<std::string>();
    auto deliver = [promise](caf::expected<json> d) mutable {
      if (d)
        promise.deliver(census_book::dump(*d));
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
    if (q.limit < 1 || q.limit > census_book::max_limit)
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
        auto doc = book->census_json(mq, pq, "", true);
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
    json base{{"node", book->node_json()},
              {"health", book->health_json()},
              {"settings", book->settings_json()},
              {"scan", book->scan_json()},
              {"query", census_book::query_json(q)}};
    registry::census_window w;
    w.kind = q.kind;
    w.offset = q.offset;
    w.limit = q.limit;
    auto doc = registry::merge_census(std::move(base), run->parts, w);
    if (!q.console) {
      run->promise.deliver(census_book::dump(doc));
      return;
    }
    auto snapshot = std::make_shared<json>(
      json{{"census", std::move(doc)}, {"detail", nullptr}, {"log", book->log_json(census_book::console_log_lines)}});
    book->add_console_figures(*snapshot);
    if (q.open.empty()) {
      run->promise.deliver(census_book::dump(*snapshot));
      return;
    }
    find_detail(q.open, run->members, [run, snapshot](caf::expected<json> d) {
      if (d)
        (*snapshot)["detail"] = std::move(*d);
      run->promise.deliver(census_book::dump(*snapshot));
    });
  }

  // One actor in detail, wherever it lives: this member's census first, then
  // every other live member's (the first that knows it answers).
  void find_detail(const std::string& id, const std::vector<member_status>& ms,
                   std::function<void(caf::expected<json>)> done) {
    pending_query pq;
    auto local = book->detail_json(local_id(id), pq, "");
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
    auto doc = book->census_json(q, pq, "", true);
    if (!doc)
      return doc.error();
    pq.doc = std::move(*doc);
    return answer(std::move(pq));
  }

  caf::result<std::string> part_detail(const std::string& id) {
    pending_query pq;
    auto doc = book->detail_json(local_id(id), pq, "");
    if (!doc)
      return doc.error();
    pq.doc = std::move(*doc);
    return answer(std::move(pq));
  }

};

const char* census_state::name = "troupe.census";

census_actor::behavior_type census_impl(census_actor::stateful_pointer<census_state> self, node_context_ptr ctx,
                                         std::shared_ptr<orchestration_log> log) {
  auto& st = self->state;
  st.self = self;
  st.ctx = ctx;
  st.book.emplace(std::move(ctx), std::move(log));
  self->set_down_handler([=](caf::down_msg& dm) { self->state.book->down(dm.source.id()); });
  // The census stops only with its node: any other end (an exception in a
  // handler) leaves the console without patches and the history without samples, so it is said.
  self->attach_functor([&sys = self->home_system()](const caf::error& reason) {
    if (reason && reason != caf::exit_reason::user_shutdown && reason != caf::exit_reason::kill)
      spdlog::error("census: stopped: {}", sys.render(reason));
  });
  st.book->sample_history();  // the baseline: the first rates come a second later
  self->delayed_send(self, std::chrono::seconds(1), history_atom::value);
  return {
    [=](note_atom, const census_note& note) { self->state.on_note(note); },
    [=](const actor_probe& p) {
      if (auto sender = self->current_sender())
        self->state.book->probe_answered(sender->id(), p);
    },
    [=](scan_atom, const std::vector<std::string>& names, bool last) { self->state.book->scanned(names, last); },
    [=](drop_atom, const std::string& user) { self->state.book->drop(user); },
    [=](census_atom, const census_query& q) { return self->state.query(q); },
    [=](census_atom, const std::string& id) { return self->state.detail(id); },
    [=](log_atom, const orchestration_entry& e) { self->state.book->record(e); },
    [=](tune_atom, std::uint64_t generation, std::string& source, std::string& profile) {
      self->state.book->settings_in_force(generation, std::move(source), std::move(profile));
    },
    [=](log_atom, std::uint32_t n) {
      return census_book::dump(json{{"lines", self->state.book->log_json(std::clamp<std::uint32_t>(n, 1, 1000))}});
    },
    [=](agent_atom, const cluster_view_handle& agent) { self->state.agent = agent; },
    [=](census_atom, part_atom, const census_query& q) { return self->state.part(q); },
    [=](census_atom, part_atom, const std::string& id) { return self->state.part_detail(id); },
    [=](tick_atom, std::uint64_t id) { self->state.book->probe_timeout(id); },
    [=](history_atom) {
      self->state.book->sample_history();
      self->delayed_send(self, std::chrono::seconds(1), history_atom::value);
    },
  };
}

}  // namespace

census_handle spawn_census(caf::actor_system& sys, node_context_ptr ctx, std::shared_ptr<orchestration_log> log) {
  return sys.spawn(census_impl, std::move(ctx), std::move(log));
}

}  // namespace troupe
