// The application-facing API: routes, path parameters, requests, responses.
#include "actors/app.hpp"
#include "actors/messages.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

using namespace troupe;

namespace {
response named(const char* name) {
  return response::text(name);
}
}  // namespace

TEST(router, matches_method_path_and_parameters) {
  router r;
  r.get("/api/counter", [](request&) { return named("get-counter"); });
  r.post("/api/counter/incr", [](request&) { return named("incr"); });
  r.get("/tally/{name}", [](request&) { return named("tally"); });
  r.del("/rooms/{room}/members/{member}", [](request&) { return named("kick"); });
  EXPECT_EQ(r.size(), 4u);

  auto m = r.find("GET", "/api/counter");
  ASSERT_NE(m.target, nullptr);
  http_request raw;
  request q(raw, {});
  EXPECT_EQ((*m.target)(q).body, "get-counter");

  m = r.find("DELETE", "/rooms/r1/members/bob");
  ASSERT_NE(m.target, nullptr);
  ASSERT_EQ(m.params.size(), 2u);
  request q2(raw, m.params);
  EXPECT_EQ(q2.param("room"), "r1");
  EXPECT_EQ(q2.param("member"), "bob");
  EXPECT_EQ(q2.param("absent"), "");
}

TEST(router, shares_parsed_shapes_with_its_types_routes_and_keeps_its_own_handlers) {
  router shapes;
  shapes.get("/a/{x}", [](request&) { return named("prototype"); });
  shapes.post("/b", [](request&) { return named("prototype"); });
  EXPECT_EQ(shapes.own_shapes(), 2u);

  router mine(&shapes);
  mine.get("/a/{x}", [](request&) { return named("mine-a"); });
  mine.post("/b", [](request&) { return named("mine-b"); });
  mine.get("/c", [](request&) { return named("mine-c"); });  // not in the shapes: parsed here
  EXPECT_EQ(mine.own_shapes(), 1u);
  http_request raw;
  auto m = mine.find("GET", "/a/7");
  ASSERT_NE(m.target, nullptr);
  request q(raw, m.params);
  EXPECT_EQ((*m.target)(q).body, "mine-a");
  EXPECT_EQ(q.param("x"), "7");
  EXPECT_EQ((*mine.find("GET", "/c").target)(q).body, "mine-c");
  EXPECT_TRUE(mine.find("GET", "/b").other_method);

  router other_order(&shapes);  // a different route at a position: its own shape
  other_order.post("/b", [](request&) { return named("x"); });
  EXPECT_EQ(other_order.own_shapes(), 1u);
  EXPECT_NE(other_order.find("POST", "/b").target, nullptr);
}

TEST(router, tells_unknown_paths_from_other_methods) {
  router r;
  r.get("/api/counter", [](request&) { return named("x"); });
  r.get("/tally/{name}", [](request&) { return named("y"); });
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
struct st {
  int x = 0;
  MSGPACK_DEFINE(x);
};
struct a : user_actor<st> {
  void routes(router&) override {}
};
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
  void routes(router&) override {}
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
