#include "node_process.hpp"
#include "eventually.hpp"
#include "pipe_reader.hpp"
#include "process_status.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace troupe::test {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

std::string troupe_binary() {
#ifdef TROUPE_BIN
  if (const char* env = std::getenv("TROUPE_TEST_BIN"); env && *env)
    return env;
  return TROUPE_BIN;
#else
  if (const char* env = std::getenv("TROUPE_TEST_BIN"); env && *env)
    return env;
  return "troupe";
#endif
}

std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  return std::string(buf.data());
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char ch : text) {
    if (ch == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  if (!cur.empty())
    lines.push_back(cur);
  return lines;
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// posix_spawn of argv with stdin=/dev/null, stdout=out_fd (or a file), stderr=err_fd
// (or a file when err_path is set).
pid_t spawn(const std::vector<std::string>& argv, int out_write, int out_read,
            int err_write, int err_read, const std::string& err_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_write, 1);
  if (!err_path.empty())
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  else
    posix_spawn_file_actions_adddup2(&fa, err_write, 2);
  (void)out_read;
  (void)err_read;  // pipes are O_CLOEXEC: the child does not keep the read ends

  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Default signal dispositions and an empty mask in the child, whatever the test
  // process does with its own signals.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, cargv[0], &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error("posix_spawn(" + argv[0] + "): " + std::strerror(rc));
  return pid;
}

}  // namespace

// ----------------------------------------------------------------------------------
// node_process

node_process::node_process(std::vector<std::string> extra_args, node_options opts) {
  dir_ = make_temp_dir("troupe-it-");
  deposit_ = dir_ + "/deposit";
  fs::create_directories(deposit_);
  stderr_path_ = dir_ + "/node.stderr.log";

  argv_ = opts.command.empty() ? std::vector<std::string>{troupe_binary(), "node"} : opts.command;
  if (opts.with_listen) {
    argv_.push_back("--listen");
    argv_.push_back("127.0.0.1:0");
  }
  if (opts.with_deposit) {
    argv_.push_back("--deposit");
    argv_.push_back(deposit_);
  }
  for (auto& a : extra_args)
    argv_.push_back(std::move(a));

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    fs::remove_all(dir_);
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  try {
    pid_ = spawn(argv_, fds[1], fds[0], -1, -1, stderr_path_);
  } catch (...) {
    close(fds[0]);
    close(fds[1]);
    fs::remove_all(dir_);
    throw;
  }
  close(fds[1]);
  out_fd_ = fds[0];

  // Read stdout until the ready line.
  // With TLS: "https://HOST:PORT", and " and http://HOST:PORT" with node.plain_listen.
  static const std::regex ready_re(
    R"(^troupe node listening on (https?)://([^:/]+):([0-9]+)(?: and http://[^:/]+:([0-9]+))?$)");
  auto deadline = clock_type::now() + opts.start_timeout;
  std::string pending;
  std::string failure;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                      clock_type::now());
    if (left.count() <= 0) {
      failure = "no ready line within " + std::to_string(opts.start_timeout.count()) + " ms";
      break;
    }
    pollfd p{out_fd_, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 200)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0) {
      reap_nonblocking();
      if (exited_) {
        failure = "node exited (code " + std::to_string(exit_code_) + ") before ready";
        break;
      }
      continue;
    }
    char buf[4096];
    ssize_t r = ::read(out_fd_, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      wait_exit(std::chrono::milliseconds(2000));
      failure = "node closed stdout before the ready line (exit code " +
                (exited_ ? std::to_string(exit_code_) : std::string("?")) + ")";
      break;
    }
    {
      std::lock_guard<std::mutex> lk(out_mu_);
      out_.append(buf, static_cast<size_t>(r));
    }
    pending.append(buf, static_cast<size_t>(r));
    size_t nl;
    bool found = false;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      std::smatch m;
      if (std::regex_match(line, m, ready_re)) {
        ready_line_ = line;
        tls_ = m[1] == "https";
        host_ = m[2];
        port_ = static_cast<uint16_t>(std::stoul(m[3]));
        if (m[4].matched)
          plain_port_ = static_cast<uint16_t>(std::stoul(m[4]));
        found = true;
        break;
      }
    }
    if (found)
      break;
  }

  if (!failure.empty() || port_ == 0) {
    if (failure.empty())
      failure = "ready line names port 0: " + ready_line_;
    std::string diag = diagnostics();
    kill9();
    close(out_fd_);
    out_fd_ = -1;
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw std::runtime_error("troupe node failed to start: " + failure + "\n" + diag);
  }
  start_drain();
}

