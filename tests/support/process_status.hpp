#pragma once
// What the fixtures that start processes (node_process, cdp_client) say of them.

#include <sys/wait.h>

#include <string>
#include <vector>

namespace troupe::test {

// A waitpid status as an exit code: the process's own, 128 + the signal that
// ended it (as a shell says it), or -1.
inline int exit_code_of(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return -1;
}

// A command line as a log shows it.
inline std::string join_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty())
      s += ' ';
    s += a;
  }
  return s;
}

}  // namespace troupe::test
