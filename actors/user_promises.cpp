// The user actor's deferred answers (user_actor_base::defer, docs/http.md
// "Deferred answers"): a request whose handler returned defer() waits here,
// apart from his queue, until a later event resolves its promise, its
// deadline answers 504, or he leaves (503).
#include "actors/response_headers.hpp"
#include "actors/user_state.hpp"
#include "config/limits_settings.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace troupe {

namespace {

using clock = parked_answer::clock;

std::chrono::milliseconds ms_until(clock::time_point t, clock::time_point now) {
  return std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(t - now));
}

}  // namespace

void user_state::park(pending_call&& call, detail::continuation&& next) {
  auto& m = ctx->metrics.deferred;
  if (parked.size() >= ctx->limits().user_queue_length) {
    m.refused.fetch_add(1, std::memory_order_relaxed);
    respond(call.to, routed(call, error_response(503, "this user has too many deferred answers open "
                                                      "(limits.user_queue_length)", 1)));
    return;
  }
  const auto now = clock::now();
  auto latest = now + node_context::timer_millis(ctx->limits().max_deferred_seconds);
  if (std::holds_alternative<user_promise>(call.to) && !call.req->answer_to && call.req->deadline_ms > 0) {
    // A plain request/response call (no forwarder to take a later answer) waits until its deadline, no longer.
    auto left = call.req->deadline_ms - unix_ms(registry::wall_clock::now());
    latest = std::min(latest, now + std::chrono::milliseconds(std::max<std::int64_t>(0, left)));
  }
  const auto id = ++parked_seq;
  auto& p = parked.emplace(id, parked_answer{std::move(call), now + next.delay, latest}).first->second;
  p.deadline = std::min(p.deadline, latest);
  m.pending.fetch_add(1, std::memory_order_relaxed);
  arm_deadline(id, p, now);
  if (!next.on_deferred)
    return;
  // Still the handler's turn (its identity is the request's): a throw is a failed handler.
  std::string what;
  try {
    next.on_deferred(promise(this, id));
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  auto it = parked.find(id);
  if (it == parked.end())  // it resolved its promise before it threw
    return fail_outside("a defer() callback", what.c_str());
  auto failed = std::move(it->second.call);
  parked.erase(it);
  m.pending.fetch_sub(1, std::memory_order_relaxed);
  fail(failed, what.c_str());  // 502, and he restarts from his last good state
}

// Tells the waiting front how long it waits now, and arms his own 504 for then.
void user_state::arm_deadline(std::uint64_t id, parked_answer& p, clock::time_point now) {
  auto wait = ms_until(p.deadline, now);
  http_response interim;  // for a forwarder: wait that long (never reaches a client)
  interim.deferred_ms = static_cast<std::uint64_t>(wait.count()) + 1;  // 0 would mean "not interim"
  if (auto* local = std::get_if<local_reply>(&p.call.to)) {
    (*local)->extend(wait);
  } else if (auto* promise = std::get_if<user_promise>(&p.call.to); promise && p.call.req->answer_to) {
    // From another node: the interim answer ends its forwarder's request (and
    // its timeout); the real answer follows as a message.
    promise->deliver(std::move(interim));
    p.call.to = forwarded_answer{p.call.req->answer_to, p.call.req->answer_ref};
  } else if (auto* fwd = std::get_if<forwarded_answer>(&p.call.to)) {
    caf::anon_send(fwd->to, http_atom::value, fwd->ref, std::move(interim));
  }
  arm_timer(user_timer::deferred, wait, id);
}

bool user_state::promise_resolve(std::uint64_t id, response&& answer) {
  auto& m = ctx->metrics.deferred;
  auto it = parked.find(id);
  if (it == parked.end() || stopped()) {
    m.late.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto call = std::move(it->second.call);
  parked.erase(it);
  m.pending.fetch_sub(1, std::memory_order_relaxed);
  m.resolved.fetch_add(1, std::memory_order_relaxed);
  if (answer.next) {  // a promise is answered, not continued: its steps would need the request's turn
    auto route = call.route ? *call.route : call.req->method + " " + call.req->path;
    ctx->invalid_response_log(route, "route {}: a promise was resolved with a deferred answer (after, a stream, "
                                     "the global store …), which it cannot take; the client gets 500", route);
    answer = response::error(500, "the deferred answer was not a plain answer");
  }
  auto headers = checked_headers(call, answer);
  respond(call.to, plain_answer(call, std::move(answer), std::move(headers)));
  return true;
}

bool user_state::promise_keep_alive(std::uint64_t id, std::chrono::milliseconds from_now) {
  auto it = parked.find(id);
  if (it == parked.end() || stopped())
    return false;
  auto& p = it->second;
  const auto now = clock::now();
  p.deadline = std::min(now + std::max(from_now, std::chrono::milliseconds(0)), p.latest);
  arm_deadline(id, p, now);  // an earlier tick finds the deadline not due and does nothing
  return true;
}

// His deadline tick for promise `id`: 504 if it is due (a keep_alive may have moved it).
void user_state::deferred_due(std::uint64_t id) {
  auto it = parked.find(id);
  if (it == parked.end() || clock::now() < it->second.deadline)
    return;
  auto call = std::move(it->second.call);
  parked.erase(it);
  auto& m = ctx->metrics.deferred;
  m.pending.fetch_sub(1, std::memory_order_relaxed);
  m.timed_out.fetch_add(1, std::memory_order_relaxed);
  respond(call.to, routed(call, error_response(504, "the deferred answer did not come in time")));
}

// He leaves (frozen, moved, restarted, fenced): nobody could resolve them
// now. Answered here, never dropped: the front would take a dropped request
// for one never run and send it again.
void user_state::answer_parked() {
  if (parked.empty())
    return;
  auto& m = ctx->metrics.deferred;
  m.pending.fetch_sub(static_cast<std::int64_t>(parked.size()), std::memory_order_relaxed);
  m.interrupted.fetch_add(parked.size(), std::memory_order_relaxed);
  for (auto& [id, p] : parked)
    respond(p.call.to, routed(p.call, error_response(503, "the user left before the deferred answer came "
                                                          "(frozen, moved or restarted), retry", 1)));
  parked.clear();
}

}  // namespace troupe
