#pragma once
/// \file
/// The orchestrator: the one owner of the node's settings in force (docs/config.md
/// "Profiles"). It keeps the levels apart (config/settings_ledger.hpp), applies a
/// profile given inline or read again from orchestration.profiles_path — one
/// at a time, so concurrent applies get successive generations and the last one
/// is in force whole — hands the groups the keys applied while they run
/// (group_tuning), answers what is in force, and writes every attempt to the
/// orchestration log, refused ones with their violations.

#include "actors/census.hpp"
#include "actors/group.hpp"
#include "actors/messages.hpp"
#include "actors/node_context.hpp"
#include "config/recipe.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

using orchestrate_atom = caf::atom_constant<caf::atom("orchestr")>;

/// What an operator asks of the orchestrator.
struct orchestration_request {
  std::string what;    ///< apply | reload | status | config
  std::string text;    ///< apply: the profile's text
  std::string format;  ///< apply: toml | json
  std::string name;    ///< reload: the stored profile ("": the active one)
  std::string who;     ///< the operator (X-Troupe-Operator, "admin", "SIGHUP")
  std::string from;    ///< the operator's address
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, orchestration_request& x) {
  return f(caf::meta::type_name("troupe.orchestration_request"), x.what, x.text, x.format, x.name, x.who, x.from);
}

/// The orchestrator's answer: an HTTP status and a JSON body.
struct orchestration_answer {
  std::uint16_t status = 200;
  std::string body;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, orchestration_answer& x) {
  return f(caf::meta::type_name("troupe.orchestration_answer"), x.status, x.body);
}

using orchestrator_handle =
  caf::typed_actor<caf::replies_to<orchestrate_atom, orchestration_request>::with<orchestration_answer>>;

/// Spawns the orchestrator of the node whose settings `ctx` holds, composed
/// from `sources` (its profile level the one in force at the start); it tunes
/// `groups` and logs to `census`.
orchestrator_handle spawn_orchestrator(caf::actor_system& sys, node_context_ptr ctx, config::recipe_sources sources,
                                       std::vector<group_handle> groups, census_handle census);

}  // namespace troupe
