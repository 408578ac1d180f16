#pragma once
/// \file
/// `troupe census`: a node's census in a terminal (table, tree, JSON, or
/// refreshed in place like top). Exit 0 on success, 1 when the node cannot be
/// reached or refuses, 2 on a usage error.

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace troupe {

struct census_flags {
  std::string url;
  std::string token;
  std::string cacert;                ///< https: PEM CA(s) to verify the node with; "": the system's
  bool json = false;
  bool tree = false;
  bool top = false;
  std::vector<std::string> filters;  ///< kind=…, prefix=…, worker=…, state=…, node=…
  int limit = 50;
  int iterations = 0;                ///< --top: stop after N refreshes (0: until Ctrl-C)
  bool limit_given = false;          ///< --limit was on the command line (--top lists 1000 otherwise)
  std::string sort = "handled";      ///< --top: handled (handled/s) | mailbox | service, first order
};

/// Declares the subcommand's options on `cmd`.
void add_census_options(CLI::App& cmd, census_flags& flags);

/// Runs the subcommand; returns the process's exit code.
int run_census(const census_flags& flags);

}  // namespace troupe
