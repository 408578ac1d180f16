#pragma once
/// \file
/// Guards (docs/http.md "Guards"): the one rule that judges a request by its
/// route's guards, shared by the front (before any actor: a refusal wakes
/// nobody) and the user actor (again, before his handler: no route is open
/// because the front could not tell whose a request was).

#include "actors/app.hpp"
#include "actors/messages.hpp"
#include "actors/metrics.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace troupe {

/// The route of `routes` for `method` `path`; a HEAD takes GET's route when it has none.
router::match find_route(const router& routes, std::string_view method, std::string_view path);

/// The verdict of the guards of route `found` (matched by find_route) on
/// `req` for `user`: nullopt when they let it through or it has none; else
/// the refusal ({"error": message}, the route's key set), counted in
/// troupe_guard_rejections_total.
std::optional<http_response> guard_refusal(node_metrics& metrics, const router& routes, const router::match& found,
                                           const http_request& req, const std::string& user);

}  // namespace troupe
