// Messages between users (README "Messages between users"): the ones he sends
// (tell, tell_then) and the ones he is sent, served one at a time with his
// requests and made durable like them.
#include "actors/errors.hpp"
#include "actors/user_state.hpp"
#include "config/limits_settings.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

namespace {

tell_outcome refused_as(tell_outcome::result r, std::string why) { return tell_outcome{r, std::move(why)}; }

}  // namespace

void user_state::tell(detail::tell_order order) {
  auto done = std::move(order.done);
  send_message(
    std::move(order.message),
    [this, done](const tell_outcome& o) {
      if (done)
        run_callback([&] { done(o); });
    },
    true);
}

// Counted on the sender's node, once per message: sent, then delivered or refused{reason}.
void user_state::count_outcome(const tell_outcome& o) {
  if (o.delivered())
    ctx->metrics.messages.delivered.fetch_add(1, std::memory_order_relaxed);
  else if (auto i = static_cast<std::size_t>(o.what); i < ctx->metrics.messages.refused.size())
    ctx->metrics.messages.refused[i].fetch_add(1, std::memory_order_relaxed);
}

// The sender waits for the commander (a wake: the deposit's read and the
// recipient's claim, each within hold_seconds) and the recipient's handler.
caf::duration user_state::message_timeout() const {
  return node_context::to_duration(ctx->limits().request_timeout_seconds + 3 * ctx->limits().hold_seconds);
}

// Sends `m` through the commander, which knows where everybody lives; `then`
// runs here with the outcome. One too big or not addressed to a user name
// is refused here, before anything leaves; with `early` (a tell() from a
// running handler) that outcome waits until the handler has returned.
void user_state::send_message(detail::encoded_message m, std::function<void(const tell_outcome&)> then, bool early) {
  using R = tell_outcome::result;
  ctx->metrics.messages.sent.fetch_add(1, std::memory_order_relaxed);
  std::optional<tell_outcome> now;
  const auto max = ctx->limits().max_message_bytes;
  if (m.data.size() > max)
    now = refused_as(R::too_big, "the message is " + std::to_string(m.data.size()) +
                                " bytes encoded, more than limits.max_message_bytes (" + std::to_string(max) + ")");
  else if (!registry::valid_user_name(m.to))
    now = refused_as(R::invalid, "not a user name (1-64 of [A-Za-z0-9_.@-], not a guest)");
  if (now) {
    count_outcome(*now);
    if (early)
      told_early.emplace_back(std::move(then), std::move(*now));
    else
      then(*now);
    return;
  }
  // A guest's name carries his connection's secret: his messages come from "".
  user_message msg{registry::is_guest(user_name) ? std::string() : user_name, std::move(m.to), std::move(m.name),
                   std::move(m.data)};
  core->asked();
  self->request(commander, message_timeout(), tell_atom::value, std::move(msg))
    .then(
      [this, then](tell_reply& r) {
        core->answered();
        auto o = r.outcome();
        count_outcome(o);
        then(o);
      },
      [this, then](caf::error& err) {
        core->answered();
        auto o = refused_as(R::unavailable, "the message was not answered in time (" + self->system().render(err) + ")");
        count_outcome(o);
        then(o);
      });
}

// tell_then(): the request's next step runs once the message's outcome is
// known; messages for him are served meanwhile (the core's "telling"), or two
// users telling each other would wait for each other until the timeout.
void user_state::await_tell(pending_call&& call, detail::continuation&& step) {
  auto waiting = std::make_shared<pending_call>(std::move(call));
  auto on_told = std::move(step.on_told);
  send_message(
    std::move(step.message),
    [this, waiting, on_told](const tell_outcome& o) {
      auto next = [this, waiting, on_told, o] {
        run(std::move(*waiting), [&] {
          return on_told ? on_told(o) : response::json({{"delivered", o.delivered()}}, o.status());
        });
      };
      if (core->tell_answered() == tell_answer::park) {  // a message's change is being written: the answer follows it
        told_after_write.emplace_back(std::move(next));
        return;
      }
      next();
      core->drain();
    },
    false);
}

// Outcomes refused before they left, once the handler that sent them has returned.
void user_state::flush_told_early() {
  while (!told_early.empty() && !stopped()) {
    auto due = std::move(told_early);
    told_early.clear();
    for (auto& [done, outcome] : due)
      done(outcome);
  }
}

void user_state::fail_outside(const char* what, const char* why) {
  ctx->metrics.handler_failures.fetch_add(1, std::memory_order_relaxed);
  ctx->handler_failure_log("user {} on {}: {} failed: {}; the worker restarts him", registry::redact(user_name),
                           worker_name, what, why);
  told_early.clear();  // they would run in a dead actor
  core->failed();
}

