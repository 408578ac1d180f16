// The commander carries out an operator's orders (freeze, push, drop, drain),
// the soft quit, the expiry sweep and the retirement of idle workers.
#include "actors/budgets.hpp"
#include "actors/commander_state.hpp"
#include "actors/errors.hpp"
#include "config/channel_settings.hpp"
#include "config/commander_settings.hpp"
#include "config/group_settings.hpp"
#include "config/recipe.hpp"
#include "config/node_settings.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

namespace troupe {

// Freeze user `name` now: answers once he is durable.
caf::result<bool> commander_state::freeze(const std::string& user) {
  auto slot = core->staffed() ? index().worker_of(user) : std::nullopt;
  if (!slot)
    return make_error(errc::no_such_user, user);
  auto promise = self->make_response_promise<bool>();
  auto watch = watch_remote(*slot, [promise]() mutable {
    promise.deliver(make_error(errc::unavailable, "his member went down before he was frozen"));
  });
  if (watch == 0)
    return promise.delegate(handles[*slot], freeze_atom::value, user);
  self->request(handles[*slot], ctx->request_timeout(), freeze_atom::value, user)
    .then(
      [this, watch, promise](bool frozen) mutable {
        if (unwatch(watch))
          promise.deliver(frozen);
      },
      [this, watch, promise](caf::error& err) mutable {
        if (unwatch(watch))
          promise.deliver(std::move(err));
      });
  return promise;
}

// push_users: through his worker when he is live; a frozen, unknown or leaving
// user is not woken for a push and counts as (0, 1).
caf::result<std::uint32_t, std::uint32_t> commander_state::push(const std::string& user, std::string& path,
                                                               std::string& data) {
  auto slot = core->staffed() ? index().worker_of(user) : std::nullopt;
  if (!slot || core->departing(user))
    return {std::uint32_t{0}, std::uint32_t{1}};
  auto promise = self->make_response_promise<std::uint32_t, std::uint32_t>();
  auto watch = watch_remote(*slot, [promise]() mutable { promise.deliver(std::uint32_t{0}, std::uint32_t{1}); });
  if (watch == 0)
    return promise.delegate(handles[*slot], push_atom::value, user, std::move(path), std::move(data));
  self->request(handles[*slot], node_context::timer_millis(ctx->channel().push_timeout_seconds),
                push_atom::value, user, std::move(path), std::move(data))
    .then(
      [this, watch, promise](std::uint32_t delivered, std::uint32_t missed) mutable {
        if (unwatch(watch))
          promise.deliver(delivered, missed);
      },
      [this, watch, promise](caf::error&) mutable {
        if (unwatch(watch))
          promise.deliver(std::uint32_t{0}, std::uint32_t{1});
      });
  return promise;
}

// Soft quit: every worker freezes all its users (within the freeze budget),
// then the global store is written; answers (frozen, not saved). Writes the
// deposit refuses are retried and parked in the fallback by the deposit
// actor itself: what comes back as not saved here is really lost.
caf::result<std::uint64_t, std::vector<std::string>> commander_state::quit(const std::string& node) {
  using names = std::vector<std::string>;
  auto promise = self->make_response_promise<std::uint64_t, names>();
  auto total = std::make_shared<std::uint64_t>(0);
  auto not_saved = std::make_shared<names>();
  // Its workers take no new user (the last in service of a single node stays: nobody else could).
  auto mine = core->slots_of(node);
  for (auto slot : mine)
    index().set_in_service(slot, false);
  // After every user froze (they may commit on their way out), the global
  // store — when the commander runs on the quitting node.
  auto finish = [this, promise, total, not_saved, node]() mutable {
    if (node != ctx->node_name) {
      promise.deliver(*total, std::move(*not_saved));
      return;
    }
    auto failed = [this, promise, total, not_saved](const caf::error& err) mutable {
      spdlog::error("soft quit: the global store could not be written: {}", self->system().render(err));
      not_saved->push_back("the global store");
      promise.deliver(*total, std::move(*not_saved));
    };
    self->request(global_store, node_context::to_duration(ctx->node().shutdown_freeze_seconds), flush_atom::value)
      .then([promise, total, not_saved](bool) mutable { promise.deliver(*total, std::move(*not_saved)); }, failed);
  };
  if (mine.empty()) {
    finish();
    return promise;
  }
  auto pending = std::make_shared<std::size_t>(mine.size());
  auto budget = node_context::to_duration(ctx->node().shutdown_freeze_seconds);
  for (auto slot : mine)
    self->request(handles[slot], budget, quit_atom::value)
      .then(
        [finish, total, not_saved, pending](std::uint64_t n, names& failed) mutable {
          *total += n;
          not_saved->insert(not_saved->end(), failed.begin(), failed.end());
          if (--*pending == 0)
            finish();
        },
        [this, finish, not_saved, pending, name = core->slots()[slot].name](caf::error& err) mutable {
          spdlog::error("soft quit: worker {} did not answer: {}", name, self->system().render(err));
          not_saved->push_back("the users of worker " + name);
          if (--*pending == 0)
            finish();
        });
  return promise;
}

// An operator drops `user`: his actor stops without freezing (if live), his
// parcel and those of the connections bound to him here are removed, and the
// connections become new guests. His resolves are held meanwhile.
caf::result<std::string, std::uint64_t> commander_state::drop(const std::string& user) {
  if (!core->staffed())
    return make_error(errc::unavailable, "no workers registered yet");
  if (!core->begin_drop(user))
    return make_error(errc::busy, "he is being frozen or dropped; retry");
  auto promise = self->make_response_promise<std::string, std::uint64_t>();
  auto fail = [this, promise, user](caf::error err) mutable {
    core->drop_failed(user);
    promise.deliver(std::move(err));
  };
  if (auto slot = index().worker_of(user)) {
    // His member going down drops him as surely: his actor went with it.
    auto watch = watch_remote(*slot, [this, promise, user]() { finish_drop(promise, user, "inactive"); });
    self->request(handles[*slot], ctx->request_timeout(), drop_atom::value, user)
      .then(
        [this, watch, promise, user](bool) {
          if (unwatch(watch))
            finish_drop(promise, user, "active");
        },
        [this, watch, promise, user, fail](caf::error& err) mutable {
          if (!unwatch(watch))
            return;
          if (is(err, errc::no_such_user))  // placed, but his actor is gone (crashed for good)
            return finish_drop(promise, user, "inactive");
          fail(std::move(err));
        });
    return promise;
  }
  // Not live: frozen, if the deposit has his parcel (he is not woken to know).
  self->request(deposit, ctx->request_timeout(), get_atom::value, parcel_kind::user, user)
    .then(
      [this, promise, user, fail](std::vector<store::parcel>& found) mutable {
        if (found.empty() && index().unbind_user(user).empty())
          return fail(make_error(errc::no_such_user, user));
        finish_drop(promise, user, "frozen");
      },
      [this, promise, user, fail](caf::error& err) mutable {
        if (is(err, errc::bad_state))  // his parcel is quarantined: the drop lifts that too
          return finish_drop(promise, user, "quarantined");
        fail(std::move(err));
      });
  return promise;
}

void commander_state::finish_drop(caf::typed_response_promise<std::string, std::uint64_t> promise,
                                  const std::string& user, const std::string& was) {
  frozen_channels->take(user);  // his pages are not his any more
  auto cids = core->forget_dropped(user);
  // Removes are ordered after every write he made (the deposit flushes first).
  self->request(deposit, ctx->request_timeout(), remove_atom::value, parcel_kind::user, user)
    .then([](bool) {},
          [this, user](caf::error& err) {
            spdlog::error("commander: the parcel of dropped user {} could not be removed: {}", registry::redact(user),
                          self->system().render(err));
          });
  for (auto& cid : cids)
    remove_deposit_parcel(parcel_kind::connection, cid);
  if (ctx->census)
    self->send(ctx->census, drop_atom::value, user);
  spdlog::info("commander: user {} dropped ({}; {} connection(s))", registry::redact(user), was, cids.size());
  promise.deliver(was, static_cast<std::uint64_t>(cids.size()));
  // Requests held meanwhile start afresh: their connections are strangers now.
  core->dropped(user);
}

// An operator drains worker `name` of the placing group: it gets no new
// user, its users freeze, it stops; answers (frozen, failed).
caf::result<std::uint64_t, std::uint64_t> commander_state::drain(const std::string& name) {
  if (!core->staffed())
    return make_error(errc::unavailable, "no workers registered yet");
  // A worker is named <group>-w<n>, or <member>/<group>-w<n> where several members have one.
  std::optional<std::size_t> slot;
  std::size_t matches = 0;
  auto& slots = core->slots();
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (!index().retired(i) && (slots[i].name == name || slots[i].node + "/" + slots[i].name == name)) {
      slot = i;
      ++matches;
    }
  if (!slot)
    return make_error(errc::no_such_user, "no worker called " + name);
  if (matches > 1)
    return make_error(errc::bad_request, "several members have a worker called " + name + "; name it MEMBER/" + name);
  if (!index().in_service(*slot))
    return make_error(errc::refused, "worker " + name + " is drained or being drained");
  if (!index().set_in_service(*slot, false))
    return make_error(errc::refused, "worker " + name + " is the last of group " + slots[*slot].group + " in service");
  auto promise = self->make_response_promise<std::uint64_t, std::uint64_t>();
  auto s = *slot;
  auto watch = watch_remote(s, [promise]() mutable {
    promise.deliver(make_error(errc::unavailable, "the worker's member went down while it was being drained"));
  });
  self->request(handles[s], drain_answer_budget(ctx->node()), drain_atom::value)
    .then(
      [this, watch, promise, s](std::uint64_t frozen, std::uint64_t failed) mutable {
        if (!unwatch(watch))
          return;
        if (failed)
          index().set_in_service(s, true);
        promise.deliver(frozen, failed);
      },
      [this, watch, promise, s](caf::error& err) mutable {
        if (!unwatch(watch))
          return;
        // Not drained (it failed, or did not answer within its budget): back in service.
        budget_log("commander: the drain of worker {} did not complete: {}; it is back in service",
                   core->slots()[s].name, self->system().render(err));
        index().set_in_service(s, true);
        promise.deliver(std::move(err));
      });
  return promise;
}

// -- the expiry sweep ----------------------------------------------------------------------

// Expired parcels leave the deposit now and then (run on the deposit's thread).
void commander_state::schedule_sweep() {
  auto& c = ctx->commander();
  double hours = std::min(c.user_expiry_hours, c.guest_expiry_hours) / 10;
  auto period = std::chrono::seconds(std::clamp<std::int64_t>(static_cast<std::int64_t>(hours * 3600), 1, 3600));
  self->delayed_send(self, period, tick_atom::value);
}

void commander_state::sweep() {
  if (core->staffed()) {
    if (auto n = index().forget_unplaced_connections())
      spdlog::debug("commander: forgot {} connection binding(s) of users no longer live", n);
    ctx->metrics.connections_bound.store(static_cast<std::int64_t>(index().connections()), std::memory_order_relaxed);
  }
  auto& c = ctx->commander();
  self->request(deposit, expiry_sweep_budget, sweep_atom::value, c.user_expiry_hours, c.guest_expiry_hours)
    .then(
      [this](std::uint64_t n) {
        ctx->metrics.users_expired.fetch_add(n, std::memory_order_relaxed);
        ctx->metrics.users_frozen.fetch_sub(static_cast<std::int64_t>(n), std::memory_order_relaxed);
        if (n)
          spdlog::info("commander: {} expired user(s) removed from the deposit", n);
        schedule_sweep();
      },
      [this](caf::error& err) {  // failed, or no answer within its budget: the next one is scheduled all the same
        budget_log("commander: the expiry sweep failed: {}", self->system().render(err));
        schedule_sweep();
      });
}

// -- retirement ------------------------------------------------------------------------------

// How often workers beyond their group's minimum are checked for retirement
// (only when a group may grow at all).
// The groups as the settings in force say (group.NAME.workers is hot).
const std::vector<config::group_settings>& commander_state::groups_in_force(
  std::shared_ptr<const config::recipe>& keep) const {
  keep = ctx->settings_in_force();
  return keep ? keep->groups : ctx->groups();
}

// Half the shortest quiet a group needs before it retires (0.25–10 s); 10 s
// when no group may retire now, so that a lowered `workers` is seen.
std::optional<std::chrono::milliseconds> commander_state::retirement_period() const {
  std::optional<double> shortest;
  std::shared_ptr<const config::recipe> keep;
  for (auto& g : groups_in_force(keep))
    if (g.max_workers() > g.workers) {
      double s = std::min(g.worker_min_life_seconds, g.cpu_retirement_quiet_seconds) / 2;
      shortest = shortest ? std::min(*shortest, s) : s;
    }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::clamp(shortest.value_or(10.0), 0.25, 10.0) * 1000));
}

