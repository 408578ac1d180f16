#include "actors/guards.hpp"

namespace troupe {

router::match find_route(const router& routes, std::string_view method, std::string_view path) {
  auto found = routes.find(method, path);
  if (!found.target && method == "HEAD")  // GET's answer; the front sends its headers only
    found = routes.find("GET", path);
  return found;
}

std::optional<http_response> guard_refusal(node_metrics& metrics, const router& routes, const router::match& found,
                                           const http_request& req, const std::string& user) {
  if (!found.target || !routes.guarded(found.index))
    return std::nullopt;
  guard_request view(req, found.params, user);
  auto verdict = routes.judge(found.index, view);
  if (verdict.allowed())
    return std::nullopt;
  const auto& key = routes.key(found.index);
  if (auto* counters = metrics.route(key))
    counters->guard_rejections.fetch_add(1, std::memory_order_relaxed);
  auto refusal = error_response(verdict.status, verdict.message);
  refusal.route_key = key;
  return refusal;
}

}  // namespace troupe
