#pragma once
/// \file
/// The front side of one streaming response (SSE, NDJSON; docs/streaming.md):
/// a small actor per open stream, on the node whose front holds the socket.
/// It takes the writer's chunks (typed messages: the writer's user may live on
/// another node), keeps them in a bounded queue, hands them to its HTTP session
/// one batch at a time (one write in flight), and grants the written bytes
/// back to the writer as credit. It monitors the writer's actor (gone: the
/// stream is cut) and tells the writer when the client disconnected.

#include "actors/messages.hpp"
#include "actors/metrics.hpp"
#include "actors/stream.hpp"

#include <caf/actor.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

namespace caf {
class actor_system;
}

namespace troupe {

/// The sink's queue: what the writer sent and the client has not received
/// yet, in bytes, bounded. Plain class (the sink actor drives it; unit-tested).
class stream_queue {
public:
  /// `max_bytes`: queued plus in flight, at most (limits.stream_queue_bytes).
  /// Credit goes back in grants of at least `grant_bytes` (or whatever is owed once the queue is empty).
  stream_queue(std::uint64_t max_bytes, std::uint64_t grant_bytes) noexcept
    : max_(max_bytes), grant_min_(grant_bytes) {}

  /// Queues one framed event that the writer paid credit for. False (nothing
  /// queued) when it would pass max_bytes: a writer that ignores its credit.
  bool push(std::string data);
  /// Queues bytes nobody paid credit for (a keep-alive comment); no grant comes back for them.
  bool push_free(std::string data);

  /// The next write (everything queued, coalesced up to `max_batch` bytes
  /// but at least one chunk), or nullopt when a write is in flight or nothing is queued.
  std::optional<std::string> next_batch(std::size_t max_batch);
  /// The write in flight is done: credit to grant the writer now (0: keep
  /// collecting, the grant would be too small to be worth a message).
  std::uint64_t written();

  std::uint64_t queued_bytes() const noexcept { return queued_ + in_flight_; }  ///< queued + in flight
  bool in_flight() const noexcept { return writing_; }
  bool empty() const noexcept { return chunks_.empty() && !writing_; }

private:
  struct chunk {
    std::string data;
    bool paid;
  };
  bool add(std::string data, bool paid);
  std::uint64_t max_;
  std::uint64_t grant_min_;
  std::deque<chunk> chunks_;
  std::uint64_t queued_ = 0;
  std::uint64_t in_flight_ = 0;
  std::uint64_t in_flight_paid_ = 0;
  std::uint64_t owed_ = 0;  // written, paid, not granted back yet
  bool writing_ = false;
};

/// The HTTP session as its sink sees it (local only: the sink is spawned by
/// the session's front, in its process). Calls are posted onto the session's strand.
class stream_port {
public:
  virtual ~stream_port() = default;
  /// Writes `bytes` as one chunk; the session answers (written_atom) when it is on the wire.
  virtual void write(std::string bytes) = 0;
  /// Ends the response: `clean` with the last chunk, else the connection is cut.
  virtual void end(bool clean) = 0;
};

using stream_port_ptr = std::shared_ptr<stream_port>;

using written_atom = caf::atom_constant<caf::atom("twritten")>;  ///< session → sink: a write is on the wire
using gone_atom = caf::atom_constant<caf::atom("tgone")>;        ///< session → sink: the client went away

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::stream_port_ptr)

namespace troupe {

/// The sink's typed interface.
using stream_sink_handle = caf::typed_actor<
  /// From the writer (possibly on another node).
  caf::reacts_to<stream_msg_atom, stream_chunk>,
  /// From its session: the batch in flight is written (its size in bytes).
  caf::reacts_to<written_atom, std::uint64_t>,
  /// From its session: the client disconnected (or the session ended).
  caf::reacts_to<gone_atom>>;

/// How one sink is set up (from the recipe's limits.stream_*).
struct stream_sink_spec {
  stream_writer_for_sinks writer;  ///< the user actor that owns the stream
  std::uint64_t id = 0;      ///< the stream's id within that actor
  stream_format format = stream_format::sse;
  stream_port_ptr port;      ///< its HTTP session
  std::uint64_t queue_bytes = 262144;   ///< limits.stream_queue_bytes
  std::uint64_t credit_bytes = 65536;   ///< limits.stream_credit_bytes (≤ queue_bytes)
  std::chrono::milliseconds keepalive{15000};  ///< limits.stream_keepalive_seconds (SSE only; 0: none)
  node_metrics* metrics = nullptr;      ///< the front node's counters (troupe_stream_*)
};

/// Spawns the sink of one stream. It tells the writer `open` with its credit
/// at once, and ends by itself when the stream ends (either side) — counting
/// itself out of troupe_stream_open then (the front counted it in).
stream_sink_handle spawn_stream_sink(caf::actor_system& sys, stream_sink_spec spec);

}  // namespace troupe
