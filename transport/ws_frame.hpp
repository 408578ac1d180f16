#pragma once
/// \file
/// (Internal to transport/.) One frame a WebSocket session writes: a message
/// (text or binary) or, after the frames queued before it, the close handshake.

#include "actors/channel.hpp"

#include <cstdint>
#include <string>

namespace troupe {

struct ws_frame {
  ws_frame() = default;
  ws_frame(std::string d, frame_kind k = frame_kind::text, std::uint16_t code = 0)  // NOLINT: a text frame from its text
    : data(std::move(d)), kind(k), close_code(code) {}

  std::string data;  ///< the message; a close's reason
  frame_kind kind = frame_kind::text;
  std::uint16_t close_code = 0;  ///< frame_kind::close only

  /// Compares the payload (tests and logs read frames as their text).
  friend bool operator==(const ws_frame& f, const std::string& s) { return f.data == s; }
};

}  // namespace troupe
