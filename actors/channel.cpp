#include "actors/channel.hpp"

#include <nlohmann/json.hpp>

namespace troupe {

std::string push_frame(const std::string& path, const std::string& data_json) {
  // Built by hand around the data's JSON text: the data is encoded once, by
  // its sender, however many pages it goes to. The path is a JSON string.
  std::string out;
  out.reserve(path.size() + data_json.size() + 24);
  out += "{\"push\":";
  out += nlohmann::json(path).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += ",\"data\":";
  out += data_json.empty() ? std::string("null") : data_json;
  out += '}';
  return out;
}

}  // namespace troupe
