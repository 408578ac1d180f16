#pragma once
/// \file
/// The connection actor: one browser session (cookie id) of a user, activated
/// when a request names a page on it. Keeps the connection's clocks and pages;
/// stamps climb page → connection.

#include "actors/messages.hpp"
#include "actors/node_context.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace caf {
class local_actor;
}

namespace troupe {

/// The connection actor's typed interface.
using connection_handle = caf::typed_actor<
  /// Page `page` saw a request at `unix_ms`.
  caf::reacts_to<stamp_atom, std::string, std::int64_t>>;

/// Spawns the connection actor of `cid`, linked to `user` (it dies with him).
connection_handle spawn_connection(caf::local_actor& user, node_context_ptr ctx, std::string cid);

}  // namespace troupe
