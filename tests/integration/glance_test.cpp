// The node at a glance (issue 15), against a real node: the rate history
// (GET /_troupe/history) and the per-route figures follow the traffic, the
// census tells guests from named users, `troupe census --top` draws one frame
// sorted by activity and fitted to the terminal, the log is JSON lines or text
// in UTC, and a login into a user who has a store drops the guest's (logged, counted).
#include "../support/test_support.hpp"

#include <regex>

namespace glance_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string token = "glance-" + random_token(12);
const headers_t auth{{"Authorization", "Bearer " + token}};
const std::regex iso_utc(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$)");

json history(uint16_t port) {
  http_client c(port);
  auto r = c.get("/_troupe/history", auth);
  EXPECT_STATUS(r, 200);
  return r.status == 200 ? r.json() : json::object();
}

const json* route_of(const json& h, const std::string& method, const std::string& route) {
  for (auto& r : h["routes"])
    if (r["method"] == method && r["route"] == route)
      return &r;
  return nullptr;
}

// Cells of UTF-8 text as a terminal counts them here (names are ASCII, µ and … one cell each).
int cells(const std::string& s) {
  int n = 0;
  for (unsigned char c : s)
    n += (c & 0xc0) != 0x80;
  return n;
}

}  // namespace

class Glance : public node_test {};

TEST_F(Glance, TheHistoryAndThePerRouteFiguresFollowTheTraffic) {
  start({"--admin-token", token, "--set", "node.history_seconds=30"});
  http_client alice(port());
  ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
  for (int i = 0; i < 20; ++i)
    ASSERT_STATUS(alice.get("/api/counter"), 200);
  // Two paths, one route pattern: one series, not one per path.
  ASSERT_STATUS(alice.get("/api/global/k1"), 404);
  ASSERT_STATUS(alice.get("/api/global/k2"), 404);
  EXPECT_STATUS(alice.post("/api/crash"), 502);  // a handler that throws: an error of its route

  json h;
  ASSERT_TRUE(eventually([&] {
    h = history(port());
    for (auto& s : h["samples"])
      if (s["requests_per_s"].get<double>() > 0 && s["p50_ms"].is_number())
        return true;
    return false;
  }, 5s)) << h.dump(1);
  EXPECT_EQ(h["interval_seconds"], 1);
  EXPECT_EQ(h["capacity"], 30);
  for (auto& s : h["samples"]) {
    EXPECT_TRUE(std::regex_match(s["t"].get<std::string>(), iso_utc)) << s.dump();
    for (const char* k : {"requests_per_s", "errors_per_s", "wakes_per_s", "freezes_per_s"})
      EXPECT_GE(s[k].get<double>(), 0) << k;
  }
  // The crash's 502 shows as errors/s in some second.
  ASSERT_TRUE(eventually([&] {
    h = history(port());
    for (auto& s : h["samples"])
      if (s["errors_per_s"].get<double>() > 0)
        return true;
    return false;
  }, 3s)) << h.dump(1);

  auto* counter = route_of(h, "GET", "/api/counter");
  ASSERT_TRUE(counter) << h["routes"].dump(1);
  EXPECT_EQ((*counter)["type"], "notes");
  EXPECT_EQ((*counter)["requests"], 20);
  EXPECT_EQ((*counter)["errors"], 0);
  EXPECT_TRUE((*counter)["p50_ms"].is_number());
  EXPECT_TRUE((*counter)["p99_ms"].is_number());
  EXPECT_LE((*counter)["p50_ms"].get<double>(), (*counter)["p99_ms"].get<double>());
  auto* global = route_of(h, "GET", "/api/global/{key}");
  ASSERT_TRUE(global);
  EXPECT_EQ((*global)["requests"], 2);
  auto* crash = route_of(h, "POST", "/api/crash");
  ASSERT_TRUE(crash);
  EXPECT_EQ((*crash)["errors"], 1);

  // The same figures in /_troupe/metrics, labelled by route pattern.
  auto text = metrics_text(port(), auth);
  const std::string counter_labels = R"(type="notes",method="GET",route="/api/counter")";
  EXPECT_EQ(prometheus_sample(text, "troupe_route_requests_total", counter_labels), 20) << text;
  EXPECT_EQ(prometheus_sample(text, "troupe_route_errors_total", counter_labels), 0);
  EXPECT_EQ(prometheus_sample(text, "troupe_route_request_seconds_count", counter_labels), 20);
  EXPECT_EQ(prometheus_sample(text, "troupe_route_requests_total", R"(type="notes",method="GET",route="/api/global/{key}")"), 2);
  EXPECT_EQ(prometheus_sample(text, "troupe_route_errors_total", R"(type="notes",method="POST",route="/api/crash")"), 1);
  EXPECT_EQ(text.find("/api/global/k1"), std::string::npos);  // never a path as a label
  EXPECT_TRUE(prometheus_sample(text, "troupe_http_request_seconds_count"));
  // A route nobody called is listed at 0: the set is the type's table.
  EXPECT_EQ(prometheus_sample(text, "troupe_route_requests_total", R"(type="notes",method="GET",route="/api/inbox")"), 0);
  // The history is admin surface.
  http_client anonymous(port());
  EXPECT_STATUS(anonymous.get("/_troupe/history"), 401);
}

