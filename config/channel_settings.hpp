#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <cstdint>
#include <string>

namespace troupe::config {

/// `[channel]`: the page channels on /_troupe/ws (docs/channels.md).
struct channel_settings {
  std::string overflow = "close";            ///< a socket's full outgoing queue: close (1013) | drop_oldest
  std::uint64_t max_queued_frames = 256;     ///< frames waiting to be written on one socket
  std::uint64_t max_queued_bytes = 1048576;  ///< bytes waiting to be written on one socket
  std::uint64_t max_frame_bytes = 65536;     ///< a larger incoming frame closes the socket (1009)
  std::uint64_t max_sockets = 10000;         ///< open channel sockets on the node; one more is closed (1013)
  std::uint64_t max_sockets_per_connection = 16;  ///< open sockets of one connection (cookie) on the node; past it 1013
  std::uint64_t max_sockets_per_user = 64;   ///< open sockets of one user (all his connections) on the node; past it 1013
  std::uint64_t max_calls_per_socket = 128;  ///< calls in flight (or queued on a sequential page) per socket; 503 past it
  double idle_timeout_seconds = 60;          ///< nothing received (pings included) for this long: closed
  double push_timeout_seconds = 5;           ///< how long a push waits for a socket or a user to answer
  std::uint64_t max_push_users = 1000;       ///< users one push_users may name; more: refused, nothing sent
};

}  // namespace troupe::config
