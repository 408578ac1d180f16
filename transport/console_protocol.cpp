#include "transport/console_protocol.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace troupe {

namespace {

using nlohmann::json;

census_query view_of(const json& v) {
  auto text = [&](const char* k) { return v.contains(k) && v[k].is_string() ? v[k].get<std::string>() : ""; };
  auto number = [&](const char* k, std::int64_t dflt) {
    return v.contains(k) && v[k].is_number_integer() ? v[k].get<std::int64_t>() : dflt;
  };
  census_query q;
  q.kind = text("kind").empty() ? "user" : text("kind");
  q.prefix = text("prefix");
  q.worker = text("worker");
  q.state = text("state");
  q.offset = static_cast<std::uint64_t>(std::max<std::int64_t>(0, number("offset", 0)));
  q.limit = static_cast<std::uint32_t>(std::clamp<std::int64_t>(number("limit", 50), 1, console_max_rows));
  q.open = text("open");
  q.console = true;
  return q;
}

}  // namespace

console_message parse_console_message(std::string_view text) {
  console_message m;
  auto msg = json::parse(text.begin(), text.end(), nullptr, false);
  if (msg.is_discarded() || !msg.is_object())
    return m;
  if (auto t = msg.find("token"); t != msg.end() && t->is_string()) {
    m.what = console_message::kind::token;
    m.token = t->get<std::string>();
  } else if (auto v = msg.find("view"); v != msg.end() && v->is_object()) {
    m.what = console_message::kind::view;
    m.view = view_of(*v);
  } else {
    m.what = console_message::kind::ignored;
  }
  return m;
}

}  // namespace troupe
