#pragma once
/// \file
/// (Internal to transport/.) Requests to the users of worker processes
/// without the forwarder and CAF's middleman (issue 26; docs/design.md
/// "Worker pipes"). Each io thread of the front has one pipe to each worker
/// process, a Unix socket the process inherited (actors/worker_pipes.hpp):
/// the io thread writes the requests its connections bring, every request
/// ready in one write, and reads the answers, all that came in one read; the
/// process runs each on the io thread of its own (transport/worker_pipe_server.hpp).
///
/// The same guarantees as the forwarder's: a pipe that ends (its process died,
/// was killed, or broke the protocol) releases every request in flight on it
/// at once, undelivered, so the front re-resolves a read and answers a change
/// "outcome unknown" (user_call.cpp); limits.max_forwarded_requests bounds the
/// requests in flight on the pipes (503 + Retry-After past it), and
/// limits.worker_pipe_frame_bytes every frame. A request's deadline stays
/// the front's (user_call's 504); the pipe itself keeps no timer.
///
/// Single-threaded: a worker_pipes_here and its pipes live on one io thread.

#include "actors/messages.hpp"
#include "actors/user.hpp"

#include <boost/asio/io_context.hpp>

#include <caf/node_id.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace troupe {

struct node_context;
class worker_pipe_directory;

class worker_pipes_here {
public:
  /// The pipes of io thread `index` (of the front's), on `ioc`, taken from `ctx.worker_pipes`.
  worker_pipes_here(boost::asio::io_context& ioc, node_context& ctx, std::size_t index);
  ~worker_pipes_here();  // closes its pipes: what is in flight on them is released
  worker_pipes_here(const worker_pipes_here&) = delete;
  worker_pipes_here& operator=(const worker_pipes_here&) = delete;

  /// The calling thread's pipes (null off the front's io threads, or when no group runs processes).
  static worker_pipes_here* current() noexcept;
  /// Makes these the calling thread's pipes until they are destroyed.
  void install() noexcept;

  /// Sends `slot`'s request to `target`, a user of a worker process, on its
  /// process's pipe: true when the pipe took it (or refused it with 503: the
  /// slot is answered); false, `slot` untouched, when there is no pipe to its
  /// process or the request does not fit a frame (take the forwarder).
  bool send(const user_handle& target, local_reply& slot);

  /// Pipes open now (tests).
  std::size_t open_pipes() const;

  class pipe;

private:
  std::shared_ptr<pipe> find(const caf::node_id& node);

  boost::asio::io_context& ioc_;
  node_context& ctx_;
  worker_pipe_directory& directory_;
  std::size_t index_;
  std::uint64_t seen_version_ = 0;
  std::unordered_map<caf::node_id, std::shared_ptr<pipe>> pipes_;
};

}  // namespace troupe
