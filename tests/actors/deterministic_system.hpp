// An actor system on CAF's deterministic test coordinator, for the tests of an
// actor's glue: no thread runs an actor by itself; the test delivers every
// message (sched->run()) and moves the clock (sched->advance_time()), so the
// order of events and every timeout are the test's, never the machine's pace.
// A fixture derives from it (its names stay `cfg`, `sys`, `sched`) and resets
// `sys` in its destructor once it has told its actors to stop and run them.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <optional>

namespace troupe::test {

struct deterministic_system {
  /// `prepare` completes the configuration before the system starts (e.g. register_types).
  explicit deterministic_system(void (*prepare)(caf::actor_system_config&) = nullptr) {
    if (prepare)
      prepare(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys.emplace(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
};

}  // namespace troupe::test
