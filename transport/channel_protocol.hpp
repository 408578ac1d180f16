#pragma once
/// \file
/// The page channel's wire format (docs/channels.md), as plain functions a
/// unit test drives: a client's frame is an envelope
/// `{"page": id, "id": n, "method": "POST", "path": "/...", "data": …}`; a
/// reply is `{"id": n, "status": code, "data": …}`; a push is
/// `{"push": path, "data": …}` (actors/channel.hpp builds it).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace troupe {

/// One call read from a channel frame.
struct channel_envelope {
  nlohmann::json id;             ///< echoed in the reply: an integer or a string (null when absent)
  std::string page;              ///< "" when the frame names none
  std::string method = "POST";   ///< upper case
  std::string path;              ///< starts with '/'; may carry a query after '?'
  std::string body;              ///< `data` as JSON text; "" when absent
};

/// Why a frame is not a call: its id (when one could be read) and a text for the client.
struct envelope_error {
  nlohmann::json id;
  std::string text;
};

/// Longest path an envelope may name.
constexpr std::size_t max_envelope_path = 2048;

/// Reads one frame's text as an envelope.
std::variant<channel_envelope, envelope_error> parse_envelope(std::string_view text);

/// The reply frame to call `id`: `body` becomes `data` as JSON when
/// `content_type` is JSON and it parses, as a string otherwise.
std::string reply_frame(const nlohmann::json& id, std::uint16_t status, const std::string& body,
                        std::string_view content_type = "application/json");

/// A reply frame with data {"error": text}.
std::string error_frame(const nlohmann::json& id, std::uint16_t status, const std::string& text);

}  // namespace troupe
