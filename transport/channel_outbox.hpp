#pragma once
/// \file
/// A socket's outgoing queue, bounded in frames and bytes, with an explicit
/// overflow policy (recipe channel.overflow): `close` (the socket is closed
/// with 1013, what was queued is dropped) or `drop_oldest` (the oldest queued
/// frames make room). Shared by the socket's session (which writes, one frame
/// in flight) and its actor (which queues pushes): a short lock, no waiting.

#include "transport/ws_frame.hpp"

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>

namespace troupe {

namespace config {
struct channel_settings;
}

class channel_outbox {
public:
  enum class policy : std::uint8_t { close, drop_oldest };
  struct limits {
    std::size_t max_frames = 256;
    std::size_t max_bytes = 1048576;
    policy overflow = policy::close;
  };
  /// What offer() did with a frame.
  enum class offer_result : std::uint8_t {
    queued,    ///< queued (under drop_oldest, `dropped` older frames went)
    too_big,   ///< larger than max_bytes alone: refused, the queue untouched
    overflow,  ///< full under `close`: refused, the queue is closed (the socket must go with 1013)
    closed,    ///< the queue was closed already: refused
  };

  explicit channel_outbox(limits l) : limits_(l) {}

  /// Queues `frame`; `dropped` (if given) receives how many older frames were dropped for it.
  offer_result offer(ws_frame frame, std::size_t* dropped = nullptr);
  offer_result offer(std::string text, std::size_t* dropped = nullptr) {
    return offer(ws_frame(std::move(text)), dropped);
  }
  /// The oldest queued frame (the writer's next), if any.
  std::optional<ws_frame> take();
  /// No frame is taken any more; what is queued is dropped.
  void close();
  bool closed() const;
  /// True once a frame overflowed under `close`.
  bool overflowed() const;
  std::size_t size() const;
  std::size_t bytes() const;

private:
  mutable std::mutex mutex_;
  limits limits_;
  std::list<ws_frame> frames_;  // a list: an empty deque allocates ~600 bytes, per socket
  std::size_t bytes_ = 0;
  bool closed_ = false;
  bool overflowed_ = false;
};

/// The limits of recipe [channel]: max_queued_frames, max_queued_bytes, overflow.
channel_outbox::limits outbox_limits(const config::channel_settings& c);

}  // namespace troupe
