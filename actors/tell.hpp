#pragma once
/// \file
/// Messages between users, the platform's side (README "Messages between
/// users"): the wire form of one message and of its outcome. A sender's user
/// actor asks the commander, which knows where every user lives; the commander
/// asks his worker (waking him first when he is frozen), which hands it to his
/// user actor. Both are plain registered structs: they may cross nodes.

#include "actors/app.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>

namespace troupe {

using tell_atom = caf::atom_constant<caf::atom("tell")>;  ///< a message from one user to another

/// One message on its way: who sends it, to whom, its type's name and its msgpack bytes.
struct user_message {
  std::string from;
  std::string to;
  std::string name;
  store::bytes data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, user_message& x) {
  return f(caf::meta::type_name("troupe.user_message"), x.from, x.to, x.name, x.data);
}

/// What became of it: a tell_outcome::result (or not_here), and why.
struct tell_reply {
  /// Internal only, never shown to an app: the user actor asked is not (or no
  /// longer) his home — he froze or moved meanwhile; the commander routes it again.
  static constexpr std::uint8_t not_here = 255;
  std::uint8_t result = static_cast<std::uint8_t>(tell_outcome::result::unavailable);
  std::string text;

  static tell_reply of(tell_outcome::result r, std::string why = {}) {
    return tell_reply{static_cast<std::uint8_t>(r), std::move(why)};
  }
  /// As the sender's app sees it (not_here: unavailable).
  tell_outcome outcome() const {
    if (result > static_cast<std::uint8_t>(tell_outcome::result::handler_failed))
      return tell_outcome{tell_outcome::result::unavailable, text.empty() ? "the user could not be reached" : text};
    return tell_outcome{static_cast<tell_outcome::result>(result), text};
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tell_reply& x) {
  return f(caf::meta::type_name("troupe.tell_reply"), x.result, x.text);
}

}  // namespace troupe
