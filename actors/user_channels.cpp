// The user actor's pages and their channels (docs/channels.md): a page's
// stamp, a channel call's gate, the bindings a freeze hands over, pushes.
#include "actors/user_state.hpp"
#include "config/channel_settings.hpp"
#include "config/limits_settings.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace troupe {

// The stamp climbs page → connection → user (the two others are stamped by serve).
std::optional<http_response> user_state::touch_page(connection_record& conn, const std::string& page_id,
                                                    registry::wall_clock::time_point now) {
  using outcome = connection_table::touch_outcome;
  auto t = connections.touch_page(conn, page_id, ctx->limits().max_pages_per_connection,
                                  ctx->limits().max_pages_per_user);
  switch (t.outcome) {
    case outcome::invalid_id: return error_response(400, "invalid X-Troupe-Page: 1-64 characters of [A-Za-z0-9_.-]");
    case outcome::too_many_on_connection: return error_response(429, "too many pages on this connection");
    case outcome::too_many_for_user: return error_response(429, "too many pages for this user");
    case outcome::added:
      if (t.reclaimed)  // the page count stays: one went, one came
        ctx->metrics.pages_reclaimed.fetch_add(1, std::memory_order_relaxed);
      note();
      [[fallthrough]];
    case outcome::known: t.page->clocks.stamp_rpc(now); return std::nullopt;
  }
  return std::nullopt;
}

// A channel call's gate: a socket's admission and openchannel are answered
// here (openchannel binding the page to the call's socket); any other call
// naming a page goes on only when that page opened its channel on this very
// socket. nullopt: serve the call.
std::optional<http_response> user_state::channel_gate(connection_record& conn, const http_request& req,
                                                      registry::wall_clock::time_point now) {
  if (req.path == socket_admission_path) {  // a socket's admission: whom it counts under
    http_response r;
    r.body = nlohmann::json{{"user", user_name}}.dump();
    return r;
  }
  const bool open = req.path == "/_troupe/openchannel";
  const auto& id = req.page;
  if (id.empty())
    return open ? std::optional<http_response>(
                    error_response(400, "openchannel names no page: put it in the envelope's \"page\""))
                : std::nullopt;  // a call of the connection, not of a page
  for (auto& other : connections)
    if (&other != &conn && other.find_page(id))
      return error_response(403, "page '" + id + "' is not this connection's");
  if (!open) {
    auto* p = conn.find_page(id);
    if (!p || !p->channel || p->channel->socket != req.channel)
      return error_response(409, "page '" + id + "' has no open channel on this socket: send "
                                 "/_troupe/openchannel for it first");
    p->clocks.stamp_rpc(now);
    return std::nullopt;
  }
  bool sequential = false;
  if (!req.body.empty()) {
    auto params = nlohmann::json::parse(req.body, nullptr, false);
    if (params.is_discarded() || !(params.is_object() || params.is_null()))
      return error_response(400, "openchannel: data must be an object like {\"sequential\": true}");
    if (params.is_object() && params.contains("sequential")) {
      if (!params["sequential"].is_boolean())
        return error_response(400, "openchannel: \"sequential\" must be true or false");
      sequential = params["sequential"].get<bool>();
    }
  }
  if (auto refusal = touch_page(conn, id, now))
    return refusal;
  auto* p = conn.find_page(id);
  if (p->channel && !p->channel->app_path.empty())
    return error_response(409, "page '" + id + "' is an app WebSocket");
  if (!p->channel)
    p->channel = std::make_unique<page_channel>();
  // Opening twice on the same socket changes nothing; a new socket (a
  // reconnecting browser) takes the page over from the old one.
  if (p->channel->socket != req.channel) {
    if (auto& old = p->channel->socket)
      self->send(old.hub, unbind_atom::value, old.socket, id);
    p->channel->socket = req.channel;
    p->channel->sequential = sequential;
    // Sent before the answer: a push this user makes after it reaches the
    // socket after the binding (one sender, one receiver: in order).
    self->send(req.channel.hub, bind_atom::value, req.channel.socket, conn.cid, id,
               channel_owner_handle{self});
  }
  http_response r;
  r.body = nlohmann::json{{"channel", "open"}, {"page", id}, {"sequential", p->channel->sequential}}.dump();
  return r;
}

// The channels his pages had open when he froze (the commander kept them):
// the pages are bound to the same sockets again, to this actor; a socket
// that closed meanwhile answers unbind (forget_channel) at once.
void user_state::restore_channels(std::vector<channel_binding>& bound) {
  for (auto& b : bound) {
    connections.add(b.cid);
    auto t = connections.touch_page(*connections.find(b.cid), b.page, ctx->limits().max_pages_per_connection,
                                    ctx->limits().max_pages_per_user);
    if (!t.page || t.page->channel)
      continue;
    t.page->channel = std::make_unique<page_channel>(page_channel{b.socket, b.sequential, b.app_path, b.subprotocol});
    self->send(b.socket.hub, bind_atom::value, b.socket.socket, b.cid, b.page,
               channel_owner_handle{self});
  }
}

// What a freeze hands to his next placement: every page's open channel.
std::vector<channel_binding> user_state::open_channels() const {
  std::vector<channel_binding> out;
  for (auto& conn : connections)
    for (auto& page : conn.pages)
      if (page.channel && page.channel->socket)
        out.push_back(channel_binding{conn.cid, page.id, page.channel->socket, page.channel->sequential,
                                      page.channel->app_path, page.channel->subprotocol});
  return out;
}

