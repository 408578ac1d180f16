#pragma once
/// \file
/// The bridge: the front's one actor. The asio side never blocks on an actor;
/// when it must ask the commander where a connection goes (a routing-cache
/// miss), it hands the question to the bridge, which makes the request with the
/// hold budget as its timeout and calls the front back.

#include "actors/commander.hpp"

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

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::local_resolve)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::local_admin)

namespace troupe {

/// The bridge's typed interface.
using bridge_handle = caf::typed_actor<
  caf::reacts_to<resolve_atom, std::string, bool, local_resolve>,
  /// POST /_troupe/users/{user}/freeze: {"frozen": user} once durable; 404 when not hosted.
  caf::reacts_to<freeze_atom, std::string, local_admin>,
  /// GET /_troupe/global: the global store's keys, sizes and leases.
  caf::reacts_to<global_atom, local_admin>>;

/// Spawns the bridge in front of `commander` (a top-level actor: the node stops it).
bridge_handle spawn_bridge(caf::actor_system& sys, commander_handle commander, caf::duration hold_timeout,
                           caf::duration request_timeout);

}  // namespace troupe
