#pragma once
// What the fixtures that start processes (node_process, cdp_client) say of them.

#include <sys/wait.h>

#include <sys/types.h>
#include <fcntl.h>
#include <unistd.h>

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

// The text of a /proc file ("" when it cannot be read): with read(2), since a
// process that dies while its file is read fails the read with ESRCH, which a
// std::ifstream turns into an exception.
inline std::string proc_text(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return out;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0)
        out.clear();
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// The resident memory of process `pid` in KiB (VmRSS); -1 once it is gone.
inline long rss_kib(pid_t pid) {
  auto text = proc_text("/proc/" + std::to_string(pid) + "/status");
  auto at = text.find("\nVmRSS:");
  return at == std::string::npos ? -1 : std::stol(text.substr(at + 7));
}

}  // namespace troupe::test
