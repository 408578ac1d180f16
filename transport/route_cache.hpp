#pragma once
/// \file
/// The front's routing cache: connection id → the actor serving its user.
/// Every actor it points at is watched (attach_functor), so an entry dies with
/// its actor; the front never routes to a known-dead actor.

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/node_id.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

class route_cache : public std::enable_shared_from_this<route_cache> {
public:
  /// The actor connection `cid` was last routed to, if it is still known.
  std::optional<caf::actor> find(const std::string& cid) const;

  /// Routes `cid` to `actor` (and starts watching the actor).
  void put(const std::string& cid, caf::actor actor);

  /// Forgets `cid`.
  void erase(const std::string& cid);

  /// Forgets every route to an actor of `node` (the cluster declared it down;
  /// its proxies may live on, silently dropping what they are sent).
  void forget_node(const caf::node_id& node);

  std::size_t size() const;

private:
  void forget_actor(const caf::actor_addr& addr);

  mutable std::mutex mutex_;
  std::unordered_map<std::string, caf::actor> by_cid_;
  // Watched actors, by address: an actor id is unique on its node only.
  std::unordered_map<caf::actor_addr, std::vector<std::string>> by_actor_;
};

}  // namespace troupe
