// The census and its surfaces against a real node: totals that match the traffic driven
// into it, paging and filters, detail with the state projection, each operator action
// and its orchestration-log line, the live WebSocket channel, the CLI, and 401s.
#include "../support/test_support.hpp"
#include "../support/ws_client.hpp"

#include <cstdio>
#include <fstream>
#include <set>
#include <sys/wait.h>

namespace census_test_file {

using namespace troupe::test;
using nlohmann::json;

namespace {

const std::string token = "census-token-" + random_token(10);
const headers_t auth{{"Authorization", "Bearer " + token}};

class Census : public node_test {
protected:
  // A node with two workers; `guests` guests, of whom the first `named` log in as u0, u1, …
  void start_with_users(int guests, int named, std::vector<std::string> extra = {}) {
    // Guests who only read retire after guest_idle_seconds: these must stay to be counted.
    std::vector<std::string> args{"--admin-token", token, "--set", "group.default.workers=2", "--set",
                                  "group.default.guest_idle_seconds=600"};
    args.insert(args.end(), extra.begin(), extra.end());
    start(args);
    for (int i = 0; i < guests; ++i) {
      clients_.push_back(std::make_unique<http_client>(port()));
      ASSERT_STATUS(clients_.back()->get("/api/counter"), 200);
    }
    for (int i = 0; i < named; ++i)
      ASSERT_STATUS(clients_[i]->post_json("/api/login", {{"user", "u" + std::to_string(i)}}), 200);
  }

  json census(const std::string& query = "") {
    http_client c(port());
    auto r = c.get("/_troupe/census" + query, auth);
    EXPECT_STATUS(r, 200);
    return r.json();
  }

  json log_lines() {
    http_client c(port());
    auto r = c.get("/_troupe/orchestration/log?tail=100", auth);
    EXPECT_STATUS(r, 200);
    return r.json()["lines"];
  }

  response act(const std::string& path, const std::string& who = "") {
    http_client c(port());
    headers_t h = auth;
    if (!who.empty())
      h.push_back({"X-Troupe-Operator", who});
    return c.post(path, "", h);
  }

