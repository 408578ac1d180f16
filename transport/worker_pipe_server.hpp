#pragma once
/// \file
/// (Internal to transport/.) A worker process's side of its pipes
/// (transport/worker_pipe.hpp): one io thread of its own reads the requests
/// on every pipe the node gave it and sends each to its user actor, which,
/// idle, runs right there (transport/inline_unit.hpp); the answers go back on
/// the pipe the request came on, every answer ready in one write.
///
/// A request for an actor this process does not have (it ended since the
/// node resolved it) is answered `not_here`: the front re-resolves it, since
/// nobody ran it. An actor that dies with a request unanswered sends
/// `dropped`, which the front treats as the forwarder's "target down".

#include "actors/node_context.hpp"
#include "actors/rate_limited_log.hpp"
#include "actors/worker_pipes.hpp"
#include "transport/inline_unit.hpp"

#include <caf/fwd.hpp>

#include <memory>
#include <thread>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace troupe {

class worker_pipe_server final : public worker_pipe_service {
public:
  /// Serves the pipes on descriptors `fds` (owned from now on) for the user actors of `sys`.
  worker_pipe_server(caf::actor_system& sys, node_context_ptr ctx, std::vector<int> fds);
  ~worker_pipe_server() override;  // stops its thread: answers still to come are dropped with the pipes
  worker_pipe_server(const worker_pipe_server&) = delete;
  worker_pipe_server& operator=(const worker_pipe_server&) = delete;

  std::chrono::milliseconds handler_running() const noexcept override;

private:
  rate_limited_log stall_log_{spdlog::level::warn};
  inline_unit unit_;  // its thread's: idle users run their handlers here
  std::unique_ptr<boost::asio::io_context> ioc_;
  std::thread thread_;
};

}  // namespace troupe
