#include "transport/route_cache.hpp"

#include <caf/abstract_actor.hpp>

namespace troupe {

std::optional<user_handle> route_cache::find(const std::string& cid) const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = by_cid_.find(cid);
  if (i == by_cid_.end())
    return std::nullopt;
  return i->second.actor;
}

std::shared_ptr<const route_cache::who> route_cache::who_of(const std::string& cid) const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = by_cid_.find(cid);
  return i == by_cid_.end() ? nullptr : i->second.whose;
}

void route_cache::put(const std::string& cid, user_handle actor, std::shared_ptr<const who> whose) {
  if (!actor)
    return;
  auto addr = actor.address();
  registry::short_name key(cid);
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto [i, fresh] = by_cid_.try_emplace(key, entry{actor, whose});
    if (!fresh) {
      if (i->second.actor == actor) {
        if (whose)
          i->second.whose = std::move(whose);
        return;  // routed there already, and watched
      }
      i->second = entry{actor, std::move(whose)};
    }
  }
  // One watch per route (its key with it): an id routed anew to another actor
  // leaves the old actor's watch behind, which finds nothing when it fires.
  // Outside the lock: for an actor that is already dead the functor runs at once.
  actor->attach_functor([weak = weak_from_this(), addr, key = std::move(key)] {
    if (auto self = weak.lock())
      self->forget_route(key, addr);
  });
}

void route_cache::erase(const std::string& cid) {
  std::lock_guard<std::mutex> guard{mutex_};
  by_cid_.erase(cid);
}

std::size_t route_cache::size() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return by_cid_.size();
}

void route_cache::forget_route(const registry::short_name& cid, const caf::actor_addr& addr) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (auto i = by_cid_.find(cid); i != by_cid_.end() && i->second.actor.address() == addr)
    by_cid_.erase(i);
}

void route_cache::forget_node(const caf::node_id& node) {
  std::lock_guard<std::mutex> guard{mutex_};
  for (auto i = by_cid_.begin(); i != by_cid_.end();)
    i = i->second.actor.node() == node ? by_cid_.erase(i) : std::next(i);
  // Their watches stay attached to the proxies and find nothing when they run.
}

}  // namespace troupe