  std::vector<std::unique_ptr<http_client>> clients_;
};

std::set<std::string> ids_of(const json& c) {
  std::set<std::string> out;
  for (auto& row : c["actors"])
    out.insert(row["id"].get<std::string>());
  return out;
}

// Runs `troupe census ARGS`; returns (exit code, stdout).
std::pair<int, std::string> run_cli(const std::string& args) {
  return run_command(troupe_binary() + " census " + args + " 2>/dev/null");
}

}  // namespace

TEST_F(Census, TotalsMatchTheTrafficDrivenIntoTheNode) {
  start_with_users(20, 5);
  // Three connections name a page each.
  for (int i = 5; i < 8; ++i)
    ASSERT_STATUS(clients_[i]->get("/api/counter", {{"X-Troupe-Page", "tab1"}}), 200);
  ASSERT_STATUS(act("/_troupe/users/u0/freeze"), 200);
  ASSERT_STATUS(act("/_troupe/users/u1/freeze"), 200);

  auto c = census();
  auto& users = c["totals"]["users"];
  EXPECT_EQ(users["all"], 20) << c.dump();  // 15 guests + 5 named (each login retired his guest)
  EXPECT_EQ(users["frozen"], 2);
  EXPECT_EQ(users["active"], 18);
  EXPECT_EQ(c["totals"]["connections"], 18);  // a frozen user's connection is not live
  EXPECT_EQ(c["totals"]["pages"], 3);
  EXPECT_EQ(c["totals"]["workers"], 2);
  EXPECT_EQ(c["totals"]["groups"], 1);
  // Worker aggregates add up to the live users; the group's are their sum.
  std::int64_t live = 0, conns = 0;
  for (auto& w : c["workers"]) {
    live += w["users"]["all"].get<std::int64_t>();
    conns += w["connections"].get<std::int64_t>();
  }
  EXPECT_EQ(live, 18);
  EXPECT_EQ(conns, 18);
  ASSERT_EQ(c["groups"].size(), 1u);
  EXPECT_EQ(c["groups"][0]["users"]["all"], 18);
  EXPECT_EQ(c["groups"][0]["user_type"], "notes");
  EXPECT_EQ(c["node"]["id"], "node");
  EXPECT_GT(c["node"]["rss_bytes"].get<double>(), 1e6);
  EXPECT_TRUE(c["scan"]["done"]);
  // The frozen users are listed without being woken.
  auto wakes = metric(port(), auth, "troupe_user_wakes_total");
  auto frozen = census("?state=frozen");
  EXPECT_EQ(ids_of(frozen), (std::set<std::string>{"user:u0", "user:u1"}));
  for (auto& row : frozen["actors"]) {
    EXPECT_TRUE(row["actor"].is_null());
    EXPECT_FALSE(row.contains("mailbox"));
  }
  EXPECT_EQ(metric(port(), auth, "troupe_user_wakes_total"), wakes);
  // Live rows carry their probe: handled counts what they served.
  auto u2 = census("?prefix=u2");
  ASSERT_EQ(u2["actors"].size(), 1u);
  EXPECT_EQ(u2["actors"][0]["state"], "active");
  EXPECT_GE(u2["actors"][0]["handled"].get<int>(), 1);
  EXPECT_EQ(u2["actors"][0]["mailbox"], 0);
  EXPECT_TRUE(u2["actors"][0]["clocks"].is_object());
}

TEST_F(Census, PagesAndFiltersAreExact) {
  start_with_users(30, 10);
  auto all = census("?limit=7");
  EXPECT_EQ(all["matched"], 30);
  ASSERT_EQ(all["actors"].size(), 7u);
  // Walking the cursor visits every user once, in name order.
  std::vector<std::string> walked;
  std::string after;
  for (int guard = 0; guard < 10; ++guard) {
    auto page = census("?limit=7" + (after.empty() ? "" : "&after=" + after));
    for (auto& row : page["actors"])
      walked.push_back(row["id"]);
    if (page["next"].is_null())
      break;
    after = page["next"].get<std::string>();
  }
  ASSERT_EQ(walked.size(), 30u);
  EXPECT_TRUE(std::is_sorted(walked.begin(), walked.end()));
  EXPECT_EQ(std::set<std::string>(walked.begin(), walked.end()).size(), 30u);
  // Offset paging gives the same rows.
  auto third = census("?limit=7&offset=14");
  ASSERT_EQ(third["actors"].size(), 7u);
  EXPECT_EQ(third["actors"][0]["id"], walked[14]);
  // Filters.
  auto named = census("?prefix=u&limit=100");
  EXPECT_EQ(named["matched"], 10);
  EXPECT_EQ(named["actors"].size(), 10u);
  auto w1 = census("?worker=default-w1&limit=1000");
  auto w2 = census("?worker=default-w2&limit=1000");
  EXPECT_EQ(w1["matched"].get<int>() + w2["matched"].get<int>(), 30);
  EXPECT_EQ(w1["actors"].size(), w1["matched"].get<std::size_t>());
  for (auto& row : w1["actors"])
    EXPECT_EQ(row["parent"], "worker:default-w1");
  auto workers = census("?kind=worker");
  EXPECT_EQ(workers["matched"], 2);
  EXPECT_EQ(workers["actors"][0]["kind"], "worker");
  EXPECT_TRUE(workers["actors"][0].contains("mailbox"));
  // Bad parameters are 400s naming the parameter.
  http_client c(port());
  for (std::string q : {"kind=pages", "limit=0", "limit=1001", "limit=x", "state=asleep", "offset=-1",
                        "worker=nobody"}) {
    auto r = c.get("/_troupe/census?" + q, auth);
    ASSERT_TRUE(is_json_error(r, 400)) << q << ": " << r.describe();
    auto name = q.substr(0, q.find('='));
    EXPECT_NE(r.json()["error"].get<std::string>().find(name), std::string::npos) << q << ": " << r.body;
  }
}

TEST_F(Census, DetailShowsTheProjectedStateAndConnections) {
  start_with_users(2, 1);
  ASSERT_STATUS(clients_[0]->post("/api/counter/incr"), 200);
  ASSERT_STATUS(clients_[0]->post("/api/counter/incr", "", {{"X-Troupe-Page", "p1"}}), 200);
  http_client c(port());
  auto r = c.get("/_troupe/actors/user%3Au0", auth);
  ASSERT_STATUS(r, 200);
  auto d = r.json();
  EXPECT_EQ(d["state"], "active");
  EXPECT_EQ(d["store"], json({{"count", 2}, {"notes", json::array()}, {"inbox", json::array()}})) << d.dump();
  ASSERT_EQ(d["connections"].size(), 1u);
  auto& conn = d["connections"][0];
  EXPECT_EQ(conn["ref"].get<std::string>().size(), 8u);
  EXPECT_EQ(clients_[0]->cookie()->substr(0, 8), conn["ref"]);
  ASSERT_EQ(conn["pages"].size(), 1u);
  EXPECT_EQ(conn["pages"][0]["page"], "p1");
  EXPECT_TRUE(conn["pages"][0]["actor"].is_null()) << "an idle page is a record, not an actor (virtual)";
  EXPECT_TRUE(conn["pages"][0]["clocks"]["last_rpc"].is_number());
  // The whole cookie is never shown.
  EXPECT_EQ(r.body.find(*clients_[0]->cookie()), std::string::npos);
  // Worker, group, node.
  EXPECT_STATUS(c.get("/_troupe/actors/worker:default-w1", auth), 200);
  EXPECT_EQ(c.get("/_troupe/actors/group:default", auth).json()["users"]["all"], 2);
  EXPECT_EQ(c.get("/_troupe/actors/node", auth).json()["totals"]["users"]["all"], 2);
  EXPECT_TRUE(is_json_error(c.get("/_troupe/actors/user:nobody", auth), 404));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/actors/user%zz", auth), 400));
}

TEST_F(Census, EveryOperatorActionIsCarriedOutAndLogged) {
  start_with_users(6, 3);
  ASSERT_STATUS(clients_[0]->post("/api/counter/incr"), 200);

  // Freeze: he is frozen, and wakes with his count on his next request.
  auto r = act("/_troupe/users/u0/freeze", "alice-ops");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json(), json({{"frozen", "u0"}}));
  EXPECT_EQ(census("?prefix=u0")["actors"][0]["state"], "frozen");
  EXPECT_EQ(count_of(clients_[0]->get("/api/counter")), 1);

