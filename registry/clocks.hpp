#pragma once
/// \file
/// The three clocks of a user, connection or page. Idleness and expiry read the
/// real clocks (user, rpc), never last_refresh. Stamps are the server's own
/// instant: a client cannot claim activity.

#include <chrono>

namespace troupe::registry {

using wall_clock = std::chrono::system_clock;

struct clocks {
  wall_clock::time_point last_refresh{};  ///< any technical contact
  wall_clock::time_point last_user{};     ///< a real human event
  wall_clock::time_point last_rpc{};      ///< a real call (an HTTP request)

  /// A request was served at `now`.
  void stamp_rpc(wall_clock::time_point now) noexcept {
    last_refresh = now;
    last_rpc = now;
  }
  /// The latest real activity (what idleness is judged on).
  wall_clock::time_point last_activity() const noexcept {
    return last_user > last_rpc ? last_user : last_rpc;
  }
};

/// Seconds since the epoch, for messages and JSON.
inline double to_seconds(wall_clock::time_point t) noexcept {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace troupe::registry
