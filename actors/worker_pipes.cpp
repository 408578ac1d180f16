#include "actors/worker_pipes.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace troupe {

std::optional<worker_pipe_ends> make_worker_pipes(std::size_t count, std::string& error) {
  worker_pipe_ends out;
  for (std::size_t i = 0; i < count; ++i) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      error = std::string("cannot make its pipes: ") + std::strerror(errno);
      close_pipe_ends(out.node);
      close_pipe_ends(out.child);
      return std::nullopt;
    }
    out.node.push_back(fds[0]);
    out.child.push_back(fds[1]);
  }
  return out;
}

void close_pipe_ends(std::vector<int>& fds) noexcept {
  for (int fd : fds)
    if (fd >= 0)
      ::close(fd);
  fds.clear();
}

worker_pipe_directory::~worker_pipe_directory() {
  for (auto& [node, fds] : ends_)
    close_pipe_ends(fds);
}

void worker_pipe_directory::publish(const caf::node_id& child, std::vector<int> node_ends) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto& slot = ends_[child];
  close_pipe_ends(slot);  // published twice: the older ends go
  slot = std::move(node_ends);
  version_.fetch_add(1, std::memory_order_release);
}

void worker_pipe_directory::withdraw(const caf::node_id& child) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = ends_.find(child);
  if (i == ends_.end())
    return;
  close_pipe_ends(i->second);
  ends_.erase(i);
  version_.fetch_add(1, std::memory_order_release);
}

std::vector<std::pair<caf::node_id, int>> worker_pipe_directory::take_all(std::size_t index) {
  std::vector<std::pair<caf::node_id, int>> out;
  std::lock_guard<std::mutex> guard{mutex_};
  for (auto& [child, fds] : ends_)
    if (index < fds.size() && fds[index] >= 0)
      out.emplace_back(child, std::exchange(fds[index], -1));
  return out;
}

bool worker_pipe_directory::serves(const caf::node_id& child) const {
  std::lock_guard<std::mutex> guard{mutex_};
  return ends_.count(child) > 0;
}

}  // namespace troupe
