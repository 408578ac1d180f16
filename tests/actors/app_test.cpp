// The application-facing API: routes, path parameters, requests, responses.
#include "actors/app.hpp"
#include "actors/messages.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <vector>

namespace app_test_file {

using namespace troupe;

namespace {
response named(const char* name) {
  return response::text(name);
}
}  // namespace

namespace {
struct st {
  int x = 0;
  MSGPACK_DEFINE(x);
};

// Routes in all three shapes: (Self&, request&), (request&), a member function.
struct routed : user_actor<st> {
  static void routes(route_table<routed>& r) {
    r.get("/api/counter", [](routed& u, request&) { return named(u.tag.c_str()); });
    r.post("/api/counter/incr", [](request&) { return named("incr"); });
    r.get("/tally/{name}", &routed::tally);
    r.del("/rooms/{room}/members/{member}", [](request&) { return named("kick"); });
  }
  response tally(request& q) { return named(("tally " + q.param("name")).c_str()); }
  std::string tag = "instance";
};
struct a_plain : user_actor<st> {};
}  // namespace

TEST(router, matches_method_path_and_parameters_and_calls_the_instance_served) {
  auto types = user_types<routed>("routed");
  const router& r = *types.routes("routed");
  EXPECT_EQ(r.size(), 4u);

  routed alice, bob;
  bob.tag = "bob";
  auto m = r.find("GET", "/api/counter");
  ASSERT_NE(m.target, nullptr);
  http_request raw;
  request q(raw, {});
  EXPECT_EQ((*m.target)(alice, q).body, "instance");
  EXPECT_EQ((*m.target)(bob, q).body, "bob");  // one table, the user served is the argument

  m = r.find("GET", "/tally/t1");
  ASSERT_NE(m.target, nullptr);
  request qt(raw, m.params);
  EXPECT_EQ((*m.target)(bob, qt).body, "tally t1");

  m = r.find("DELETE", "/rooms/r1/members/bob");
  ASSERT_NE(m.target, nullptr);
  ASSERT_EQ(m.params.size(), 2u);
  request q2(raw, m.params);
  EXPECT_EQ(q2.param("room"), "r1");
  EXPECT_EQ(q2.param("member"), "bob");
  EXPECT_EQ(q2.param("absent"), "");
  EXPECT_EQ((*m.target)(alice, q2).body, "kick");
}

TEST(router, a_type_is_given_its_routes_once_and_a_type_without_routes_has_none) {
  auto types = user_types<routed>("routed");
  types.add<a_plain>("plain");
  EXPECT_EQ(types.routes("routed"), types.routes("routed"));
  ASSERT_NE(types.routes("plain"), nullptr);
  EXPECT_EQ(types.routes("plain")->size(), 0u);
  EXPECT_EQ(types.routes("absent"), nullptr);
}

TEST(router, tells_unknown_paths_from_other_methods) {
  router r;
  r.on("GET", "/api/counter", [](user_actor_base&, request&) { return named("x"); });
  r.on("GET", "/tally/{name}", [](user_actor_base&, request&) { return named("y"); });
  auto wrong_method = r.find("POST", "/api/counter");
  EXPECT_EQ(wrong_method.target, nullptr);
  EXPECT_TRUE(wrong_method.other_method);
  auto unknown = r.find("GET", "/api/nothing");
  EXPECT_EQ(unknown.target, nullptr);
  EXPECT_FALSE(unknown.other_method);
  EXPECT_EQ(r.find("GET", "/tally/").target, nullptr);      // empty parameter
  EXPECT_EQ(r.find("GET", "/tally/a/b").target, nullptr);   // too many segments
  EXPECT_EQ(r.find("GET", "/api/counter/").target, nullptr); // trailing slash is another path
}

// {id:int} and {id:uint}: the syntax decides the match (404 when no route
// matches), digits past 64 bits match and are refused (400), q.param<T> converts.
TEST(router, typed_parameters_match_integers_only) {
  router r;
  r.on("GET", "/notes/{index:int}", [](user_actor_base&, request&) { return named("int"); });
  r.on("GET", "/pages/{n:uint}/lines/{line:uint}", [](user_actor_base&, request&) { return named("uint"); });
  r.on("GET", "/notes/{name}/x", [](user_actor_base&, request&) { return named("text"); });
  http_request raw;
  struct row {
    const char* path;
    bool matches;
    const char* out_of_range;
  };
  for (auto& t : std::vector<row>{{"/notes/0", true, ""},
                                  {"/notes/-12", true, ""},
                                  {"/notes/007", true, ""},
                                  {"/notes/9223372036854775807", true, ""},
                                  {"/notes/-9223372036854775808", true, ""},
                                  {"/notes/9223372036854775808", true, "index"},
                                  {"/notes/99999999999999999999999", true, "index"},
                                  {"/notes/%31%32", true, ""},
                                  {"/notes/+1", false, ""},
                                  {"/notes/1.5", false, ""},
                                  {"/notes/1e3", false, ""},
                                  {"/notes/0x10", false, ""},
                                  {"/notes/-", false, ""},
                                  {"/notes/", false, ""},
                                  {"/notes/ 1", false, ""},
                                  {"/notes/%201", false, ""},
                                  {"/notes/one", false, ""},
                                  {"/pages/18446744073709551615/lines/0", true, ""},
                                  {"/pages/18446744073709551616/lines/0", true, "n"},
                                  {"/pages/-1/lines/0", false, ""},
                                  {"/pages/1/lines/x", false, ""}}) {
    auto m = r.find("GET", t.path);
    EXPECT_EQ(m.target != nullptr, t.matches) << t.path;
    EXPECT_EQ(m.out_of_range, t.out_of_range) << t.path;
  }
  auto m = r.find("GET", "/notes/-12");
  request q(raw, m.params);
  EXPECT_EQ(q.param<std::int64_t>("index"), -12);
  EXPECT_EQ(q.param<int>("index"), -12);
  EXPECT_EQ(q.param("index"), "-12");
  EXPECT_THROW(q.param<std::uint32_t>("index"), bad_request);  // does not fit T
  auto big = r.find("GET", "/pages/18446744073709551615/lines/7");
  request qb(raw, big.params);
  EXPECT_EQ(qb.param<std::uint64_t>("n"), 18446744073709551615u);
  EXPECT_EQ(qb.param<std::uint8_t>("line"), 7);
  EXPECT_THROW(qb.param<std::int64_t>("n"), bad_request);
  EXPECT_THROW(qb.param<int>("absent"), bad_request);
  // An untyped parameter is still text, beside a typed route of the same prefix.
  auto text = r.find("GET", "/notes/one/x");
  ASSERT_NE(text.target, nullptr);
}

TEST(router, an_unknown_parameter_type_is_refused_when_declared) {
  router r;
  auto fn = [](user_actor_base&, request&) { return named("x"); };
  EXPECT_THROW(r.on("GET", "/a/{id:float}", fn), std::invalid_argument);
  EXPECT_THROW(r.on("GET", "/a/{:int}", fn), std::invalid_argument);
  EXPECT_NO_THROW(r.on("GET", "/a/{id:uint}", fn));
}

namespace {
// Guards: a type-wide one (no "X-Blocked" header), one table guarded by a bool
// guard (staff_* only), and guards that throw or refuse with a non-error status.
struct guarded_type : user_actor<st> {
  static void routes(route_table<guarded_type>& r) {
    r.get("/open", [](request&) { return named("open"); });
    r.guard([](const guard_request& g) {
      return g.header("X-Blocked") ? guard_verdict::refuse(401, "blocked") : guard_verdict::allow();
    });
    auto staff = r.guarded([](const guard_request& g) { return g.user().rfind("staff_", 0) == 0; });
    staff.get("/staff/{id:int}", [](request&) { return named("report"); });
    auto broken = r.guarded([](const guard_request&) -> bool { throw std::runtime_error("guard bug"); });
    broken.get("/broken", [](request&) { return named("never"); });
    auto odd = r.guarded([](const guard_request&) { return guard_verdict::refuse(302, "not a refusal"); });
    odd.get("/odd", [](request&) { return named("never"); });
  }
};

guard_verdict judge(const router& r, const std::string& path, const std::string& user, bool blocked = false) {
  auto m = r.find("GET", path);
  EXPECT_NE(m.target, nullptr) << path;
  http_request raw;
  raw.method = "GET";
  raw.path = path;
  if (blocked)
    raw.headers.push_back({"X-Blocked", "1"});
  guard_request g(raw, m.params, user);
  return r.judge(m.index, g);
}
}  // namespace

TEST(router, guards_run_type_wide_then_per_route_and_a_failing_guard_refuses) {
  auto types = user_types<guarded_type>("guarded");
  const router& r = *types.routes("guarded");
  EXPECT_TRUE(r.has_guards());
  for (auto path : {"/open", "/staff/1", "/broken", "/odd"})
    EXPECT_TRUE(r.guarded(r.find("GET", path).index)) << path << ": the type-wide guard covers every route";
  EXPECT_TRUE(judge(r, "/open", "alice").allowed());
  EXPECT_EQ(judge(r, "/open", "alice", true).status, 401);  // declared after /open, still its guard
  EXPECT_EQ(judge(r, "/staff/7", "alice").status, 403);       // a bool guard's false: 403
  EXPECT_EQ(judge(r, "/staff/7", "alice").message, "forbidden");
  EXPECT_TRUE(judge(r, "/staff/7", "staff_ann").allowed());
  EXPECT_EQ(judge(r, "/staff/7", "staff_ann", true).status, 401);  // the type-wide guard first
  EXPECT_EQ(judge(r, "/broken", "staff_ann").status, 500);
  EXPECT_EQ(judge(r, "/odd", "staff_ann").status, 500);
  auto plain = user_types<routed>("routed");
  EXPECT_FALSE(plain.routes("routed")->has_guards());
  EXPECT_FALSE(plain.routes("routed")->guarded(0));
}

// App WebSockets: a route of its own kind (GET), its handlers reached through
// the match with the user served as argument; a subprotocol must be a token.
namespace {
struct socketed : user_actor<st> {
  static void routes(route_table<socketed>& r) {
    socket_route<socketed> echo;
    echo.subprotocols = {"echo.v1", "echo.v2"};
    echo.max_message_bytes = 512;
    echo.message = [](socketed& u, app_socket& s, const socket_message& m) {
      u.heard.push_back(s.id() + ":" + std::string(m.data) + (m.binary ? ":binary" : ""));
    };
    r.websocket("/ws/{room}", std::move(echo));
    r.get("/plain", [](request&) { return named("plain"); });
  }
  std::vector<std::string> heard;
};
struct badly_socketed : user_actor<st> {
  static void routes(route_table<badly_socketed>& r) {
    socket_route<badly_socketed> bad;
    bad.subprotocols = {"has space"};
    r.websocket("/ws", std::move(bad));
  }
};
}  // namespace

TEST(router, a_websocket_route_carries_its_handlers_and_a_plain_get_is_426) {
  auto types = user_types<socketed>("socketed");
  const router& r = *types.routes("socketed");
  auto m = r.find("GET", "/ws/lobby");
  ASSERT_NE(m.target, nullptr);
  ASSERT_NE(m.socket, nullptr);
  EXPECT_EQ(m.socket->subprotocols, (std::vector<std::string>{"echo.v1", "echo.v2"}));
  EXPECT_EQ(m.socket->max_message_bytes, 512u);
  EXPECT_FALSE(m.socket->open);  // not given: empty
  EXPECT_FALSE(m.socket->closed);
  socketed alice;
  app_socket s(nullptr, "ws-1-ab", "/ws/lobby", "echo.v1");
  m.socket->message(alice, s, socket_message{"hi", false});
  m.socket->message(alice, s, socket_message{std::string_view("\0\1", 2), true});
  EXPECT_EQ(alice.heard, (std::vector<std::string>{"ws-1-ab:hi", std::string("ws-1-ab:\0\1:binary", 17)}));
  // Without the platform behind it, a write says the socket is not open.
  EXPECT_FALSE(s.send_text("x"));
  EXPECT_FALSE(s.is_open());
  http_request raw;
  request q(raw, m.params);
  EXPECT_EQ((*m.target)(alice, q).status, 426);
  EXPECT_EQ(r.find("POST", "/ws/lobby").other_method, true);
  EXPECT_EQ(r.find("GET", "/plain").socket, nullptr);
  EXPECT_THROW(user_types<badly_socketed>("bad"), std::invalid_argument);
}

TEST(request, decodes_parameters_query_and_headers) {
  http_request raw;
  raw.method = "GET";
  raw.path = "/tally/a%20b";
  raw.query = "x=1&name=J%C3%BCrgen+M&flag";
  raw.headers = {{"Content-Type", "application/json"}};
  request q(raw, {{"name", "a%20b"}});
  EXPECT_EQ(q.param("name"), "a b");
  EXPECT_EQ(q.query("x"), "1");
  EXPECT_EQ(q.query("name"), "J\xC3\xBCrgen M");
  EXPECT_EQ(q.query("flag"), "");
  EXPECT_FALSE(q.query("missing"));
  EXPECT_EQ(q.header("content-type"), "application/json");
  EXPECT_FALSE(q.header("accept"));
}

TEST(request, json_errors_are_bad_requests) {
  http_request raw;
  raw.body = "{not json";
  request bad(raw, {});
  EXPECT_THROW(bad.json(), bad_request);
  http_request ok_raw;
  ok_raw.body = R"({"user":"alice","n":3})";
  request ok(ok_raw, {});
  EXPECT_EQ(ok.json_string("user"), "alice");
  EXPECT_THROW(ok.json_string("n"), bad_request);
  EXPECT_THROW(ok.json_string("missing"), bad_request);
  http_request arr_raw;
  arr_raw.body = "[1,2]";
  request arr(arr_raw, {});
  EXPECT_THROW(arr.json_string("user"), bad_request);
}

TEST(response, helpers_build_json_and_errors) {
  auto r = response::json({{"count", 3}}, 201);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, R"({"count":3})");
  EXPECT_EQ(r.content_type, "application/json");
  auto e = response::error(404, "no such \"thing\"");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(nlohmann::json::parse(e.body).at("error"), "no such \"thing\"");
  EXPECT_FALSE(r.next);
}