// The socket `socket` went (or refused): page `page` of `cid` has no channel any more.
void user_state::forget_channel(const std::string& cid, const std::string& page, const channel_ref& socket) {
  auto* conn = connections.find(cid);
  auto* p = conn ? conn->find_page(page) : nullptr;
  if (!p || !p->channel || p->channel->socket != socket)
    return;
  if (!p->channel->app_path.empty())  // an app WebSocket: the page is the socket
    return socket_gone(*conn, *p);
  p->channel.reset();
}

void user_state::detach(const std::string& cid) {
  if (!connections.erase(cid))
    return;
  if (!stopped())
    note();
}

// -- pushes ------------------------------------------------------------------------------

namespace {

// What a push has reached so far; `done` runs (in this actor) when nothing is pending.
struct push_tally {
  push_outcome out;
  std::size_t pending = 1;  // the push itself, until every target has been tried
  std::function<void(const push_outcome&)> done;
  void settle() {
    if (--pending == 0 && done) {
      auto d = std::move(done);
      d(out);
    }
  }
};

std::chrono::milliseconds push_timeout(const node_context& ctx) {
  return node_context::timer_millis(ctx.channel().push_timeout_seconds);
}

void not_delivered(node_context& ctx, push_tally& t, std::uint32_t n = 1) {
  t.out.not_delivered += n;
  ctx.metrics.channel_pushes_not_delivered.fetch_add(n, std::memory_order_relaxed);
}

// One page: written only through its bound socket, which checks the binding again.
void push_to(user_state& st, const std::shared_ptr<push_tally>& t, const std::string& cid, page_record& p,
             const std::string& frame) {
  if (!p.channel || !p.channel->socket)
    return not_delivered(*st.ctx, *t);
  ++t->pending;
  auto socket = p.channel->socket;
  auto* self = st.self;
  st.core->asked();
  self->request(socket.hub, push_timeout(*st.ctx), push_atom::value,
                channel_push{socket.socket, cid, p.id, frame})
    .then(
      [self, t](bool ok) {
        auto& st = self->state;
        st.core->answered();
        if (ok) {
          ++t->out.delivered;
          st.ctx->metrics.channel_pushes_delivered.fetch_add(1, std::memory_order_relaxed);
        } else {
          not_delivered(*st.ctx, *t);
        }
        t->settle();
      },
      [self, t, cid, page = p.id, socket](caf::error&) {
        auto& st = self->state;
        st.core->answered();
        st.forget_channel(cid, page, socket);  // its socket is gone: the binding with it
        not_delivered(*st.ctx, *t);
        t->settle();
      });
}

void push_own(user_state& st, const std::shared_ptr<push_tally>& t, const std::string& frame) {
  for (auto& conn : st.connections)
    for (auto& p : conn.pages)
      push_to(st, t, conn.cid, p, frame);
}

}  // namespace

// `encoded`: the data as JSON text already (a push_users from another user).
void user_state::push_now(detail::push_order order, const std::string* encoded) {
  auto t = std::make_shared<push_tally>();
  t->done = std::move(order.done);
  auto data = encoded ? *encoded : order.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto frame = push_frame(order.path, data);
  using scope = detail::push_order::scope;
  switch (order.to) {
    case scope::page: {
      // A page id is unique within its connection: while serving a request
      // it is looked up on that request's connection only (another
      // connection's page is not written to); outside a request, on any.
      connection_record* conn = nullptr;
      page_record* p = nullptr;
      if (!current_cid->empty()) {
        conn = connections.find(*current_cid);
        p = conn ? conn->find_page(order.page) : nullptr;
      } else {
        for (auto& c : connections)
          if (auto* found = c.find_page(order.page)) {
            conn = &c;
            p = found;
            break;
          }
      }
      if (p)
        push_to(*this, t, conn->cid, *p, frame);
      else
        not_delivered(*ctx, *t);
      break;
    }
    case scope::own_pages: push_own(*this, t, frame); break;
    case scope::users: {
      std::sort(order.users.begin(), order.users.end());
      order.users.erase(std::unique(order.users.begin(), order.users.end()), order.users.end());
      if (order.users.size() > ctx->channel().max_push_users) {  // refused whole: nothing half-sent
        not_delivered(*ctx, *t, static_cast<std::uint32_t>(order.users.size()));
        break;
      }
      for (auto& name : order.users) {
        if (name == user_name) {
          push_own(*this, t, frame);
          continue;
        }
        // Through the commander and his worker: a live user is reached, a
        // frozen one is not woken (he has no open channel).
        ++t->pending;
        core->asked();
        self->request(commander, push_timeout(*ctx), push_atom::value, name, order.path, data)
          .then(
            [this, t](std::uint32_t delivered, std::uint32_t missed) {
              core->answered();
              t->out.delivered += delivered;  // counted in metrics where his pages are
              t->out.not_delivered += missed;
              t->settle();
            },
            [this, t](caf::error&) {
              core->answered();
              not_delivered(*ctx, *t);
              t->settle();
            });
      }
      break;
    }
  }
  t->settle();
}

}  // namespace troupe