// Issue 23 (b): login and logout answer later than their handler returns (the
// commander moves the connection), and a stream answers with a stream: their
// routes count them all the same.
TEST_F(Glance, DeferredAndStreamingAnswersCountInTheirRoutesFigures) {
  start({"--admin-token", token});
  const int n = 3;
  for (int i = 0; i < n; ++i) {
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", "rita" + std::to_string(i)}}), 200);
    ASSERT_STATUS(c.post("/api/logout"), 200);
  }
  http_client reader(port());
  ASSERT_STATUS(reader.get("/api/notes.ndjson"), 200);
  ASSERT_STATUS(reader.get("/api/notes.ndjson"), 200);
  json h;
  auto requests = [&](const char* method, const char* route) {
    auto* r = route_of(h, method, route);
    return r ? (*r)["requests"].get<int>() : -1;
  };
  EXPECT_TRUE(eventually([&] {
    h = history(port());
    return requests("POST", "/api/login") == n && requests("POST", "/api/logout") == n
           && requests("GET", "/api/notes.ndjson") == 2;
  }, 5s)) << h["routes"].dump(1);
  EXPECT_EQ(requests("POST", "/api/login"), n);
  EXPECT_EQ(requests("POST", "/api/logout"), n);
  EXPECT_EQ(requests("GET", "/api/notes.ndjson"), 2);
}

TEST_F(Glance, TheCensusTellsGuestsFromNamedUsers) {
  start({"--admin-token", token, "--set", "group.default.guest_idle_seconds=600"});
  std::vector<std::unique_ptr<http_client>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<http_client>(port()));
    ASSERT_STATUS(clients.back()->get("/api/counter"), 200);
  }
  ASSERT_STATUS(clients[0]->post_json("/api/login", {{"user", "bob"}}), 200);
  http_client c(port());
  auto census = c.get("/_troupe/census?limit=10", auth).json();
  EXPECT_EQ(census["totals"]["users"]["all"], 4);
  EXPECT_EQ(census["totals"]["guests"], 3);
  EXPECT_EQ(census["totals"]["named"], 1);
  int guests = 0;
  for (auto& row : census["actors"]) {
    bool guest = row["guest"].get<bool>();
    guests += guest;
    EXPECT_EQ(guest, row["name"].get<std::string>().rfind("guest_", 0) == 0) << row.dump();
  }
  EXPECT_EQ(guests, 3);
}

TEST_F(Glance, TopDrawsOneFrameSortedByActivityThatFitsTheTerminal) {
  start({"--admin-token", token});
  http_client busy(port()), quiet(port());
  ASSERT_STATUS(quiet.post_json("/api/login", {{"user", "aaron"}}), 200);
  ASSERT_STATUS(busy.post_json("/api/login", {{"user", "zoe"}}), 200);
  for (int i = 0; i < 30; ++i)
    ASSERT_STATUS(busy.post("/api/counter/incr"), 200);
  auto url = " census --url http://127.0.0.1:" + std::to_string(port()) + " --token " + token;
  // stdout is a pipe, not a terminal: COLUMNS × LINES is the size.
  auto [code, out] = run_command("COLUMNS=64 LINES=8 " + troupe_binary() + url + " --top --iterations 1 2>&1");
  ASSERT_EQ(code, 0) << out;
  auto clear = std::string("\x1b[H\x1b[2J");
  ASSERT_EQ(out.rfind(clear, 0), 0u) << out;
  auto lines = split_lines(out.substr(clear.size()));
  ASSERT_GE(lines.size(), 6u) << out;
  EXPECT_LE(lines.size(), 8u) << out;
  for (auto& l : lines)
    EXPECT_LE(cells(l), 64) << l;
  EXPECT_NE(lines[2].find("sorted by handled/s"), std::string::npos) << out;
  EXPECT_NE(lines[3].find("HANDLED/S"), std::string::npos) << out;
  EXPECT_NE(lines[3].find("SERVICE"), std::string::npos) << out;
  // zoe handled the most: first, though aaron comes first by name.
  EXPECT_EQ(lines[4].rfind("zoe ", 0), 0u) << out;
  EXPECT_GT(out.find("\naaron "), out.find("\nzoe ")) << out;
  EXPECT_NE(out.find("\xC2\xB5s"), std::string::npos) << out;  // sub-millisecond service times in µs

  // Narrower: columns drop from the right, nothing wraps.
  std::tie(code, out) = run_command("COLUMNS=40 LINES=6 " + troupe_binary() + url + " --top --iterations 1 --sort service");
  ASSERT_EQ(code, 0) << out;
  lines = split_lines(out.substr(clear.size()));
  EXPECT_LE(lines.size(), 6u);
  for (auto& l : lines)
    EXPECT_LE(cells(l), 40) << l;
  EXPECT_NE(out.find("sorted by service"), std::string::npos) << out;
  EXPECT_EQ(run_command(troupe_binary() + url + " --top --iterations 1 --sort name 2>/dev/null").first, 2);
}

