#include "transport/bridge.hpp"

#include <caf/all.hpp>

namespace troupe {

namespace {

bridge_handle::behavior_type bridge_impl(bridge_handle::pointer self, commander_handle commander,
                                         caf::duration hold_timeout) {
  return {
    [=](resolve_atom, std::string& cid, local_resolve& slot) {
      self->request(commander, hold_timeout, resolve_atom::value, std::move(cid))
        .then([slot](placement& where) { slot->placed(std::move(where)); },
              [slot](caf::error& err) { slot->failed(err); });
    },
  };
}

}  // namespace

bridge_handle spawn_bridge(caf::actor_system& sys, commander_handle commander, caf::duration hold_timeout) {
  return sys.spawn(bridge_impl, std::move(commander), hold_timeout);
}

}  // namespace troupe
