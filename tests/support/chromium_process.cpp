#include "chromium_process.hpp"
#include "eventually.hpp"
#include "node_process.hpp"
#include "pipe_reader.hpp"
#include "process_status.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char** environ;

namespace troupe::test {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr size_t tail_limit = 256u << 10;  // output kept: the last 128..256 KiB

// Whether a process of group `pgid` is still alive (zombies excluded: a reparented
// child may never be reaped when PID 1 does not reap).
bool group_alive(pid_t pgid) {
  if (pgid <= 0)
    return false;
  if (::kill(-pgid, 0) != 0 && errno == ESRCH)
    return false;
  DIR* d = ::opendir("/proc");
  if (!d)
    return true;
  bool alive = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto rp = stat.rfind(')');
    if (rp == std::string::npos)
      continue;
    std::istringstream rest(stat.substr(rp + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!(rest >> state >> ppid >> pgrp))
      continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') {
      alive = true;
      break;
    }
  }
  ::closedir(d);
  return alive;
}

}  // namespace

chromium_process::chromium_process(const chromium_options& opts) : opts_(opts) {
  try {
    spawn();
  } catch (...) {
    release();  // started and failed (exec): its drain and directory go now
    throw;
  }
}

chromium_process::~chromium_process() { release(); }

void chromium_process::release() {
  stop();
  stop_drain_ = true;
  if (drain_.joinable())
    drain_.join();
  if (out_fd_ >= 0)
    ::close(out_fd_);
  out_fd_ = -1;
  if (!dir_.empty() && !std::getenv("TROUPE_TEST_KEEP_DIRS")) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (ec)  // a file still being written by a dying process: again, until it is gone
      eventually([&] {
        fs::remove_all(dir_, ec);
        return !ec;
      }, milliseconds(1000), milliseconds(50));
  }
}

void chromium_process::stop() {
  if (pid_ <= 0)
    return;
  if (!wait_exit(milliseconds(3000)))
    kill_group();
  // Renderers, zygotes and utilities live in the group: none may outlive us.
  if (group_alive(pid_)) {
    ::kill(-pid_, SIGKILL);
    eventually([&] { return !group_alive(pid_); }, milliseconds(3000));
  }
}

void chromium_process::spawn() {
  dir_ = make_temp_dir("troupe-chromium-");
  argv_ = {opts_.binary,
           "--headless",
           "--no-sandbox",
           "--disable-gpu",
           "--disable-quic",
           "--no-first-run",
           "--no-default-browser-check",
           "--disable-background-networking",
           "--disable-component-update",
           "--disable-sync",
           "--disable-extensions",
           "--disable-dev-shm-usage",
           "--remote-debugging-port=0",
           "--window-size=" + std::to_string(opts_.width) + "," + std::to_string(opts_.height),
           "--user-data-dir=" + dir_};
  for (const auto& a : opts_.extra_args)
    argv_.push_back(a);
  argv_.push_back("about:blank");

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(e));
  }
  // Everything the child needs is prepared before fork (no allocation after it).
  std::vector<char*> cargv;
  for (auto& a : argv_)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t parent = ::getpid();

  pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    if (devnull >= 0)
      ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s)
      ::signal(s, SIG_DFL);
    ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);  // no leaked fds
    ::execve(cargv[0], cargv.data(), environ);
    int e = errno;
    ssize_t ignored = ::write(err[1], &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  int fork_errno = errno;
  if (devnull >= 0)
    ::close(devnull);
  ::close(out[1]);
  ::close(err[1]);
  if (child < 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
  pid_ = child;
  ::setpgid(child, child);  // also from this side: no race with a kill(-pid_)
  out_fd_ = out[0];
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(err[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(err[0]);
  start_drain();
  if (n == static_cast<ssize_t>(sizeof exec_errno))
    throw std::runtime_error("chromium: cannot execute " + opts_.binary + ": " +
                             std::strerror(exec_errno));
}

// Reads chromium's output for the whole life of the process: the DevTools line
// first, then a bounded tail, so chromium never blocks on a full pipe.
void chromium_process::start_drain() {
  drain_ = std::thread([this] {
    std::string pending;
    bool found = false;
    read_pipe(out_fd_, stop_drain_, [&](const char* buf, size_t r) {
      std::lock_guard<std::mutex> lk(mu_);
      tail_.append(buf, r);
      if (tail_.size() > tail_limit)
        tail_.erase(0, tail_.size() - tail_limit / 2);
      if (found)
        return;
      pending.append(buf, r);
      size_t nl;
      while (!found && (nl = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        static const std::string key = "DevTools listening on ";
        auto at = line.find(key);
        if (at != std::string::npos) {
          std::string url = line.substr(at + key.size());
          while (!url.empty() && std::isspace(static_cast<unsigned char>(url.back())))
            url.pop_back();
          ws_url_ = url;
          found = true;
          cv_.notify_all();
        }
      }
      if (pending.size() > 65536)
        pending.erase(0, pending.size() - 4096);
    });
    std::lock_guard<std::mutex> lk(mu_);
    out_eof_ = true;
    cv_.notify_all();
  });
}

void chromium_process::reap_nonblocking() {
  if (reaped_ || pid_ <= 0)
    return;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    reaped_ = true;
    exit_code_ = r == pid_ ? exit_code_of(status) : -1;
  }
}

bool chromium_process::exited() {
  reap_nonblocking();
  return reaped_;
}

bool chromium_process::wait_exit(milliseconds timeout) {
  return eventually([&] {
    reap_nonblocking();
    return reaped_;
  }, timeout, milliseconds(5));
}

void chromium_process::kill_group() {
  if (pid_ <= 0)
    return;
  ::kill(-pid_, SIGKILL);
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    exit_code_ = r == pid_ ? exit_code_of(status) : -1;
  }
}

std::string chromium_process::output_tail(size_t max_bytes) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (tail_.size() > max_bytes)
    return "[...]" + tail_.substr(tail_.size() - max_bytes);
  return tail_;
}

std::string chromium_process::describe(const std::string& connection) {
  reap_nonblocking();
  std::ostringstream os;
  os << "---- chromium: " << join_args(argv_) << "\n";
  os << "---- pid " << pid_
     << (reaped_ ? ", exited with code " + std::to_string(exit_code_) : std::string(", running"))
     << (connection.empty() ? std::string() : "; connection: " + connection) << "\n";
  os << "---- output tail:\n" << output_tail(8192) << "\n---- end\n";
  return os.str();
}

std::string chromium_process::wait_devtools_url(clock_type::time_point deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (!ws_url_.empty())
      return ws_url_;
    if (clock_type::now() >= deadline) {
      lk.unlock();
      throw std::runtime_error("chromium: no 'DevTools listening on' line within " +
                               std::to_string(opts_.start_timeout.count()) + " ms\n" + describe());
    }
    cv_.wait_for(lk, milliseconds(100));
    lk.unlock();
    reap_nonblocking();
    bool gone = reaped_;
    lk.lock();
    if (gone && ws_url_.empty()) {
      // Let the drain thread collect the last output (EOF once the children are gone).
      cv_.wait_for(lk, milliseconds(1000), [&] { return out_eof_; });
      lk.unlock();
      throw std::runtime_error("chromium exited (code " + std::to_string(exit_code_) +
                               ") before the DevTools line\n" + describe());
    }
  }
}

}  // namespace troupe::test
