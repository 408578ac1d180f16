// The cluster's census merge (registry::merge_census): the members' parts of
// one query in, the cluster's answer out — without actors.
#include "registry/census_model.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace census_merge_test_file {

using namespace troupe::registry;
using nlohmann::json;

namespace {

json counts(int active, int frozen) {
  return {{"all", active + frozen}, {"active", active}, {"unfreezing", 0}, {"departing", 0}, {"frozen", frozen}, {"resting", 0}};
}

json user(const std::string& name, bool live, const std::string& worker = "default-w1") {
  return {{"id", "user:" + name},   {"kind", "user"},
          {"name", name},           {"parent", live ? json("worker:" + worker) : json(nullptr)},
          {"actor", live ? json(7) : json(nullptr)}, {"state", live ? "active" : "frozen"},
          {"connections", live ? 1 : 0}, {"pages", 0}, {"restarts", 0}};
}

// A member's census document: `live` users on its worker default-w1, `frozen` ones known frozen.
json member_doc(const std::vector<std::string>& live, const std::vector<std::string>& frozen, int window,
                std::int64_t frozen_total = -1) {
  std::vector<json> rows;
  for (auto& n : live)
    rows.push_back(user(n, true));
  for (auto& n : frozen)
    rows.push_back(user(n, false));
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a["id"] < b["id"]; });
  json actors = json::array();
  for (int i = 0; i < static_cast<int>(rows.size()) && i < window; ++i)
    actors.push_back(rows[i]);
  auto n_live = static_cast<int>(live.size());
  auto n_frozen = frozen_total >= 0 ? static_cast<int>(frozen_total) : static_cast<int>(frozen.size());
  return {{"node", {{"id", "node"}, {"uptime_seconds", 3.5}, {"rss_bytes", 1000}, {"cpu_seconds", 0.1}}},
          {"health", {{"status", "ok"}}},
          {"totals", {{"users", counts(n_live, n_frozen)}, {"connections", n_live}, {"pages", 0}, {"workers", 1},
                      {"groups", 1}}},
          {"groups", json::array({{{"id", "group:default"}, {"kind", "group"}, {"name", "default"},
                                   {"user_type", "notes"}, {"actor", 3}, {"workers", {"worker:default-w1"}},
                                   {"users", counts(n_live, 0)}, {"connections", n_live}, {"pages", 0},
                                   {"restarts", 0}}})},
          {"workers", json::array({{{"id", "worker:default-w1"}, {"kind", "worker"}, {"name", "default-w1"},
                                    {"group", "default"}, {"users", counts(n_live, 0)}}})},
          {"matched", static_cast<int>(rows.size())},
          {"actors", actors},
          {"next", static_cast<int>(rows.size()) > window ? json(actors.back()["name"]) : json(nullptr)}};
}

census_part part(const std::string& name, const std::string& state, json doc, std::uint64_t age) {
  census_part p;
  p.member.name = name;
  p.member.state = state;
  p.member.incarnation = (std::uint64_t{1} << 62) + age;  // past 2^53: must survive as a string
  p.member.address = "127.0.0.1:" + std::to_string(7000 + age);
  p.member.age = age;
  p.member.leader = age == 1;
  p.member.heartbeat_age_ms = state == "self" ? -1 : 120;
  p.doc = std::move(doc);
  return p;
}

std::vector<std::string> row_names(const json& doc) {
  std::vector<std::string> out;
  for (auto& r : doc["actors"])
    out.push_back(r["name"]);
  return out;
}

census_window window(std::uint64_t offset, std::uint32_t limit, std::string kind = "user") {
  census_window w;
  w.kind = std::move(kind);
  w.offset = offset;
  w.limit = limit;
  return w;
}

}  // namespace

