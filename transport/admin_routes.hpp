#pragma once
/// \file
/// (Internal to transport/.) The routes under /_troupe, served on an HTTP
/// session (transport/http_session.hpp) through its answering calls:
/// health (for everyone), the page channels' upgrade (/_troupe/ws, a valid
/// cookie is their credential), and the admin surface behind node.admin_token
/// (the console and its live channel, metrics, history, global, census, the
/// orchestration log, actors, TLS reload, and the operator's orders).

#include <string_view>

namespace troupe {

class http_session;

/// Serves the request of `s`, whose path `path` starts with /_troupe; `query` is its query string.
void serve_admin(http_session& s, std::string_view path, std::string_view query);

}  // namespace troupe
