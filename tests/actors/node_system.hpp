// A node's actor system for the actor-tree tests (tree_test.cpp, groups_test.cpp):
// two scheduler threads (real concurrency, as on a node), the node's message
// types, a scoped actor to ask from, and a node context named "test-node" for
// the fixture to fill in. A fixture derives from it (its names stay `cfg`,
// `sys`, `self`, `ctx`) and resets `self`, then `sys`, in its destructor once
// its actors were told to stop.
#pragma once

#include "actors/messages.hpp"
#include "actors/node_context.hpp"

#include <caf/actor_system.hpp>
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

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  std::optional<caf::scoped_actor> self;
  node_context_ptr ctx;
};

}  // namespace troupe::test