namespace {
struct a : user_actor<st> {};
}  // namespace

TEST(app_types, finds_registered_types) {
  auto types = user_types<a>("a");
  EXPECT_NE(types.find("a"), nullptr);
  EXPECT_EQ(types.find("b"), nullptr);
  EXPECT_EQ(types.names(), std::vector<std::string>{"a"});
  auto instance = (*types.find("a"))();
  EXPECT_NE(instance, nullptr);
}

namespace {
struct global_probe : user_actor<st> {
  using user_actor_base::global_commit;
  using user_actor_base::global_erase;
  using user_actor_base::global_set;
  using user_actor_base::lease_grant;
};

// The http_error a global-store reply makes its handler answer, or nullopt when it succeeds.
std::optional<http_error> answer_to(const response& r, const std::string& refusal) {
  EXPECT_TRUE(r.next);
  if (!r.next)
    return std::nullopt;
  detail::global_reply reply;
  reply.refusal = refusal;
  try {
    r.next->on_reply(reply);
  } catch (const http_error& e) {
    return e;
  }
  return std::nullopt;
}
}  // namespace

// commander.durability = "reply": a change the deposit refused was not applied
// (503 + Retry-After: retrying is safe); one whose write was not answered may
// be applied (503 without Retry-After, saying so).
TEST(global_store, a_refused_change_says_retry_and_one_of_unknown_outcome_does_not) {
  global_probe::lease_grant lease{"k", 7, std::string("1")};
  const std::vector<response> changes = {
    global_probe::global_commit(lease, std::string("2"), [] { return response::text("ok"); }),
    global_probe::global_set("k", "2", [] { return response::text("ok"); }),
    global_probe::global_erase("k", [](bool) { return response::text("ok"); }),
  };
  for (const auto& change : changes) {
    EXPECT_FALSE(answer_to(change, "")) << "a durable change is answered by its handler";
    auto refused = answer_to(change, "not_durable");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status(), 503);
    EXPECT_GT(refused->retry_after(), 0u);
    EXPECT_NE(std::string(refused->what()).find("not applied"), std::string::npos) << refused->what();
    auto unknown = answer_to(change, "durability_unknown");
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->status(), 503);
    EXPECT_EQ(unknown->retry_after(), 0u) << "retrying a change that may be applied may apply it twice";
    EXPECT_NE(std::string(unknown->what()).find("may or may not"), std::string::npos) << unknown->what();
  }
}

}  // namespace app_test_file
