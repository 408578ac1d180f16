#pragma once
/// \file
/// Forward declarations of message structs, for typed interfaces that name a
/// message defined in a header they cannot include (it would close a cycle).
/// Whoever sends or receives one includes its own header.

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

struct login_request;  ///< actors/commander.hpp
struct placement;      ///< actors/user.hpp
struct member_status;  ///< actors/cluster_view.hpp
struct channel_push;   ///< actors/channel.hpp
struct channel_ref;    ///< actors/messages.hpp

/// The member list (actors/cluster_view.hpp).
using members_atom = caf::atom_constant<caf::atom("members")>;
/// The membership as the census sees it: the member list, this node among
/// them (actors/cluster_view.hpp; the cluster agent answers it).
using cluster_view_handle = caf::typed_actor<caf::replies_to<members_atom>::with<std::vector<member_status>>>;

using bind_atom = caf::atom_constant<caf::atom("chbind")>;      ///< a page of this socket opened its channel
using unbind_atom = caf::atom_constant<caf::atom("chunbind")>;  ///< a binding ends (page rebound, socket gone)
using push_atom = caf::atom_constant<caf::atom("push")>;        ///< write a frame on a page's channel

/// Who holds a page's channel binding, as the hub sees him: told when the
/// socket carrying the page (cid, page) goes (a part of the user's interface).
using channel_owner_handle = caf::typed_actor<caf::reacts_to<unbind_atom, std::string, std::string, channel_ref>>;

/// The channel hub's typed interface, as users see it (one hub per front;
/// its sockets are numbered; actors/channel.hpp, docs/channels.md). Declared
/// here because every channel call carries a hub (channel_ref, actors/messages.hpp).
using channel_handle = caf::typed_actor<
  /// Page `page` of connection `cid` opened its channel on socket `socket`;
  /// `user` is told (unbind) when the socket goes.
  caf::reacts_to<bind_atom, std::uint64_t, std::string, std::string, channel_owner_handle>,
  /// Page `page` was opened on another socket: socket `socket` no longer carries it.
  caf::reacts_to<unbind_atom, std::uint64_t, std::string>,
  /// Queue the frame if the page is bound to the socket; true: the socket's
  /// outgoing queue took it; false: not bound there, socket closed, or
  /// refused by the overflow policy.
  caf::replies_to<push_atom, channel_push>::with<bool>>;

}  // namespace troupe
