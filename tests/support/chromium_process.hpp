// chromium_process: the headless Chromium process a `chromium` (cdp_client.hpp)
// drives, apart from the DevTools protocol it speaks.
//
// The constructor starts `<binary> --headless --remote-debugging-port=0 ...` with a
// fresh --user-data-dir, in its own process group, with SIGKILL as its parent-death
// signal (Linux sends it when the *thread* that created the object exits). Its
// stdout and stderr go to one pipe, which a thread drains for the process's whole
// life: the `DevTools listening on ws://...` line first, then a bounded tail, so
// chromium never blocks on a full pipe.
//
// stop() waits up to 3 s for chromium to exit, then SIGKILLs its process group
// (and any member still alive after that) and reaps it; the destructor also ends
// the drain and removes the user-data-dir (kept when TROUPE_TEST_KEEP_DIRS is set).
#pragma once

#include "cdp_client.hpp"

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace troupe::test {

class chromium_process {
public:
  // Starts chromium; throws std::runtime_error when it cannot be started.
  explicit chromium_process(const chromium_options& opts);
  ~chromium_process();
  chromium_process(const chromium_process&) = delete;
  chromium_process& operator=(const chromium_process&) = delete;

  // The browser's DevTools WebSocket URL, from its output; throws (with
  // describe()) when chromium exits first or the line does not come by `deadline`.
  std::string wait_devtools_url(std::chrono::steady_clock::time_point deadline);

  // Waits up to 3 s for chromium to exit (after Browser.close), then kills its
  // process group; no member of the group outlives it. Idempotent.
  void stop();

  // Whether chromium has exited (reaped).
  bool exited();

  // The command line, the process's state (`connection`: what became of the
  // DevTools connection, if anything) and the output tail: for error messages.
  std::string describe(const std::string& connection = {});

  pid_t pid() const { return pid_; }
  const std::string& user_data_dir() const { return dir_; }
  std::string output_tail(std::size_t max_bytes) const;

private:
  void spawn();
  void release();  // stop(), the drain ended, the directory removed
  void start_drain();
  void reap_nonblocking();
  bool wait_exit(std::chrono::milliseconds timeout);
  void kill_group();

  chromium_options opts_;
  std::vector<std::string> argv_;
  std::string dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  int out_fd_ = -1;
  std::thread drain_;
  std::atomic<bool> stop_drain_{false};
  mutable std::mutex mu_;  // guards tail_, ws_url_, out_eof_
  std::condition_variable cv_;
  std::string tail_;
  std::string ws_url_;
  bool out_eof_ = false;
};

}  // namespace troupe::test
