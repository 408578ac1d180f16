// The user actor's HTTP requests: admission, his type's handlers, the steps a
// handler defers (after, the global store, a push), durable replies.
#include "actors/errors.hpp"
#include "actors/guards.hpp"
#include "actors/response_headers.hpp"
#include "actors/user_state.hpp"
#include "config/limits_settings.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

void user_state::respond(reply_to& to, http_response&& r) {
  if (auto* local = std::get_if<local_reply>(&to))
    (*local)->deliver(std::move(r));
  else if (auto* promise = std::get_if<user_promise>(&to))
    promise->deliver(std::move(r));
  else if (auto& fwd = std::get<forwarded_answer>(to); fwd.to)
    caf::anon_send(fwd.to, http_atom::value, fwd.ref, std::move(r));
}

// `r` as the answer of the route `call` matched: the front counts it in that route's figures.
http_response user_state::routed(const pending_call& call, http_response r) {
  if (call.route)
    r.route_key = *call.route;
  return r;
}

// Past its deadline the front answered 504 already: it is never run.
bool user_state::expired(pending_call& call, std::int64_t now_ms) {
  if (call.req->deadline_ms == 0 || now_ms < call.req->deadline_ms)
    return false;
  ctx->metrics.requests_expired.fetch_add(1, std::memory_order_relaxed);
  respond(call.to, error_response(504, "the request was not answered in time"));
  return true;
}

void user_state::accept(pending_call&& call) {
  if (gate)
    if (auto retry = gate->retry_after()) {  // his group is degraded: nobody of it is served
      ctx->metrics.admission_rejections[static_cast<std::size_t>(refusal_reason::degraded)].fetch_add(
        1, std::memory_order_relaxed);
      respond(call.to, error_response(503, gate->text(*retry), *retry));
      return;
    }
  switch (core->admit_request(backlog.size(), ctx->limits().user_queue_length)) {
    case arrival::serve: return serve(std::move(call));
    case arrival::queue: backlog.push_back(std::move(call)); return;
    case arrival::refuse_quarantined:
      respond(call.to, error_response(503, "this user's stored state cannot be read; an operator has been told", 30));
      return;
    case arrival::refuse_full:
    case arrival::refuse_leaving:
      respond(call.to, error_response(503, "this user has too many requests waiting", 1));
      return;
  }
}

void user_state::serve(pending_call&& call) {
  if (expired(call, unix_ms(registry::wall_clock::now())))
    return;
  auto* conn = connections.find(call.req->cid);
  if (!conn) {
    http_response moved;
    moved.route = route_note::not_here;
    respond(call.to, std::move(moved));
    return;
  }
  auto now = registry::wall_clock::now();
  clocks.stamp_rpc(now);
  conn->clocks.stamp_rpc(now);
  if (call.req->socket != socket_event::none)  // an app WebSocket's upgrade or message
    return serve_socket(std::move(call), *conn, now);
  if (call.req->channel) {  // a channel call: openchannel, or a page that must have opened it (docs/channels.md)
    if (auto answer = channel_gate(*conn, *call.req, now)) {
      respond(call.to, std::move(*answer));
      return;
    }
  } else if (!call.req->page.empty())
    if (auto refusal = touch_page(*conn, call.req->page, now)) {
      respond(call.to, std::move(*refusal));
      return;
    }
  auto found = find_route(*routes, call.req->method, call.req->path);
  if (!found.target) {
    respond(call.to, found.other_method ? error_response(405, "method not allowed")
                                        : error_response(404, "no such route"));
    return;
  }
  if (call.req->upload_from && !found.streamed_body) {  // the front streamed it for a route of another type
    respond(call.to, error_response(400, "this route does not take a streamed body"));
    return;
  }
  if (!found.out_of_range.empty()) {
    respond(call.to, error_response(400, "path parameter \"" + std::string(found.out_of_range) +
                                           "\" does not fit a 64-bit integer"));
    return;
  }
  // The front judged them when it knew whose the request was; judged here in every case.
  if (auto refusal = guard_refusal(ctx->metrics, *routes, found, *call.req, user_name)) {
    respond(call.to, std::move(*refusal));
    return;
  }
  if (found.socket) {  // a WebSocket route asked without the upgrade (RFC 9110 §15.5.22)
    auto r = routed(call, error_response(426, "this route is a WebSocket: send a WebSocket upgrade"));
    r.headers.push_back({"Upgrade", "websocket"});
    respond(call.to, std::move(r));
    return;
  }
  request q(*call.req, std::move(found.params));
  call.route = found.key;
  auto& fn = *found.target;
  run(std::move(call), [&] { return fn(keeper->app(), q); });
}

