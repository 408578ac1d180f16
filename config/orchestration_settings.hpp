#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <string>

namespace troupe::config {

/// `[orchestration]`: the named profiles an operator retunes the node with
/// (docs/config.md "Profiles"). Both keys are read at the start only.
struct orchestration_settings {
  std::string profiles_path;  ///< the folder of stored profiles (NAME.toml); "": none
  std::string profile_name;   ///< the profile the start puts in force; "": none (generation 1 is the recipe's)
};

}  // namespace troupe::config
