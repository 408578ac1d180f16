#pragma once
/// \file
/// The node binary's entry point: `troupe node [flags]`.

#include "actors/app.hpp"

namespace troupe {

/// Runs the troupe command line with the user actor types `types`
/// (a group's `user_type` names one of them). Returns the process exit code:
/// 0 after an orderly stop (SIGTERM/SIGINT), 2 for bad flags or a bad recipe.
int node_main(int argc, char** argv, app_types types);

}  // namespace troupe