void user_state::fail(pending_call& call, const char* what) {
  ctx->metrics.handler_failures.fetch_add(1, std::memory_order_relaxed);
  ctx->handler_failure_log("user {} on {}: handler {} {} failed: {}; the worker restarts him",
                           registry::redact(user_name), worker_name, call.req->method, call.req->path, what);
  respond(call.to, routed(call, error_response(502, "the request handler failed")));
  told_early.clear();  // they would run in a dead actor
  core->failed();
}

// He failed in a handler: what it half-changed is thrown away; his restart
// starts from the last good state, which only his worker outlives him to hand over.
void user_state::leave_failed() {
  self->send(supervisor, restart_atom::value, user_name, keeper->last_good_encoded(ctx->node_name, worker_name));
  self->quit(make_error(errc::handler_failed));
}

// The handler's headers and cookies, checked: never a split response. A bad
// one makes `out` a 500, its cause logged once per route.
std::vector<http_header> user_state::checked_headers(const pending_call& call, response& out) {
  std::vector<http_header> headers;
  if (auto problem = take_headers(out, out.content_type, headers); !problem.empty()) {
    auto route = call.route ? *call.route : call.req->method + " " + call.req->path;
    ctx->invalid_response_log(route, "route {}: the handler's answer is refused ({}); the client gets 500", route,
                              problem);
    out = response::error(500, "the handler's answer had an invalid header or cookie");
    headers.clear();
  }
  return headers;
}

http_response user_state::plain_answer(const pending_call& call, response&& out, std::vector<http_header>&& headers) {
  http_response r;
  r.status = out.status;
  r.body = std::move(out.body);
  r.content_type = std::move(out.content_type);
  r.retry_after = out.retry_after;
  r.headers = std::move(headers);
  if (call.route)
    r.route_key = *call.route;
  return r;
}

void user_state::finish(pending_call&& call, response&& out) {
  auto headers = checked_headers(call, out);
  if (!out.next) {
    auto r = plain_answer(call, std::move(out), std::move(headers));
    if (core->policy().mode == durability::reply && core->dirty())
      return reply_when_durable(std::move(call), std::move(r));
    if (core->take_change())
      keeper->keep_as_good();  // one encoding per changing request: what a restart starts from
    respond(call.to, std::move(r));
    return;
  }
  auto next = std::move(out.next);
  using kind = detail::continuation::kind;
  if (next->what == kind::stream || next->what == kind::defer || next->what == kind::upload) {
    // None is a pending request: his queue goes on meanwhile.
    if (core->take_change())
      keeper->keep_as_good();
    if (next->what == kind::defer)
      return defer_answer(std::move(call), std::move(*next));  // the answer's headers are the resolving answer's
    if (next->what == kind::upload)
      return receive_upload(std::move(call), std::move(*next));
    return open_stream(std::move(call), std::move(*next), std::move(headers));
  }
  switch (next->what) {
    case kind::after:
      deferred_call = std::move(call);
      deferred_then = std::move(next->then);
      core->defer(deferral::timer, next->delay);
      return;
    case kind::login:
      core->defer(deferral::elsewhere);
      return move_connection(std::move(call), next->user);
    case kind::logout:
      core->defer(deferral::elsewhere);
      return move_connection(std::move(call), std::nullopt);
    case kind::global:
      core->defer(deferral::elsewhere);
      return await_global(std::move(call), std::move(*next));
    case kind::stream:
    case kind::defer:
    case kind::upload: return;  // handled above
    case kind::push:
      core->defer(deferral::elsewhere);
      return await_push(std::move(call), std::move(*next));
    case kind::tell:
      core->defer(deferral::tell);
      return await_tell(std::move(call), std::move(*next));
  }
}

