// A node's actor system for the actor-tree tests (tree_test.cpp, groups_test.cpp):
// two scheduler threads (real concurrency, as on a node), the node's message
// types, a scoped actor to ask from, and a node context named "test-node" for
// the fixture to fill in. A fixture derives from it (its names stay `cfg`,
// `sys`, `self`, `ctx`) and ends with stop_node(its actors...).
#pragma once

#include "actors/messages.hpp"
#include "actors/node_context.hpp"

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <memory>
#include <optional>

namespace troupe::test {

struct node_system {
  node_system() {
    register_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    sys.emplace(cfg);
    self.emplace(*sys);
    ctx = std::make_shared<node_context>();
    ctx->node_name = "test-node";
  }

  /// Tells each of `actors` to stop and drops their handles (a detached actor's
  /// thread waits for its last handle to go), then waits for the system: its
  /// reset blocks until every actor is gone.
  template <class... Handles>
  void stop_node(Handles&... actors) {
    (caf::anon_send_exit(actors, caf::exit_reason::user_shutdown), ...);
    ((actors = nullptr), ...);
    self.reset();
    sys.reset();
  }

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  std::optional<caf::scoped_actor> self;
  node_context_ptr ctx;
};

}  // namespace troupe::test