  // Drop: he is gone with his state; his connection is a new guest.
  ASSERT_STATUS(clients_[1]->post("/api/counter/incr"), 200);
  r = act("/_troupe/users/u1/drop");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json()["was"], "active");
  EXPECT_EQ(r.json()["connections"], 1);
  EXPECT_TRUE(census("?prefix=u1")["actors"].empty());
  auto who = clients_[1]->get("/api/whoami").json();
  EXPECT_NE(who["user"], "u1");
  EXPECT_EQ(count_of(clients_[1]->get("/api/counter")), 0);
  // A frozen user is dropped without waking him.
  ASSERT_STATUS(act("/_troupe/users/u2/freeze"), 200);
  auto wakes = metric(port(), auth, "troupe_user_wakes_total");
  r = act("/_troupe/users/u2/drop");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json()["was"], "frozen");
  EXPECT_EQ(metric(port(), auth, "troupe_user_wakes_total"), wakes);
  EXPECT_TRUE(is_json_error(act("/_troupe/users/nobody/drop"), 404));

  // Drain: the worker's users freeze, it leaves the census, its users wake on the other.
  auto before = census("?kind=worker");
  ASSERT_EQ(before["matched"], 2);
  auto hosted = before["actors"][0]["users"]["all"].get<int>();
  r = act("/_troupe/workers/default-w1/drain");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json()["frozen"], hosted);
  EXPECT_EQ(r.json()["failed"], 0);
  eventually([&] { return census("?kind=worker")["matched"] == 1; }, std::chrono::seconds(5));
  auto after = census("?kind=worker");
  ASSERT_EQ(after["matched"], 1);
  EXPECT_EQ(after["actors"][0]["name"], "default-w2");
  EXPECT_EQ(count_of(clients_[0]->get("/api/counter")), 1);
  EXPECT_EQ(clients_[0]->get("/api/whoami").json()["worker"], "default-w2");
  EXPECT_TRUE(is_json_error(act("/_troupe/workers/default-w2/drain"), 409));
  EXPECT_TRUE(is_json_error(act("/_troupe/workers/default-w1/drain"), 409));  // drained already
  EXPECT_TRUE(is_json_error(act("/_troupe/workers/default-w9/drain"), 404));

  // The log: one line per action, who, what, on whom, how it ended.
  auto lines = log_lines();
  std::vector<std::string> seen;
  for (auto& l : lines)
    seen.push_back(l["what"].get<std::string>() + " " + l["on"].get<std::string>() + " " +
                   l["outcome"].get<std::string>());
  std::vector<std::string> expected{"worker_start group:default ok", "worker_start group:default ok",
                                    "start node ok",          "freeze user:u0 ok",
                                    "drop user:u1 ok",         "freeze user:u2 ok",
                                    "drop user:u2 ok",         "drop user:nobody refused",
                                    "drain worker:default-w1 ok", "drain worker:default-w2 refused",
                                    "drain worker:default-w1 refused", "drain worker:default-w9 refused"};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(lines[0]["numbers"]["slot"], 1);
  EXPECT_EQ(lines[0]["numbers"]["generation"], 1) << "every line carries the settings generation";
  EXPECT_EQ(lines[3]["who"], "alice-ops");
  EXPECT_EQ(lines[3]["from"], "127.0.0.1");
  EXPECT_EQ(lines[4]["who"], "admin");
  EXPECT_EQ(lines[8]["numbers"]["frozen"], hosted);
  EXPECT_TRUE(lines[8]["numbers"].contains("ms"));
  EXPECT_FALSE(lines[9]["detail"].get<std::string>().empty());
  // The same lines are in the file (written by the log's own thread), one JSON object each.
  std::vector<std::string> in_file;
  eventually([&] {
    in_file.clear();
    std::ifstream file(node().deposit_dir() + "/orchestration.log");
    for (std::string line; std::getline(file, line);)
      in_file.push_back(line);
    return in_file.size() >= lines.size();
  }, std::chrono::seconds(5));
  ASSERT_EQ(in_file.size(), lines.size());
  for (std::size_t i = 0; i < in_file.size(); ++i)
    EXPECT_EQ(json::parse(in_file[i]), lines[i]);
}