TEST(census_merge, lists_every_member_as_a_node_with_its_facts) {
  std::vector<census_part> parts{part("n1", "self", member_doc({"a"}, {}, 10), 1),
                                 part("n2", "up", member_doc({"b"}, {}, 10), 2)};
  auto doc = merge_census(json{{"node", {{"name", "n1"}}}}, parts, window(0, 10));
  ASSERT_EQ(doc["nodes"].size(), 2u);
  auto& n2 = doc["nodes"][1];
  EXPECT_EQ(n2["id"], "node:n2");
  EXPECT_EQ(n2["name"], "n2");
  EXPECT_EQ(n2["state"], "up");
  EXPECT_EQ(n2["incarnation"], std::to_string((std::uint64_t{1} << 62) + 2));
  EXPECT_EQ(n2["address"], "127.0.0.1:7002");
  EXPECT_EQ(n2["age"], 2);
  EXPECT_EQ(n2["leader"], false);
  EXPECT_EQ(n2["heartbeat_age_ms"], 120);
  EXPECT_EQ(n2["health"]["status"], "ok");
  EXPECT_EQ(n2["totals"]["users"]["active"], 1);
  EXPECT_EQ(n2["workers"][0]["id"], "worker:n2/default-w1");
  EXPECT_EQ(n2["answered"], true);
  EXPECT_TRUE(doc["nodes"][0]["heartbeat_age_ms"].is_null());
  EXPECT_EQ(doc["nodes"][0]["leader"], true);
  EXPECT_EQ(doc["node"]["name"], "n1");  // the base is kept
}

TEST(census_merge, adds_live_users_and_counts_the_shared_deposits_frozen_once) {
  // Both members scanned the shared deposit: f1, f2 frozen are known to both.
  std::vector<census_part> parts{part("n1", "self", member_doc({"a", "c"}, {"f1", "f2"}, 10), 1),
                                 part("n2", "up", member_doc({"b"}, {"f1", "f2"}, 10), 2)};
  auto doc = merge_census(json::object(), parts, window(0, 10));
  auto& u = doc["totals"]["users"];
  EXPECT_EQ(u["active"], 3);
  EXPECT_EQ(u["frozen"], 2);
  EXPECT_EQ(u["all"], 5);
  EXPECT_EQ(doc["totals"]["workers"], 2);
  EXPECT_EQ(doc["totals"]["groups"], 1);
  EXPECT_EQ(doc["totals"]["connections"], 3);
  EXPECT_EQ(row_names(doc), (std::vector<std::string>{"a", "b", "c", "f1", "f2"}));
  EXPECT_EQ(doc["matched"], 5);
  EXPECT_TRUE(doc["next"].is_null());
  // Live rows say where they live, with their worker qualified; frozen ones live nowhere.
  EXPECT_EQ(doc["actors"][1]["node"], "n2");
  EXPECT_EQ(doc["actors"][1]["parent"], "worker:n2/default-w1");
  EXPECT_TRUE(doc["actors"][3]["node"].is_null());
  // One group, over both members, its workers qualified.
  ASSERT_EQ(doc["groups"].size(), 1u);
  auto& g = doc["groups"][0];
  EXPECT_EQ(g["users"]["active"], 3);
  EXPECT_EQ(g["workers"], (json{"worker:n1/default-w1", "worker:n2/default-w1"}));
  EXPECT_EQ(g["nodes"], (json{"n1", "n2"}));
  ASSERT_EQ(doc["workers"].size(), 2u);
  EXPECT_EQ(doc["workers"][1]["node"], "n2");
}

TEST(census_merge, a_user_woken_elsewhere_shows_live_not_frozen) {
  // n1 still lists g frozen (he froze there); n2 hosts him now.
  std::vector<census_part> parts{part("n1", "self", member_doc({}, {"g"}, 10), 1),
                                 part("n2", "up", member_doc({"g"}, {}, 10), 2)};
  auto doc = merge_census(json::object(), parts, window(0, 10));
  ASSERT_EQ(doc["actors"].size(), 1u);
  EXPECT_EQ(doc["actors"][0]["state"], "active");
  EXPECT_EQ(doc["actors"][0]["node"], "n2");
  EXPECT_EQ(doc["matched"], 1);
}

TEST(census_merge, pages_by_offset_and_limit_over_the_union_by_name) {
  // n1: a c e g i, n2: b d f h j; each answered its first offset + limit = 6 rows.
  std::vector<census_part> parts{part("n1", "self", member_doc({"a", "c", "e", "g", "i"}, {}, 6), 1),
                                 part("n2", "up", member_doc({"b", "d", "f", "h", "j"}, {}, 6), 2)};
  auto doc = merge_census(json::object(), parts, window(3, 3));
  EXPECT_EQ(row_names(doc), (std::vector<std::string>{"d", "e", "f"}));
  EXPECT_EQ(doc["next"], "f");
  EXPECT_EQ(doc["matched"], 10);
  // The last page: nothing after it.
  std::vector<census_part> last{part("n1", "self", member_doc({"a", "c", "e", "g", "i"}, {}, 12), 1),
                                part("n2", "up", member_doc({"b", "d", "f", "h", "j"}, {}, 12), 2)};
  auto end = merge_census(json::object(), last, window(8, 4));
  EXPECT_EQ(row_names(end), (std::vector<std::string>{"i", "j"}));
  EXPECT_TRUE(end["next"].is_null());
}

