#include "actors/log_format.hpp"

#include "registry/rate_history.hpp"  // iso_utc

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>

#include <chrono>

namespace troupe {

void json_log_formatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
  auto level = spdlog::level::to_string_view(msg.level);
  // In this order (ts first): a person reading the raw lines sees the time first.
  nlohmann::ordered_json line{{"ts", registry::iso_utc(ms)},
                      {"level", std::string(level.data(), level.size())},
                      {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
                      {"msg", std::string(msg.payload.data(), msg.payload.size())}};
  if (!tag_.empty())
    line["worker"] = tag_;
  // Invalid UTF-8 in a message (a client's bytes) is replaced, never a broken line.
  auto text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  text += '\n';
  dest.append(text.data(), text.data() + text.size());
}

std::unique_ptr<spdlog::formatter> json_log_formatter::clone() const {
  return std::make_unique<json_log_formatter>(tag_);
}

std::unique_ptr<spdlog::formatter> log_formatter(const std::string& format, const std::string& tag) {
  if (format == "json")
    return std::make_unique<json_log_formatter>(tag);
  auto pattern = std::string("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ ") + (tag.empty() ? "" : "[" + tag + "] ") + "%v";
  return std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc);
}

}  // namespace troupe
