#pragma once
/// \file
/// troupe's error codes, carried as caf::error between actors (and nodes).

#include <caf/error.hpp>

#include <cstdint>
#include <string>

namespace caf {
class actor_system_config;
}

namespace troupe {

/// Errors troupe's actors answer with. Registered with CAF under the
/// category atom "troupe" (see register_errors()).
enum class errc : std::uint8_t {
  not_here = 1,     ///< the actor no longer serves that connection: re-resolve
  handler_failed,   ///< an application handler threw
  unavailable,      ///< no actor can take the request now (placement failed, worker gone)
  bad_request,      ///< the message itself is invalid (bad name, bad page id, …)
  busy,             ///< a bounded queue is full
  too_many_pages,   ///< max_pages_per_connection reached
  deposit_failed,   ///< a parcel could not be written, read or removed
  no_such_user,     ///< the user is not hosted here
  wake_failed,      ///< a user could not be woken from his parcel
  dropped,          ///< an operator dropped the user (his actor's exit reason)
  refused,          ///< an operator's order cannot be carried out as asked (nothing was done)
  too_many_users,   ///< limits.max_live_users reached: no newcomer is placed
  bad_state,        ///< a user's parcel does not decode as his state (quarantined; he is refused)
  stale_owner,      ///< a write from an owner the deposit no longer recognises (fencing)
};

/// "not_here", "handler_failed", …
const char* to_string(errc code) noexcept;

/// A caf::error of category "troupe" (found by ADL: `return errc::busy;` works in handlers).
caf::error make_error(errc code);
caf::error make_error(errc code, std::string context);

/// True when `err` is of troupe's category and has code `code`.
bool is(const caf::error& err, errc code) noexcept;

/// Lets the actor system render troupe errors by name (sys.render(err)).
void register_errors(caf::actor_system_config& cfg);

}  // namespace troupe