// A message for him: served now, or after the request or wake that keeps
// him busy (bounded like his requests: user_queue_length).
void user_state::accept_message(pending_message&& pm) {
  using R = tell_outcome::result;
  if (gate)
    if (auto retry = gate->retry_after()) {
      pm.to.deliver(tell_reply::of(R::unavailable, gate->text(*retry)));
      return;
    }
  switch (core->admit_message(message_backlog.size(), ctx->limits().user_queue_length)) {
    case arrival::serve: return serve_message(std::move(pm));
    case arrival::queue: message_backlog.push_back(std::move(pm)); return;
    case arrival::refuse_quarantined:
      pm.to.deliver(tell_reply::of(R::unavailable, "the recipient's stored state cannot be read"));
      return;
    case arrival::refuse_leaving:  // the commander routes it again, to where he is next
      pm.to.deliver(tell_reply{tell_reply::not_here, "the recipient is leaving this worker"});
      return;
    case arrival::refuse_full:
      pm.to.deliver(tell_reply::of(R::unavailable, "the recipient has too many messages waiting"));
      return;
  }
}

// Runs his type's handler for the message, like a request's: it may
// mutate(), durability applies (reply: delivered once the change is
// durable), and a throw is a handler failure (he restarts; nothing it changed is kept).
void user_state::serve_message(pending_message&& pm) {
  using R = tell_outcome::result;
  auto& m = pm.msg;
  if (m.data.size() > ctx->limits().max_message_bytes) {
    pm.to.deliver(tell_reply::of(R::too_big, "the message is larger than the recipient's limits.max_message_bytes"));
    return;
  }
  auto* fn = messages ? messages->find(m.name) : nullptr;
  if (!fn) {
    pm.to.deliver(tell_reply::of(R::not_accepted, "the recipient's actor type does not accept message " + m.name));
    return;
  }
  auto now = registry::wall_clock::now();
  clocks.stamp_rpc(now);  // a message is activity: he does not freeze under it
  {
    busy_scope timed{cost.get()};
    current_cid = &no_name;
    current_page = &no_name;
    current_sender = &m.from;
    try {
      (*fn)(keeper->app(), m.data, m.from);
    } catch (const bad_message& e) {
      current_sender = &no_name;
      if (!core->changed_now()) {  // its decoding failed before any application code ran
        pm.to.deliver(tell_reply::of(R::invalid, "the message does not decode as " + m.name + ": " + e.what()));
        return;
      }
      pm.to.deliver(tell_reply::of(R::handler_failed, "the recipient's message handler failed"));
      return fail_outside("a message handler", e.what());
    } catch (const std::exception& e) {
      current_sender = &no_name;
      pm.to.deliver(tell_reply::of(R::handler_failed, "the recipient's message handler failed"));
      return fail_outside("a message handler", e.what());
    } catch (...) {
      current_sender = &no_name;
      pm.to.deliver(tell_reply::of(R::handler_failed, "the recipient's message handler failed"));
      return fail_outside("a message handler", "unknown exception");
    }
    current_sender = &no_name;
  }
  if (core->policy().mode == durability::reply && core->dirty())
    return deliver_when_durable(std::move(pm));
  if (core->take_change())
    keeper->keep_as_good();
  pm.to.deliver(tell_reply::of(R::delivered));
  flush_told_early();
}

// The write of a message's change is done: what waited for it goes on (a
// tell_then's answer that came meanwhile first: its request is still pending).
void user_state::end_message_write() {
  core->message_written();
  flush_told_early();
  auto due = std::move(told_after_write);
  told_after_write.clear();
  for (auto& step : due) {
    core->resume_request();
    step();
  }
  core->drain();
}

// durability = "reply": "delivered" only once the change is durable (as reply_when_durable).
void user_state::deliver_when_durable(pending_message&& pm) {
  using R = tell_outcome::result;
  core->begin_message_write();
  auto parcel = make_parcel(store::parcel_cause::checkpoint);
  auto payload = std::make_shared<store::bytes>(parcel.payload);
  auto waiting = std::make_shared<pending_message>(std::move(pm));
  core->asked();
  self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name, std::move(parcel))
    .then(
      [this, waiting, payload](std::uint64_t) {
        core->answered();
        keeper->keep_as_good(*payload);
        waiting->to.deliver(tell_reply::of(R::delivered));
        end_message_write();
      },
      [this, waiting](caf::error& err) {
        core->answered();
        if (is(err, errc::stale_owner)) {  // applied nowhere: his new home gets it
          waiting->to.deliver(tell_reply{tell_reply::not_here, "a newer placement holds the recipient"});
          core->fence();
          return;
        }
        log_deposit_error("making a message's change durable", err);
        if (is(err, errc::deposit_failed)) {
          keeper->roll_back();
          ctx->metrics.changes_rolled_back.fetch_add(1, std::memory_order_relaxed);
          waiting->to.deliver(tell_reply::of(R::unavailable, "the change could not be made durable and was not applied"));
        } else {
          core->mark_dirty();
          waiting->to.deliver(tell_reply::of(R::unavailable, "the change may or may not have been made durable"));
        }
        end_message_write();
      });
}

}  // namespace troupe
