#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::config {

/// One `[[cors]]` entry: which other origins' pages may call the app's routes
/// (docs/http.md "CORS"). Entries are tried in order; the first whose origins
/// name the request's Origin applies. Only in a recipe file (no --set form).
struct cors_settings {
  std::vector<std::string> origins;                      ///< "https://shop.example" (scheme://host[:port]) or "*"
  std::vector<std::string> methods{"GET", "HEAD", "POST"}; ///< what a page may ask with
  std::vector<std::string> headers{"Content-Type"};      ///< request headers a page may send (besides the safelisted)
  std::uint64_t max_age_seconds = 600;                   ///< how long a browser keeps a preflight's answer
  bool credentials = false;                              ///< cookies go with the request; not with "*"
};

}  // namespace troupe::config
