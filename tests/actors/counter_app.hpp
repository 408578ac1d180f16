// counter_app: the actor type of the actor-tree tests (tree_test.cpp, groups_test.cpp):
// a counter per user, login and logout, a login routing hook (staff_* to group
// "staff", x_* to "other"), handlers that crash, half-change then crash, answer an
// HTTP error, answer later, or answer with headers of their own (valid or not).
#pragma once

#include "actors/app.hpp"

#include <troupe/troupe.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace troupe::test {

using namespace std::chrono_literals;

struct tally {
  std::int64_t n = 0;
  MSGPACK_DEFINE(n);
};

class counter_app : public user_actor<tally> {
public:
  // The login routing hook: staff_* users log in to group "staff", x_* to group "other".
  static std::optional<std::string> login_group(std::string_view user) {
    if (user.substr(0, 6) == "staff_")
      return std::string("staff");
    if (user.substr(0, 2) == "x_")
      return std::string("other");
    return std::nullopt;
  }

  static void routes(route_table<counter_app>& r) {
    r.get("/n", [](counter_app& u, request&) { return json({{"n", u.state().n}, {"user", u.user()}}); });
    r.post("/n", [](counter_app& u, request&) { return json({{"n", ++u.mutate().n}}); });
    r.post("/login", [](counter_app& u, request& q) { return u.login(q.json_string("user")); });
    r.post("/logout", [](counter_app& u, request&) { return u.logout(); });
    r.post("/boom", [](request&) -> response { throw std::logic_error("boom"); });
    // Changes the state, then fails: the change must not survive the restart.
    r.post("/half", [](counter_app& u, request&) -> response {
      u.mutate().n += 100;
      throw std::runtime_error("half done");
    });
    r.post("/teapot", [](request&) -> response { throw http_error(418, "short and stout"); });
    // Headers of the handler's own: checked ones, and ones that must become a 500.
    r.post("/headers", [](counter_app& u, request&) {
      cookie_attributes site;
      site.path = "/";
      return json({{"n", ++u.mutate().n}})
        .header("Cache-Control", "no-store")
        .header("X-Twice", "1")
        .header("X-Twice", "2")
        .header("Content-Type", "application/vnd.tally+json")
        .cookie("theme", "dark", site);
    });
    r.post("/split", [](counter_app& u, request&) {
      ++u.mutate().n;
      return response::text("x").header("X-Note", "a\r\nSet-Cookie: troupe_cid=stolen");
    });
    r.post("/steal", [](request&) { return response::text("x").cookie("troupe_cid", "stolen"); });
    r.post("/wait", [](request&) { return after(300ms, [] { return response::json({{"waited", true}}); }); });
    // Deferred answers (defer): resolved by a timer (twice: the second is late);
    // resolved with headers; kept alive; never resolved; resolved with a
    // continuation (refused: 500); a start that throws.
    r.post("/defer/timer", [](counter_app& u, request&) {
      return defer(5s, [&u](promise p) {
        u.later(50ms, [&u, p]() mutable {
          u.first_resolve = p.resolve(json({{"n", ++u.mutate().n}}).header("X-Deferred", "yes"));
          u.second_resolve = p.resolve(json({{"again", true}}));
          u.open_after = p.is_open();
        });
      });
    });
    r.post("/defer/never", [](request&) { return defer(200ms, [](promise) {}); });
    r.post("/defer/kept", [](counter_app& u, request&) {
      return defer(100ms, [&u](promise p) {
        p.keep_alive(1s);  // past the first deadline
        u.later(400ms, [p]() mutable { p.resolve(json({{"kept", true}})); });
      });
    });
    r.post("/defer/continued", [](counter_app& u, request&) {
      return defer(5s, [&u](promise p) {
        u.later(10ms, [p]() mutable { p.resolve(after(1ms, [] { return json({{"no", true}}); })); });
      });
    });
    r.post("/defer/throws", [](request&) { return defer(5s, [](promise) { throw std::runtime_error("no"); }); });
    // A guarded route: the user actor judges it too (a request the front could not judge).
    auto staff = r.guarded([](const guard_request& g) { return g.user().rfind("staff_", 0) == 0; });
    staff.post("/staff/n", [](counter_app& u, request&) { return json({{"n", ++u.mutate().n}}); });
    // A streamed body (route_table::upload): here, without a front, it arrives whole as one piece.
    r.upload("/upload", [](counter_app& u, request&) {
      upload_handlers h;
      h.chunk = [&u](const upload&, std::string_view piece) { u.mutate().n += static_cast<std::int64_t>(piece.size()); };
      h.end = [&u](const upload& up) { return json({{"received", up.received}, {"n", u.state().n}}); };
      return response::receive(std::move(h));
    });
    r.post("/not-an-upload", [](request&) { return response::receive({}); });
    r.get("/defer/seen", [](counter_app& u, request&) {
      return json({{"first", u.first_resolve}, {"second", u.second_resolve}, {"open_after", u.open_after}});
    });
  }

  // What /defer/timer's resolves answered (GET /defer/seen).
  bool first_resolve = false, second_resolve = true, open_after = true;
};

}  // namespace troupe::test
