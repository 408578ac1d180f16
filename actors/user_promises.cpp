// The user actor's parked answers: a request whose handler returned defer()
// (docs/http.md "Deferred answers") or receive() (a streamed body, "Streamed
// uploads") waits here, apart from his queue, until a later event resolves
// its promise or its body's end handler answers, its deadline answers 504,
// or he leaves (503).
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

// Parks `call` for at most `timeout` (and limits.max_deferred_seconds): null,
// and the call answered 503, past limits.user_queue_length parked answers.
parked_answer* user_state::park(pending_call&& call, std::chrono::milliseconds timeout, std::uint64_t& id) {
  auto& m = ctx->metrics.deferred;
  if (parked.size() >= ctx->limits().user_queue_length) {
    m.refused.fetch_add(1, std::memory_order_relaxed);
    respond(call.to, routed(call, error_response(503, "this user has too many deferred answers open "
                                                      "(limits.user_queue_length)", 1)));
    return nullptr;
  }
  const auto now = clock::now();
  auto latest = now + node_context::timer_millis(ctx->limits().max_deferred_seconds);
  if (std::holds_alternative<user_promise>(call.to) && !call.req->answer_to && call.req->deadline_ms > 0) {
    // A plain request/response call (no forwarder to take a later answer) waits until its deadline, no longer.
    auto left = call.req->deadline_ms - unix_ms(registry::wall_clock::now());
    latest = std::min(latest, now + std::chrono::milliseconds(std::max<std::int64_t>(0, left)));
  }
  id = ++parked_seq;
  auto& p = parked.emplace(id, parked_answer{std::move(call), now + timeout, latest, nullptr}).first->second;
  p.deadline = std::min(p.deadline, latest);
  m.pending.fetch_add(1, std::memory_order_relaxed);
  arm_deadline(id, p, now);
  return &p;
}

