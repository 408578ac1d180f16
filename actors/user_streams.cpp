// The user actor's streams (docs/streaming.md) and later() timers: his side
// of the data path, kept in his stream_book.
#include "actors/user_state.hpp"
#include "config/limits_settings.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace troupe {

stream_book& user_state::the_books() {
  if (!books)
    books = std::make_unique<stream_book>();
  return *books;
}

void user_state::open_stream(pending_call&& call, detail::continuation&& next, std::vector<http_header> headers) {
  auto& b = the_books();
  const auto now = std::chrono::steady_clock::now();
  const auto stale = now - node_context::timer_millis(ctx->limits().request_timeout_seconds);
  auto id = b.open(next.ndjson ? stream_format::ndjson : stream_format::sse, std::move(next.handlers), now, stale,
                   ctx->limits().max_streams_per_user);
  if (!id) {
    ctx->metrics.stream.refusals.fetch_add(1, std::memory_order_relaxed);
    respond(call.to,
            routed(call, error_response(503, "this user has too many open streams (limits.max_streams_per_user)", 1)));
    return;
  }
  http_response r;
  r.status = 200;
  r.content_type = content_type_of(b.find(*id)->format);
  r.stream_id = *id;
  r.headers = std::move(headers);
  respond(call.to, routed(call, std::move(r)));
}

void user_state::end_stream_here(std::uint64_t id) {
  if (auto* e = books ? books->find(id) : nullptr) {
    if (e->sink)
      self->demonitor(e->sink.address());
    books->erase(id);
  }
}

void user_state::on_stream_event(stream_event& ev) {
  using kind = stream_event::kind;
  auto* e = books ? books->find(ev.id) : nullptr;
  switch (static_cast<kind>(ev.what)) {
    case kind::open:
      if (!e || e->sink || !ev.sink) {  // closed (or dropped) before the front opened it: end it
        if (ev.sink)
          caf::anon_send(ev.sink, stream_msg_atom::value, stream_chunk{ev.id, {}, true});
        return;
      }
      e->sink = ev.sink;
      e->credit = streaming::credit_window(ev.bytes);
      self->monitor(e->sink);
      return notify(ev.id, &stream_handlers::open);
    case kind::credit:
      if (e && e->credit.grant(ev.bytes))
        notify(ev.id, &stream_handlers::ready);
      return;
    case kind::slow:
      if (e && e->credit.slow())
        notify(ev.id, &stream_handlers::slow);
      return;
    case kind::gone: {
      if (!e)
        return;
      auto gone = std::move(e->handlers.gone);
      end_stream_here(ev.id);
      if (gone)
        call_app([&] {
          stream w(this, ev.id);
          gone(w);
        });
      return;
    }
  }
}

// Runs the stream's callback `which`, if it has one (it may end the stream).
void user_state::notify(std::uint64_t id, std::function<void(stream&)> stream_handlers::*which) {
  auto* e = books ? books->find(id) : nullptr;
  if (!e || !(e->handlers.*which))
    return;
  auto fn = e->handlers.*which;  // a copy: the callback may close (erase) its own stream
  call_app([&] {
    stream w(this, id);
    fn(w);
  });
}

stream_write user_state::stream_send(std::uint64_t id, std::string_view data, std::string_view name,
                                     std::string_view event_id, bool as_json) {
  auto* e = books ? books->find(id) : nullptr;
  if (!e || !e->sink || stopped())
    return stream_write::closed;
  std::string frame;
  if (e->format == stream_format::ndjson) {
    if (as_json) {
      frame.reserve(data.size() + 1);
      frame.append(data);
      frame += '\n';
    } else {
      frame = streaming::ndjson_line(nlohmann::json(std::string(data)));
    }
  } else {
    frame = streaming::sse_event(data, name, event_id);
  }
  return send_frame(id, *e, std::move(frame));
}

stream_write user_state::stream_retry(std::uint64_t id, std::uint64_t ms) {
  auto* e = books ? books->find(id) : nullptr;
  if (!e || !e->sink || stopped())
    return stream_write::closed;
  if (e->format != stream_format::sse)
    return stream_write::written;  // NDJSON has no such field
  return send_frame(id, *e, "retry: " + std::to_string(ms) + "\n\n");
}

// A framed write of stream `id`: refused past the event limit or the credit, else sent to the sink.
stream_write user_state::send_frame(std::uint64_t id, stream_book::entry& stream, std::string frame) {
  auto* e = &stream;
  if (frame.size() > ctx->limits().stream_max_event_bytes)
    return stream_write::too_big;
  if (!e->credit.take(frame.size())) {
    if (e->credit.became_slow()) {  // told once per spell, as a message: never inside the write that ran out
      ctx->metrics.stream.slow.fetch_add(1, std::memory_order_relaxed);
      stream_event notice;
      notice.id = id;
      notice.what = static_cast<std::uint8_t>(stream_event::kind::slow);
      self->send(self, stream_msg_atom::value, std::move(notice));
    }
    return stream_write::slow;
  }
  caf::anon_send(e->sink, stream_msg_atom::value, stream_chunk{id, std::move(frame), false});
  return stream_write::written;
}

void user_state::stream_close(std::uint64_t id) {
  auto* e = books ? books->find(id) : nullptr;
  if (!e)
    return;
  if (e->sink)
    caf::anon_send(e->sink, stream_msg_atom::value, stream_chunk{id, {}, true});
  end_stream_here(id);  // not yet opened: the sink's open finds it gone and ends the stream
}

user_state::stream_status user_state::stream_state(std::uint64_t id) const {
  auto* e = books ? books->find(id) : nullptr;
  if (!e || !e->sink)
    return {};
  return {true, e->credit.slow(), e->credit.available()};
}

// A sink went down (its node, its front): as if the client went away.
void user_state::on_down(const caf::down_msg& m) {
  if (!books)
    return;
  if (auto id = books->find_by_sink(m.source)) {
    stream_event gone;
    gone.id = *id;
    gone.what = static_cast<std::uint8_t>(stream_event::kind::gone);
    on_stream_event(gone);
  }
}

bool user_state::later(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto& b = the_books();
  if (stopped())
    return false;
  auto id = b.add_timer(std::move(fn), ctx->limits().user_queue_length);
  if (!id)
    return false;
  arm_timer(user_timer::later, std::max(delay, std::chrono::milliseconds(0)), *id);
  return true;
}

void user_state::run_timer(std::uint64_t id) {
  if (!books)
    return;
  auto fn = books->take_timer(id);
  if (!fn)
    return;
  call_app([&] { (*fn)(); });
}

}  // namespace troupe
