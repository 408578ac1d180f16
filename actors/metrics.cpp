#include "actors/metrics.hpp"

namespace troupe {

const char* to_string(actor_kind kind) noexcept {
  switch (kind) {
    case actor_kind::user: return "user";
    case actor_kind::connection: return "connection";
    case actor_kind::page: return "page";
    case actor_kind::worker: return "worker";
    case actor_kind::group: return "group";
    case actor_kind::commander: return "commander";
    case actor_kind::count_: break;
  }
  return "unknown";
}

std::string node_metrics::prometheus_text() const {
  std::string out;
  out.reserve(2048);
  auto line = [&out](const std::string& name, const std::string& labels, auto value) {
    out += name;
    if (!labels.empty())
      out += "{" + labels + "}";
    out += " " + std::to_string(value) + "\n";
  };
  out += "# HELP troupe_http_requests_total HTTP requests answered, by status code.\n"
         "# TYPE troupe_http_requests_total counter\n";
  for (std::size_t code = 100; code < http_requests.size(); ++code)
    if (auto n = http_requests[code].load(std::memory_order_relaxed))
      line("troupe_http_requests_total", "code=\"" + std::to_string(code) + "\"", n);
  out += "# HELP troupe_actors Live actors of this node, by kind.\n# TYPE troupe_actors gauge\n";
  for (std::size_t k = 0; k < actors.size(); ++k)
    line("troupe_actors", std::string("kind=\"") + to_string(static_cast<actor_kind>(k)) + "\"",
         actors[k].load(std::memory_order_relaxed));
  out += "# HELP troupe_users Users known to this node, by state.\n# TYPE troupe_users gauge\n";
  line("troupe_users", "state=\"active\"",
       actors[static_cast<std::size_t>(actor_kind::user)].load(std::memory_order_relaxed));
  line("troupe_users", "state=\"frozen\"", 0);  // the freezer (deposit) fills this in
  out += "# HELP troupe_user_restarts_total User actors restarted by their worker after a crash.\n"
         "# TYPE troupe_user_restarts_total counter\n";
  line("troupe_user_restarts_total", "", user_restarts.load(std::memory_order_relaxed));
  out += "# HELP troupe_handler_failures_total Application handlers that threw (answered 502).\n"
         "# TYPE troupe_handler_failures_total counter\n";
  line("troupe_handler_failures_total", "", handler_failures.load(std::memory_order_relaxed));
  out += "# HELP troupe_http_inflight Requests handed to actors and not answered yet.\n"
         "# TYPE troupe_http_inflight gauge\n";
  line("troupe_http_inflight", "", inflight.load(std::memory_order_relaxed));
  return out;
}

}  // namespace troupe
