#include "actors/orchestration_log.hpp"

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/rotating_file_sink.h>

#include <chrono>
#include <ctime>
#include <filesystem>

namespace troupe {

namespace {

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

}  // namespace

orchestration_log::orchestration_log(const std::string& path, std::size_t max_bytes, std::size_t files,
                                     std::size_t kept_in_memory)
  : path_(path), kept_(kept_in_memory) {
  try {
    auto dir = std::filesystem::path(path).parent_path();
    if (!dir.empty())
      std::filesystem::create_directories(dir);
    auto sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(path, max_bytes, files);
    // Its own thread, its own queue; not registered with spdlog (no global state).
    // A full queue blocks rather than drop a line (8192 actions pending: never in practice).
    pool_ = std::make_shared<spdlog::details::thread_pool>(8192, 1);
    logger_ = std::make_shared<spdlog::async_logger>("orchestration", std::move(sink), pool_,
                                                     spdlog::async_overflow_policy::block);
    logger_->set_pattern("%v");
    logger_->set_level(spdlog::level::info);
    logger_->flush_on(spdlog::level::info);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot open the orchestration log " + path + ": " + e.what());
  }
}

orchestration_log::~orchestration_log() {
  if (!logger_)
    return;
  logger_->flush();
  // Joins the worker (this is the pool's only owner; the logger holds a
  // weak_ptr) once it has written every line queued and the flush, so the
  // logger and its file are freed after a join. Left to the members'
  // destruction they are freed after the worker drops the flush message's
  // reference to the logger inside libspdlog: the same order in fact, but one
  // ThreadSanitizer cannot see (libspdlog is not instrumented), which it
  // reports as a race on the sink's mutex (docs/RELIABILITY.md).
  pool_.reset();
}

void orchestration_log::write(const nlohmann::json& line) {
  nlohmann::ordered_json out;
  out["at"] = utc_now();
  for (auto& [key, value] : line.items())
    if (key != "at")
      out[key] = value;
  auto text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  logger_->info(text);
  recent_.push_back(std::move(text));
  while (recent_.size() > kept_)
    recent_.pop_front();
}

std::vector<std::string> orchestration_log::tail(std::size_t n) const {
  n = std::min(n, recent_.size());
  return {recent_.end() - static_cast<std::ptrdiff_t>(n), recent_.end()};
}

}  // namespace troupe