void commander_state::schedule_retirement() {
  if (auto period = retirement_period())
    self->delayed_send(self, *period, retire_atom::value);
}

// A worker of this node beyond its group's `workers`, with no user, older
// than worker_min_life_seconds, is retired once the group's CPU was quiet
// (no admission report) for cpu_retirement_quiet_seconds: its slot first
// (no user is placed there again), then the group stops it (not a restart).
void commander_state::check_retirement() {
  auto now = steady::now();
  std::shared_ptr<const config::recipe> keep;
  for (auto& g : groups_in_force(keep)) {
    auto local = local_groups.find(g.name);
    auto* mine = core->positions(ctx->node_name, g.name);
    if (!core->staffed() || local == local_groups.end() || !mine)
      continue;
    if (auto r = last_admission_report.find(g.name);
        r != last_admission_report.end() && now - r->second < std::chrono::duration<double>(g.cpu_retirement_quiet_seconds))
      continue;
    std::size_t live = 0;
    for (auto slot : *mine)  // a drained worker (out of service) is not counted: it stops by itself
      live += slot != commander_core::no_slot && index().in_service(slot);
    for (std::size_t i = mine->size(); i-- > 0 && live > static_cast<std::size_t>(std::max(1, g.workers));) {
      auto slot = (*mine)[i];
      if (slot == commander_core::no_slot || !index().in_service(slot) || index().loads()[slot] > 0 ||
          now - core->slots()[slot].since < std::chrono::duration<double>(g.worker_min_life_seconds))
        continue;
      core->retire_position(ctx->node_name, g.name, i);
      --live;
      spdlog::info("commander: worker {} retired (no users, group {} quiet; {} worker(s) left)",
                   core->slots()[slot].name, g.name, live);
      self->send(local->second, retire_atom::value, handles[slot]);
    }
  }
  schedule_retirement();
}

}  // namespace troupe
