#include "actors/remote_watches.hpp"

namespace troupe {

std::uint64_t remote_watches::watch(caf::node_id node, std::function<void()> at_verdict) {
  by_id_.emplace(++last_, watched{std::move(node), std::move(at_verdict)});
  return last_;
}

std::vector<std::function<void()>> remote_watches::release(const caf::node_id& node) {
  std::vector<std::function<void()>> due;
  for (auto i = by_id_.begin(); i != by_id_.end();)
    if (i->second.node == node) {
      due.push_back(std::move(i->second.at_verdict));
      i = by_id_.erase(i);
    } else {
      ++i;
    }
  return due;
}

}  // namespace troupe
