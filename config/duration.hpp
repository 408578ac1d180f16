#pragma once
/// \file
/// The recipe's durations are seconds (a double: 0.25 is a quarter second).

#include <chrono>
#include <cstdint>

namespace troupe::config {

/// A recipe's duration in seconds as whole milliseconds.
inline std::chrono::milliseconds to_millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

}  // namespace troupe::config
