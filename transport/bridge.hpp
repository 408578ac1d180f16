#pragma once
/// \file
/// The bridge: the front's one actor. The asio side never blocks on an actor;
/// when it must ask the commander where a connection goes (a routing-cache
/// miss), or ask the census, or carry out an operator's order, it hands the
/// question to the bridge, which makes the request with a timeout and calls
/// the front back. Operator orders are written to the orchestration log here,
/// with how they ended.

#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/orchestrator.hpp"

namespace troupe {

/// The front's side of one pending resolve; exactly one of the two is called.
class resolve_slot {
public:
  virtual ~resolve_slot() = default;
  virtual void placed(placement&& where) = 0;
  virtual void failed(const caf::error& err) = 0;
};

/// Local-only continuation (front and bridge share a process).
using local_resolve = std::shared_ptr<resolve_slot>;

/// The front's side of one admin operation: answered exactly once with the HTTP reply.
class admin_slot {
public:
  virtual ~admin_slot() = default;
  virtual void done(http_response&& r) = 0;
};

using local_admin = std::shared_ptr<admin_slot>;

/// An operator's order from the admin surface (docs/census.md "Operator actions").
struct operator_order {
  std::string what;    ///< freeze | drop | drain
  std::string target;  ///< the user's or the worker's name
  std::string who;     ///< X-Troupe-Operator, or "admin"
  std::string from;    ///< the operator's address
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operator_order& x) {
  return f(caf::meta::type_name("troupe.operator_order"), x.what, x.target, x.who, x.from);
}

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::local_resolve)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::local_admin)

namespace troupe {

/// The bridge's typed interface.
using bridge_handle = caf::typed_actor<
  caf::reacts_to<resolve_atom, std::string, bool, local_resolve>,
  /// Whose is the connection (the commander's whois): for the front's guards.
  caf::reacts_to<whois_atom, std::string, local_resolve>,
  /// POST /_troupe/users/{user}/freeze|drop, POST /_troupe/workers/{worker}/drain.
  caf::reacts_to<order_atom, operator_order, local_admin>,
  /// GET /_troupe/global: the global store's keys, sizes and leases.
  caf::reacts_to<global_atom, local_admin>,
  /// GET /_troupe/census, and the console's snapshots.
  caf::reacts_to<census_atom, census_query, local_admin>,
  /// GET /_troupe/actors/{id}.
  caf::reacts_to<census_atom, std::string, local_admin>,
  /// GET /_troupe/orchestration/log?tail=N.
  caf::reacts_to<log_atom, std::uint32_t, local_admin>,
  /// /_troupe/orchestration/apply|reload|status and /_troupe/config (actors/orchestrator.hpp).
  caf::reacts_to<orchestrate_atom, orchestration_request, local_admin>>;

/// Spawns the bridge in front of `commander`, `global_store`, `census` and
/// `orchestrator` (a top-level actor: the node stops it).
bridge_handle spawn_bridge(caf::actor_system& sys, commander_handle commander, global_store_handle global_store,
                           census_handle census, orchestrator_handle orchestrator, caf::duration hold_timeout,
                           caf::duration request_timeout);

}  // namespace troupe
