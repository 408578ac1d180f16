#include "actors/stream.hpp"

#include <caf/actor_system_config.hpp>
#include <nlohmann/json.hpp>

namespace troupe {

const char* content_type_of(stream_format f) noexcept {
  return f == stream_format::ndjson ? "application/x-ndjson" : "text/event-stream";
}

void register_stream_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<stream_chunk>("troupe.stream_chunk");
  cfg.add_message_type<stream_event>("troupe.stream_event");
}

namespace streaming {

namespace {

// A field value on one line: a line break would start a new field.
void append_field(std::string& out, std::string_view field, std::string_view value) {
  out += field;
  out += ": ";
  for (char c : value)
    out += (c == '\n' || c == '\r') ? ' ' : c;
  out += '\n';
}

}  // namespace

std::string sse_event(std::string_view data, std::string_view name, std::string_view id) {
  std::string out;
  out.reserve(data.size() + name.size() + id.size() + 24);
  if (!name.empty())
    append_field(out, "event", name);
  if (!id.empty())
    append_field(out, "id", id);
  std::size_t start = 0;
  for (;;) {  // one data line per line; "\r\n", "\r" and "\n" end a line (the SSE grammar)
    auto end = data.find_first_of("\r\n", start);
    out += "data: ";
    out.append(data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    out += '\n';
    if (end == std::string_view::npos)
      break;
    start = end + (data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n' ? 2 : 1);
    if (start >= data.size()) {  // a trailing line break: one empty data line keeps it
      out += "data: \n";
      break;
    }
  }
  out += '\n';
  return out;
}

std::string sse_comment(std::string_view text) {
  std::string out = ": ";
  for (char c : text)
    out += (c == '\n' || c == '\r') ? ' ' : c;
  out += "\n\n";
  return out;
}

std::string ndjson_line(const nlohmann::json& value) {
  auto out = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += '\n';
  return out;
}

bool credit_window::take(std::uint64_t n) noexcept {
  if (n <= available_ && !slow_) {
    available_ -= n;
    return true;
  }
  if (!slow_) {
    slow_ = true;
    fresh_slow_ = true;
  }
  wanted_ = n;
  return false;
}

bool credit_window::grant(std::uint64_t n) noexcept {
  available_ += n;
  if (slow_ && available_ >= wanted_) {
    slow_ = false;
    fresh_slow_ = false;
    return true;
  }
  return false;
}

}  // namespace streaming

}  // namespace troupe
