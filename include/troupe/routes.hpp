#pragma once
/// \file
/// The routes of a user actor type (docs/http.md): the type-erased router its
/// users share, route_table<Self> with which its `static void routes(...)`
/// declares them (paths, parameters, uploads, guards), and app WebSocket routes.
/// Included by <troupe/app.hpp>; include <troupe/troupe.hpp>.

#include <troupe/http.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace troupe {

class user_actor_base;

/// What an app WebSocket route does with its sockets (route_table::websocket),
/// type-erased. Declared with the route, not per socket: a user woken after a
/// freeze serves the sockets he had open with the same handlers.
struct socket_handlers {
  /// The subprotocols the route speaks, in order of preference: the first the
  /// client offers is agreed; a client offering none of them is refused 400.
  /// Empty: no subprotocol is agreed (whatever the client offers).
  std::vector<std::string> subprotocols;
  /// The largest message read from the client (past it the socket is closed
  /// with 1009); 0: channel.max_frame_bytes. At most limits.max_body_bytes.
  std::size_t max_message_bytes = 0;
  std::function<void(user_actor_base&, app_socket&, request&)> open;
  std::function<void(user_actor_base&, app_socket&, const socket_message&)> message;
  std::function<void(user_actor_base&, app_socket&)> closed;
};

/// The routes of one user actor type, type-erased: method + pattern →
/// handler. Built once per type (app_types::add), shared by all its users:
/// an instance keeps no route of its own. Write routes with route_table<Self>.
/// A pattern is a path whose segments may be `{name}` (one segment, available
/// as request::param).
class router {
public:
  using handler = std::function<response(user_actor_base&, request&)>;
  /// A guard (route_table::guard, guarded): runs before the handler, on the front.
  using guard = std::function<guard_verdict(const guard_request&)>;
  using guards = std::vector<std::shared_ptr<const guard>>;

  /// Adds a route; `route_guards` run before its handler, after the type-wide ones.
  /// `streamed_body`: the handler gets the request before its body, which it
  /// reads with response::receive (route_table::upload).
  /// `socket`: an app WebSocket route's handlers (route_table::websocket).
  router& on(std::string_view method, std::string_view pattern, handler h, guards route_guards = {},
             bool streamed_body = false, std::shared_ptr<const socket_handlers> socket = nullptr);
  /// Adds a type-wide guard: it runs before every route of the type.
  router& guard_all(guard g);

  /// The result of matching a request against the routes.
  struct match {
    const handler* target = nullptr;  ///< nullptr: no route
    bool other_method = false;        ///< the path exists under another method (405)
    request::params_type params;
    const std::string* key = nullptr;  ///< the route's metrics key (name_routes), with target
    /// A typed parameter (`{id:int}`, `{id:uint}`) whose digits do not fit 64 bits: its name (400), with target.
    std::string_view out_of_range;
    std::size_t index = 0;  ///< the route's number (guarded, judge), with target
    bool streamed_body = false;  ///< declared with route_table::upload, with target
    const socket_handlers* socket = nullptr;  ///< an app WebSocket route's, with target
  };
  match find(std::string_view method, std::string_view path) const;

  /// True when route `index` streams its body in (route_table::upload).
  bool streams_body(std::size_t index) const noexcept {
    return index < routes_.size() && routes_[index].streamed_body;
  }
  /// True when route `index` has a guard (its own or the type's).
  bool guarded(std::size_t index) const noexcept;
  /// True when any route of the type has a guard.
  bool has_guards() const noexcept { return !type_guards_.empty() || route_guards_; }
  /// The verdict of route `index`'s guards on `g`: the type-wide ones, then
  /// the route's, in declaration order; the first refusal wins. A guard that
  /// throws refuses with 500.
  guard_verdict judge(std::size_t index, const guard_request& g) const;
  /// The metrics key of route `index` (name_routes).
  const std::string& key(std::size_t index) const { return routes_.at(index).key; }

  std::size_t size() const noexcept { return routes_.size(); }
  /// Gives each route its metrics key under user type `type` (app_types::add does).
  void name_routes(const std::string& type);
  /// Calls `f(method, pattern)` for each route, in declaration order.
  template <class F>
  void for_each_route(F&& f) const {
    for (auto& r : routes_)
      f(r.method, r.pattern);
  }

private:
  /// What a path segment of a route matches.
  enum class segment_kind : std::uint8_t {
    literal,      ///< itself
    text,         ///< `{name}`: any non-empty segment
    signed_int,   ///< `{name:int}`: an optional '-' and digits
    unsigned_int  ///< `{name:uint}`: digits
  };
  struct route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;  // a literal, or a parameter's name
    std::vector<segment_kind> kinds;    // one per segment
    handler fn;
    std::string key;  // "<type> <method> <pattern>": its per-route figures (node_metrics::route)
    guards own_guards;
    bool streamed_body = false;
    std::shared_ptr<const socket_handlers> socket;
  };
  std::vector<route> routes_;
  std::vector<guard> type_guards_;
  bool route_guards_ = false;  // some route has guards of its own
};

/// An app WebSocket route of user actor type `Self` (route_table::websocket):
/// what it speaks and its handlers, each run in the user's actor, one at a
/// time with his requests and messages; any may be empty. A handler that
/// throws is a failed handler (his restart starts from his last good state):
/// in `open` the upgrade is refused (an http_error: with its status; anything
/// else: 502), in `message` the socket is closed with 1011.
template <class Self>
struct socket_route {
  /// As socket_handlers::subprotocols.
  std::vector<std::string> subprotocols;
  /// As socket_handlers::max_message_bytes.
  std::size_t max_message_bytes = 0;
  /// The upgrade passed the guards and is accepted: the socket is open (it
  /// may be written to); the request is the upgrade's (path parameters, query, headers).
  std::function<void(Self&, app_socket&, request&)> open;
  /// A whole message from the client. The next one is read when this returns.
  std::function<void(Self&, app_socket&, const socket_message&)> message;
  /// The socket closed (by its client, by close(), by the front: its
  /// connection changed, the node stops …); writes to it are refused now.
  std::function<void(Self&, app_socket&)> closed;
};

