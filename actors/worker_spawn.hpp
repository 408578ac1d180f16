#pragma once
/// \file
/// Starting a worker process (actors/worker_process.hpp), apart from the slot
/// actor that supervises it: the node's own executable as `troupe worker`,
/// its bootstrap (recipe, cookie secret, gate token) on an inherited
/// descriptor and never on its command line or in its environment, which any
/// local user can read in /proc.

#include "actors/node_context.hpp"

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// The descriptor a child finds its bootstrap on.
inline constexpr int worker_bootstrap_fd = 3;
/// The descriptor a child finds its first worker pipe on (the others follow it).
inline constexpr int worker_pipe_fd = worker_bootstrap_fd + 1;

/// A started child: its pid, or -1 and why it could not start.
struct worker_child_start {
  pid_t pid = -1;
  std::string error;
};

/// Starts the process of worker `worker`, which passes the worker gate on
/// 127.0.0.1:`gate_port` with `token` (written into its bootstrap with `boot`;
/// both copies are cleansed from memory here). The child has its own process
/// group (a terminal's ^C reaches the node only, which freezes the child's
/// users first), the node's environment without its TROUPE_* variables (the
/// bootstrap carries them) and PGPASSWORD, and no descriptor of the node's but
/// stderr (as stdout too: the node's stdout carries its ready line only)
/// and `pipe_ends`, which it finds on worker_pipe_fd, worker_pipe_fd + 1, …
/// (the caller keeps and closes its copies).
worker_child_start start_worker_child(const worker_bootstrap& boot, const std::string& token, std::uint16_t gate_port,
                                      const std::string& worker, const std::vector<int>& pipe_ends = {});

}  // namespace troupe
