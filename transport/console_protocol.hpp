#pragma once
/// \file
/// The messages a console sends on its live channel (`/_troupe/console/live`),
/// parsed without any state: `{"token": "..."}` (its first message, when the
/// upgrade carried no Authorization header) and `{"view": {...}}` (what it
/// shows). The console session and the fuzz target use this one parser.

#include "actors/census.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe {

/// The rows a console view may ask for at most.
inline constexpr std::uint32_t console_max_rows = 200;

/// One message from a console.
struct console_message {
  enum class kind {
    token,     ///< `{"token": "<string>"}`: `token` holds it
    view,      ///< `{"view": {...}}`: `view` holds it, clamped (kind user by default, limit 1-200)
    ignored,   ///< a JSON object that is neither
    malformed  ///< not JSON, or not a JSON object
  } what = kind::malformed;
  std::string token;
  census_query view;
};

/// Parses one text message of the live channel; never throws.
console_message parse_console_message(std::string_view text);

}  // namespace troupe
