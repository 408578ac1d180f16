#pragma once
// The worker processes of a node under test (isolation = "process"), found in /proc.

#include "process_status.hpp"

#include <cctype>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace troupe::test {

// The command line of process `pid`, its NUL separators as spaces ("" once it is gone).
inline std::string cmdline_of(pid_t pid) {
  auto s = proc_text("/proc/" + std::to_string(pid) + "/cmdline");
  for (auto& c : s)
    if (c == '\0')
      c = ' ';
  return s;
}

inline pid_t parent_of(pid_t pid) {
  auto stat = proc_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos)
    return -1;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

inline bool is_zombie(pid_t pid) {
  auto stat = proc_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

// Every live `troupe worker` process whose parent is `node`.
inline std::vector<pid_t> worker_processes(pid_t node) {
  std::vector<pid_t> out;
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    auto name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])))
      continue;
    pid_t pid = std::stoi(name);
    if (parent_of(pid) == node && !is_zombie(pid) && cmdline_of(pid).find(" worker ") != std::string::npos)
      out.push_back(pid);
  }
  return out;
}

// The worker process of `node` serving worker `name` (-1: none).
inline pid_t worker_pid(pid_t node, const std::string& name) {
  for (auto pid : worker_processes(node))
    if (cmdline_of(pid).find(" --worker " + name + " ") != std::string::npos)
      return pid;
  return -1;
}

inline bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 || is_zombie(pid); }

}  // namespace troupe::test