TEST_F(Census, TheOrchestrationLogIsRotatedBySize) {
  start({"--admin-token", token, "--set", "commander.orchestration_log_max_bytes=1024", "--set",
         "commander.orchestration_log_files=2"});
  for (int i = 0; i < 30; ++i)
    act("/_troupe/users/nobody" + std::to_string(i) + "/freeze");
  auto base = node().deposit_dir() + "/orchestration";
  auto exists = [](const std::string& path) { return !std::ifstream(path).fail(); };
  // Written by the log's own thread; a rotation renames the files one after the
  // other (.1 → .2, then the current one → .1), so a look between two renames
  // misses one: wait for all three at one look, after the last line.
  const bool rotated = eventually([&] {
    return log_lines().size() == 32u && exists(base + ".log") && exists(base + ".1.log") && exists(base + ".2.log");
  }, std::chrono::seconds(5));
  EXPECT_TRUE(rotated) << "lines " << log_lines().size() << ", current " << exists(base + ".log") << ", .1 "
                       << exists(base + ".1.log") << ", .2 " << exists(base + ".2.log");
  EXPECT_FALSE(exists(base + ".3.log"));
}

TEST_F(Census, FrozenUsersOfAnEarlierLifeAreListedAfterARestart) {
  start_with_users(4, 4);
  auto deposit = node().deposit_dir();
  node().terminate();
  ASSERT_EQ(node().wait_exit(std::chrono::seconds(20)), 0);
  clients_.clear();
  start_on(deposit, {"--admin-token", token});
  json c;
  eventually([&] {
    c = census("?state=frozen");
    return c["scan"]["done"] == true;
  }, std::chrono::seconds(5));
  EXPECT_EQ(c["scan"]["frozen_found"], 4);
  EXPECT_EQ(ids_of(c), (std::set<std::string>{"user:u0", "user:u1", "user:u2", "user:u3"}));
  EXPECT_EQ(c["totals"]["users"]["all"], 4);
  EXPECT_EQ(c["totals"]["users"]["frozen"], 4);
  // This life's log holds its start: its worker's and the node's (written on the log's own time).
  json lines;
  eventually([&] {
    lines = log_lines();
    return lines.size() >= 2;
  }, std::chrono::seconds(5));
  EXPECT_EQ(lines.size(), 2u) << lines.dump(1);
}