TEST_F(Glance, JsonLogsAreOneObjectPerLineInUtc) {
  start({"--admin-token", token, "--set", "log.format=json", "--set", "node.log_level=debug"});
  http_client c(port());
  ASSERT_STATUS(c.get("/api/counter"), 200);
  std::vector<std::string> lines;
  ASSERT_TRUE(eventually([&] {
    lines = split_lines(node().stderr_log());
    return lines.size() >= 2;
  }, 5s)) << node().stderr_log();
  for (auto& l : lines) {
    auto j = json::parse(l, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << l;
    ASSERT_TRUE(j["ts"].is_string()) << l;
    EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(), iso_utc)) << l;
    EXPECT_TRUE(j["level"].is_string()) << l;
    EXPECT_EQ(j["logger"], "troupe") << l;
    EXPECT_TRUE(j["msg"].is_string()) << l;
  }
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](auto& l) { return l.find("\"level\":\"debug\"") != std::string::npos; }));
  // A format the node does not know is refused at start, naming the key.
  auto bad = run_binary({"node", "--listen", "127.0.0.1:0", "--set", "log.format=xml"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("log.format"), std::string::npos) << bad.err;
}

TEST_F(Glance, TextLogsAreStampedInUtcWithTheZone) {
  start({"--admin-token", token, "--set", "node.log_level=debug"});
  http_client c(port());
  ASSERT_STATUS(c.get("/api/counter"), 200);
  std::vector<std::string> lines;
  ASSERT_TRUE(eventually([&] {
    lines = split_lines(node().stderr_log());
    return !lines.empty();
  }, 5s));
  const std::regex stamped(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (trace|debug|info|warning|error|critical) .*)");
  for (auto& l : lines)
    EXPECT_TRUE(std::regex_match(l, stamped)) << l;
}

TEST_F(Glance, ALoginKeepsTheUsersStoreAndDropsTheGuestsLoggedAndCounted) {
  start({"--admin-token", token});
  {
    http_client alice(port());
    ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
    for (int i = 0; i < 5; ++i)
      ASSERT_STATUS(alice.post("/api/counter/incr"), 200);
  }
  http_client admin(port());
  ASSERT_STATUS(admin.post("/_troupe/users/alice/freeze", "", auth), 200);

  // A guest with a store of his own logs in as frozen alice: her parcel wins.
  http_client guest(port());
  for (int i = 0; i < 3; ++i)
    ASSERT_STATUS(guest.post("/api/counter/incr"), 200);
  ASSERT_STATUS(guest.post_json("/api/login", {{"user", "alice"}}), 200);
  EXPECT_EQ(count_of(guest.get("/api/counter")), 5);
  EXPECT_EQ(metric(port(), auth, "troupe_login_guest_store_dropped_total", R"(reason="frozen")"), 1);
  EXPECT_EQ(metric(port(), auth, "troupe_login_guest_store_dropped_total", R"(reason="live")"), 0);
  EXPECT_TRUE(eventually([&] {
    return node().stderr_log().find("he was frozen, his parcel wins; the guest's store") != std::string::npos;
  }, 5s)) << node().stderr_log();

  // Another guest logs in while she is live: her live state wins.
  http_client second(port());
  for (int i = 0; i < 2; ++i)
    ASSERT_STATUS(second.post("/api/counter/incr"), 200);
  ASSERT_STATUS(second.post_json("/api/login", {{"user", "alice"}}), 200);
  EXPECT_EQ(count_of(second.get("/api/counter")), 5);
  EXPECT_EQ(metric(port(), auth, "troupe_login_guest_store_dropped_total", R"(reason="live")"), 1);
  EXPECT_TRUE(eventually([&] {
    return node().stderr_log().find("his resident state wins") != std::string::npos;
  }, 5s)) << node().stderr_log();
}

}  // namespace glance_test_file
