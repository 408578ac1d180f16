#pragma once
/// \file
/// Forward declarations of message structs, for typed interfaces that name a
/// message defined in a header they cannot include (it would close a cycle).
/// Whoever sends or receives one includes its own header.

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

namespace troupe {

struct login_request;  ///< actors/commander.hpp
struct placement;      ///< actors/user.hpp
struct member_status;  ///< actors/cluster_view.hpp

/// The member list (actors/cluster_view.hpp).
using members_atom = caf::atom_constant<caf::atom("members")>;
/// The membership as the census sees it: the member list, this node among
/// them (actors/cluster_view.hpp; the cluster agent answers it).
using cluster_view_handle = caf::typed_actor<caf::replies_to<members_atom>::with<std::vector<member_status>>>;

}  // namespace troupe
