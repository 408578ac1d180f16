#include "transport/admin_routes.hpp"

#include "actors/errors.hpp"
#include "actors/health.hpp"
#include "config/node_settings.hpp"
#include "registry/ids.hpp"
#include "registry/url.hpp"
#include "transport/channel_session.hpp"
#include "transport/console_session.hpp"
#include "transport/front.hpp"
#include "transport/http_session.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <optional>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;

namespace {

using http_framing::sv;

// X-Troupe-Operator: at most 64 printable ASCII characters, else "admin".
std::string operator_name(const http_session::request_type& req) {
  auto h = req.find("X-Troupe-Operator");
  if (h == req.end() || h->value().empty() || h->value().size() > 64)
    return "admin";
  std::string name(h->value());
  for (char c : name)
    if (c < 0x20 || c > 0x7e)
      return "admin";
  return name;
}

// An operator's order (freeze, drop, drain), carried out by the bridge and written to the orchestration log.
void order(http_session& s, std::string what, std::string target) {
  operator_order o{std::move(what), std::move(target), operator_name(s.request()), s.client_address()};
  s.call_bridge([o = std::move(o)](front& f, local_admin slot) mutable {
    caf::anon_send(f.bridge(), order_atom::value, std::move(o), std::move(slot));
  });
}

// POST /_troupe/tls/reload: 200 with what is served now, or 409 with why the
// new pair was refused (the old one still served) or that TLS is off. Reading
// two small files is the only I/O: it runs here, on the io thread, rarely.
void tls_reload(http_session& s) {
  auto& f = s.owner();
  if (!f.tls_enabled())
    return s.answer(409, error_body("TLS is off (node.tls_cert and node.tls_key are not set)"), "application/json");
  auto r = f.reload_tls();
  nlohmann::json served{{"subject", r.identity.subject}, {"serial", r.identity.serial},
                        {"not_after", r.identity.not_after_unix}};
  if (!r.ok)
    return s.answer(409, nlohmann::json{{"error", r.reason}, {"result", "refused"}, {"served", served}}.dump(),
                    "application/json");
  s.answer(200, nlohmann::json{{"result", "ok"}, {"served", served}}.dump(), "application/json");
}

// GET /_troupe/census: its parameters (docs/census.md); a bad one is a 400 naming it.
void census(http_session& s, std::string_view query) {
  auto params = registry::parse_query(query);
  if (!params)
    return s.answer(400, error_body("malformed query string"), "application/json");
  census_query q;
  for (auto& [k, v] : *params) {
    auto number = [&, &k = k, &v = v](auto& out) {
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
      return ec == std::errc{} && end == v.data() + v.size();
    };
    if (k == "kind")
      q.kind = v;
    else if (k == "prefix")
      q.prefix = v;
    else if (k == "worker")
      q.worker = v;
    else if (k == "state")
      q.state = v;
    else if (k == "node")
      q.node = v;
    else if (k == "after")
      q.after = v;
    else if (k == "probe")
      q.probe = v != "0";
    else if (k == "offset" && !number(q.offset))
      return s.answer(400, error_body("offset: must be a non-negative integer"), "application/json");
    else if (k == "limit" && !number(q.limit))
      return s.answer(400, error_body("limit: must be 1-1000"), "application/json");
  }
  s.call_bridge([q = std::move(q)](front& f, local_admin slot) mutable {
    caf::anon_send(f.bridge(), census_atom::value, std::move(q), std::move(slot));
  });
}

// /_troupe/config, /_troupe/orchestration/status|apply|reload: the orchestrator's
// (actors/orchestrator.hpp), through the bridge; docs/config.md "Profiles".
void orchestrate(http_session& s, orchestration_request q) {
  q.who = operator_name(s.request());
  q.from = s.client_address();
  s.call_bridge([q = std::move(q)](front& f, local_admin slot) mutable {
    caf::anon_send(f.bridge(), orchestrate_atom::value, std::move(q), std::move(slot));
  });
}

// POST /_troupe/orchestration/apply: the body is the profile, JSON when its
// Content-Type says so (or it starts with '{'), else TOML.
void apply_profile(http_session& s) {
  const auto& req = s.request();
  orchestration_request q;
  q.what = "apply";
  q.text = req.body();
  auto type = req.find(http::field::content_type);
  auto first = q.text.find_first_not_of(" \t\r\n");
  bool json = (type != req.end() && sv(type->value()).find("json") != std::string_view::npos) ||
              (first != std::string::npos && q.text[first] == '{');
  q.format = json ? "json" : "toml";
  orchestrate(s, std::move(q));
}

// POST /_troupe/orchestration/reload: {"name": …}, or an empty body for the active profile.
void reload_profile(http_session& s) {
  orchestration_request q;
  q.what = "reload";
  const auto& body = s.request().body();
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || (j.contains("name") && !j["name"].is_string()))
      return s.answer(400, error_body("expected {\"name\": \"<profile>\"} or an empty body"), "application/json");
    q.name = j.value("name", "");
  }
  orchestrate(s, std::move(q));
}

}  // namespace

