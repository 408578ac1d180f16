#include "actors/user.hpp"

#include "actors/commander.hpp"
#include "actors/errors.hpp"
#include "actors/page.hpp"
#include "registry/clocks.hpp"
#include "registry/ids.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <deque>
#include <optional>
#include <unordered_map>
#include <variant>

namespace troupe {

namespace detail {
/// The platform's access to the private side of a user actor type.
struct user_access {
  static void bind(user_actor_base& app, user_host* host) { app.host_ = host; }
  static store::bytes save(const user_actor_base& app) { return app.save_state(); }
  static void load(user_actor_base& app, const store::bytes& data) { app.load_state(data); }
};
}  // namespace detail

namespace {

using detail::user_access;
using promise_type = caf::typed_response_promise<http_response>;
using reply_to = std::variant<local_reply, promise_type>;

struct pending_call {
  std::shared_ptr<const http_request> req;  // the local path shares the front's slot
  reply_to to;
};

struct connection_record {
  registry::clocks clocks;
  connection_handle actor;  // activated when a request names a page
  std::unordered_map<std::string, page_handle> pages;
};

std::int64_t unix_ms(registry::wall_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

const std::string no_name;

struct user_state : detail::user_host {
  static const char* name;

  user_handle::stateful_pointer<user_state> self = nullptr;
  node_context_ptr ctx;
  std::optional<actor_gauge> gauge;
  std::string user_name;
  std::string worker_name;
  caf::actor commander;
  std::unique_ptr<user_actor_base> app;
  router routes;
  registry::clocks clocks;
  std::uint64_t generation = 0;  // of the store: grows with every parcel written
  bool dirty = false;
  std::unordered_map<std::string, connection_record> connections;

  // One request at a time: while a deferred answer (after/login/logout) is
  // pending, later requests wait in `backlog` (bounded by user_queue_length).
  bool busy = false;
  bool stopped = false;  // quit() was called: serve nothing more
  std::deque<pending_call> backlog;
  std::optional<pending_call> deferred_call;
  std::function<response()> deferred_then;
  std::uint64_t deferral_id = 0;

  // The request being served, for the identity accessors.
  const std::string* current_cid = &no_name;
  const std::string* current_page = &no_name;

  // -- detail::user_host --------------------------------------------------------
  const std::string& user() const override { return user_name; }
  const std::string& connection() const override { return *current_cid; }
  const std::string& page() const override { return *current_page; }
  const std::string& node() const override { return ctx->node_name; }
  const std::string& worker() const override { return worker_name; }
  void changed() override { dirty = true; }
  caf::local_actor* actor() override { return self; }

  // -- requests -------------------------------------------------------------------

  void accept(pending_call&& call) {
    if (!busy && !stopped)
      return serve(std::move(call));
    if (backlog.size() >= ctx->recipe.limits.user_queue_length) {
      respond(call.to, error_response(503, "this user has too many requests waiting", 1));
      return;
    }
    backlog.push_back(std::move(call));
  }

  void serve(pending_call&& call) {
    auto conn = connections.find(call.req->cid);
    if (conn == connections.end()) {
      http_response moved;
      moved.route = route_note::not_here;
      respond(call.to, std::move(moved));
      return;
    }
    auto now = registry::wall_clock::now();
    clocks.stamp_rpc(now);
    conn->second.clocks.stamp_rpc(now);
    if (!call.req->page.empty())
      if (auto refusal = touch_page(conn->first, conn->second, call.req->page, now)) {
        respond(call.to, std::move(*refusal));
        return;
      }
    auto found = routes.find(call.req->method, call.req->path);
    if (!found.target) {
      respond(call.to, found.other_method ? error_response(405, "method not allowed")
                                          : error_response(404, "no such route"));
      return;
    }
    request q(*call.req, std::move(found.params));
    auto& fn = *found.target;
    run(std::move(call), [&] { return fn(q); });
  }

  // Runs application code for `call`: an http_error is the client's answer,
  // anything else thrown is a failed handler (502, and this actor restarts).
  template <class F>
  void run(pending_call&& call, F&& fn) {
    current_cid = &call.req->cid;
    current_page = &call.req->page;
    response out;
    try {
      out = fn();
    } catch (const http_error& e) {
      out = response::error(e.status(), e.what());
    } catch (const std::exception& e) {
      return fail(call, e.what());
    } catch (...) {
      return fail(call, "unknown exception");
    }
    finish(std::move(call), std::move(out));
  }

  void fail(pending_call& call, const char* what) {
    ctx->metrics.handler_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("user {} on {}: handler {} {} failed: {}; the worker restarts him",
                  registry::redact(user_name), worker_name, call.req->method, call.req->path, what);
    respond(call.to, error_response(502, "the request handler failed"));
    stopped = true;
    self->quit(make_error(errc::handler_failed));
  }

  void finish(pending_call&& call, response&& out) {
    if (!out.next) {
      http_response r;
      r.status = out.status;
      r.body = std::move(out.body);
      r.content_type = std::move(out.content_type);
      respond(call.to, std::move(r));
      return;
    }
    auto next = std::move(out.next);
    busy = true;
    switch (next->what) {
      case detail::continuation::kind::after:
        deferred_call = std::move(call);
        deferred_then = std::move(next->then);
        self->delayed_send(self, next->delay, resume_atom::value, ++deferral_id);
        return;
      case detail::continuation::kind::login:
        return move_connection(std::move(call), next->user);
      case detail::continuation::kind::logout:
        return move_connection(std::move(call), std::nullopt);
    }
  }

  void resume(std::uint64_t id) {
    if (id != deferral_id || !deferred_call)
      return;
    auto call = std::move(*deferred_call);
    deferred_call.reset();
    auto then = std::move(deferred_then);
    busy = false;
    run(std::move(call), [&] { return then ? then() : response::json(nullptr); });
    drain();
  }

  void drain() {
    while (!busy && !stopped && !backlog.empty()) {
      auto call = std::move(backlog.front());
      backlog.pop_front();
      serve(std::move(call));
    }
  }

  static void respond(reply_to& to, http_response&& r) {
    if (auto* local = std::get_if<local_reply>(&to))
      (*local)->deliver(std::move(r));
    else
      std::get<promise_type>(to).deliver(std::move(r));
  }

  // -- pages -----------------------------------------------------------------------

  std::optional<http_response> touch_page(const std::string& cid, connection_record& conn,
                                          const std::string& page_id, registry::wall_clock::time_point now) {
    if (!registry::valid_page_id(page_id))
      return error_response(400, "invalid X-Troupe-Page: 1-64 characters of [A-Za-z0-9_.-]");
    auto i = conn.pages.find(page_id);
    if (i == conn.pages.end()) {
      if (conn.pages.size() >= ctx->recipe.limits.max_pages_per_connection)
        return error_response(429, "too many pages on this connection");
      if (!conn.actor)
        conn.actor = spawn_connection(*self, ctx, cid);
      i = conn.pages.emplace(page_id, spawn_page(*self, ctx, conn.actor, page_id)).first;
    }
    self->send(i->second, stamp_atom::value, unix_ms(now));
    return std::nullopt;
  }

  void detach(const std::string& cid) {
    auto i = connections.find(cid);
    if (i == connections.end())
      return;
    for (auto& [id, page] : i->second.pages)
      self->send_exit(page, caf::exit_reason::user_shutdown);
    if (i->second.actor)
      self->send_exit(i->second.actor, caf::exit_reason::user_shutdown);
    connections.erase(i);
  }

  // -- login / logout ----------------------------------------------------------------

  placement where() const {
    return placement{user_name, worker_name, ctx->node_name, caf::actor_cast<caf::actor>(self)};
  }

  static http_response identity_response(const placement& p, const std::string& cid, route_note route) {
    http_response r;
    r.body = nlohmann::json{{"user", p.user}, {"connection", cid}, {"node", p.node}, {"worker", p.worker}}.dump();
    r.route = route;
    return r;
  }

  // The guest's store, as the parcel a login carries to a user who is not live.
  store::bytes carried_store() const {
    store::parcel p;
    p.generation = generation + 1;
    p.writer_node = ctx->node_name;
    p.writer_worker = worker_name;
    p.cause = store::parcel_cause::login;
    p.payload = user_access::save(*app);
    return store::encode(p);
  }

  // Login (target set) or logout (none): the commander moves the connection;
  // this user answers with the new owner's identity and lets the connection go.
  void move_connection(pending_call&& call, std::optional<std::string> target) {
    if (target && *target == user_name) {
      busy = false;
      respond(call.to, identity_response(where(), call.req->cid, route_note::keep));
      return drain();
    }
    auto waiting = std::make_shared<pending_call>(std::move(call));
    auto on_placed = [self = self, waiting](placement& p) {
      auto& st = self->state;
      const std::string cid = waiting->req->cid;
      st.detach(cid);
      respond(waiting->to, identity_response(p, cid, route_note::changed));
      st.busy = false;
      if (st.connections.empty() && registry::is_guest(st.user_name))
        return st.retire();
      st.drain();
    };
    auto on_error = [self = self, waiting](caf::error& err) {
      auto& st = self->state;
      spdlog::warn("user {}: moving a connection failed: {}", registry::redact(st.user_name),
                   self->system().render(err));
      respond(waiting->to, error_response(503, "login/logout could not be completed, retry", 1));
      st.busy = false;
      st.drain();
    };
    const auto& cid = waiting->req->cid;
    if (target) {
      login_request order{cid, user_name, *target,
                          registry::is_guest(user_name) ? carried_store() : store::bytes{}};
      self->request(commander, ctx->hold_timeout(), login_atom::value, std::move(order))
        .then(on_placed, on_error);
    } else {
      self->request(commander, ctx->hold_timeout(), logout_atom::value, cid, user_name)
        .then(on_placed, on_error);
    }
  }

  // A guest whose only connection left: answer what waits (not here), stop.
  void retire() {
    for (auto& call : backlog) {
      http_response moved;
      moved.route = route_note::not_here;
      respond(call.to, std::move(moved));
    }
    backlog.clear();
    while (!connections.empty())
      detach(connections.begin()->first);
    stopped = true;
    self->quit();
  }
};

const char* user_state::name = "troupe.user";

user_handle::behavior_type user_impl(user_handle::stateful_pointer<user_state> self, user_spec spec) {
  auto& st = self->state;
  st.self = self;
  st.ctx = spec.ctx;
  st.gauge.emplace(st.ctx->metrics, actor_kind::user);
  st.user_name = std::move(spec.user);
  st.worker_name = std::move(spec.worker);
  st.commander = std::move(spec.commander);
  st.app = (*spec.factory)();
  user_access::bind(*st.app, &st);
  st.app->routes(st.routes);
  if (!spec.parcel.empty()) {
    try {
      auto p = store::decode(spec.parcel);
      user_access::load(*st.app, p.payload);
      st.generation = p.generation;
    } catch (const std::exception& e) {
      spdlog::error("user {}: the store handed to him does not load ({}); he starts empty",
                    registry::redact(st.user_name), e.what());
    }
  }
  return {
    [=](http_atom, local_reply& k) {
      std::shared_ptr<const http_request> req(k, &k->request());
      self->state.accept(pending_call{std::move(req), std::move(k)});
    },
    [=](http_atom, http_request& req) -> caf::result<http_response> {
      auto promise = self->make_response_promise<http_response>();
      self->state.accept(pending_call{std::make_shared<const http_request>(std::move(req)), promise});
      return promise;
    },
    [=](adopt_atom, std::string& cid) -> placement {
      self->state.connections.try_emplace(std::move(cid));
      return self->state.where();
    },
    [=](resume_atom, std::uint64_t id) { self->state.resume(id); },
  };
}

}  // namespace

user_handle spawn_user(caf::local_actor& parent, user_spec spec) {
  return parent.spawn<caf::linked + caf::monitored>(user_impl, std::move(spec));
}

}  // namespace troupe
