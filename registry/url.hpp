#pragma once
/// \file
/// URL pieces: percent-decoding and query strings (the admin surface, the
/// application's requests).

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::registry {

/// The value of a hexadecimal digit (either case), -1 for anything else.
int hex_digit(char c) noexcept;

/// Decodes %XX escapes (and '+' as a space when `plus_is_space`); nullopt
/// when an escape is malformed.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space = false);

/// The decoded name=value pairs of a query string ("a=1&b=x%20y"), in order;
/// nullopt when a piece does not decode.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query);

}  // namespace troupe::registry
