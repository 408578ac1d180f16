#pragma once
/// \file
/// The page actor: one page/tab of a connection (X-Troupe-Page), created on
/// first mention. It keeps the page's clocks and passes every stamp on to its
/// connection; it is where the page's channel will live.

#include "actors/connection.hpp"

namespace troupe {

/// The page actor's typed interface.
using page_handle = caf::typed_actor<
  /// A request on this page at `unix_ms`.
  caf::reacts_to<stamp_atom, std::int64_t>>;

/// Spawns page `page` of connection `conn`, linked to `user` (it dies with him).
page_handle spawn_page(caf::local_actor& user, node_context_ptr ctx, connection_handle conn,
                      std::string page);

}  // namespace troupe
