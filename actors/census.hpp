#pragma once
/// \file
/// The census: the node's register of every actor of its tree (explicit
/// membership: members send a census_note when they start and when their
/// state changes, and the census monitors them). It answers paged, filtered
/// queries from its model — totals always exact, frozen users included,
/// nobody woken — and asks the actors on the page for their live figures with
/// a high-priority probe. It also keeps the orchestration log. On a cluster
/// member (once told its agent) a query answers for every member: it asks each
/// live member's census for its part and merges them (registry::merge_census).
/// The JSON it answers is the public contract documented in docs/census.md.

#include "actors/fwd.hpp"
#include "actors/messages.hpp"
#include "actors/node_context.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <string>
#include <vector>

namespace troupe {

class orchestration_log;

/// A census query: GET /_troupe/census (its parameters, see docs/census.md),
/// or the console's snapshot of one view.
struct census_query {
  std::string kind = "user";   ///< user | worker | group
  std::string prefix;
  std::string worker;
  std::string state;           ///< active | unfreezing | departing | frozen | resting, "" for all
  std::uint64_t offset = 0;
  std::uint32_t limit = 100;   ///< 1..1000
  std::string after;           ///< cursor: the last name of the previous page
  bool probe = true;           ///< ask the listed actors for their live figures
  bool console = false;        ///< answer {"census", "detail", "log"} (the console's snapshot)
  std::string open;            ///< console: the id shown in its detail panel, "" for none
  std::string node;            ///< only this member of the cluster ("" for all)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, census_query& x) {
  return f(caf::meta::type_name("troupe.census_query"), x.kind, x.prefix, x.worker, x.state, x.offset, x.limit,
           x.after, x.probe, x.console, x.open, x.node);
}

/// One operator action as the orchestration log records it.
struct orchestration_entry {
  std::string who;       ///< the operator (X-Troupe-Operator, or "admin"), or "node"
  std::string from;      ///< the operator's address
  std::string what;      ///< freeze | drop | drain | start | quit
  std::string on;        ///< an id (user:alice, worker:default-w1, node)
  std::string outcome;   ///< ok | failed | refused
  std::string numbers;   ///< a JSON object, "" for none
  std::string detail;    ///< why it failed or was refused
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, orchestration_entry& x) {
  return f(caf::meta::type_name("troupe.orchestration_entry"), x.who, x.from, x.what, x.on, x.outcome, x.numbers,
           x.detail);
}

/// Tells the census its node's cluster agent; asks a member's census for its part.
using agent_atom = caf::atom_constant<caf::atom("agent")>;
using part_atom = caf::atom_constant<caf::atom("cpart")>;
/// Internal: once a second, the node's counters into its rate history.
using history_atom = caf::atom_constant<caf::atom("history")>;

/// The census's typed interface.
using census_handle = caf::typed_actor<
  /// A member says what it is now (the sender is monitored on first sight).
  caf::reacts_to<note_atom, census_note>,
  /// A member's answer to a probe.
  caf::reacts_to<actor_probe>,
  /// Users found frozen in the deposit at start (batches; true: the last one).
  caf::reacts_to<scan_atom, std::vector<std::string>, bool>,
  /// User `name` was dropped: forget him, frozen or not.
  caf::reacts_to<drop_atom, std::string>,
  /// The census as JSON (errc::bad_request naming a bad parameter).
  caf::replies_to<census_atom, census_query>::with<std::string>,
  /// One actor in detail as JSON, by id (errc::no_such_user when unknown).
  caf::replies_to<census_atom, std::string>::with<std::string>,
  /// Appends a line to the orchestration log (its numbers get the settings
  /// generation in force, unless they name one).
  caf::reacts_to<log_atom, orchestration_entry>,
  /// From the orchestrator: the settings in force from now on (generation,
  /// source, active profile): stamped on later log lines, shown by the console.
  caf::reacts_to<tune_atom, std::uint64_t, std::string, std::string>,
  /// The orchestration log's last N lines as {"lines": [...]}.
  caf::replies_to<log_atom, std::uint32_t>::with<std::string>,
  /// From its node once the cluster agent runs (the agent answers a
  /// cluster_view_handle, actors/cluster_view.hpp): from then on a query
  /// answers for every member (docs/census.md "Across a cluster").
  caf::reacts_to<agent_atom, cluster_view_handle>,
  /// Another member's census asks for this member's part of a query: its
  /// census document alone, whatever the cluster (limit up to
  /// registry::max_cluster_window; an unknown worker selects no row).
  caf::replies_to<census_atom, part_atom, census_query>::with<std::string>,
  /// Another member's census asks for an actor in detail, by id
  /// (errc::no_such_user when this member does not know it).
  caf::replies_to<census_atom, part_atom, std::string>::with<std::string>>;

/// Spawns the census (a top-level actor: the node stops it). It writes
/// operator actions to `log`.
census_handle spawn_census(caf::actor_system& sys, node_context_ptr ctx, std::shared_ptr<orchestration_log> log);

/// A member's answer to a probe: its mailbox, its meter, its restarts (the
/// clocks and the detail are the member's to add).
inline actor_probe probe_answer(std::uint64_t query, std::uint64_t mailbox, const actor_meter& meter,
                                std::uint32_t restarts) {
  actor_probe p;
  p.query = query;
  p.mailbox = mailbox;
  p.handled = meter.handled;
  p.service_ns = meter.service_ns;
  p.restarts = restarts;
  return p;
}

/// A connection id as the census shows it: its first 8 characters.
std::string connection_ref(const std::string& cid);

/// A user name as the census shows it (a guest's connection id shortened).
std::string shown_user_name(const std::string& user);

}  // namespace troupe
