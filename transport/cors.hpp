#pragma once
/// \file
/// The node's CORS policy (`[[cors]]` entries of the recipe; docs/http.md "CORS"):
/// the front answers a preflight itself, waking nobody, and adds the
/// Access-Control-* headers to the answers of cross-origin requests it allows.

#include "actors/messages.hpp"
#include "config/cors_settings.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class cors_policy {
public:
  cors_policy() = default;
  explicit cors_policy(std::vector<config::cors_settings> entries) : entries_(std::move(entries)) {}

  /// No entry: no cross-origin request is answered with CORS headers.
  bool empty() const noexcept { return entries_.empty(); }

  /// The first entry naming `origin` (or "*"), nullptr when none does.
  const config::cors_settings* match(std::string_view origin) const;

  /// A preflight (OPTIONS with Access-Control-Request-Method): allowed, with the
  /// headers of its 204, or refused with why (a 403 without CORS headers).
  struct preflight_answer {
    bool allowed = false;
    std::string why;
    std::vector<http_header> headers;
  };
  preflight_answer preflight(std::string_view origin, std::string_view method, std::string_view request_headers) const;

  /// The CORS headers of the answer to a request from `origin` (none when no entry names it).
  std::vector<http_header> answer_headers(std::string_view origin) const;

private:
  std::vector<config::cors_settings> entries_;
};

}  // namespace troupe