// A global-store operation: the global store answers, then the handler's next
// step runs here (and may defer again: a lease's commit).
void user_state::await_global(pending_call&& call, detail::continuation&& step) {
  auto waiting = std::make_shared<pending_call>(std::move(call));
  auto on_reply = std::move(step.on_reply);
  auto timeout = ctx->request_timeout();
  using kind = detail::global_op::kind;
  bool changes = step.op.what == kind::set || step.op.what == kind::erase || step.op.what == kind::commit;
  core->asked();
  self->request(global_store, timeout, global_atom::value, std::move(step.op))
    .then(
      [this, waiting, on_reply](detail::global_reply& r) {
        core->answered();
        core->resume_request();
        run(std::move(*waiting), [&] { return on_reply(r); });
        core->drain();
      },
      [this, waiting, changes](caf::error& err) {
        core->answered();
        spdlog::warn("user {}: the global store did not answer: {}", registry::redact(user_name),
                     self->system().render(err));
        core->resume_request();
        // A change without an answer may still be applied: never "retry" for it.
        respond(waiting->to, changes ? error_response(503, "the global store did not answer; the change may or "
                                                           "may not have been applied, check before retrying")
                                     : error_response(503, "the global store did not answer, retry", 1));
        core->drain();
      });
}

// after_push / after_push_all: the push goes out, and once every page has
// been tried the handler's next step answers the request.
void user_state::await_push(pending_call&& call, detail::continuation&& step) {
  auto waiting = std::make_shared<pending_call>(std::move(call));
  auto order = std::move(*step.push);
  order.done = [this, waiting, then = std::move(step.on_pushed)](const push_outcome& o) {
    // Runs in this actor, at once when nothing was to be tried, else when the last page answered.
    core->resume_request();
    run(std::move(*waiting), [&] { return then ? then(o) : response::json({{"delivered", o.delivered}}); });
    core->drain();
  };
  push_now(std::move(order));
}

// His resume timer (after()): a stale number (interrupted, fenced) runs nothing.
void user_state::resume(std::uint64_t id) {
  if (!deferred_call || !core->deferral_due(id))
    return;
  auto call = std::move(*deferred_call);
  deferred_call.reset();
  auto then = std::move(deferred_then);
  run(std::move(call), [&] { return then ? then() : response::json(nullptr); });
  core->drain();
}

// The node is leaving: a deferred answer that is not due yet is answered
// now. Never "retry" for a request whose first step changed the state (it
// is kept, and frozen with him): retrying would apply it twice.
void user_state::answer_sleeper() {
  if (!deferred_call)
    return;
  auto call = std::move(*deferred_call);
  deferred_call.reset();
  deferred_then = nullptr;
  if (core->take_change())
    respond(call.to, error_response(503, "the node is shutting down: the request was interrupted after it "
                                         "changed the state, which is kept; do not simply retry it"));
  else
    respond(call.to, error_response(503, "the node is shutting down: the request was not completed, retry", 1));
}

// durability = "reply": the answer to a request that changed the store goes
// out only once the new parcel is durable.
// A write the deposit refused leaves his previous parcel intact: the change
// is rolled back in memory too, so "retry" is the truth. A write with no
// answer (timeout) may have landed: the change is kept and the client told
// the outcome is unknown — never "retry" for a change that may be applied.
void user_state::reply_when_durable(pending_call&& call, http_response&& r) {
  core->begin_request_write();
  auto parcel = make_parcel(store::parcel_cause::checkpoint);
  auto waiting = std::make_shared<std::pair<pending_call, http_response>>(std::move(call), std::move(r));
  auto payload = std::make_shared<store::bytes>(parcel.payload);
  core->asked();
  self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name, std::move(parcel))
    .then(
      [this, waiting, payload](std::uint64_t) {
        core->answered();
        keeper->keep_as_good(*payload);
        respond(waiting->first.to, std::move(waiting->second));
        core->request_written();
      },
      [this, waiting](caf::error& err) {
        core->answered();
        if (is(err, errc::stale_owner)) {  // not applied anywhere: the front re-resolves it to his owner
          http_response moved;
          moved.route = route_note::not_here;
          respond(waiting->first.to, std::move(moved));
          core->fence();
          return;
        }
        log_deposit_error("making a change durable", err);
        if (is(err, errc::deposit_failed)) {
          keeper->roll_back();
          ctx->metrics.changes_rolled_back.fetch_add(1, std::memory_order_relaxed);
          respond(waiting->first.to,
                  error_response(503, "the change could not be made durable and was not applied, retry", 1));
        } else {
          core->mark_dirty();
          respond(waiting->first.to, error_response(503, "the change may or may not have been made durable "
                                                         "(the deposit did not answer); check before retrying"));
        }
        core->request_written();
      });
}

}  // namespace troupe