void user_state::defer_answer(pending_call&& call, detail::continuation&& next) {
  std::uint64_t id = 0;
  if (!park(std::move(call), next.delay, id) || !next.on_deferred)
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
  ctx->metrics.deferred.pending.fetch_sub(1, std::memory_order_relaxed);
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

// Answers parked request `id` with `answer` (a plain answer), counted resolved.
void user_state::resolve_parked(std::uint64_t id, response&& answer) {
  auto it = parked.find(id);
  if (it == parked.end())
    return;
  auto call = std::move(it->second.call);
  parked.erase(it);
  auto& m = ctx->metrics.deferred;
  m.pending.fetch_sub(1, std::memory_order_relaxed);
  m.resolved.fetch_add(1, std::memory_order_relaxed);
  if (answer.next) {  // a parked answer is answered, not continued: its steps would need the request's turn
    auto route = call.route ? *call.route : call.req->method + " " + call.req->path;
    ctx->invalid_response_log(route, "route {}: a deferred answer was a deferred step (after, a stream, the "
                                     "global store …), which it cannot take; the client gets 500", route);
    answer = response::error(500, "the deferred answer was not a plain answer");
  }
  auto headers = checked_headers(call, answer);
  respond(call.to, plain_answer(call, std::move(answer), std::move(headers)));
}

bool user_state::promise_resolve(std::uint64_t id, response&& answer) {
  auto it = parked.find(id);
  if (it == parked.end() || it->second.upload || stopped()) {
    ctx->metrics.deferred.late.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  resolve_parked(id, std::move(answer));
  return true;
}

bool user_state::promise_keep_alive(std::uint64_t id, std::chrono::milliseconds from_now) {
  auto it = parked.find(id);
  if (it == parked.end() || it->second.upload || stopped())
    return false;
  auto& p = it->second;
  const auto now = clock::now();
  p.deadline = std::min(now + std::max(from_now, std::chrono::milliseconds(0)), p.latest);
  arm_deadline(id, p, now);  // an earlier tick finds the deadline not due and does nothing
  return true;
}

// His deadline tick for parked answer `id`: 504 if it is due (a keep_alive
// may have moved it; an upload's moves with its pieces).
void user_state::deferred_due(std::uint64_t id) {
  auto it = parked.find(id);
  const auto now = clock::now();
  if (it == parked.end() || now < it->second.deadline)
    return;
  auto& p = it->second;
  if (p.upload) {
    const auto idle = node_context::timer_millis(ctx->limits().request_timeout_seconds);
    if (now - p.upload->last_piece < idle) {  // pieces still come: its deadline follows the last one
      p.deadline = p.upload->last_piece + idle;
      return arm_deadline(id, p, now);
    }
    caf::anon_send(p.upload->source, upload_atom::value, upload_reader_handle{}, id, std::uint64_t{0});
    ctx->metrics.uploads.aborted.fetch_add(1, std::memory_order_relaxed);
  }
  auto call = std::move(p.call);
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
  for (auto& [id, p] : parked) {
    if (p.upload) {  // its body is read no further
      caf::anon_send(p.upload->source, upload_atom::value, upload_reader_handle{}, id, std::uint64_t{0});
      ctx->metrics.uploads.aborted.fetch_add(1, std::memory_order_relaxed);
    }
    respond(p.call.to, routed(p.call, error_response(503, "the user left before the deferred answer came "
                                                          "(frozen, moved or restarted), retry", 1)));
  }
  parked.clear();
}

// -- streamed bodies (route_table::upload) ---------------------------------------------

// Upload callbacks are the request's: its identity is theirs, and a throw is
// a failed handler (502 for it, and he restarts). False when it threw.
template <class F>
bool user_state::run_upload_callback(std::uint64_t id, const char* what, F&& fn) {
  auto it = parked.find(id);
  if (it == parked.end() || stopped())
    return false;
  current_cid = &it->second.call.req->cid;
  current_page = &it->second.call.req->page;
  std::string failure;
  try {
    fn();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  current_cid = current_page = &no_name;
  if (failure.empty())
    return true;
  it = parked.find(id);
  if (it == parked.end())
    return fail_outside(what, failure.c_str()), false;
  if (it->second.upload)
    caf::anon_send(it->second.upload->source, upload_atom::value, upload_reader_handle{}, id, std::uint64_t{0});
  auto failed = std::move(it->second.call);
  parked.erase(it);
  ctx->metrics.deferred.pending.fetch_sub(1, std::memory_order_relaxed);
  ctx->metrics.uploads.aborted.fetch_add(1, std::memory_order_relaxed);
  fail(failed, failure.c_str());
  return false;
}

void user_state::receive_upload(pending_call&& call, detail::continuation&& next) {
  const auto source = call.req->upload_from;
  if (!source) {
    // Not streamed (a channel call, a request from inside the node): its body
    // arrived whole, and is read as one piece.
    auto body = call.req->body;
    std::uint64_t id = 0;
    auto* p = park(std::move(call), node_context::timer_millis(ctx->limits().request_timeout_seconds), id);
    if (!p)
      return;
    p->upload = std::make_unique<parked_answer::upload_read>();
    p->upload->handlers = std::move(next.uploads);
    upload_piece whole;
    whole.id = id;
    whole.bytes = std::move(body);
    whole.last = true;
    return on_upload_piece(whole);
  }
  std::uint64_t id = 0;
  auto* p = park(std::move(call), node_context::timer_millis(ctx->limits().request_timeout_seconds), id);
  if (!p) {
    caf::anon_send(source, upload_atom::value, upload_reader_handle{}, std::uint64_t{0}, std::uint64_t{0});
    return;
  }
  p->upload = std::make_unique<parked_answer::upload_read>();
  p->upload->handlers = std::move(next.uploads);
  p->upload->source = source;
  p->upload->last_piece = clock::now();
  // Two pieces of credit: the front reads the next while this actor takes one.
  caf::anon_send(source, upload_atom::value, upload_reader_handle{self}, id, 2 * ctx->limits().upload_chunk_bytes);
}

void user_state::on_upload_piece(upload_piece& piece) {
  auto it = parked.find(piece.id);
  if (it == parked.end() || !it->second.upload)
    return;  // answered already (timed out, failed): its source was told to stop
  const auto id = piece.id;
  auto& u = *it->second.upload;
  u.last_piece = clock::now();
  u.received += piece.bytes.size();
  upload view{id, u.received};
  auto& m = ctx->metrics.uploads;
  m.bytes.fetch_add(piece.bytes.size(), std::memory_order_relaxed);
  if (!piece.aborted.empty()) {
    m.aborted.fetch_add(1, std::memory_order_relaxed);
    auto abort = std::move(u.handlers.abort);
    if (abort && !run_upload_callback(id, "an upload's abort callback", [&] { abort(view, piece.aborted); }))
      return;
    // The client is gone, or was answered by the front (a limit): this answer is for the record.
    return resolve_parked(id, response::error(400, "the upload broke: " + piece.aborted));
  }
  if (!piece.bytes.empty() && u.handlers.chunk) {
    auto chunk = u.handlers.chunk;  // a copy: the callback may end the upload (a freeze)
    if (!run_upload_callback(id, "an upload's chunk callback", [&] { chunk(view, piece.bytes); }))
      return;
  }
  it = parked.find(id);
  if (it == parked.end())
    return;
  if (!piece.last) {  // taken: its bytes are credit again
    caf::anon_send(it->second.upload->source, upload_atom::value, upload_reader_handle{self}, id,
                   std::max<std::uint64_t>(piece.bytes.size(), 1));
    return;
  }
  m.completed.fetch_add(1, std::memory_order_relaxed);
  auto end = std::move(it->second.upload->handlers.end);
  response answer = response::json({{"bytes", view.received}});
  if (end && !run_upload_callback(id, "an upload's end callback", [&] { answer = end(view); }))
    return;
  if (core->take_change())
    keeper->keep_as_good();
  resolve_parked(id, std::move(answer));
}

}  // namespace troupe