void serve_admin(http_session& s, std::string_view path, std::string_view query) {
  auto& f = s.owner();
  auto& ctx = f.context();
  const auto& req = s.request();
  // Everything but the three operator actions only reads.
  bool reads = req.method() == http::verb::get || req.method() == http::verb::head;
  if (path == "/_troupe/health") {  // from atomics only: nothing is asked of an actor here
    if (!reads)
      return s.refuse_method("GET, HEAD");
    auto h = assess_health(ctx.health, ctx.node().health_max_restart_rate, &ctx.metrics, ctx.serving.get());
    return s.answer(h.status, std::move(h.body), "application/json");
  }
  // The page channels: for every client (a valid cookie is their credential), not the admin surface.
  if (path == "/_troupe/ws") {
    if (req.method() != http::verb::get)
      return s.refuse_method("GET");
    if (!beast::websocket::is_upgrade(req))
      return s.answer(426, error_body("a WebSocket upgrade is expected here"), "application/json");
    std::string cid(s.request_cid());
    if (!ctx.cids->verify(cid))
      cid.clear();  // refused with 1008 once the handshake is done
    return s.upgrade([&f, &cid, client = s.client_address()](front_stream&& stream,
                                                              http_session::request_type&& upgrade) mutable {
      start_channel_session(std::move(stream), std::move(upgrade), f, std::move(cid), std::move(client));
    });
  }
  if (ctx.node().admin_token.empty())  // the admin surface is off
    return s.answer(404, error_body("not found"), "application/json");
  // The console page holds no data (it asks for the token, then everything it
  // shows comes through token-checked calls); its live channel checks the token itself.
  if (path == "/_troupe/console")
    return reads ? s.answer(200, std::string(console_page()), "text/html; charset=utf-8") : s.refuse_method("GET, HEAD");
  if (path == "/_troupe/console/live") {
    if (req.method() != http::verb::get)
      return s.refuse_method("GET");
    if (!beast::websocket::is_upgrade(req))
      return s.answer(426, error_body("a WebSocket upgrade is expected here"), "application/json");
    // Only an authenticated channel takes a slot: one with the token in its
    // header now, one without it once its first message brings the token.
    bool authenticated = false;
    if (auto h = req.find(http::field::authorization); h != req.end()) {
      std::string_view v = sv(h->value());
      authenticated = v.substr(0, 7) == "Bearer " && f.admin_token_matches(v.substr(7));
    }
    if (authenticated && !f.console_opened())
      return s.answer(503, error_body("too many consoles are open (limits.max_consoles)"), "application/json", 5);
    return s.upgrade([&f, authenticated](front_stream&& stream, http_session::request_type&& upgrade) {
      start_console_session(std::move(stream), std::move(upgrade), f, authenticated);
    });
  }
  std::string_view auth;
  if (auto h = req.find(http::field::authorization); h != req.end())
    auth = sv(h->value());
  constexpr std::string_view bearer = "Bearer ";
  if (auth.substr(0, bearer.size()) != bearer || !f.admin_token_matches(auth.substr(bearer.size())))
    return s.answer(401, error_body("missing or wrong admin token"), "application/json", 0, true);
  constexpr std::string_view actors = "/_troupe/actors/";
  bool read_only_path = path == "/_troupe/metrics" || path == "/_troupe/global" || path == "/_troupe/census"
                        || path == "/_troupe/orchestration/log" || path == "/_troupe/history"
                        || path == "/_troupe/config" || path == "/_troupe/orchestration/status"
                        || (path.substr(0, actors.size()) == actors && path.size() > actors.size());
  if (read_only_path && !reads)
    return s.refuse_method("GET, HEAD");
  if (path == "/_troupe/metrics")
    return s.answer(200, ctx.metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
  if (path == "/_troupe/history")  // the rate history (one sample a second) and the per-route figures
    return s.answer(200, ctx.metrics.history_json(), "application/json");
  if (path == "/_troupe/config" || path == "/_troupe/orchestration/status") {
    orchestration_request q;
    q.what = path == "/_troupe/config" ? "config" : "status";
    return orchestrate(s, std::move(q));
  }
  if (path == "/_troupe/orchestration/apply")
    return req.method() == http::verb::post ? apply_profile(s) : s.refuse_method("POST");
  if (path == "/_troupe/orchestration/reload")
    return req.method() == http::verb::post ? reload_profile(s) : s.refuse_method("POST");
  if (path == "/_troupe/global")
    return s.call_bridge([](front& f, local_admin slot) {
      caf::anon_send(f.bridge(), global_atom::value, std::move(slot));
    });
  if (path == "/_troupe/census")
    return census(s, query);
  if (path == "/_troupe/tls/reload")
    return req.method() == http::verb::post ? tls_reload(s) : s.refuse_method("POST");
  if (path == "/_troupe/orchestration/log") {
    std::uint32_t tail = 100;
    auto params = registry::parse_query(query);
    if (!params)
      return s.answer(400, error_body("malformed query string"), "application/json");
    for (auto& [k, v] : *params)
      if (k == "tail") {
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), tail);
        if (ec != std::errc{} || end != v.data() + v.size() || tail < 1 || tail > 1000)
          return s.answer(400, error_body("tail: must be 1-1000"), "application/json");
      }
    return s.call_bridge([tail](front& f, local_admin slot) {
      caf::anon_send(f.bridge(), log_atom::value, tail, std::move(slot));
    });
  }
  if (path.substr(0, actors.size()) == actors && path.size() > actors.size()) {
    auto id = registry::percent_decode(path.substr(actors.size()));
    if (!id || id->size() > 512)
      return s.answer(400, error_body("malformed actor id"), "application/json");
    return s.call_bridge([id = std::move(*id)](front& f, local_admin slot) mutable {
      caf::anon_send(f.bridge(), census_atom::value, std::move(id), std::move(slot));
    });
  }
  // POST /_troupe/users/{user}/freeze|drop, POST /_troupe/workers/{worker}/drain
  constexpr std::string_view users = "/_troupe/users/", workers = "/_troupe/workers/";
  auto split_action = [&](std::string_view base) -> std::optional<std::pair<std::string, std::string>> {
    if (path.substr(0, base.size()) != base)
      return std::nullopt;
    auto rest = path.substr(base.size());
    auto slash = rest.rfind('/');
    if (slash == std::string_view::npos || slash == 0)
      return std::nullopt;
    auto name = registry::percent_decode(rest.substr(0, slash));
    if (!name)
      return std::nullopt;
    return std::make_pair(std::move(*name), std::string(rest.substr(slash + 1)));
  };
  if (auto a = split_action(users); a && (a->second == "freeze" || a->second == "drop")) {
    if (req.method() != http::verb::post)
      return s.refuse_method("POST");
    auto& user = a->first;
    if (!registry::valid_user_name(user) && !(registry::is_guest(user) && registry::valid_cid(user.substr(6))))
      return s.answer(404, error_body("no such user on this node"), "application/json");
    return order(s, a->second, std::move(user));
  }
  if (auto a = split_action(workers); a && a->second == "drain") {
    if (req.method() != http::verb::post)
      return s.refuse_method("POST");
    return order(s, "drain", std::move(a->first));
  }
  s.answer(404, error_body("not found"), "application/json");
}

}  // namespace troupe
