// The user actor's app WebSockets (route_table::websocket; docs/http.md "App
// WebSockets"): an upgrade opens a page of his bound to the front's socket, as
// a page channel is; its messages are served by the route's handlers, one at a
// time with his requests; his writes are pushes to that socket. The binding
// goes with him through a freeze (channel_binding), so the socket stays open
// and its next message wakes him.
#include "actors/guards.hpp"
#include "actors/user_state.hpp"
#include "config/channel_settings.hpp"
#include "config/limits_settings.hpp"
#include "registry/url.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace troupe {

namespace {

// The first of the route's subprotocols (its order of preference) that the
// client offers in Sec-WebSocket-Protocol (one or more lines, comma-separated).
std::optional<std::string> agreed_subprotocol(const socket_handlers& route, const http_request& req) {
  for (auto& wanted : route.subprotocols)
    for (auto& h : req.headers) {
      if (!registry::iequals(h.name, "Sec-WebSocket-Protocol"))
        continue;
      std::string_view rest = h.value;
      while (!rest.empty()) {
        auto comma = rest.find(',');
        if (registry::trim_ows(rest.substr(0, comma)) == wanted)
          return wanted;
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      }
    }
  return std::nullopt;
}

// What a close frame may carry (RFC 6455 §7.4): another code is sent as 1000.
std::uint16_t sendable_close_code(std::uint16_t code) {
  bool defined = code == 1000 || code == 1001 || code == 1003 || (code >= 1007 && code <= 1014 && code != 1010);
  return defined || (code >= 3000 && code <= 4999) ? code : 1000;
}

}  // namespace

app_socket user_state::socket_value(const page_record& p) {
  return app_socket(this, p.id, p.channel->app_path, p.channel->subprotocol);
}

page_record* user_state::find_socket(const std::string& id, connection_record** conn) {
  for (auto& c : connections)
    if (auto* p = c.find_page(id); p && p->channel && !p->channel->app_path.empty()) {
      if (conn)
        *conn = &c;
      return p;
    }
  return nullptr;
}

void user_state::serve_socket(pending_call&& call, connection_record& conn, registry::wall_clock::time_point now) {
  auto& req = *call.req;
  if (req.socket == socket_event::open)
    return open_socket(std::move(call), conn, now);
  auto* p = conn.find_page(req.page);
  if (!p || !p->channel || p->channel->socket != req.channel || p->channel->app_path.empty()) {
    respond(call.to, error_response(409, "this socket is not open for this user"));
    return;
  }
  auto found = find_route(*routes, "GET", p->channel->app_path);
  if (!found.socket) {  // his type changed its routes since (a new binary): nobody serves it now
    respond(call.to, error_response(404, "the socket's route is gone"));
    return;
  }
  p->clocks.stamp_rpc(now);
  auto s = socket_value(*p);
  call.route = found.key;
  const auto* route = found.socket;
  run(std::move(call), [&] {
    if (route->message)
      route->message(keeper->app(), s, socket_message{req.body, req.socket == socket_event::binary});
    return response{};  // served: the front reads the next message
  });
}

