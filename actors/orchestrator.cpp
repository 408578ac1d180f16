#include "actors/orchestrator.hpp"

#include "config/group_settings.hpp"
#include "config/orchestration_settings.hpp"
#include "config/settings_ledger.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace troupe {

namespace {

using nlohmann::json;
using outcome = config::apply_result::outcome;

struct orchestrator_state {
  static inline const char* name = "troupe.orchestrator";
  node_context_ptr ctx;
  std::optional<config::settings_ledger> ledger;
  std::vector<group_handle> groups;
  census_handle census;
};

using orchestrator_pointer = orchestrator_handle::stateful_pointer<orchestrator_state>;

orchestration_answer answer_with(std::uint16_t status, const json& body) { return {status, body.dump()}; }

json violations_json(const std::vector<config::setting_violation>& v) {
  json out = json::array();
  for (auto& x : v)
    out.push_back({{"key", x.key}, {"value", x.value}, {"rule", x.rule}});
  return out;
}

void log_attempt(orchestrator_pointer self, const orchestration_request& q, const std::string& outcome_word, json numbers,
         const std::string& detail) {
  numbers["generation"] = self->state.ledger->generation();
  self->send(self->state.census, log_atom::value,
             orchestration_entry{q.who, q.from, q.what, "node", outcome_word, numbers.dump(), detail});
}

// Each group whose keys changed gets them, stamped with the generation (its
// workers tell every live user: nobody else is disturbed).
void tune_groups(orchestrator_pointer self, const std::vector<config::setting_change>& changed) {
  auto& ledger = *self->state.ledger;
  auto& recipe = ledger.in_force();  // its groups in the order they were spawned in (a restart-only list)
  for (std::size_t i = 0; i < self->state.groups.size() && i < recipe.groups.size(); ++i) {
    const auto& gs = recipe.groups[i];
    const auto prefix = "group." + gs.name + ".";
    if (std::none_of(changed.begin(), changed.end(), [&](auto& c) { return c.key.rfind(prefix, 0) == 0; }))
      continue;
    group_tuning t{ledger.generation(), gs.user_idle_freeze_minutes, gs.guest_idle_seconds};
    self->send(self->state.groups[i], tune_atom::value, t);
  }
}

// Composes `profile` as the profile level: 200 applied or unchanged, 400 refused.
orchestration_answer apply_level(orchestrator_pointer self, const orchestration_request& q, config::profile_entries profile,
                           const std::string& source, const std::string& name) {
  auto& ledger = *self->state.ledger;
  auto result = ledger.apply(std::move(profile), source, name);
  if (result.what == outcome::rejected) {
    std::string detail;
    for (auto& v : result.violations)
      detail += (detail.empty() ? "" : "; ") + v.key + ": " + v.rule;
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

orchestration_answer serve_request(orchestrator_pointer self, const orchestration_request& q) {
  auto& st = self->state;
  auto& ledger = *st.ledger;
  if (q.what == "status") {
    auto body = ledger.status();
    body["members"] = json::array({{{"node", st.ctx->node_name}, {"generation", ledger.generation()}, {"acknowledged", true}}});
    return answer_with(200, body);
  }
  if (q.what == "config")
    return answer_with(200, ledger.config());
  if (st.ctx->serving && !st.ctx->serving->may_serve())
    return answer_with(503, {{"error", "this node is not serving (not a member of a majority): nothing was applied"}});
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

orchestrator_handle::behavior_type orchestrator_impl(orchestrator_pointer self, node_context_ptr ctx,
                                                     config::recipe_sources sources, std::vector<group_handle> groups,
                                                     census_handle census) {
  auto& st = self->state;
  st.ledger.emplace(std::move(sources), ctx->recipe(), ctx->recipe().orchestration.profile_name);
  st.ctx = std::move(ctx);
  st.groups = std::move(groups);
  st.census = std::move(census);
  return {
    [=](orchestrate_atom, orchestration_request& q) { return serve_request(self, q); },
  };
}

}  // namespace

orchestrator_handle spawn_orchestrator(caf::actor_system& sys, node_context_ptr ctx, config::recipe_sources sources,
                                       std::vector<group_handle> groups, census_handle census) {
  return sys.spawn(orchestrator_impl, std::move(ctx), std::move(sources), std::move(groups), std::move(census));
}

}  // namespace troupe
