#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <string>

namespace troupe::config {

/// `[log]`: the node's log lines on stderr.
struct log_settings {
  std::string format = "text";  ///< text (for people) | json (one object per line); both stamped in UTC
};

}  // namespace troupe::config
