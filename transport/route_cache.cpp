#include "transport/route_cache.hpp"

#include <caf/abstract_actor.hpp>

namespace troupe {

std::optional<caf::actor> route_cache::find(const std::string& cid) const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = by_cid_.find(cid);
  if (i == by_cid_.end())
    return std::nullopt;
  return i->second;
}

void route_cache::put(const std::string& cid, caf::actor actor) {
  if (!actor)
    return;
  auto addr = actor.address();
  bool first_route = false;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    by_cid_[cid] = actor;
    auto [routes, fresh] = by_actor_.try_emplace(addr);
    routes->second.push_back(cid);
    first_route = fresh;
  }
  // Outside the lock: for an actor that is already dead the functor runs at once.
  if (first_route)
    actor->attach_functor([weak = weak_from_this(), addr] {
      if (auto self = weak.lock())
        self->forget_actor(addr);
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

void route_cache::forget_actor(const caf::actor_addr& addr) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto routes = by_actor_.find(addr);
  if (routes == by_actor_.end())
    return;
  for (auto& cid : routes->second)
    if (auto i = by_cid_.find(cid); i != by_cid_.end() && i->second.address() == addr)
      by_cid_.erase(i);
  by_actor_.erase(routes);
}

void route_cache::forget_node(const caf::node_id& node) {
  std::lock_guard<std::mutex> guard{mutex_};
  for (auto i = by_cid_.begin(); i != by_cid_.end();)
    i = i->second.node() == node ? by_cid_.erase(i) : std::next(i);
  // Their functors stay attached to the proxies and find nothing when they run.
  for (auto i = by_actor_.begin(); i != by_actor_.end();)
    i = i->first.node() == node ? by_actor_.erase(i) : std::next(i);
}

}  // namespace troupe
