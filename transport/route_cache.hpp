#pragma once
/// \file
/// The front's routing cache: connection id → the actor serving its user.
/// Every actor it points at is watched (attach_functor), so an entry dies with
/// its actor; the front never routes to a known-dead actor.
/// One entry per live connection (issue 14, S5): keyed by a short_name (a
/// connection id inline, no allocation), and each route's watch carries its
/// own key, so no reverse index (actor → its ids) is kept.

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/node_id.hpp>

#include "actors/user.hpp"
#include "registry/short_name.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace troupe {

class route_cache : public std::enable_shared_from_this<route_cache> {
public:
  /// Whose a routed connection is: kept only while some actor type declares
  /// guards (the front judges them with it; docs/http.md "Guards").
  struct who {
    std::string user;
    std::string type;
  };

  /// The actor connection `cid` was last routed to, if it is still known.
  /// Only ids the node minted or verified are ever routed (user_call), so a
  /// routed id is authentic: this is the front's cheap check before the HMAC.
  std::optional<user_handle> find(const std::string& cid) const;
  /// Whose connection `cid` is, if it is routed and that was kept (put's `whose`).
  std::shared_ptr<const who> who_of(const std::string& cid) const;

  /// Routes `cid` to `actor` (and starts watching the actor); `whose`: see who.
  void put(const std::string& cid, user_handle actor, std::shared_ptr<const who> whose = nullptr);

  /// Forgets `cid`.
  void erase(const std::string& cid);

  /// Forgets every route to an actor of `node` (the cluster declared it down;
  /// its proxies may live on, silently dropping what they are sent).
  void forget_node(const caf::node_id& node);

  std::size_t size() const;

private:
  // The watch of route `cid` → `addr` fired: forgets it if it still goes there.
  void forget_route(const registry::short_name& cid, const caf::actor_addr& addr);

  struct entry {
    user_handle actor;
    std::shared_ptr<const who> whose;  // null unless guards are declared: one pointer per route otherwise
  };
  mutable std::mutex mutex_;
  std::unordered_map<registry::short_name, entry, registry::short_name_hash> by_cid_;
};

}  // namespace troupe
