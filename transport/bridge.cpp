#include "transport/bridge.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

namespace troupe {

namespace {

bridge_handle::behavior_type bridge_impl(bridge_handle::pointer self, commander_handle commander,
                                         caf::duration hold_timeout, caf::duration request_timeout) {
  return {
    [=](resolve_atom, std::string& cid, bool minted, local_resolve& slot) {
      self->request(commander, hold_timeout, resolve_atom::value, std::move(cid), minted)
        .then([slot](placement& where) { slot->placed(std::move(where)); },
              [slot](caf::error& err) { slot->failed(err); });
    },
    [=](freeze_atom, std::string& user, local_admin& slot) {
      self->request(commander, request_timeout, freeze_atom::value, user)
        .then(
          [slot, user](bool) {
            http_response r;
            r.body = nlohmann::json{{"frozen", user}}.dump();
            slot->done(std::move(r));
          },
          [slot, self](caf::error& err) {
            if (is(err, errc::no_such_user))
              return slot->done(error_response(404, "no such user on this node"));
            slot->done(error_response(503, "the freeze did not complete: " + self->system().render(err), 1));
          });
    },
    [=](global_atom, local_admin& slot) {
      self->request(commander, request_timeout, global_atom::value)
        .then(
          [slot](std::string& json) {
            http_response r;
            r.body = std::move(json);
            slot->done(std::move(r));
          },
          [slot](caf::error&) { slot->done(error_response(503, "the commander did not answer", 1)); });
    },
  };
}

}  // namespace

bridge_handle spawn_bridge(caf::actor_system& sys, commander_handle commander, caf::duration hold_timeout,
                           caf::duration request_timeout) {
  return sys.spawn(bridge_impl, std::move(commander), hold_timeout, request_timeout);
}

}  // namespace troupe
