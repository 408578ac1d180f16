#include "actors/worker_spawn.hpp"

#include "actors/worker_pipes.hpp"
#include "actors/worker_process.hpp"

#include <openssl/crypto.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace troupe {

namespace {

// The child's bootstrap as an unnamed in-memory file (nothing on disk, no
// pipe that could fill): its descriptor, or -1 with errno set.
int write_bootstrap(worker_bootstrap boot, const std::string& token, std::size_t pipes) {
  boot.token = token;
  boot.pipes = static_cast<std::uint32_t>(pipes);
  auto text = encode_bootstrap(boot);
  OPENSSL_cleanse(boot.token.data(), boot.token.size());
  OPENSSL_cleanse(boot.cookie_secret.data(), boot.cookie_secret.size());
  int fd = ::memfd_create("troupe-worker-bootstrap", MFD_CLOEXEC);
  bool ok = fd >= 0;
  for (std::size_t done = 0; ok && done < text.size();) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    ok = n > 0;
    done += ok ? static_cast<std::size_t>(n) : 0;
  }
  ok = ok && ::lseek(fd, 0, SEEK_SET) == 0;
  OPENSSL_cleanse(text.data(), text.size());
  if (!ok) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace

worker_child_start start_worker_child(const worker_bootstrap& boot, const std::string& token, std::uint16_t gate_port,
                                      const std::string& worker, const std::vector<int>& pipe_ends) {
  int boot_fd = write_bootstrap(boot, token, pipe_ends.size());
  if (boot_fd < 0)
    return {-1, std::string("cannot write its bootstrap: ") + std::strerror(errno)};
  // Every source above every target: a dup2 onto a descriptor still to be
  // moved would lose it (copies, close-on-exec, closed again below).
  const int lowest_free = worker_pipe_fd + static_cast<int>(pipe_ends.size());
  std::vector<int> sources;
  for (int fd : pipe_ends) {
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, lowest_free);
    if (high < 0) {
      int err = errno;
      close_pipe_ends(sources);
      ::close(boot_fd);
      return {-1, std::string("cannot pass its pipes: ") + std::strerror(err)};
    }
    sources.push_back(high);
  }
  if (boot_fd < lowest_free) {
    int high = ::fcntl(boot_fd, F_DUPFD_CLOEXEC, lowest_free);
    ::close(boot_fd);
    boot_fd = high;
    if (boot_fd < 0) {
      int err = errno;
      close_pipe_ends(sources);
      return {-1, std::string("cannot write its bootstrap: ") + std::strerror(err)};
    }
  }
  std::vector<std::string> args{"troupe",         "worker",
                                "--parent",       "127.0.0.1:" + std::to_string(gate_port),
                                "--parent-pid",   std::to_string(::getpid()),
                                "--worker",       worker,
                                "--bootstrap-fd", std::to_string(worker_bootstrap_fd)};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "TROUPE_", 7) != 0 && std::strncmp(*e, "PGPASSWORD=", 11) != 0)
      env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, boot_fd, worker_bootstrap_fd);
  for (std::size_t i = 0; i < sources.size(); ++i)
    posix_spawn_file_actions_adddup2(&fa, sources[i], worker_pipe_fd + static_cast<int>(i));
  posix_spawn_file_actions_addclosefrom_np(&fa, lowest_free);  // no socket of the node's
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the node blocks SIGTERM/SIGINT in all its threads
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(boot_fd);
  close_pipe_ends(sources);
  if (rc != 0)
    return {-1, std::string("cannot start its process: ") + std::strerror(rc)};
  return {pid, {}};
}

}  // namespace troupe
