#pragma once
/// \file
/// URL and HTTP text pieces: percent-decoding, query strings, tokens (the
/// admin surface, the application's requests and answers, the recipe's CORS).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::registry {

/// The value of a hexadecimal digit (either case), -1 for anything else.
int hex_digit(char c) noexcept;

/// What percent_decode does with a malformed escape ('%' not followed by two
/// hexadecimal digits).
enum class bad_escape : std::uint8_t {
  refuse,  ///< the whole decode fails (nullopt): the admin surface's ids and queries
  keep,    ///< kept literally, as written: an application's path parameters and queries
};

/// Decodes %XX escapes (and '+' as a space when `plus_is_space`). A malformed
/// escape: nullopt (bad_escape::refuse), or kept as it is (bad_escape::keep:
/// the answer is then never nullopt).
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space = false,
                                          bad_escape on_bad = bad_escape::refuse);

/// An HTTP token (RFC 9110 §5.6.2: letters, digits and !#$%&'*+-.^_`|~; not empty):
/// a header name, a method, a cookie name.
bool is_http_token(std::string_view s) noexcept;

/// ASCII case-insensitive equality (header names, cookie names).
bool iequals(std::string_view a, std::string_view b) noexcept;

/// `s` without the spaces and tabs around it (HTTP's optional whitespace).
std::string_view trim_ows(std::string_view s) noexcept;

/// The longest start of UTF-8 text `s` of at most `max_bytes` that does not cut a
/// character (e.g. a WebSocket close reason: 123 bytes).
std::string_view utf8_prefix(std::string_view s, std::size_t max_bytes) noexcept;

/// The decoded name=value pairs of a query string ("a=1&b=x%20y"), in order;
/// nullopt when a piece does not decode.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query);

}  // namespace troupe::registry
