#include "config/settings_ledger.hpp"

#include "config/recipe_fields.hpp"

namespace troupe::config {

using namespace detail;

namespace {

template <class S>
bool hot_in(const std::vector<field<S>>& fields, const std::string& name) {
  auto* f = find_field(fields, name);
  return f && f->hot;
}

// "profile limits.x: must be …" or "limits.x: must be …" → "must be …".
std::string rule_of(const recipe_error& e) {
  std::string what = e.what();
  auto at = e.key().empty() ? std::string::npos : what.find(e.key() + ": ");
  return at == std::string::npos ? what : what.substr(at + e.key().size() + 2);
}

}  // namespace

bool hot_key(const std::string& key) {
  auto dot = key.find('.');
  if (dot == std::string::npos)
    return false;
  auto section = key.substr(0, dot);
  auto name = key.substr(dot + 1);
  if (section == "group") {
    auto second = name.find('.');
    return second != std::string::npos && hot_in(group_fields(), name.substr(second + 1));
  }
  if (section == "node") return hot_in(node_fields(), name);
  if (section == "limits") return hot_in(limits_fields(), name);
  if (section == "deposit") return hot_in(deposit_fields(), name);
  if (section == "commander") return hot_in(commander_fields(), name);
  if (section == "cluster") return hot_in(cluster_fields(), name);
  if (section == "channel") return hot_in(channel_fields(), name);
  if (section == "log") return hot_in(log_fields(), name);
  return false;
}

settings_ledger::settings_ledger(recipe_sources base, recipe in_force, std::string active_profile)
  : sources_(std::move(base)), in_force_(std::make_shared<const recipe>(std::move(in_force))),
    active_profile_(std::move(active_profile)), digest_(settings_digest(*in_force_)) {}

std::string encode_record(const settings_record& r) {
  nlohmann::json entries = nlohmann::json::array();
  for (auto& [k, v] : r.entries)
    entries.push_back({k, v});
  return nlohmann::json{{"generation", r.generation}, {"source", r.source}, {"name", r.name}, {"entries", entries}}
    .dump();
}

settings_record decode_record(const std::string& text) {
  settings_record r;
  try {
    auto j = nlohmann::json::parse(text);
    r.generation = j.at("generation").get<std::uint64_t>();
    r.source = j.at("source").get<std::string>();
    r.name = j.at("name").get<std::string>();
    for (auto& e : j.at("entries"))
      r.entries.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw recipe_error("", "the stored settings record is not one: " + std::string(e.what()));
  }
  if (r.generation == 0)
    throw recipe_error("", "the stored settings record has generation 0");
  return r;
}

apply_result settings_ledger::apply(profile_entries profile, const std::string& source, const std::string& name) {
  return put_in_force(std::move(profile), source, name, std::nullopt);
}

apply_result settings_ledger::adopt(const settings_record& record) {
  return put_in_force(record.entries, record.source, record.name, record.generation);
}

settings_record settings_ledger::record() const {
  return {generation_, source_, active_profile_, sources_.profile};
}

apply_result settings_ledger::put_in_force(profile_entries profile, const std::string& source, const std::string& name,
                                           std::optional<std::uint64_t> generation) {
  apply_result out;
  auto attempt = sources_;
  attempt.profile = std::move(profile);
  recipe composed;
  auto problems = compose_recipe(attempt, composed);
  if (!problems.empty()) {
    for (auto& p : problems) {
      nlohmann::json value;  // the profile's own text for its keys; unknown otherwise
      for (auto& [k, v] : attempt.profile)
        if (k == p.key())
          value = v;
      out.violations.push_back({p.key(), std::move(value), rule_of(p)});
    }
    return out;
  }
  auto before = flatten(*in_force_, false);
  auto after = flatten(composed, false);
  auto shown_before = flatten(*in_force_, true);
  auto shown_after = flatten(composed, true);
  for (auto& [key, value] : after.items()) {
    auto was = before.find(key);
    if (was != before.end() && *was == value)
      continue;
    if (!hot_key(key)) {
      out.violations.push_back({key, shown_after[key], "needs a restart"});
      continue;
    }
    out.changed.push_back({key, was == before.end() ? nlohmann::json() : shown_before[key], shown_after[key]});
  }
  for (auto& [key, value] : before.items())  // a key gone: a group or mount that only the old composition had
    if (!after.contains(key))
      out.violations.push_back({key, nullptr, "needs a restart"});
  if (!out.violations.empty()) {
    out.changed.clear();
    return out;
  }
  const bool unchanged = out.changed.empty();
  if (unchanged && !generation) {
    out.what = apply_result::outcome::unchanged;
    return out;
  }
  sources_ = std::move(attempt);
  if (!unchanged)
    in_force_ = std::make_shared<const recipe>(std::move(composed));
  generation_ = generation ? *generation : generation_ + 1;
  source_ = source;
  active_profile_ = source == "inline" ? std::string{} : name;
  digest_ = settings_digest(*in_force_);
  out.what = unchanged ? apply_result::outcome::unchanged : apply_result::outcome::applied;
  return out;
}

nlohmann::json settings_ledger::summary() const {
  return {{"generation", generation_},
          {"source", source_},
          {"active_profile", active_profile_.empty() ? nlohmann::json() : nlohmann::json(active_profile_)},
          {"digest", digest_}};
}

nlohmann::json settings_ledger::status() const {
  auto out = summary();
  out["effective_settings"] = flatten(*in_force_, true);
  return out;
}

nlohmann::json settings_ledger::config() const {
  auto out = summary();
  out["settings"] = settings_with_levels(sources_);
  return out;
}

}  // namespace troupe::config
