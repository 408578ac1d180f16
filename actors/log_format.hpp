#pragma once
/// \file
/// How the node's log lines look (recipe `log.format`): "text" for people,
/// `2026-12-02T15:04:05.123Z info message`, or "json" for machines, one object
/// a line: {"ts":"2026-12-02T15:04:05.123Z","level":"info","logger":"troupe","msg":"..."}.
/// Both are stamped in UTC with the zone written out.

#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace troupe {

/// One JSON object per log line: ts, level, logger, msg, and `tag` (a worker
/// process's name and pid) when not empty.
class json_log_formatter final : public spdlog::formatter {
public:
  explicit json_log_formatter(std::string tag = {}) : tag_(std::move(tag)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;

private:
  std::string tag_;
};

/// The formatter of `format` ("text" or "json"); `tag` (e.g. "[default-w1 4242]")
/// goes before the message in text and into a "worker" field in JSON.
std::unique_ptr<spdlog::formatter> log_formatter(const std::string& format, const std::string& tag = {});

}  // namespace troupe
