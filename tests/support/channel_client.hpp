// A browser of the page-channel tests (docs/channels.md): an HTTP client that
// minted its cookie, its WebSockets on /_troupe/ws, and envelope calls over them.
#pragma once

#include "test_support.hpp"
#include "ws_client.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

namespace troupe::test {

// A browser: an HTTP client whose first request minted its cookie.
struct browser {
  explicit browser(uint16_t port) : http(port) {
    auto r = http.get("/api/whoami");
    EXPECT_STATUS(r, 200);
    cid = http.cookie().value_or("");
    EXPECT_FALSE(cid.empty());
  }
  headers_t cookie() const { return {{"Cookie", "troupe_cid=" + cid}}; }
  std::unique_ptr<ws_client> channel(uint16_t port) const {
    return std::make_unique<ws_client>(port, "/_troupe/ws", cookie());
  }
  // Logs in as `user` over HTTP: the cookie the node set is this browser's now.
  void login(const std::string& user) {
    auto r = http.post_json("/api/login", {{"user", user}});
    ASSERT_STATUS(r, 200);
    cid = http.cookie().value_or("");
  }
  http_client http;
  std::string cid;
};

// Reads frames until one that `pred` takes (others are skipped), or the deadline.
template <class Pred>
std::optional<nlohmann::json> read_until(ws_client& ws, Pred pred, milliseconds timeout = milliseconds(10000)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
    auto text = ws.read(std::max(left, milliseconds(1)));
    if (!text)
      return std::nullopt;
    auto frame = nlohmann::json::parse(*text, nullptr, false);
    if (!frame.is_discarded() && pred(frame))
      return frame;
  }
  return std::nullopt;
}

// Sends one call and waits for its reply.
inline nlohmann::json call(ws_client& ws, const nlohmann::json& envelope) {
  ws.send(envelope.dump());
  auto reply = read_until(ws, [&](const nlohmann::json& f) { return f.contains("id") && f["id"] == envelope["id"]; });
  EXPECT_TRUE(reply) << "no reply to " << envelope.dump() << " (close code " << ws.close_code() << ": "
                     << ws.close_reason() << ")";
  return reply.value_or(nlohmann::json::object());
}

inline nlohmann::json open_channel(ws_client& ws, const std::string& page, int id, bool sequential = false) {
  nlohmann::json e{{"id", id}, {"page", page}, {"path", "/_troupe/openchannel"}};
  if (sequential)
    e["data"] = {{"sequential", true}};
  return call(ws, e);
}

}  // namespace troupe::test
