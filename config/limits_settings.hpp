#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <cstdint>

namespace troupe::config {

/// `[limits]`
struct limits_settings {
  std::uint64_t max_body_bytes = 1048576;      ///< 413 past it
  std::uint64_t max_header_bytes = 16384;      ///< 431 past it
  double request_timeout_seconds = 30;         ///< 504 past it
  std::uint64_t max_inflight = 10000;          ///< 503 + Retry-After past it
  double hold_seconds = 5;                     ///< wait for a user between two homes, then 503
  double idle_timeout_seconds = 60;            ///< keep-alive connection with no request: closed
  double read_timeout_seconds = 30;            ///< a started request must be read within this
  std::uint64_t user_queue_length = 1024;      ///< requests waiting on one busy user; 503 past it
  std::uint64_t max_pages_per_connection = 32; ///< live pages per connection; 429 past it
  std::uint64_t max_consoles = 16;             ///< open console live channels; 503 past it
  std::uint64_t max_unauthenticated_consoles = 64; ///< live channels still waiting for their token; the oldest is closed past it
  std::uint64_t max_connections = 10000;       ///< open TCP connections; the excess is answered 503 and closed
  std::uint64_t max_buffered_body_bytes = 268435456; ///< request bodies buffered across the node; 503 past it
  std::uint64_t max_live_users = 100000;       ///< live user actors on the node; newcomers get 503 past it
  std::uint64_t max_pages_per_user = 64;       ///< live pages of one user over all his connections; 429 past it
  std::uint64_t max_forwarded_requests = 10000; ///< requests in flight to users on other nodes; 503 past it
  std::uint64_t worker_pipe_frame_bytes = 67108864; ///< one request or answer on a worker process's pipe, at most
  // Streaming responses (SSE, NDJSON; docs/streaming.md).
  std::uint64_t max_streams = 1000;            ///< open streams on this node's front; 503 + Retry-After past it
  std::uint64_t max_streams_per_user = 8;      ///< open streams of one user; 503 + Retry-After past it
  std::uint64_t stream_queue_bytes = 262144;   ///< bytes queued per stream (in flight included), at most
  std::uint64_t stream_credit_bytes = 65536;   ///< the writer's credit window (≤ stream_queue_bytes)
  std::uint64_t stream_max_event_bytes = 65536; ///< one framed event, at most (≤ stream_credit_bytes)
  double stream_keepalive_seconds = 15;        ///< an SSE comment on a stream quiet this long; 0: none
  double tls_handshake_timeout_seconds = 10;   ///< a TLS handshake (and a TLS close) must complete within this
  std::uint64_t max_stream_body_bytes = 1073741824; ///< a streamed request body (route_table::upload); 413 past it
  std::uint64_t upload_chunk_bytes = 65536;    ///< one piece of a streamed body, at most: what an upload holds in memory
  double max_deferred_seconds = 300;           ///< a deferred answer (defer, keep_alive) waits at most this; then 504
  /// The machine's memory in use (MemTotal − MemAvailable) past which health
  /// warns and the node's workers admit no newcomer (and no group grows).
  double machine_memory_alarm_percent = 95;
  /// The node process's resident memory (where the commander, the fronts and
  /// the thread workers live), as a share of the machine's, past which health
  /// warns and the node places no new guest.
  double commander_memory_max_percent = 100;
  double shard_stall_ms = 100;                 ///< a handler run on an io thread longer than this is reported
  std::uint64_t max_message_bytes = 65536;     ///< an encoded message between users (tell); refused too_big past it
  // The gates in front of CAF's middleman (the worker gate, the cluster port; docs/CLUSTER.md "The gate").
  std::uint64_t gate_max_pending = 64;         ///< connections being vetted at once per gate; one more is closed
  double gate_handshake_timeout_seconds = 3;   ///< a connection must answer the gate's challenge within this
};

}  // namespace troupe::config