TEST(census_merge, a_member_with_more_rows_than_its_window_keeps_a_next) {
  // n2 has more rows than it was asked for: the page is full and a cursor follows.
  std::vector<census_part> parts{part("n1", "self", member_doc({"a"}, {}, 2), 1),
                                 part("n2", "up", member_doc({"b", "c", "d"}, {}, 2), 2)};
  auto doc = merge_census(json::object(), parts, window(0, 2));
  EXPECT_EQ(row_names(doc), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(doc["next"], "b");
}

TEST(census_merge, a_member_that_did_not_answer_is_listed_with_its_last_known_facts) {
  auto n2_before = member_doc({"b", "d"}, {}, 10);
  std::vector<census_part> parts{part("n1", "self", member_doc({"a"}, {}, 10), 1),
                                 part("n2", "down", nullptr, 2), part("n3", "unreachable", nullptr, 3)};
  parts[1].last_known = census_facts(n2_before);
  parts[1].last_known_age_seconds = 4.5;
  auto doc = merge_census(json::object(), parts, window(0, 10));
  ASSERT_EQ(doc["nodes"].size(), 3u);
  auto& n2 = doc["nodes"][1];
  EXPECT_EQ(n2["state"], "down");
  EXPECT_EQ(n2["answered"], false);
  EXPECT_EQ(n2["stale"], true);
  EXPECT_EQ(n2["health"]["status"], "down");
  EXPECT_EQ(n2["last_answer_seconds_ago"], 4.5);
  EXPECT_EQ(n2["totals"]["users"]["active"], 2);  // as it last answered
  auto& n3 = doc["nodes"][2];
  EXPECT_EQ(n3["state"], "unreachable");
  EXPECT_TRUE(n3["totals"].is_null());  // never answered
  EXPECT_TRUE(n3["last_answer_seconds_ago"].is_null());
  // Only the answers count in the totals and rows.
  EXPECT_EQ(doc["totals"]["users"]["active"], 1);
  EXPECT_EQ(row_names(doc), (std::vector<std::string>{"a"}));
}

TEST(census_merge, worker_and_group_kinds_list_every_members_rows) {
  auto d1 = member_doc({"a"}, {}, 10), d2 = member_doc({"b"}, {}, 10);
  d1["actors"] = d1["workers"];
  d2["actors"] = d2["workers"];
  std::vector<census_part> parts{part("n1", "self", d1, 1), part("n2", "up", d2, 2)};
  auto workers = merge_census(json::object(), parts, window(0, 10, "worker"));
  ASSERT_EQ(workers["actors"].size(), 2u);
  EXPECT_EQ(workers["actors"][0]["id"], "worker:n1/default-w1");
  EXPECT_EQ(workers["actors"][1]["id"], "worker:n2/default-w1");
  auto groups = merge_census(json::object(), parts, window(0, 10, "group"));
  ASSERT_EQ(groups["actors"].size(), 1u);
  EXPECT_EQ(groups["actors"][0]["users"]["active"], 2);
}

TEST(census_merge, a_lone_nodes_entry_keeps_its_worker_ids) {
  census_part me;
  me.member.name = "solo";
  me.member.state = "self";
  me.member.leader = true;
  me.doc = member_doc({"a"}, {}, 10);
  auto e = node_entry(me, false);
  EXPECT_EQ(e["id"], "node:solo");
  EXPECT_TRUE(e["incarnation"].is_null());
  EXPECT_TRUE(e["address"].is_null());
  EXPECT_EQ(e["workers"][0]["id"], "worker:default-w1");
  EXPECT_FALSE(e["workers"][0].contains("node"));
}

TEST(census_merge, tags_a_detail_row_with_its_member) {
  auto row = tag_member_row(user("a", true), "n3");
  EXPECT_EQ(row["node"], "n3");
  EXPECT_EQ(row["parent"], "worker:n3/default-w1");
  auto w = tag_member_row(json{{"id", "worker:default-w2"}, {"kind", "worker"}}, "n3");
  EXPECT_EQ(w["id"], "worker:n3/default-w2");
  auto again = tag_member_row(w, "n3");  // qualified once only
  EXPECT_EQ(again["id"], "worker:n3/default-w2");
}

}  // namespace census_merge_test_file
