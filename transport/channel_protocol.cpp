#include "transport/channel_protocol.hpp"

namespace troupe {

using nlohmann::json;

namespace {

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool valid_method(const std::string& m) {
  return m == "GET" || m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE";
}

}  // namespace

std::variant<channel_envelope, envelope_error> parse_envelope(std::string_view text) {
  auto frame = json::parse(text.begin(), text.end(), nullptr, false);
  if (frame.is_discarded())
    return envelope_error{nullptr, "the frame is not JSON"};
  if (!frame.is_object())
    return envelope_error{nullptr, "the frame is not a JSON object (an envelope {\"id\", \"path\", …})"};
  channel_envelope e;
  if (auto id = frame.find("id"); id != frame.end()) {
    if (!id->is_number_integer() && !id->is_number_unsigned() && !id->is_string())
      return envelope_error{nullptr, "\"id\" must be an integer or a string"};
    if (id->is_string() && id->get_ref<const std::string&>().size() > 128)
      return envelope_error{nullptr, "\"id\" is longer than 128 characters"};
    e.id = *id;
  }
  auto fail = [&](std::string why) { return envelope_error{e.id, std::move(why)}; };
  auto path = frame.find("path");
  if (path == frame.end() || !path->is_string())
    return fail("\"path\" is missing or not a string");
  e.path = path->get<std::string>();
  if (e.path.empty() || e.path.front() != '/')
    return fail("\"path\" must start with '/'");
  if (e.path.size() > max_envelope_path)
    return fail("\"path\" is longer than " + std::to_string(max_envelope_path) + " characters");
  if (auto m = frame.find("method"); m != frame.end()) {
    if (!m->is_string() || !valid_method(m->get_ref<const std::string&>()))
      return fail("\"method\" must be one of GET, POST, PUT, PATCH, DELETE");
    e.method = m->get<std::string>();
  }
  if (auto page = frame.find("page"); page != frame.end() && !page->is_null()) {
    if (!page->is_string())
      return fail("\"page\" must be a string");
    e.page = page->get<std::string>();
  }
  if (auto data = frame.find("data"); data != frame.end())
    e.body = dump(*data);
  return e;
}

std::string reply_frame(const json& id, std::uint16_t status, const std::string& body, std::string_view content_type) {
  json data;
  if (body.empty())
    data = nullptr;
  else if (content_type.substr(0, 16) == "application/json") {
    data = json::parse(body, nullptr, false);
    if (data.is_discarded())
      data = body;
  } else {
    data = body;
  }
  return dump(json{{"id", id}, {"status", status}, {"data", std::move(data)}});
}

std::string error_frame(const json& id, std::uint16_t status, const std::string& text) {
  return dump(json{{"id", id}, {"status", status}, {"data", {{"error", text}}}});
}

}  // namespace troupe
