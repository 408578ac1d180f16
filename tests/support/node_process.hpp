// node_process: the real `troupe` binary, started for one integration test.
//
//   troupe::test::node_process node({"--set", "limits.max_body_bytes=4096"});
//   troupe::test::http_client c(node.port());
//
// The node is started as
//   TROUPE_BIN node --listen 127.0.0.1:0 --deposit <fresh temp dir> <extra args>
// with its stdout piped (drained by a thread once the ready line has been read) and its
// stderr written to <temp dir>/node.stderr.log. The constructor returns once the line
// `troupe node listening on http://HOST:PORT` has been read, or throws (with the
// node's stderr in the message) when it does not come within the start timeout.
// The destructor SIGKILLs a node still running and removes the temp dir.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace troupe::test {

// The node binary under test (TROUPE_BIN, set by the build).
std::string troupe_binary();

// A fresh directory under $TMPDIR (or /tmp); the caller removes it.
std::string make_temp_dir(const std::string& prefix);

struct node_options {
  std::chrono::milliseconds start_timeout{15000};
  bool with_deposit = true;   // pass --deposit <temp dir>/deposit
  bool with_listen = true;    // pass --listen 127.0.0.1:0
  // The program and its first arguments, instead of {TROUPE_BIN, "node"} (e.g.
  // {"/bin/bash", "scripts/run.sh"}): whatever prints the node's ready line.
  std::vector<std::string> command;
};

class node_process {
public:
  explicit node_process(std::vector<std::string> extra_args = {}, node_options opts = {});
  ~node_process();
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  uint16_t port() const { return port_; }
  bool tls() const { return tls_; }                 // the ready line said https://
  uint16_t plain_port() const { return plain_port_; }  // node.plain_listen's port, 0: none
  const std::string& host() const { return host_; }
  pid_t pid() const { return pid_; }
  const std::string& ready_line() const { return ready_line_; }
  const std::string& temp_dir() const { return dir_; }
  const std::string& deposit_dir() const { return deposit_; }
  const std::vector<std::string>& argv() const { return argv_; }

  void terminate();              // SIGTERM
  void send_signal(int sig);
  void kill9();                  // SIGKILL (and reap)
  // The exit code once the process has exited (128 + signal when killed by a
  // signal), or nullopt if it is still running after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  bool running();

  std::string stderr_log() const;           // the whole stderr log file
  std::string stderr_tail(size_t max_bytes = 8192) const;
  std::string stdout_text() const;          // everything read from stdout so far
  // A block for a failure message: command line, exit state, stdout, stderr tail.
  std::string diagnostics();

private:
  void reap_nonblocking();
  void start_drain();

  std::vector<std::string> argv_;
  std::string dir_, deposit_, stderr_path_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  uint16_t port_ = 0;
  uint16_t plain_port_ = 0;
  bool tls_ = false;
  std::string host_, ready_line_;
  mutable std::mutex out_mu_;
  std::string out_;
  std::atomic<bool> stop_drain_{false};
  std::thread drain_;
};

// Runs TROUPE_BIN with `args` to completion (killed after `timeout`).
struct run_result {
  int exit_code = -1;        // 128 + signal when killed by a signal
  bool timed_out = false;
  std::string out, err;
};
run_result run_binary(const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

// Lines of `text`, without the trailing empty line of a final '\n'.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace troupe::test
