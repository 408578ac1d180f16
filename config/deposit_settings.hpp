#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <string>

namespace troupe::config {

/// `[deposit]`
struct deposit_settings {
  std::string backend = "filesystem";  ///< filesystem (parcels under path) | postgres (tables at url)
  std::string url;                     ///< postgres: libpq URI/conninfo; "": everything from the PG* variables
  std::string schema = "troupe";       ///< postgres: the SQL schema of troupe's tables
  std::string path = "./deposit";
  /// Free space of the filesystem deposit's disk (of its size) under which
  /// health warns and the node places no new guest; 0: off. Not measured on postgres.
  double low_space_percent = 5;
  std::string fallback_path;  ///< where a soft quit writes what the deposit refused; "": $TMPDIR/troupe-rescue
};

}  // namespace troupe::config
