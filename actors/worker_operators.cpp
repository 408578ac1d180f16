// What operators and its node order a worker: the soft quit, a drain, a
// drop, a fence. Each freeze of every user is a worker_core freeze run; the
// glue here answers the order and writes what only this worker holds.
#include "actors/budgets.hpp"
#include "actors/deposit.hpp"
#include "actors/worker_actor_state.hpp"
#include "config/node_settings.hpp"
#include "registry/ids.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

namespace {

using steady = std::chrono::steady_clock;

steady::time_point deadline_after(caf::duration budget) {
  auto deadline = steady::now();
  deadline += budget;  // a finite budget (its callers': actors/budgets.hpp, the soft quit's)
  return deadline;
}

}  // namespace

// -- operators -----------------------------------------------------------------------------------

// A drain's or a replacement's budget for freezing every user (actors/budgets.hpp).
caf::duration worker_actor_state::freeze_all_budget() const {
  static const config::node_settings defaults{};  // a worker without a node context (unit tests)
  return worker_freeze_all_budget(spec.ctx ? spec.ctx->node() : defaults);
}

// Soft quit: every user freezes (cause quit); answers how many did and who
// did not. A user who does not answer in time (a freeze waiting behind a
// long deferred answer) counts as not saved: the node's exit code says so.
// The last good states of users left down are written too.
caf::result<std::uint64_t, std::vector<std::string>> worker_actor_state::quit() {
  auto promise = self->make_response_promise<std::uint64_t, std::vector<std::string>>();
  auto budget = spec.ctx->node().shutdown_freeze_seconds * 0.9;
  auto saved = std::make_shared<std::uint64_t>(0);
  auto not_saved = std::make_shared<std::vector<std::string>>();
  auto pending = std::make_shared<int>(2);
  auto one_done = [promise, pending, saved, not_saved]() mutable {
    if (--*pending == 0)
      promise.deliver(*saved, std::move(*not_saved));
  };
  save_restart_states(saved, not_saved, one_done);
  core->freeze_all(freeze_purpose::quit, deadline_after(node_context::to_duration(budget)),
                   [one_done, saved, not_saved](std::uint64_t frozen, const std::vector<std::string>& failed) mutable {
                     *saved += frozen;
                     for (auto& user : failed)
                       not_saved->push_back(registry::redact(user));
                     one_done();
                   });
  return promise;
}

// A user left down (quarantined) still has his last good state
// here, and only here: the soft quit writes it, as his freeze would have.
void worker_actor_state::save_restart_states(std::shared_ptr<std::uint64_t> saved,
                                             std::shared_ptr<std::vector<std::string>> not_saved,
                                             std::function<void()> done) {
  auto deposit = spec.deposit;
  std::vector<std::pair<std::string, store::parcel>> left;
  for (auto& [user, encoded] : core->states_left_down()) {
    try {
      left.emplace_back(user, store::decode(encoded));
    } catch (const std::exception& e) {
      spdlog::error("worker {}: the last good state of user {} does not decode: {}", spec.name,
                    registry::redact(user), e.what());
    }
  }
  if (left.empty() || !deposit)
    return done();
  auto pending = std::make_shared<std::size_t>(left.size());
  for (auto& [user, parcel] : left) {
    parcel.cause = store::parcel_cause::quit;
    self->request(deposit, spec.ctx->request_timeout(), put_atom::value, parcel_kind::user, user, std::move(parcel))
      .then(
        [saved, pending, done](std::uint64_t) mutable {
          ++*saved;
          if (--*pending == 0)
            done();
        },
        [this, pending, done, not_saved, user = user](caf::error& err) mutable {
          spdlog::error("worker {}: the last good state of user {} could not be written: {}", spec.name,
                        registry::redact(user), self->system().render(err));
          not_saved->push_back(registry::redact(user));
          if (--*pending == 0)
            done();
        });
  }
}

// An operator drains this worker: it takes no new user, freezes all of its
// users, and stops once all are durable (the group does not replace a
// worker that stopped normally). A failed freeze keeps it in service.
caf::result<std::uint64_t, std::uint64_t> worker_actor_state::drain() {
  auto promise = self->make_response_promise<std::uint64_t, std::uint64_t>();
  core->drain(deadline_after(freeze_all_budget()),
              [promise](std::uint64_t frozen, const std::vector<std::string>& failed) mutable {
                promise.deliver(frozen, static_cast<std::uint64_t>(failed.size()));
              });
  return promise;
}

// An operator drops a user: his actor stops at once, without freezing; the
// answer comes once he is gone (his down message), so nothing of his runs after it.
caf::result<bool> worker_actor_state::drop(const std::string& user) {
  auto id = core->live_id(user);
  switch (core->drop(user)) {
    case drop_verdict::gone:  // he rested: no actor
      forget_resting(user);
      if (spec.ctx->census)
        self->send(spec.ctx->census, drop_atom::value, user);
      return true;
    case drop_verdict::no_such_user: return make_error(errc::no_such_user, user);
    case drop_verdict::await_down: break;
  }
  auto promise = self->make_response_promise<bool>();
  dropping.emplace(id, promise);
  return promise;
}

// Its node fenced itself: every user freezes now and leaves (the deposit
// refuses those placed again elsewhere); the worker forgets them at once.
void worker_actor_state::fence() {
  auto budget = node_context::to_duration(spec.ctx->node().shutdown_freeze_seconds * 0.9);
  auto freezing = core->fence(deadline_after(budget));
  if (freezing == 0)
    return;
  spdlog::warn("worker {}: fenced: {} user(s) freeze and leave; the deposit refuses those placed again elsewhere",
               spec.name, freezing);
  fenced.insert(actors->begin(), actors->end());  // they finish their freeze even if the worker stops
  actors->clear();
}

}  // namespace troupe
