#pragma once
/// \file
/// The node's ends of its worker processes' pipes (issue 26; docs/design.md
/// "Worker pipes"). A slot (actors/worker_process.hpp) makes one socket pair
/// per io thread of the front before it starts its child, which inherits the
/// other ends; once the child's worker is up, the slot publishes the node's
/// ends here under the child's node id, and each io thread takes its own one
/// the first time it sends a request to a user of that child
/// (transport/worker_pipe.hpp). An inherited descriptor is its own proof: no
/// gate, no token, nothing another local process could connect to.
///
/// Shared by the slots (CAF threads) and the io threads: guarded by a mutex,
/// which an io thread takes only when version() says something changed.

#include <caf/node_id.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe {

/// `count` connected Unix stream socket pairs, every descriptor close-on-exec
/// (the spawn hands the child its ends explicitly): the node's ends and the
/// child's, in the same order; nullopt with `error` set when the system refuses.
struct worker_pipe_ends {
  std::vector<int> node;
  std::vector<int> child;
};
std::optional<worker_pipe_ends> make_worker_pipes(std::size_t count, std::string& error);

/// Closes every descriptor of `fds` (and empties it).
void close_pipe_ends(std::vector<int>& fds) noexcept;

/// A worker process's side of its pipes, being served (transport/worker_pipe_server.hpp).
/// Its thread runs the handlers of idle users; the stuck-handler detection
/// (the slot's heartbeat) asks it how long the one it runs now has been running.
class worker_pipe_service {
public:
  virtual ~worker_pipe_service() = default;
  /// How long its thread has been running its current handler (0: it runs none).
  virtual std::chrono::milliseconds handler_running() const noexcept = 0;
};

class worker_pipe_directory {
public:
  worker_pipe_directory() = default;
  worker_pipe_directory(const worker_pipe_directory&) = delete;
  worker_pipe_directory& operator=(const worker_pipe_directory&) = delete;
  ~worker_pipe_directory();  // closes the ends nobody took

  /// The child `child` serves: its pipes' node ends, one per io thread (index = the io thread's).
  void publish(const caf::node_id& child, std::vector<int> node_ends);
  /// The child is gone or going: its ends not taken yet are closed; the io threads drop theirs.
  void withdraw(const caf::node_id& child);

  /// Io thread `index` takes its ends of every child's pipes it has not taken
  /// yet (it owns them from then on), with the child's node id.
  std::vector<std::pair<caf::node_id, int>> take_all(std::size_t index);
  /// Whether `child` is published (not withdrawn).
  bool serves(const caf::node_id& child) const;

  /// Changes with every publish and withdraw (an io thread looks again only then).
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_acquire); }

private:
  mutable std::mutex mutex_;
  std::unordered_map<caf::node_id, std::vector<int>> ends_;  // -1: taken
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace troupe
