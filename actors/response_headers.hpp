#pragma once
/// \file
/// The checks a handler's headers and cookies pass before they leave the node
/// (docs/http.md "Headers and cookies"): what would split a response, reach a
/// hop-by-hop or framing header the platform owns, or overwrite the platform's
/// cookie is refused, and the answer becomes a 500 instead.

#include "actors/messages.hpp"

#include <troupe/app.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// The platform's connection cookie: no handler may set it.
inline constexpr std::string_view platform_cookie = "troupe_cid";

/// "" when `name: value` may go out as a response header, else why not, in one
/// line that quotes no byte of the value (it may hold CR or LF: a log line must not split).
std::string header_problem(std::string_view name, std::string_view value);

/// The Set-Cookie value for `name`=`value` with `attributes`, attributes in the
/// order Max-Age, Path, Domain, Secure, HttpOnly, SameSite; or, in `problem`,
/// why it cannot be one.
struct set_cookie {
  std::string line;
  std::string problem;
};
set_cookie make_set_cookie(std::string_view name, std::string_view value, const cookie_attributes& attributes);

/// 301, 302, 303, 307 or 308.
constexpr bool is_redirect_status(std::uint16_t status) noexcept {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/// Checks a handler's answer's headers and moves them into `out` (a
/// "Content-Type" header replaces `content_type` instead); "" or the first problem
/// (`in.invalid` first), and then nothing is moved.
std::string take_headers(response& in, std::string& content_type, std::vector<http_header>& out);

}  // namespace troupe
