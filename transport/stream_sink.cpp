#include "transport/stream_sink.hpp"

#include <caf/all.hpp>

namespace troupe {

// -- stream_queue ---------------------------------------------------------------------

bool stream_queue::add(std::string data, bool paid) {
  if (queued_bytes() + data.size() > max_)
    return false;
  queued_ += data.size();
  chunks_.push_back(chunk{std::move(data), paid});
  return true;
}

bool stream_queue::push(std::string data) {
  return add(std::move(data), true);
}

bool stream_queue::push_free(std::string data) {
  return add(std::move(data), false);
}

std::optional<std::string> stream_queue::next_batch(std::size_t max_batch) {
  if (writing_ || chunks_.empty())
    return std::nullopt;
  std::string out = std::move(chunks_.front().data);
  std::uint64_t paid = chunks_.front().paid ? out.size() : 0;
  chunks_.pop_front();
  while (!chunks_.empty() && out.size() + chunks_.front().data.size() <= max_batch) {
    auto& c = chunks_.front();
    if (c.paid)
      paid += c.data.size();
    out += c.data;
    chunks_.pop_front();
  }
  queued_ -= out.size();
  in_flight_ = out.size();
  in_flight_paid_ = paid;
  writing_ = true;
  return out;
}

std::uint64_t stream_queue::written() {
  if (!writing_)
    return 0;
  writing_ = false;
  in_flight_ = 0;
  owed_ += std::exchange(in_flight_paid_, 0);
  // Small grants cost a message each; a drained queue grants all it owes (the writer may be waiting for it).
  if (owed_ >= grant_min_ || chunks_.empty())
    return std::exchange(owed_, 0);
  return 0;
}

// -- the sink actor --------------------------------------------------------------------

namespace {

constexpr std::size_t max_batch_bytes = 65536;

// The sink's whole interface: its public one and its own timer (private: an
// SSE keep-alive comment is due).
using sink_actor = stream_sink_handle::extend<caf::reacts_to<tick_atom>>;

struct sink_state {
  static const char* name;

  sink_actor::stateful_pointer<sink_state> self = nullptr;
  stream_sink_spec spec;
  std::optional<stream_queue> queue;
  bool closing = false;  // the writer closed: end once the queue is written
  bool ended = false;
  bool wrote_since_tick = false;
  std::int64_t counted_bytes = 0;  // this sink's share of troupe_stream_queued_bytes

  ~sink_state() {
    if (!spec.metrics)
      return;
    spec.metrics->stream.queued_bytes.fetch_sub(counted_bytes, std::memory_order_relaxed);
    spec.metrics->stream.open.fetch_sub(1, std::memory_order_relaxed);
  }

  void account() {
    auto now = static_cast<std::int64_t>(queue->queued_bytes());
    if (spec.metrics)
      spec.metrics->stream.queued_bytes.fetch_add(now - counted_bytes, std::memory_order_relaxed);
    counted_bytes = now;
  }

  void tell_writer(stream_event::kind k, std::uint64_t bytes = 0) {
    stream_event e;
    e.id = spec.id;
    e.what = static_cast<std::uint8_t>(k);
    e.bytes = bytes;
    if (k == stream_event::kind::open)
      e.sink = self;
    caf::anon_send(spec.writer, stream_msg_atom::value, std::move(e));
  }

  void flush() {
    if (ended)
      return;
    if (auto batch = queue->next_batch(max_batch_bytes)) {
      wrote_since_tick = true;
      spec.port->write(std::move(*batch));
    } else if (closing && queue->empty()) {
      end(true);
    }
    account();
  }

  // Ends the response (clean: with its last chunk) and this sink.
  void end(bool clean) {
    if (ended)
      return;
    ended = true;
    spec.port->end(clean);
    self->quit();
  }

  void on_chunk(stream_chunk& c) {
    if (c.id != spec.id || ended || closing)
      return;
    if (!c.data.empty()) {
      if (!queue->push(std::move(c.data))) {
        // Only a writer that ignores its credit gets here (ours never does):
        // the memory bound holds, the stream is cut and the writer told.
        tell_writer(stream_event::kind::gone);
        return end(false);
      }
      if (spec.metrics)
        spec.metrics->stream.events.fetch_add(1, std::memory_order_relaxed);
    }
    closing = c.last;
    flush();
  }

  void on_written(std::uint64_t) {
    if (auto grant = queue->written(); grant > 0 && !closing)
      tell_writer(stream_event::kind::credit, grant);
    flush();
  }

  void on_gone() {
    if (ended)
      return;
    if (spec.metrics)
      spec.metrics->stream.disconnects.fetch_add(1, std::memory_order_relaxed);
    if (!closing)
      tell_writer(stream_event::kind::gone);
    ended = true;  // the session is gone or going: nothing to end there
    self->quit();
  }

  void on_tick() {
    if (ended)
      return;
    // A comment only on a quiet stream: one that writes needs none.
    if (!std::exchange(wrote_since_tick, false) && queue->empty())
      if (queue->push_free(streaming::sse_comment("keep-alive")))
        flush();
    self->delayed_send(self, spec.keepalive, tick_atom::value);
  }
};

const char* sink_state::name = "troupe.stream_sink";

sink_actor::behavior_type sink_impl(sink_actor::stateful_pointer<sink_state> self,
                                            stream_sink_spec spec) {
  auto& st = self->state;
  st.self = self;
  st.spec = std::move(spec);
  st.queue.emplace(st.spec.queue_bytes, std::max<std::uint64_t>(1, st.spec.credit_bytes / 4));
  self->monitor(st.spec.writer);
  self->set_down_handler([self](caf::down_msg& m) {
    if (m.source == self->state.spec.writer.address())
      self->state.end(false);  // the writer's actor went away (crash, freeze, its node): the stream is cut
  });
  st.tell_writer(stream_event::kind::open, st.spec.credit_bytes);
  if (st.spec.format == stream_format::sse && st.spec.keepalive.count() > 0)
    self->delayed_send(self, st.spec.keepalive, tick_atom::value);
  return {
    [self](stream_msg_atom, stream_chunk& c) { self->state.on_chunk(c); },
    [self](written_atom, std::uint64_t n) { self->state.on_written(n); },
    [self](gone_atom) { self->state.on_gone(); },
    [self](tick_atom) { self->state.on_tick(); },
  };
}

}  // namespace

stream_sink_handle spawn_stream_sink(caf::actor_system& sys, stream_sink_spec spec) {
  return sys.spawn(sink_impl, std::move(spec));
}

}  // namespace troupe
