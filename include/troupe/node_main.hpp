#pragma once
/// \file
/// An application's entry point: its main() hands its user actor types to
/// node_main, which is the whole `troupe` command line (`node`, `census`,
/// `worker`, `--version`, `--help`):
///
///     int main(int argc, char** argv) {
///       return troupe::node_main(argc, argv, troupe::user_types<cart_user>("cart"));
///     }
///
/// Link `troupe::troupe` (CMake: `find_package(troupe 0.2 REQUIRED)`) or
/// `pkg-config --cflags --libs troupe`; then run `./app node --app cart`.

#include <troupe/app.hpp>

namespace troupe {

/// Runs the troupe command line with the user actor types `types`
/// (a group's `user_type` names one of them). Returns the process exit code:
/// 0 after an orderly stop (SIGTERM/SIGINT) and for `--version`, `--help` and
/// the usage shown when no command is given; 2 for bad flags or a bad recipe
/// (README "The node" lists the others).
int node_main(int argc, char** argv, app_types types);

}  // namespace troupe
