#pragma once
/// \file
/// The escape hatch to CAF, kept apart so that <troupe/troupe.hpp> carries no CAF
/// type: include it (and link CAF, as troupe::troupe does) to reach the CAF actor
/// behind a user — to send, request or spawn what the app API does not offer.

#include <troupe/app.hpp>

namespace caf {
class local_actor;
}

namespace troupe {

/// The CAF actor behind user `u`. Valid only in his own handlers (it is his
/// actor: one thread at a time, never to be kept past the handler).
caf::local_actor* caf_actor(user_actor_base& u);

}  // namespace troupe
