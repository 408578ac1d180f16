#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <string>

namespace troupe::config {

/// One `[[static]]` mount: files under `root` served by the front at `prefix`,
/// without an actor (docs/http.md "Static files"). Only in a recipe file.
struct static_settings {
  std::string prefix;                 ///< the URL path it answers under: "/static/", "/" (starts and ends with '/')
  std::string root;                   ///< the directory served (must exist at start); relative: to the recipe file's directory
  std::string index = "index.html";   ///< a directory's file (a plain file name); "": none (404)
  bool spa_fallback = false;          ///< an unknown path under the prefix answers the prefix's index
  std::string cache_control;          ///< its Cache-Control header; "": none (the browser revalidates with ETag)
};

}  // namespace troupe::config
