#pragma once
/// \file
/// Requests the commander made of workers on other members, by id. CAF never
/// fails a request in flight to a member that dies or stalls (it waits out its
/// timeout), so each is settled at that member's down verdict instead: its
/// `at_verdict` answers it or places its user again (docs/CLUSTER.md "Nothing
/// waits for a timer at a verdict"). A plain class: a unit test drives it
/// without an actor system.

#include <caf/node_id.hpp>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace troupe {

class remote_watches {
public:
  /// Watches a request to a worker of `node`; its id (never 0).
  std::uint64_t watch(caf::node_id node, std::function<void()> at_verdict);
  /// Its answer came: true when it still counts (not settled at a verdict
  /// already). Id 0 (a request that was never watched) always counts.
  bool settle(std::uint64_t id) { return id == 0 || by_id_.erase(id) > 0; }
  /// `node` was declared down: what was watched there, to run now (forgotten here).
  std::vector<std::function<void()>> release(const caf::node_id& node);
  std::size_t size() const noexcept { return by_id_.size(); }

private:
  struct watched {
    caf::node_id node;
    std::function<void()> at_verdict;
  };
  std::unordered_map<std::uint64_t, watched> by_id_;
  std::uint64_t last_ = 0;
};

}  // namespace troupe
