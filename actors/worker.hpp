#pragma once
/// \file
/// The worker: supervisor of the users placed on it. It spawns them on
/// demand, hands them their connections, and restarts one that crashed
/// (other users are untouched), up to group.<name>.max_restarts within
/// restart_window_seconds.

#include "actors/user.hpp"

namespace troupe {

/// Orders a worker to host `user` (spawning him if needed) and to give him connection `cid`.
struct attach_order {
  std::string user;
  std::string cid;
  store::bytes parcel;  ///< a store to start from if he must be spawned (a login's carry)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attach_order& x) {
  return f(caf::meta::type_name("troupe.attach_order"), x.user, x.cid, x.parcel);
}

/// The worker's typed interface.
using worker_handle = caf::typed_actor<
  /// Host the user and give him the connection; answers his placement.
  caf::replies_to<attach_atom, attach_order>::with<placement>,
  /// Forget this user: he is retiring (a guest whose connection logged in).
  caf::reacts_to<release_atom, std::string>>;

/// How to start one worker.
struct worker_spec {
  std::string name;       ///< e.g. "default-w1"
  std::string group;      ///< the group's name
  caf::actor commander;
  node_context_ptr ctx;
};

/// Spawns a worker linked to `group` (it dies with its group).
worker_handle spawn_worker(caf::local_actor& group, worker_spec spec);

}  // namespace troupe