TEST_F(Census, EverySurfaceNeedsTheToken) {
  start({"--admin-token", token});
  http_client c(port());
  for (std::string path : {"/_troupe/census", "/_troupe/actors/node", "/_troupe/orchestration/log"}) {
    EXPECT_TRUE(is_json_error(c.get(path), 401)) << path;
    EXPECT_TRUE(is_json_error(c.get(path, {{"Authorization", "Bearer wrong"}}), 401)) << path;
  }
  for (std::string path : {"/_troupe/users/u/freeze", "/_troupe/users/u/drop", "/_troupe/workers/default-w1/drain"})
    EXPECT_TRUE(is_json_error(c.post(path), 401)) << path;
  // The page holds no data: it is served, and asks for the token itself.
  auto page = c.get("/_troupe/console");
  ASSERT_STATUS(page, 200);
  EXPECT_NE(page.get("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page.body.find("token-form"), std::string::npos);
  EXPECT_EQ(page.body.find("http://"), std::string::npos);  // nothing fetched from outside
  EXPECT_EQ(page.body.find("https://"), std::string::npos);
  // The live channel closes with 1008 on a wrong token.
  ws_client ws(port(), "/_troupe/console/live");
  ws.send(R"({"token":"wrong"})");
  EXPECT_FALSE(ws.read(std::chrono::seconds(5)));
  EXPECT_EQ(ws.close_code(), 1008);
}

TEST_F(Census, ConsolesAreBoundedByMaxConsoles) {
  start({"--admin-token", token, "--set", "limits.max_consoles=1"});
  {
    ws_client first(port(), "/_troupe/console/live");
    first.send(json{{"token", token}}.dump());
    ASSERT_TRUE(first.read(std::chrono::seconds(5)));  // authenticated: it holds the one slot
    EXPECT_THROW(ws_client(port(), "/_troupe/console/live", auth), transport_error);  // 503, no upgrade
    http_client c(port());
    auto r = c.get("/_troupe/console/live", {{"Connection", "Upgrade"}, {"Upgrade", "websocket"},
                                             {"Sec-WebSocket-Version", "13"},
                                             {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                                             auth.front()});
    EXPECT_TRUE(is_json_error(r, 503)) << r.describe();
    EXPECT_FALSE(r.get("Retry-After").empty());
    // A token-less upgrade costs no slot; its token, when it comes, finds none free.
    ws_client second(port(), "/_troupe/console/live");
    second.send(json{{"token", token}}.dump());
    EXPECT_FALSE(second.read(std::chrono::seconds(5)));
    EXPECT_EQ(second.close_code(), 1013);
    EXPECT_TRUE(first.read(std::chrono::seconds(3)));  // the first one is served all along
  }
  // Its place is free once it closed.
  EXPECT_TRUE(eventually([&] {
    try {
      ws_client again(port(), "/_troupe/console/live", auth);
      return true;
    } catch (const transport_error&) {
      return false;
    }
  }, std::chrono::milliseconds(2500), std::chrono::milliseconds(50)));
}

TEST_F(Census, TheAdminSurfaceOffMeansNoConsole) {
  start();
  http_client c(port());
  EXPECT_TRUE(is_json_error(c.get("/_troupe/console"), 404));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/census"), 404));
}

TEST_F(Census, TheLiveChannelSendsAFullSnapshotThenPatches) {
  start_with_users(5, 2);
  ws_client ws(port(), "/_troupe/console/live");
  ws.send(json{{"token", token}}.dump());
  ws.send(json{{"view", {{"kind", "user"}, {"limit", 10}, {"open", "user:u0"}}}}.dump());
  auto first = ws.read(std::chrono::seconds(5));
  ASSERT_TRUE(first);
  auto full = json::parse(*first);
  ASSERT_EQ(full["type"], "full") << *first;
  json snapshot = full["data"];
  EXPECT_EQ(snapshot["census"]["totals"]["users"]["all"], 5);
  EXPECT_EQ(snapshot["detail"]["id"], "user:u0");
  EXPECT_EQ(snapshot["detail"]["store"]["count"], 0);
  EXPECT_TRUE(snapshot["log"].is_array());
  auto seq = full["seq"].get<int>();
  // Traffic and an action change the census; the next patches carry the change.
  for (int i = 0; i < 3; ++i)
    ASSERT_STATUS(clients_[0]->post("/api/counter/incr"), 200);
  ASSERT_STATUS(act("/_troupe/users/u1/freeze"), 200);
  bool saw_frozen = false, saw_count = false;
  for (int i = 0; i < 6 && !(saw_frozen && saw_count); ++i) {
    auto m = ws.read(std::chrono::seconds(3));
    ASSERT_TRUE(m) << "no message within 3 s";
    auto msg = json::parse(*m);
    if (msg["type"] == "full") {
      snapshot = msg["data"];
    } else {
      ASSERT_EQ(msg["type"], "patch") << *m;
      EXPECT_EQ(msg["seq"], seq + 1);
      EXPECT_LT(m->size(), 4000u) << "a patch carries changes, not the whole census";
      snapshot = snapshot.patch(msg["ops"]);
    }
    seq = msg["seq"];
    saw_frozen = snapshot["census"]["totals"]["users"]["frozen"] == 1;
    saw_count = snapshot["detail"]["store"]["count"] == 3;
  }
  EXPECT_TRUE(saw_frozen) << snapshot.dump();
  EXPECT_TRUE(saw_count) << snapshot["detail"].dump();
  // A patched snapshot equals what the node says now (the parts that do not tick).
  auto now = census("?limit=10");
  EXPECT_EQ(snapshot["census"]["totals"], now["totals"]);
}

TEST_F(Census, TheCommandLineShowsTheSameCensus) {
  start_with_users(3, 2);
  auto url = "--url http://127.0.0.1:" + std::to_string(port()) + " --token " + token;
  auto [code, out] = run_cli(url + " --json");
  ASSERT_EQ(code, 0) << out;
  auto c = json::parse(out);
  EXPECT_EQ(c["totals"]["users"]["all"], 3);
  std::tie(code, out) = run_cli(url + " --filter prefix=u");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("u0"), std::string::npos) << out;
  EXPECT_NE(out.find("u1"), std::string::npos) << out;
  EXPECT_NE(out.find("matched 2"), std::string::npos) << out;
  std::tie(code, out) = run_cli(url + " --tree");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("worker default-w1"), std::string::npos) << out;
  std::tie(code, out) = run_cli(url + " --top --iterations 2");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\x1b[H\x1b[2J"), std::string::npos);
  EXPECT_EQ(run_cli("--url http://127.0.0.1:" + std::to_string(port()) + " --token wrong").first, 1);
  EXPECT_EQ(run_cli(url + " --filter colour=red").first, 2);
  EXPECT_EQ(run_cli("--url ftp://x --token t").first, 2);
}

}  // namespace census_test_file
