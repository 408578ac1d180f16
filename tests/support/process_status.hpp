#pragma once
// What the fixtures that start processes (node_process, cdp_client) say of them.

#include <sys/wait.h>

#include <sys/types.h>

#include <fstream>
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

// The resident memory of process `pid` in KiB (VmRSS); -1 once it is gone.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

}  // namespace troupe::test
