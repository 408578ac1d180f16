#pragma once
/// \file
/// The orchestration log: one JSON line per operator action (who, what, on
/// whom, with which numbers, how it ended), appended to a file rotated by
/// size. Lines are written by the log's own background thread (spdlog's
/// asynchronous logger with a rotating file sink), so the actor that records
/// an action never waits for the disk. The last lines are also kept in memory
/// for the console's tail. Owned by the census actor; not thread-safe.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace spdlog {
class logger;
namespace details {
class thread_pool;
}
}  // namespace spdlog

namespace troupe {

class orchestration_log {
public:
  /// Opens (creating it and its directory if needed) `path`, rotated past
  /// `max_bytes` with `files` rotated files kept. Throws std::runtime_error
  /// when the file cannot be opened.
  orchestration_log(const std::string& path, std::size_t max_bytes, std::size_t files,
                    std::size_t kept_in_memory = 1000);
  ~orchestration_log();
  orchestration_log(const orchestration_log&) = delete;
  orchestration_log& operator=(const orchestration_log&) = delete;

  /// Appends `line` (an object) with its time ("at", UTC, milliseconds) put first.
  void write(const nlohmann::json& line);

  /// The last `n` lines (oldest first) of this process's life.
  std::vector<std::string> tail(std::size_t n) const;

  const std::string& path() const noexcept { return path_; }

private:
  std::string path_;
  std::size_t kept_;
  std::deque<std::string> recent_;
  std::shared_ptr<spdlog::details::thread_pool> pool_;  // the destructor joins it before the logger goes
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace troupe