// The upgrade: the route's guards (again: the front judged them when it
// knew whose the connection was), its subprotocol, then the page bound to the
// socket before `open` runs, so `open` may write to it already.
void user_state::open_socket(pending_call&& call, connection_record& conn, registry::wall_clock::time_point now) {
  auto& req = *call.req;
  auto found = find_route(*routes, "GET", req.path);
  if (!found.target) {
    respond(call.to, error_response(404, "no such route"));
    return;
  }
  if (!found.socket) {
    respond(call.to, routed(call, error_response(400, "this route is not a WebSocket")));
    return;
  }
  if (!found.out_of_range.empty()) {
    respond(call.to, error_response(400, "path parameter \"" + std::string(found.out_of_range) +
                                           "\" does not fit a 64-bit integer"));
    return;
  }
  if (auto refusal = guard_refusal(ctx->metrics, *routes, found, req, user_name)) {
    respond(call.to, std::move(*refusal));
    return;
  }
  const auto* route = found.socket;
  std::string subprotocol;
  if (!route->subprotocols.empty()) {
    auto agreed = agreed_subprotocol(*route, req);
    if (!agreed) {
      std::string spoken;
      for (auto& p : route->subprotocols)
        spoken += (spoken.empty() ? "" : ", ") + p;
      respond(call.to, routed(call, error_response(400, "no subprotocol this WebSocket speaks was offered "
                                                        "(Sec-WebSocket-Protocol): it speaks " + spoken)));
      return;
    }
    subprotocol = std::move(*agreed);
  }
  if (auto refusal = touch_page(conn, req.page, now)) {
    respond(call.to, std::move(*refusal));
    return;
  }
  auto* p = conn.find_page(req.page);
  if (p->channel) {  // a socket's page id is the front's, new for each socket
    respond(call.to, error_response(409, "this socket is open already"));
    return;
  }
  p->channel = std::make_unique<page_channel>(page_channel{req.channel, false, req.path, subprotocol});
  self->send(req.channel.hub, bind_atom::value, req.channel.socket, conn.cid, req.page, channel_owner_handle{self});
  note();
  auto max_message = route->max_message_bytes ? route->max_message_bytes : ctx->channel().max_frame_bytes;
  max_message = std::min<std::uint64_t>(max_message, ctx->limits().max_body_bytes);
  auto s = socket_value(*p);
  request q(req, std::move(found.params));
  call.route = found.key;
  auto cid = conn.cid;
  run(std::move(call), [&] {
    try {
      if (route->open)
        route->open(keeper->app(), s, q);
    } catch (...) {  // refused: the front closes the socket, which this user no longer has
      drop_socket(cid, s.id());
      throw;
    }
    response accepted;
    accepted.status = 101;
    accepted.body =
      nlohmann::json{{"user", user_name}, {"subprotocol", s.subprotocol()}, {"max_message_bytes", max_message}}.dump();
    return accepted;
  });
}

// Forgets socket page `id` of connection `cid`, unbinding it at its hub; `closed` does not run.
void user_state::drop_socket(const std::string& cid, const std::string& id) {
  auto* conn = connections.find(cid);
  auto* p = conn ? conn->find_page(id) : nullptr;
  if (!p || !p->channel)
    return;
  self->send(p->channel->socket.hub, unbind_atom::value, p->channel->socket.socket, id);
  connections.erase_page(*conn, id);
  note();
}

// The socket went (its hub said so, or a write found it gone): the page goes
// with it, then the route's `closed` runs.
void user_state::socket_gone(connection_record& conn, page_record& p) {
  auto s = socket_value(p);
  connections.erase_page(conn, s.id());
  note();
  auto found = find_route(*routes, "GET", s.path());
  if (!found.socket || !found.socket->closed)
    return;
  const auto* route = found.socket;
  call_app([&] { route->closed(keeper->app(), s); });
}

bool user_state::socket_send(const std::string& id, std::string data, std::uint8_t kind, std::uint16_t code) {
  connection_record* conn = nullptr;
  auto* p = find_socket(id, &conn);
  if (!p || stopped())
    return false;
  auto what = static_cast<frame_kind>(std::min<std::uint8_t>(kind, 2));
  if (what == frame_kind::close) {
    code = sendable_close_code(code);
    data = std::string(registry::utf8_prefix(data, 123));  // what a close frame holds (RFC 6455 §5.5)
  }
  auto socket = p->channel->socket;
  core->asked();
  self->request(socket.hub, node_context::timer_millis(ctx->channel().push_timeout_seconds), push_atom::value,
                channel_push{socket.socket, conn->cid, id, std::move(data), what, code})
    .then(
      [this](bool) { core->answered(); },  // refused: a full queue closes the socket, or its binding changed
      [this, cid = conn->cid, id, socket](caf::error&) {
        core->answered();
        forget_channel(cid, id, socket);  // its socket is gone
      });
  return true;
}

bool user_state::socket_open(const std::string& id) const {
  return const_cast<user_state*>(this)->find_socket(id) != nullptr;
}

std::vector<app_socket> user_state::socket_list() {
  std::vector<app_socket> out;
  for (auto& c : connections)
    for (auto& p : c.pages)
      if (p.channel && !p.channel->app_path.empty())
        out.push_back(socket_value(p));
  return out;
}

}  // namespace troupe
