#pragma once
/// \file
/// The node's recipe: every setting a troupe node runs with, composed as
/// defaults ⊕ recipe file (TOML) ⊕ profile ⊕ environment (`TROUPE_*`) ⊕
/// `--set KEY=VALUE` (config/profile.hpp reads a profile).
/// The key names are troupe's public contract (see docs/config.md).
/// Each section has a header of its own (config/<section>_settings.hpp); a
/// source that reads one section includes that header, not this one.

#include "config/channel_settings.hpp"
#include "config/cluster_settings.hpp"
#include "config/commander_settings.hpp"
#include "config/cors_settings.hpp"
#include "config/deposit_settings.hpp"
#include "config/duration.hpp"
#include "config/group_settings.hpp"
#include "config/limits_settings.hpp"
#include "config/log_settings.hpp"
#include "config/node_settings.hpp"
#include "config/orchestration_settings.hpp"
#include "config/static_settings.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace troupe::config {

/// A recipe that cannot be used: `key` names the offending setting
/// (dotted, e.g. "limits.max_body_bytes"), `what()` says the problem in one line.
class recipe_error : public std::runtime_error {
public:
  recipe_error(std::string key, const std::string& problem)
    : std::runtime_error(key.empty() ? problem : key + ": " + problem), key_(std::move(key)) {}
  /// As above, but `what()` starts with `label` instead of the key, for problems
  /// worth pointing at their source: ("limits.x", "--set limits.x", "expected KEY=VALUE")
  /// says "--set limits.x: expected KEY=VALUE" and key() is still "limits.x".
  recipe_error(std::string key, const std::string& label, const std::string& problem)
    : std::runtime_error(label.empty() ? problem : label + ": " + problem), key_(std::move(key)) {}
  /// The dotted key the problem is about (empty when it is about the file as a whole).
  const std::string& key() const noexcept { return key_; }

private:
  std::string key_;
};

/// The effective settings of one node.
struct recipe {
  node_settings node;
  limits_settings limits;
  deposit_settings deposit;
  commander_settings commander;
  cluster_settings cluster;
  channel_settings channel;
  log_settings log;
  orchestration_settings orchestration;
  std::vector<group_settings> groups{group_settings{}};  ///< never empty; "default" first if present
  std::vector<cors_settings> cors;                       ///< `[[cors]]` entries, in order; none: no cross-origin page
  std::vector<static_settings> statics;                  ///< `[[static]]` mounts; none: every path is the app's

  /// The group called `name`, or nullptr.
  const group_settings* group(const std::string& name) const;
  /// The group a newcomer is born in: commander.default_group, else the first.
  const group_settings& default_group() const;
};

/// Where the pieces of a recipe come from, lowest precedence first (the
/// profile, last here, comes between the file and the environment).
struct recipe_sources {
  std::string file;                                      ///< TOML recipe; empty: none
  std::vector<std::pair<std::string, std::string>> env;  ///< (NAME, VALUE) of TROUPE_* variables
  std::vector<std::string> sets;                         ///< "KEY=VALUE" from --set, in order
  /// The profile level (config/profile.hpp): (dotted key, value as text), in order.
  std::vector<std::pair<std::string, std::string>> profile;
  /// `file`'s text as read once (see read_recipe_file): set, the file is not read
  /// again, so a running node composes from the recipe it started with.
  std::optional<std::string> file_text;
};

/// Composes defaults ⊕ file ⊕ profile ⊕ env ⊕ sets and validates the result.
/// Throws recipe_error naming the first bad key (unknown key, wrong type,
/// out-of-range value, unparsable file).
recipe load_recipe(const recipe_sources& sources);

/// As load_recipe, but every problem is listed, in order (none: `out` is the
/// effective recipe). A file that cannot be read or parsed is one problem and
/// ends the composition there.
std::vector<recipe_error> compose_recipe(const recipe_sources& sources, recipe& out);

/// The text of the recipe file `path` (for recipe_sources::file_text); throws recipe_error.
std::string read_recipe_file(const std::string& path);

/// The TROUPE_* variables of this process's environment, for recipe_sources::env.
std::vector<std::pair<std::string, std::string>> troupe_environment();

/// Checks the settings' ranges and enumerations; throws recipe_error.
void validate(const recipe& r);

/// Every violation of the settings' ranges, enumerations and the rules between keys, in order.
std::vector<recipe_error> check_recipe(const recipe& r);

/// Splits "HOST:PORT" ("[::1]:80" for IPv6); throws recipe_error(key, ...).
/// The host comes back without brackets ("::1"), ready for an address parser or resolver.
std::pair<std::string, std::uint16_t> split_listen(const std::string& listen, const std::string& key = "node.listen");

}  // namespace troupe::config
