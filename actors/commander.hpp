#pragma once
/// \file
/// The commander: the placement index of the node (connection → user →
/// worker). It answers where a connection's user lives — creating the guest
/// `guest_<cid>` for a stranger — and carries out login and logout.

#include "actors/global_store.hpp"
#include "actors/group.hpp"

#include <map>

namespace troupe {

/// A connection changes hands: `from_user` → `to_user`.
struct login_request {
  std::string cid;
  std::string from_user;
  std::string to_user;
  store::bytes parcel;  ///< the guest's store (an encoded parcel), empty when none is carried
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, login_request& x) {
  return f(caf::meta::type_name("troupe.login_request"), x.cid, x.from_user, x.to_user, x.parcel);
}

/// The commander's typed interface.
using commander_handle = caf::typed_actor<
  /// Where does connection `cid` go? (A stranger becomes guest_<cid>.) `minted`:
  /// the front has just made this id, so no parcel can exist for it.
  caf::replies_to<resolve_atom, std::string, bool>::with<placement>,
  /// Whose is connection `cid`, from the placement index alone (waking nobody,
  /// reading nothing): a placement with his user and type, and his worker and
  /// actor when he is live; no_such_user when the index does not know it.
  caf::replies_to<whois_atom, std::string>::with<placement>,
  /// Move a connection to a named user; answers his placement.
  caf::replies_to<login_atom, login_request>::with<placement>,
  /// Move connection `cid` (of user `from`) to a fresh guest; answers its placement.
  caf::replies_to<logout_atom, std::string, std::string>::with<placement>,
  /// A message from one user to another, by name (README "Messages between
  /// users"): to his worker if he is live, woken there if he has a parcel,
  /// refused (unknown_user) otherwise; answers what became of it.
  caf::replies_to<tell_atom, user_message>::with<tell_reply>,
  /// The workers of group `name` on node `node` (in slot order), at start,
  /// after a worker restart, and to a new commander after a takeover.
  caf::reacts_to<workers_atom, std::string, std::string, std::vector<worker_handle>>,
  /// A cluster member was declared down: its workers' users are forgotten
  /// (woken elsewhere on their next request) and its global store releases
  /// the leases the member's actors held, nothing applied.
  caf::reacts_to<node_down_atom, caf::node_id>,
  /// Freeze user `name` now (an operator's order): answers once he is durable; no_such_user if not hosted.
  caf::replies_to<freeze_atom, std::string>::with<bool>,
  /// push_users: push {path, data (JSON text)} to every page of user `name`
  /// through his worker when he is live; a frozen or unknown user is not woken
  /// and counts as (0, 1). Answers (delivered, not delivered).
  caf::replies_to<push_atom, std::string, std::string, std::string>::with<std::uint32_t, std::uint32_t>,
  /// From a user actor (name, his owner epoch; the three notices): he starts
  /// freezing; requests for him are held until frozen or thaw. A notice whose
  /// epoch is not his current placement's is ignored.
  caf::reacts_to<freezing_atom, std::string, std::uint64_t>,
  /// From a user actor: his parcels are durable and he leaves; held requests
  /// wake him. The channels his pages had open go to his next placement.
  caf::reacts_to<frozen_atom, std::string, std::uint64_t, std::vector<channel_binding>>,
  /// From a user actor: his freeze failed; he stays where he was.
  caf::reacts_to<thaw_atom, std::string, std::uint64_t>,
  /// From a user actor, after `frozen`: a guest who never had a state left
  /// without a parcel; his connection is forgotten too (the index stays bounded).
  caf::reacts_to<release_atom, std::string>,
  /// An operator drops user `name` (not woken if frozen): answers what he was
  /// (active | frozen | inactive) and how many connections he had here.
  caf::replies_to<drop_atom, std::string>::with<std::string, std::uint64_t>,
  /// An operator drains worker `name`: answers (frozen, failed); no_such_user
  /// when unknown, refused when it is the group's last worker in service.
  caf::replies_to<drain_atom, std::string>::with<std::uint64_t, std::uint64_t>,
  /// Soft quit of node `node`: freeze every user of its workers, then (when
  /// the commander runs there) have its global store written; answers how many users
  /// froze and what was not saved (user names, "the global store", "the users
  /// of worker W" when a worker did not answer). Its workers get no new user.
  caf::replies_to<quit_atom, std::string>::with<std::uint64_t, std::vector<std::string>>,
  /// From a group: what one of its workers admits now (admission, degraded).
  caf::reacts_to<admission_atom, admission_report>,
  /// From a user actor (name, his owner epoch, group): his parcel says he
  /// lives in that other group; he left without writing and is placed there
  /// on his next request (docs/SUPERVISION.md "Groups and placement").
  caf::reacts_to<relocate_atom, std::string, std::uint64_t, std::string>,
  /// Internal: the retirement check (workers beyond a group's minimum, idle).
  caf::reacts_to<retire_atom>>;

/// How a commander starts: alone (a node's own, or a cluster's first), or
/// taking over from a commander that died with its member.
struct commander_start {
  /// A takeover: the members whose workers must have registered (and told
  /// their users) before placements go on; they wait meanwhile, for at most
  /// the hold budget. Empty: nobody is expected (a first start).
  std::vector<std::string> expected_nodes;
};

/// Spawns the commander (a top-level actor: the node stops it on shutdown).
/// `deposit` is the deposit actor. `global_store` is the
/// global store spawned next to it (a takeover spawns a new one, reading the
/// deposit's snapshot): the commander links to it, so they stop together, and
/// tells it its generation, the members declared down and the soft quit.
/// Users and the bridge talk to the global store directly, never through the commander.
commander_handle spawn_commander(caf::actor_system& sys, node_context_ptr ctx, deposit_handle deposit,
                                 global_store_handle global_store, commander_start start = {});

}  // namespace troupe
