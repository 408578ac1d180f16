#pragma once
/// \file
/// The orchestrator: the one owner of the node's settings in force (docs/config.md
/// "Profiles"). It keeps the levels apart (config/settings_ledger.hpp), applies a
/// profile given inline or read again from orchestration.profiles_path — one
/// at a time, so concurrent applies get successive generations and the last one
/// is in force whole — hands the groups the keys applied while they run
/// (group_tuning), answers what is in force, and writes every attempt to the
/// orchestration log, refused ones with their violations.
///
/// In a cluster the orchestrator of the member that runs the commander (the
/// leader) owns the cluster's generation: a member relays an operator's apply,
/// reload and status to it; it composes the profile, stores the generation in
/// the deposit (orchestration_record_key, fenced by an owner epoch it takes
/// when it starts to lead), and publishes it to every member, which composes
/// it onto its own recipe and acknowledges. A member subscribes when it learns
/// the leader, so a member that joins later, and every member after a
/// takeover, receives the generation in force; a new leader continues from
/// the stored one (docs/config.md "Profiles in a cluster").

#include "actors/census.hpp"
#include "actors/deposit.hpp"
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

using subscribe_settings_atom = caf::atom_constant<caf::atom("osub")>;  ///< a member asks the leader for its generations
using publish_settings_atom = caf::atom_constant<caf::atom("opub")>;    ///< the leader gives a member a generation
using settings_leader_atom = caf::atom_constant<caf::atom("olead")>;    ///< the agent says who leads now

/// Where the leader keeps the generation in force (a platform key of the deposit).
inline const std::string orchestration_record_key = "%orchestration";

/// A generation of the cluster's settings as its leader publishes it: the
/// profile level that each member composes onto its own recipe.
struct settings_generation {
  std::uint64_t generation = 0;
  std::string source;  ///< boot | inline | profile
  std::string name;    ///< the stored profile's name, "" for none
  std::vector<std::string> keys, values;  ///< the profile level's entries
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_generation& x) {
  return f(caf::meta::type_name("troupe.settings_generation"), x.generation, x.source, x.name, x.keys, x.values);
}

/// A member's answer to a published generation.
struct settings_ack {
  std::string node;
  std::uint64_t generation = 0;  ///< the generation in force there now
  std::string outcome;           ///< applied | unchanged | rejected
  std::string digest;            ///< of its settings in force (its own recipe: digests differ between members)
  std::string detail;            ///< rejected: the violations
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_ack& x) {
  return f(caf::meta::type_name("troupe.settings_ack"), x.node, x.generation, x.outcome, x.digest, x.detail);
}

/// What the leader asks of a member's orchestrator.
using settings_member_handle =
  caf::typed_actor<caf::replies_to<publish_settings_atom, settings_generation>::with<settings_ack>>;

/// What a member asks of the leader's orchestrator: an operator's request,
/// relayed; and (node name, itself) to receive every generation from now on.
using settings_leader_handle =
  caf::typed_actor<caf::replies_to<orchestrate_atom, orchestration_request>::with<orchestration_answer>,
                   caf::reacts_to<subscribe_settings_atom, std::string, settings_member_handle>>;

/// The orchestrator's whole interface: the leader's and the member's sides,
/// and from the node's cluster agent (leader's node name, its orchestrator —
/// invalid while nobody leads —, whether it takes over from a leader that was).
using orchestrator_handle = settings_leader_handle::extend<
  caf::replies_to<publish_settings_atom, settings_generation>::with<settings_ack>,
  caf::reacts_to<settings_leader_atom, std::string, settings_leader_handle, bool>>;

/// Spawns the orchestrator of the node whose settings `ctx` holds, composed
/// from `sources` (its profile level the one in force at the start); it tunes
/// `groups`, logs to `census`, and (when it leads a cluster) keeps the
/// generation in `deposit`.
orchestrator_handle spawn_orchestrator(caf::actor_system& sys, node_context_ptr ctx, config::recipe_sources sources,
                                       std::vector<group_handle> groups, census_handle census,
                                       deposit_handle deposit);

}  // namespace troupe
