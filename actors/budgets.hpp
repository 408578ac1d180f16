#pragma once
/// \file
/// The named, finite budgets of the requests an actor makes to another one that
/// it must not wait for forever (a deposit that never answers, a user stuck in a
/// handler): each is a constant or derived from the recipe, and each request that
/// uses one has an error branch that logs and re-arms what must go on.

#include "config/node_settings.hpp"

#include <caf/duration.hpp>

#include <chrono>
#include <cstdint>

namespace troupe {

namespace detail {
inline caf::duration budget_of(double seconds) {
  return caf::duration{std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000))};
}
}  // namespace detail

/// The commander's expiry sweep (the deposit removes the parcels past their
/// expiry): a scan of the whole deposit, minutes at worst. Past it the sweep is
/// given up (and logged) and the next one is scheduled all the same.
constexpr std::chrono::minutes expiry_sweep_budget{10};

/// A worker freezing all of its users for a drain or a replacement: what the soft
/// quit allows for freezing everybody (node.shutdown_freeze_seconds). A user not
/// frozen within it counts as failed: the worker stays in service.
inline caf::duration worker_freeze_all_budget(const config::node_settings& node) {
  return detail::budget_of(node.shutdown_freeze_seconds);
}

/// The commander waiting for a worker's drain: the worker's own budget and a
/// margin for its answer (it answers with its failures itself once its budget is
/// spent; this one only covers a worker that never answers).
inline caf::duration drain_answer_budget(const config::node_settings& node) {
  return detail::budget_of(node.shutdown_freeze_seconds + 10);
}

}  // namespace troupe
