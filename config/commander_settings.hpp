#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <cstdint>
#include <string>

namespace troupe::config {

/// `[commander]`
struct commander_settings {
  double user_expiry_hours = 720;
  double guest_expiry_hours = 24;
  std::string durability = "freeze";             ///< global store: freeze (at soft quit) | reply (before each ack)
  std::uint64_t global_max_value_bytes = 1048576; ///< a larger global value is refused (413)
  std::uint64_t global_max_waiters = 1024;       ///< requesters queued per key for a lease; 503 past it
  double global_max_lease_seconds = 600;         ///< a longer lease TTL is refused (400)
  std::string orchestration_log;                 ///< JSON lines of operator actions; "": <deposit.path>/orchestration.log
  std::uint64_t orchestration_log_max_bytes = 10485760;  ///< rotated past this size
  std::uint64_t orchestration_log_files = 5;     ///< rotated files kept (orchestration.log.1 …)
  std::string default_group;                     ///< where a newcomer is born; "": the first [[group]]
};

}  // namespace troupe::config
