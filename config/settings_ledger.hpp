#pragma once
/// \file
/// The composition of a node's settings in force, and how it changes while the
/// node runs (docs/config.md "Profiles"): the levels kept apart (the base —
/// recipe file, environment, --set — and the profile in force), the effective
/// recipe, its generation, source and digest. apply() composes a new profile
/// level onto the same base, refuses it whole when it does not compose or would
/// change a key that needs a restart (every violation listed), and otherwise
/// puts it in force as the next generation. The plain logic of the
/// orchestrator actor (actors/orchestrator.hpp), which serializes the applies.

#include "config/profile.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe::config {

/// Whether the dotted key (SECTION.KEY, group.NAME.KEY) is applied while the node runs.
bool hot_key(const std::string& key);

/// One reason an apply was refused: the key, the value it was given (null when unknown), the rule broken.
struct setting_violation {
  std::string key;
  nlohmann::json value;
  std::string rule;
};

/// One key an apply changed.
struct setting_change {
  std::string key;
  nlohmann::json from, to;
};

struct apply_result {
  enum class outcome : std::uint8_t {
    applied,    ///< a new generation is in force
    unchanged,  ///< it composes to the settings in force: nothing changed, not even the generation
    rejected,   ///< nothing changed: see violations
  };
  outcome what = outcome::rejected;
  std::vector<setting_violation> violations;
  std::vector<setting_change> changed;  ///< in key order (applied only)
};

/// A generation of the settings as the cluster's leader keeps it (in the
/// deposit, under orchestration_record_key) and publishes it to every member:
/// the profile level each member composes onto its own base.
struct settings_record {
  std::uint64_t generation = 1;
  std::string source = "boot";  ///< boot | inline | profile
  std::string name;             ///< the stored profile's name, "" for none
  profile_entries entries;      ///< the profile level
};

/// The record as the deposit keeps it (JSON text).
std::string encode_record(const settings_record& r);
/// Reads encode_record's text; throws recipe_error when it is not one.
settings_record decode_record(const std::string& text);

class settings_ledger {
public:
  /// At the start: `base` composed `in_force` (its profile level is the one named
  /// `active_profile`, "" for none); that is generation 1, source "boot".
  settings_ledger(recipe_sources base, recipe in_force, std::string active_profile);

  /// Composes `profile` onto the base in place of the profile level in force.
  /// `source`: "inline" or "profile"; `name`: the stored profile's name (for
  /// "inline": none, the active profile becomes none when it applies).
  apply_result apply(profile_entries profile, const std::string& source, const std::string& name);

  /// Puts the leader's `record` in force as its generation (a cluster
  /// member): like apply, except that the generation, source and profile
  /// become the record's even when the settings do not change (outcome
  /// unchanged), so that the member acknowledges the leader's generation.
  apply_result adopt(const settings_record& record);

  /// What is in force, as a record (what the leader stores and publishes).
  settings_record record() const;

  const recipe& in_force() const noexcept { return *in_force_; }
  /// The recipe in force, shared (readers keep the generation they took whole).
  std::shared_ptr<const recipe> shared() const noexcept { return in_force_; }
  std::uint64_t generation() const noexcept { return generation_; }
  const std::string& source() const noexcept { return source_; }
  const std::string& active_profile() const noexcept { return active_profile_; }
  const std::string& digest() const noexcept { return digest_; }
  const recipe_sources& sources() const noexcept { return sources_; }

  /// {generation, source, active_profile (null: none), digest}.
  nlohmann::json summary() const;
  /// summary() + effective_settings (secrets hidden).
  nlohmann::json status() const;
  /// summary() + settings: every key's {value, level} (secrets hidden).
  nlohmann::json config() const;

private:
  // Composes `profile` onto the base; puts it in force unless refused, as
  // generation `generation` (none: the next one, and only when something changed).
  apply_result put_in_force(profile_entries profile, const std::string& source, const std::string& name,
                            std::optional<std::uint64_t> generation);

  recipe_sources sources_;  // the profile level in force is sources_.profile
  std::shared_ptr<const recipe> in_force_;
  std::uint64_t generation_ = 1;
  std::string source_ = "boot";
  std::string active_profile_;
  std::string digest_;
};

}  // namespace troupe::config
