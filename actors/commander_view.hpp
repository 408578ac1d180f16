#pragma once
/// \file
/// The commander as a user actor sees it: exactly the messages users send
/// it. A part of commander_handle (actors/commander.hpp), which converts to it
/// implicitly; it lives here because commander.hpp includes user.hpp (through
/// group.hpp and worker.hpp), whose spec holds the commander.

#include "actors/channel.hpp"
#include "actors/fwd.hpp"
#include "actors/messages.hpp"
#include "actors/tell.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// What a user actor sends his commander (see commander_handle for each message).
using commander_for_users = caf::typed_actor<
  caf::replies_to<login_atom, login_request>::with<placement>,
  caf::replies_to<logout_atom, std::string, std::string>::with<placement>,
  caf::replies_to<tell_atom, user_message>::with<tell_reply>,
  caf::replies_to<push_atom, std::string, std::string, std::string>::with<std::uint32_t, std::uint32_t>,
  caf::reacts_to<freezing_atom, std::string, std::uint64_t>,
  caf::reacts_to<frozen_atom, std::string, std::uint64_t, std::vector<channel_binding>>,
  caf::reacts_to<thaw_atom, std::string, std::uint64_t>,
  caf::reacts_to<release_atom, std::string>,
  caf::reacts_to<relocate_atom, std::string, std::uint64_t, std::string>>;

}  // namespace troupe