void node_process::start_drain() {
  // Keep reading stdout so the node never blocks on a full pipe (its log may go there).
  // The loop ends on EOF (the node, the only writer, is gone) or when told to stop.
  drain_ = std::thread([this] {
    read_pipe(out_fd_, stop_drain_, [this](const char* data, std::size_t n) {
      std::lock_guard<std::mutex> lk(out_mu_);
      out_.append(data, n);
      if (out_.size() > (8u << 20))
        out_.erase(0, out_.size() - (4u << 20));
    });
  });
}

node_process::~node_process() {
  if (!exited_) {
    reap_nonblocking();
    if (!exited_)
      kill9();
  }
  stop_drain_ = true;  // the node is reaped: EOF is due, but never wait on a stray writer
  if (drain_.joinable())
    drain_.join();
  if (out_fd_ >= 0)
    close(out_fd_);
  std::error_code ec;
  if (!std::getenv("TROUPE_TEST_KEEP_DIRS"))
    fs::remove_all(dir_, ec);
}

void node_process::reap_nonblocking() {
  if (exited_ || pid_ <= 0)
    return;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    exit_code_ = exit_code_of(status);
  }
}

bool node_process::running() {
  reap_nonblocking();
  return !exited_;
}

void node_process::send_signal(int sig) {
  reap_nonblocking();
  if (!exited_ && pid_ > 0)
    ::kill(pid_, sig);
}

void node_process::terminate() { send_signal(SIGTERM); }

void node_process::kill9() {
  reap_nonblocking();
  if (exited_ || pid_ <= 0)
    return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exited_ = true;
  exit_code_ = exit_code_of(status);
}

std::optional<int> node_process::wait_exit(std::chrono::milliseconds timeout) {
  if (eventually([&] {
        reap_nonblocking();
        return exited_;
      }, timeout, std::chrono::milliseconds(5)))
    return exit_code_;
  return std::nullopt;
}

std::string node_process::stderr_log() const { return read_file(stderr_path_); }

std::string node_process::stderr_tail(size_t max_bytes) const {
  std::string s = stderr_log();
  if (s.size() > max_bytes)
    s = "[...]" + s.substr(s.size() - max_bytes);
  return s;
}

std::string node_process::stdout_text() const {
  std::lock_guard<std::mutex> lk(out_mu_);
  return out_;
}

std::string node_process::diagnostics() {
  reap_nonblocking();
  std::ostringstream os;
  os << "---- node: " << join_args(argv_) << "\n";
  os << "---- pid " << pid_ << (exited_ ? ", exited with code " + std::to_string(exit_code_)
                                        : std::string(", running"))
     << "\n";
  std::string out = stdout_text();
  if (out.size() > 4096)
    out = "[...]" + out.substr(out.size() - 4096);
  os << "---- stdout:\n" << out << "\n";
  os << "---- stderr (" << stderr_path_ << "):\n" << stderr_tail() << "\n---- end\n";
  return os.str();
}

// ----------------------------------------------------------------------------------
// run_binary

run_result run_binary(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  std::vector<std::string> argv{troupe_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  int o[2], e[2];
  if (pipe2(o, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  if (pipe2(e, O_CLOEXEC) != 0) {
    close(o[0]);
    close(o[1]);
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  pid_t pid;
  try {
    pid = spawn(argv, o[1], o[0], e[1], e[0], "");
  } catch (...) {
    close(o[0]); close(o[1]); close(e[0]); close(e[1]);
    throw;
  }
  close(o[1]);
  close(e[1]);

  run_result res;
  auto deadline = clock_type::now() + timeout;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                      clock_type::now());
    if (left.count() <= 0) {
      res.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p[2] = {{out_open ? o[0] : -1, POLLIN, 0}, {err_open ? e[0] : -1, POLLIN, 0}};
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!p[i].revents)
        continue;
      ssize_t r = ::read(p[i].fd, buf, sizeof buf);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? res.out : res.err).append(buf, static_cast<size_t>(r));
      }
    }
  }
  close(o[0]);
  close(e[0]);
  // Both pipes are closed: the process is exiting (or was killed); reap it, bounded.
  int status = 0;
  bool reaped = eventually([&] {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      res.exit_code = exit_code_of(status);
      return true;
    }
    return r < 0 && errno != EINTR;  // nothing to reap
  }, std::chrono::seconds(5), std::chrono::milliseconds(5));
  if (!reaped) {
    res.timed_out = true;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    res.exit_code = exit_code_of(status);
  }
  return res;
}

}  // namespace troupe::test
