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

class settings_ledger {
public:
  /// At the start: `base` composed `in_force` (its profile level is the one named
  /// `active_profile`, "" for none); that is generation 1, source "boot".
  settings_ledger(recipe_sources base, recipe in_force, std::string active_profile);

  /// Composes `profile` onto the base in place of the profile level in force.
  /// `source`: "inline" or "profile"; `name`: the stored profile's name (for
  /// "inline": none, the active profile becomes none when it applies).
  apply_result apply(profile_entries profile, const std::string& source, const std::string& name);

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
  recipe_sources sources_;  // the profile level in force is sources_.profile
  std::shared_ptr<const recipe> in_force_;
  std::uint64_t generation_ = 1;
  std::string source_ = "boot";
  std::string active_profile_;
  std::string digest_;
};

}  // namespace troupe::config
