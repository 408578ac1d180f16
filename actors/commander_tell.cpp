// The commander routes messages between users (README "Messages between users").
#include "actors/commander_state.hpp"
#include "actors/errors.hpp"
#include "config/group_settings.hpp"
#include "config/limits_settings.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>

namespace troupe {

// His worker may wake him (the claim, within hold_seconds) before his handler runs.
caf::duration commander_state::tell_budget() const {
  return node_context::to_duration(ctx->limits().request_timeout_seconds + ctx->limits().hold_seconds);
}

// A message for user `msg.to`: to his worker if he is live; if not, he is
// woken (placed like a request's wake) only when the deposit has his
// parcel — a message never creates anybody. Held while he is being frozen.
// `again`: this is its second routing (he had left the actor first asked).
void commander_state::tell(user_message msg, tell_promise promise, bool again) {
  using R = tell_outcome::result;
  if (!registry::valid_user_name(msg.to)) {
    promise.deliver(tell_reply::of(R::invalid, "not a user name"));
    return;
  }
  if (hold_tell(msg, promise))
    return;
  if (index().worker_of(msg.to))
    return place_for_tell(std::move(msg), std::move(promise), again);
  auto to = msg.to;
  self->request(deposit, ctx->hold_timeout(), get_atom::value, parcel_kind::user, to)
    .then(
      [this, msg, promise, again](std::vector<store::parcel>& found) mutable {
        if (found.empty() && !index().worker_of(msg.to) && !core->departing(msg.to)) {
          promise.deliver(tell_reply::of(R::unknown_user, "no user " + msg.to + " (never seen, or expired)"));
          return;
        }
        if (!hold_tell(msg, promise))
          place_for_tell(std::move(msg), std::move(promise), again);
      },
      [promise](caf::error& err) mutable {
        promise.deliver(tell_reply::of(R::unavailable, is(err, errc::bad_state)
                                                         ? "the recipient's stored state is quarantined"
                                                         : "the deposit did not answer; retry"));
      });
}

// He is being frozen: the message waits for the outcome (bounded).
bool commander_state::hold_tell(user_message& msg, tell_promise& promise) {
  if (!core->departing(msg.to))
    return false;
  commander_waiter w;
  w.told = promise;
  w.msg = msg;
  auto id = enlist(std::move(w));
  switch (core->hold_tell(msg.to, id)) {
    case tell_hold::route: take(id); return false;
    case tell_hold::held: return true;
    case tell_hold::full: break;
  }
  take(id);
  promise.deliver(tell_reply::of(tell_outcome::result::unavailable, "the recipient has too many messages waiting"));
  return true;
}

void commander_state::place_for_tell(user_message msg, tell_promise promise, bool again) {
  using R = tell_outcome::result;
  std::string group;
  if (!index().worker_of(msg.to))
    if (auto relocated = core->take_relocation(msg.to))
      group = std::move(*relocated);
  if (group.empty() || !ctx->group(group))
    group = default_group;
  if (!index().worker_of(msg.to) && index().users() >= ctx->limits().max_live_users) {
    ctx->metrics.live_user_refusals.fetch_add(1, std::memory_order_relaxed);
    promise.deliver(tell_reply::of(R::unavailable, "the node is at its limit of live users"));
    return;
  }
  auto epoch = next_owner_epoch();
  if (!epoch) {
    promise.deliver(tell_reply::of(R::unavailable, "no owner epoch yet"));
    return;
  }
  const bool newly_placed = !index().worker_of(msg.to);
  auto slot = index().place(msg.to, *epoch, group, steady::now());
  if (!slot) {  // a message does not grow a group: the sender may retry
    promise.deliver(tell_reply::of(R::unavailable, "no worker of group " + group + " admits the recipient now"));
    return;
  }
  attach_order order{msg.to, {}, {}, true, *epoch, {}};
  if (newly_placed)
    order.channels = placed_with_channels(msg.to);
  // A message is a change: one in flight to a member that dies may have been handled there.
  auto watch = watch_remote(*slot, [promise]() mutable {
    promise.deliver(tell_reply::of(R::unavailable, "the recipient's member went down with the message: it may or "
                                                   "may not have been delivered"));
  });
  self->request(handles[*slot], tell_budget(), tell_atom::value, std::move(order), msg)
    .then(
      [this, watch, msg, promise, again](tell_reply& r) mutable {
        if (!unwatch(watch))
          return;
        if (r.result == tell_reply::not_here && !again)
          return tell(std::move(msg), std::move(promise), true);
        promise.deliver(std::move(r));
      },
      [this, watch, promise](caf::error&) mutable {
        if (unwatch(watch))
          promise.deliver(tell_reply::of(R::unavailable, "the recipient's worker did not answer"));
      });
}

}  // namespace troupe
