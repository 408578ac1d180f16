#pragma once
/// \file
/// What the census needs of its node's cluster membership, defined here so that
/// nothing in actors/ reaches up into cluster/: the member list, each member
/// with its state and its census. The cluster agent (cluster/agent.hpp) provides
/// it — its typed interface includes this one — and the node hands the agent to
/// the census (census_handle's agent_atom).

#include "actors/census.hpp"
#include "actors/fwd.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/node_id.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// One member as the census shows it (cluster_view_handle, actors/fwd.hpp,
/// answers the list of them).
struct member_status {
  std::string name;
  std::uint64_t incarnation = 0;
  std::string address;
  std::uint64_t seq = 0;
  std::string state;          ///< up | down | self | fenced
  std::int64_t heartbeat_age_ms = -1;  ///< since last heard (-1: never, or this member)
  bool leader = false;
  caf::node_id node;          ///< its CAF node (invalid for a member never reached)
  census_handle census;       ///< its census (invalid when unknown)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_status& x) {
  return f(caf::meta::type_name("troupe.member_status"), x.name, x.incarnation, x.address, x.seq, x.state,
           x.heartbeat_age_ms, x.leader, x.node, x.census);
}


}  // namespace troupe
