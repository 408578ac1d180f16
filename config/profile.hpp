#pragma once
/// \file
/// Profiles: the level of the recipe between the file and the environment
/// (defaults ⊕ recipe ⊕ profile ⊕ environment ⊕ --set; docs/config.md
/// "Profiles"). A profile is written as a recipe is, in TOML, except that a
/// group's keys go in a `[group.NAME]` table; or as the same object in JSON.
/// A stored profile is the file `<orchestration.profiles_path>/<NAME>.toml`.
/// The levels are kept apart: a profile is a list of keys, composed again onto
/// the others every time, never merged into them.
///
/// And what the node shows of its settings: every key with its value (secrets
/// as "***") and the level it came from, and a digest of the whole.

#include "config/recipe.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace troupe::config {

/// A profile's keys: (dotted key, value as text), in the order written.
using profile_entries = std::vector<std::pair<std::string, std::string>>;

enum class profile_format { toml, json };

/// Reads a profile's text; throws recipe_error (its what() starts with
/// `label`, where it came from) on what is not one: not TOML or JSON, a value
/// that is not a string, number, boolean or array of strings, nesting deeper
/// than SECTION.KEY and group.NAME.KEY. Whether the keys exist is the
/// composition's business (compose_recipe lists every unknown one).
profile_entries parse_profile(const std::string& text, profile_format format, const std::string& label);

/// There is no stored profile by this name (answered 404 by the node's apply).
class profile_not_found : public recipe_error {
public:
  using recipe_error::recipe_error;
};

/// The stored profile `name` of the folder `folder`: throws profile_not_found
/// when the file is not there (or no folder is set), recipe_error when the name
/// is not a name (letters, digits, '-', '_', '.'; not starting with '.'), the
/// file cannot be read, or it is not a profile.
profile_entries read_profile(const std::string& folder, const std::string& name);

/// Every setting of `r` by its dotted key (SECTION.KEY, group.NAME.KEY,
/// cors[N].KEY, static[N].KEY), its value as JSON; secrets are "***" when `hide_secrets`.
nlohmann::json flatten(const recipe& r, bool hide_secrets);

/// A digest of a composition (SHA-256 of its flattened form, secrets included, hex):
/// equal settings, equal digest.
std::string settings_digest(const recipe& r);

/// The level every key of `sources`' composition came from: "default",
/// "recipe", "profile", "environment" or "set" (the highest level whose
/// composition changed it), with its value as flatten(…, true) shows it.
/// Throws recipe_error when the composition is invalid.
nlohmann::json settings_with_levels(const recipe_sources& sources);

}  // namespace troupe::config
