#include "actors/orchestrator.hpp"

#include "config/group_settings.hpp"
#include "config/orchestration_settings.hpp"
#include "config/settings_ledger.hpp"
#include "actors/errors.hpp"
#include "actors/rate_limited_log.hpp"
#include "actors/settings_roll_call.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <utility>
#include <optional>

namespace troupe {

namespace {

using nlohmann::json;
using outcome = config::apply_result::outcome;

// The orchestrator's interface and its own timer (private: nobody else sends it).
using orchestrator_actor = orchestrator_handle::extend<caf::reacts_to<tick_atom>>;

// How long a member waits for the leader, and the leader for a member or the deposit.
constexpr auto cluster_timeout = std::chrono::seconds(10);
// How soon a leader tries the deposit again after a failed read or write.
constexpr auto deposit_retry = std::chrono::seconds(1);

struct orchestrator_state {
  static inline const char* name = "troupe.orchestrator";
  node_context_ptr ctx;
  std::optional<config::settings_ledger> ledger;
  std::vector<group_handle> groups;
  census_handle census;
  deposit_handle deposit;

  // -- in a cluster ----------------------------------------------------------------
  settings_leader_handle leader;  // the leader's orchestrator (this one when leading); invalid: none
  std::string leader_name;
  bool leading = false;
  bool ready = false;             // leading: the stored generation was read; publishes and applies now
  bool takeover = false;          // leading: from a leader that was (the stored generation is continued)
  std::uint64_t epoch = 0;        // leading: the owner epoch of its record's writes (0: not taken yet)
  bool storing = false, store_again = false, stored = false;
  std::map<std::string, settings_member_handle> subscribers;
  settings_roll_call roll_call;
  rate_limited_log deposit_log{spdlog::level::err, std::chrono::seconds(10)};
};

using orchestrator_pointer = orchestrator_actor::stateful_pointer<orchestrator_state>;

orchestration_answer answer_with(std::uint16_t status, const json& body) { return {status, body.dump()}; }

json violations_json(const std::vector<config::setting_violation>& v) {
  json out = json::array();
  for (auto& x : v)
    out.push_back({{"key", x.key}, {"value", x.value}, {"rule", x.rule}});
  return out;
}

std::string violations_text(const std::vector<config::setting_violation>& v) {
  std::string detail;
  for (auto& x : v)
    detail += (detail.empty() ? "" : "; ") + x.key + ": " + x.rule;
  return detail;
}

// Every line of the orchestration log carries the generation in force: the census stamps it.
void tell_generation(orchestrator_pointer self) {
  auto& ledger = *self->state.ledger;
  self->send(self->state.census, tune_atom::value, ledger.generation(), ledger.source(), ledger.active_profile());
}

void log_attempt(orchestrator_pointer self, const orchestration_request& q, const std::string& outcome_word, json numbers,
         const std::string& detail) {
  tell_generation(self);
  numbers["generation"] = self->state.ledger->generation();
  self->send(self->state.census, log_atom::value,
             orchestration_entry{q.who, q.from, q.what, "node", outcome_word, numbers.dump(), detail});
}

// Each group whose keys changed gets them, stamped with the generation (its
// workers tell every live user: nobody else is disturbed).
void tune_groups(orchestrator_pointer self, const std::vector<config::setting_change>& changed) {
  auto& ledger = *self->state.ledger;
  if (!changed.empty())  // the node's own readers of hot keys (the commander's retirement beat)
    self->state.ctx->put_in_force(ledger.shared());
  auto& recipe = ledger.in_force();  // its groups in the order they were spawned in (a restart-only list)
  for (std::size_t i = 0; i < self->state.groups.size() && i < recipe.groups.size(); ++i) {
    const auto& gs = recipe.groups[i];
    const auto prefix = "group." + gs.name + ".";
    if (std::none_of(changed.begin(), changed.end(), [&](auto& c) { return c.key.rfind(prefix, 0) == 0; }))
      continue;
    group_tuning t{ledger.generation(), gs.user_idle_freeze_minutes, gs.guest_idle_seconds, gs.worker_max_users};
    self->send(self->state.groups[i], tune_atom::value, t);
  }
}

// -- the leader: the stored generation, published to every member ------------------

settings_generation published(const config::settings_record& r) {
  settings_generation g{r.generation, r.source, r.name, {}, {}};
  for (auto& [k, v] : r.entries) {
    g.keys.push_back(k);
    g.values.push_back(v);
  }
  return g;
}

void publish_to(orchestrator_pointer self, const std::string& node) {
  auto& st = self->state;
  auto h = st.subscribers.find(node);
  if (h == st.subscribers.end() || !st.ready)
    return;
  self->request(h->second, cluster_timeout, publish_settings_atom::value, published(st.ledger->record()))
    .then([self, node](settings_ack& a) { self->state.roll_call.answered(node, a.generation, a.outcome, a.detail); },
          [self, node](caf::error& err) { self->state.roll_call.unanswered(node, self->system().render(err)); });
}

void publish_all(orchestrator_pointer self) {
  for (auto& [node, h] : self->state.subscribers)
    publish_to(self, node);
}

// Writes the generation in force under the leader's epoch: a leader that was
// (an older epoch) can no longer overwrite it. One write at a time; a failed
// one is tried again (a refused one, stale_owner, means another leads now).
void store_record(orchestrator_pointer self) {
  auto& st = self->state;
  if (!st.leading || !st.ready)
    return;
  if (st.storing) {
    st.store_again = true;
    return;
  }
  st.storing = true;
  st.stored = false;
  store::parcel p;
  p.writer_node = st.ctx->node_name;
  p.writer_worker = "orchestrator";
  p.cause = store::parcel_cause::checkpoint;
  p.owner_epoch = st.epoch;
  auto text = config::encode_record(st.ledger->record());
  p.payload.assign(text.begin(), text.end());
  self->request(st.deposit, cluster_timeout, put_atom::value, parcel_kind::user, orchestration_record_key, std::move(p))
    .then(
      [self](std::uint64_t) {
        auto& st = self->state;
        st.storing = false;
        st.stored = true;
        if (std::exchange(st.store_again, false))
          store_record(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.storing = false;
        st.store_again = false;
        if (is(err, errc::stale_owner)) {
          spdlog::warn("orchestration: the deposit holds a newer leader's generation: this node no longer writes it");
          return;
        }
        st.deposit_log("orchestration: generation {} could not be stored (tried again): {}", st.ledger->generation(),
                       self->system().render(err));
        self->delayed_send(self, deposit_retry, tick_atom::value);
      });
}

// Takes over the stored generation when it is newer than the one in force here.
void continue_from(orchestrator_pointer self, const std::vector<store::parcel>& found) {
  auto& st = self->state;
  if (found.empty() || !st.takeover)
    return;
  config::settings_record r;
  try {
    r = config::decode_record(std::string(found.front().payload.begin(), found.front().payload.end()));
  } catch (const config::recipe_error& e) {
    spdlog::error("orchestration: {}: generation {} stays in force", e.what(), st.ledger->generation());
    return;
  }
  if (r.generation <= st.ledger->generation())
    return;
  auto result = st.ledger->adopt(r);
  if (result.what == outcome::rejected) {
    spdlog::error("orchestration: the stored generation {} does not compose here ({}): generation {} stays in force",
                  r.generation, violations_text(result.violations), st.ledger->generation());
    return;
  }
  tune_groups(self, result.changed);
  tell_generation(self);
  spdlog::info("orchestration: generation {} (stored by the last leader) in force", r.generation);
}

// Starts to lead: an owner epoch for the record's writes, then (a takeover)
// the stored generation; then stores and publishes what is in force. A
// deposit that fails is tried again every second.
void begin_leading(orchestrator_pointer self) {
  auto& st = self->state;
  if (!st.leading || st.ready)
    return;
  auto retry = [self](caf::error& err) {
    self->state.deposit_log("orchestration: the deposit did not answer the new leader (tried again): {}",
                            self->system().render(err));
    self->delayed_send(self, deposit_retry, tick_atom::value);
  };
  auto read_record = [self, retry] {
    self->request(self->state.deposit, cluster_timeout, get_atom::value, parcel_kind::user, orchestration_record_key)
      .then(
        [self](std::vector<store::parcel>& found) {
          auto& st = self->state;
          if (!st.leading)
            return;
          continue_from(self, found);
          st.ready = true;
          store_record(self);
          publish_all(self);
        },
        retry);
  };
  if (st.epoch != 0)
    return read_record();
  self->request(st.deposit, cluster_timeout, generation_atom::value)
    .then(
      [self, read_record](std::uint64_t epoch) {
        self->state.epoch = epoch;
        read_record();
      },
      retry);
}

// From the agent: who leads now.
void on_leader(orchestrator_pointer self, const std::string& name, settings_leader_handle leader, bool takeover) {
  auto& st = self->state;
  const bool here = leader && leader.address() == self->address();
  if (here && st.leading)
    return;
  st.leading = here;
  st.ready = false;
  st.epoch = 0;
  st.subscribers.clear();
  st.roll_call.clear();
  st.leader = leader;
  st.leader_name = leader ? name : std::string{};
  if (here) {
    st.takeover = takeover;
    spdlog::info("orchestration: this node leads the cluster's settings ({})",
                 takeover ? "continuing the stored generation" : "its own generation");
    begin_leading(self);
  } else if (leader) {
    settings_member_handle member = self;
    self->send(leader, subscribe_settings_atom::value, st.ctx->node_name, member);
  }
}

// A member is given the leader's generation: composes it onto its own recipe.
settings_ack adopt_published(orchestrator_pointer self, const settings_generation& g) {
  auto& st = self->state;
  auto& ledger = *st.ledger;
  orchestration_request q{"publish", "", "", g.name, "leader " + st.leader_name, st.leader_name};
  if (!st.leader || self->current_sender() != st.leader.address()) {
    log_attempt(self, q, "refused", {{"offered", g.generation}}, "not from the leader this node knows");
    return {st.ctx->node_name, ledger.generation(), "rejected", ledger.digest(), "not from this member's leader"};
  }
  config::settings_record r{g.generation, g.source, g.name, {}};
  for (std::size_t i = 0; i < g.keys.size() && i < g.values.size(); ++i)
    r.entries.emplace_back(g.keys[i], g.values[i]);
  auto result = ledger.adopt(r);
  if (result.what == outcome::rejected) {
    auto detail = violations_text(result.violations);
    log_attempt(self, q, "refused", {{"offered", g.generation}}, detail);
    spdlog::error("orchestration: generation {} from {} does not compose here: {}", g.generation, st.leader_name, detail);
    return {st.ctx->node_name, ledger.generation(), "rejected", ledger.digest(), detail};
  }
  tune_groups(self, result.changed);
  json keys = json::array();
  for (auto& c : result.changed)
    keys.push_back(c.key);
  const bool applied = result.what == outcome::applied;
  log_attempt(self, q, applied ? "ok" : "unchanged", {{"source", g.source}, {"changed", keys}}, "");
  return {st.ctx->node_name, ledger.generation(), applied ? "applied" : "unchanged", ledger.digest(), ""};
}

// -- an operator's requests -------------------------------------------------------

// Composes `profile` as the profile level: 200 applied or unchanged, 400 refused.
orchestration_answer apply_level(orchestrator_pointer self, const orchestration_request& q, config::profile_entries profile,
                           const std::string& source, const std::string& name) {
  auto& ledger = *self->state.ledger;
  auto result = ledger.apply(std::move(profile), source, name);
  if (result.what == outcome::rejected) {
    auto detail = violations_text(result.violations);
    log_attempt(self, q, "refused", {{"source", source}, {"violations", result.violations.size()}}, detail);
    spdlog::warn("orchestration: {} of {} refused: {}", q.what, source == "inline" ? "an inline profile" : name, detail);
    return answer_with(400, {{"outcome", "rejected"}, {"error", "the profile was not applied; nothing changed"},
                        {"violations", violations_json(result.violations)}});
  }
  json changed = json::array();
  for (auto& c : result.changed)
    changed.push_back({{"key", c.key}, {"from", c.from}, {"to", c.to}});
  if (result.what == outcome::applied) {
    tune_groups(self, result.changed);
    spdlog::info("orchestration: generation {} in force ({}{}): {} setting(s) changed", ledger.generation(), source,
                 name.empty() ? "" : " " + name, result.changed.size());
    store_record(self);  // leading a cluster: stored, then every member gets it
    publish_all(self);
  }
  auto word = result.what == outcome::applied ? "applied" : "unchanged";
  json keys = json::array();
  for (auto& c : result.changed)
    keys.push_back(c.key);
  log_attempt(self, q, word == std::string("applied") ? "ok" : "unchanged", {{"source", source}, {"changed", keys}}, "");
  auto body = ledger.status();
  body["outcome"] = word;
  body["changed_settings"] = std::move(changed);
  return answer_with(200, body);
}

json status_of(orchestrator_pointer self) {
  auto& st = self->state;
  auto body = st.ledger->status();
  if (st.leading) {
    body["leader"] = st.ctx->node_name;
    body["stored"] = st.stored;
    body["members"] = st.roll_call.members(st.ctx->node_name, st.ledger->generation());
  } else {
    body["leader"] = st.leader_name.empty() ? json() : json(st.leader_name);
    body["members"] = json::array({{{"node", st.ctx->node_name}, {"generation", st.ledger->generation()},
                                    {"acknowledged", true}, {"outcome", st.leader ? "member" : "alone"}}});
  }
  return body;
}

orchestration_answer serve_here(orchestrator_pointer self, const orchestration_request& q) {
  auto& ledger = *self->state.ledger;
  if (q.what == "apply") {
    config::profile_entries profile;
    try {
      profile = config::parse_profile(q.text, q.format == "json" ? config::profile_format::json
                                                                 : config::profile_format::toml,
                                      "the profile");
    } catch (const config::recipe_error& e) {
      log_attempt(self, q, "refused", {{"source", "inline"}}, e.what());
      return answer_with(400, {{"outcome", "rejected"}, {"error", e.what()},
                          {"violations", json::array({{{"key", e.key()}, {"value", nullptr}, {"rule", e.what()}}})}});
    }
    return apply_level(self, q, std::move(profile), "inline", "");
  }
  if (q.what == "reload") {
    auto name = q.name.empty() ? ledger.active_profile() : q.name;
    if (name.empty()) {
      log_attempt(self, q, "refused", json::object(), "no name was given and no profile is active");
      return answer_with(400, {{"error", "nothing to reload: no name was given and no profile is active"}});
    }
    config::profile_entries profile;
    try {
      const auto& o = ledger.in_force().orchestration;
      profile = config::read_profile(o.profiles_path, name);
    } catch (const config::profile_not_found& e) {
      log_attempt(self, q, "refused", {{"profile", name}}, e.what());
      return answer_with(404, {{"error", e.what()}});
    } catch (const config::recipe_error& e) {
      log_attempt(self, q, "refused", {{"profile", name}}, e.what());
      return answer_with(400, {{"outcome", "rejected"}, {"error", e.what()},
                          {"violations", json::array({{{"key", e.key()}, {"value", nullptr}, {"rule", e.what()}}})}});
    }
    return apply_level(self, q, std::move(profile), "profile", name);
  }
  return answer_with(400, {{"error", "unknown orchestration request " + q.what}});
}

// Status, config and (when this node may serve) the changes: here, on one
// node or on the cluster's leader; relayed to the leader by a member.
caf::result<orchestration_answer> serve_request(orchestrator_pointer self, const orchestration_request& q) {
  auto& st = self->state;
  if (q.what == "config")
    return answer_with(200, st.ledger->config());
  const bool change = q.what != "status";
  if (change && st.ctx->serving && !st.ctx->serving->may_serve())
    return answer_with(503, {{"error", "this node is not serving (not a member of a majority): nothing was applied"}});
  if (st.leader && !st.leading) {
    auto promise = self->make_response_promise<orchestration_answer>();
    self->request(st.leader, cluster_timeout, orchestrate_atom::value, q)
      .then([promise](orchestration_answer& a) mutable { promise.deliver(std::move(a)); },
            [self, promise, q, change](caf::error& err) mutable {
              if (!change) {  // what this member knows, rather than nothing
                promise.deliver(answer_with(200, status_of(self)));
                return;
              }
              log_attempt(self, q, "failed", json::object(), "the leader did not answer: " + self->system().render(err));
              promise.deliver(answer_with(503, {{"error", "the cluster's leader did not answer (" +
                                                          self->system().render(err) + "): outcome unknown"}}));
            });
    return promise;
  }
  if (q.what == "status")
    return answer_with(200, status_of(self));
  if (st.ctx->recipe().cluster.enabled() && !(st.leading && st.ready))
    return answer_with(503, {{"error", st.leading ? "this node has just become the cluster's leader and is reading "
                                                    "the generation in force: nothing was applied, try again"
                                                  : "the cluster has no leader right now (a takeover): nothing was "
                                                    "applied, try again"}});
  return serve_here(self, q);
}

orchestrator_actor::behavior_type orchestrator_impl(orchestrator_pointer self, node_context_ptr ctx,
                                                    config::recipe_sources sources, std::vector<group_handle> groups,
                                                    census_handle census, deposit_handle deposit) {
  auto& st = self->state;
  st.ledger.emplace(std::move(sources), ctx->recipe(), ctx->recipe().orchestration.profile_name);
  st.ctx = std::move(ctx);
  st.groups = std::move(groups);
  st.census = std::move(census);
  st.deposit = std::move(deposit);
  tell_generation(self);  // the console shows the profile the node started with
  self->set_down_handler([self](caf::down_msg& m) {
    auto& st = self->state;
    for (auto i = st.subscribers.begin(); i != st.subscribers.end(); ++i)
      if (i->second.address() == m.source) {
        st.roll_call.leave(i->first);
        st.subscribers.erase(i);
        return;
      }
  });
  return {
    [=](orchestrate_atom, orchestration_request& q) { return serve_request(self, q); },
    [=](subscribe_settings_atom, std::string& node, settings_member_handle& member) {
      auto& st = self->state;
      if (!st.leading || !member)
        return;  // it will subscribe to the one that leads
      self->monitor(member);
      st.subscribers[node] = member;
      st.roll_call.join(node);
      publish_to(self, node);
    },
    [=](publish_settings_atom, settings_generation& g) { return adopt_published(self, g); },
    [=](settings_leader_atom, std::string& name, settings_leader_handle& leader, bool takeover) {
      on_leader(self, name, std::move(leader), takeover);
    },
    [=](tick_atom) {
      auto& st = self->state;
      if (st.leading && !st.ready)
        begin_leading(self);
      else if (st.leading && !st.stored)
        store_record(self);
    },
  };
}

}  // namespace

orchestrator_handle spawn_orchestrator(caf::actor_system& sys, node_context_ptr ctx, config::recipe_sources sources,
                                       std::vector<group_handle> groups, census_handle census,
                                       deposit_handle deposit) {
  return sys.spawn(orchestrator_impl, std::move(ctx), std::move(sources), std::move(groups), std::move(census),
                   std::move(deposit));
}

}  // namespace troupe