/// The routes of user actor type `Self`, as its `static void
/// routes(troupe::route_table<Self>& r)` declares them. A handler is any
/// callable taking `(Self&, troupe::request&)` — the user being served and
/// his request; a lambda written inside Self reaches its protected members
/// (state(), mutate(), login() …) through that reference — or only
/// `(troupe::request&)` when it needs no user; a member function pointer
/// `response (Self::*)(troupe::request&)` works too. All return a response.
/// A pattern's `{name}` segment is a path parameter; `{name:int}` matches an
/// optional '-' and digits, `{name:uint}` digits only (another segment: no match,
/// 404; digits past 64 bits: 400); any other type throws std::invalid_argument.
template <class Self>
class route_table {
public:
  explicit route_table(router& r) : r_(r) {}

  template <class F>
  route_table& get(std::string_view pattern, F f) { return on("GET", pattern, std::move(f)); }
  template <class F>
  route_table& post(std::string_view pattern, F f) { return on("POST", pattern, std::move(f)); }
  template <class F>
  route_table& put(std::string_view pattern, F f) { return on("PUT", pattern, std::move(f)); }
  template <class F>
  route_table& patch(std::string_view pattern, F f) { return on("PATCH", pattern, std::move(f)); }
  template <class F>
  route_table& del(std::string_view pattern, F f) { return on("DELETE", pattern, std::move(f)); }
  template <class F>
  route_table& on(std::string_view method, std::string_view pattern, F f) {
    return add(method, pattern, std::move(f), false);
  }

  /// A route whose request body streams in (docs/http.md "Streamed uploads"): the
  /// handler runs once the head has arrived (q.body() is empty) and answers
  /// `response::receive(handlers)` to read the body piece by piece with credit,
  /// up to limits.max_stream_body_bytes, or any other answer to refuse it (the
  /// connection is closed then: its body is not read).
  template <class F>
  route_table& upload(std::string_view method, std::string_view pattern, F f) {
    return add(method, pattern, std::move(f), true);
  }
  template <class F>
  route_table& upload(std::string_view pattern, F f) {
    return add("POST", pattern, std::move(f), true);
  }

  /// An app WebSocket route (docs/http.md "App WebSockets"): a GET upgrade of
  /// `pattern` that passes the guards opens a socket, a page of the user it
  /// came from, served by `route`'s handlers; a GET without an upgrade gets
  /// 426. `r.websocket("/api/echo", {{"echo.v1"}, 0, nullptr, echo});`
  route_table& websocket(std::string_view pattern, socket_route<Self> route) {
    auto erased = std::make_shared<socket_handlers>();
    erased->subprotocols = std::move(route.subprotocols);
    erased->max_message_bytes = route.max_message_bytes;
    if (route.open)
      erased->open = [f = std::move(route.open)](user_actor_base& u, app_socket& s, request& q) {
        f(static_cast<Self&>(u), s, q);
      };
    if (route.message)
      erased->message = [f = std::move(route.message)](user_actor_base& u, app_socket& s, const socket_message& m) {
        f(static_cast<Self&>(u), s, m);
      };
    if (route.closed)
      erased->closed = [f = std::move(route.closed)](user_actor_base& u, app_socket& s) {
        f(static_cast<Self&>(u), s);
      };
    r_.on("GET", pattern, [](user_actor_base&, request&) { return response::error(426, upgrade_required); },
          guards_, false, std::move(erased));
    return *this;
  }

  /// A type-wide guard (docs/http.md "Guards"): `g(const troupe::guard_request&)`
  /// runs on the front before every route of this type (those declared before
  /// too) and returns a troupe::guard_verdict, or a bool (false: 403). A refused
  /// request wakes nobody and reads nothing from the deposit.
  template <class G>
  route_table& guard(G g) {
    r_.guard_all(make_guard(std::move(g)));
    return *this;
  }
  /// This table, its routes guarded by `g` as well (after the type-wide guards):
  /// `auto staff = r.guarded(staff_only); staff.get("/api/staff/report", …);`
  template <class G>
  route_table guarded(G g) const {
    route_table t(*this);
    t.guards_.push_back(std::make_shared<const router::guard>(make_guard(std::move(g))));
    return t;
  }

private:
  static constexpr const char* upgrade_required = "this route is a WebSocket: send a WebSocket upgrade";

  template <class F>
  route_table& add(std::string_view method, std::string_view pattern, F f, bool streamed) {
    r_.on(
      method, pattern,
      [f = std::move(f)](user_actor_base& self, request& q) -> response {
        if constexpr (std::is_invocable_v<F&, Self&, request&>) {
          return std::invoke(f, static_cast<Self&>(self), q);
        } else {
          static_assert(std::is_invocable_v<F&, request&>,
                        "a route handler takes (Self&, troupe::request&) or (troupe::request&)");
          (void)self;
          return std::invoke(f, q);
        }
      },
      guards_, streamed);
    return *this;
  }

  template <class G>
  static router::guard make_guard(G g) {
    return [g = std::move(g)](const guard_request& q) -> guard_verdict {
      if constexpr (std::is_same_v<std::invoke_result_t<const G&, const guard_request&>, bool>)
        return std::invoke(g, q) ? guard_verdict::allow() : guard_verdict::refuse();
      else
        return std::invoke(g, q);
    };
  }

  router& r_;
  router::guards guards_;
};

}  // namespace troupe
