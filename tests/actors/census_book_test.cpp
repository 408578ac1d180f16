// The census's register, documents and probe bookkeeping (actors/census_book.hpp),
// without an actor system: notes and downs in every order the integration
// tests met, the documents they give, and a query's probes answered, late and
// timed out.
#include "actors/census_book.hpp"

#include "actors/errors.hpp"
#include "actors/orchestration_log.hpp"

#include <caf/message.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace census_book_test_file {

using nlohmann::json;
using troupe::actor_kind;
using troupe::census_book;
using troupe::census_note;
using troupe::census_query;
using user_state = troupe::registry::user_state;

namespace {

census_note note_of(actor_kind kind, std::string name, std::string parent = {}, std::uint8_t state = 0) {
  census_note n;
  n.kind = static_cast<std::uint8_t>(kind);
  n.name = std::move(name);
  n.parent = std::move(parent);
  n.state = state;
  return n;
}

census_note user_note(std::string name, std::string worker, user_state state, std::uint32_t connections = 1) {
  auto n = note_of(actor_kind::user, std::move(name), std::move(worker), static_cast<std::uint8_t>(state));
  n.connections = connections;
  n.pages = connections;
  return n;
}

census_query query_of(std::string kind, bool probe = false) {
  census_query q;
  q.kind = std::move(kind);
  q.probe = probe;
  return q;
}

struct book_rig {
  std::filesystem::path dir;
  std::shared_ptr<troupe::orchestration_log> log;
  census_book book;

  book_rig() : dir(make_dir()), log(make_log(dir)), book(std::make_shared<troupe::node_context>(), log) {
  }
  ~book_rig() {
    log.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  static std::filesystem::path make_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "troupe-census-book.XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw std::runtime_error("mkdtemp failed");
    return tmpl;
  }
  static std::shared_ptr<troupe::orchestration_log> make_log(const std::filesystem::path& dir) {
    return std::make_shared<troupe::orchestration_log>((dir / "orchestration.log").string(), 1 << 20, 2);
  }

  // A worker w1 (actor 10) of group g (actor 5), and `users` on it (actors 100, 101, …).
  void populate(const std::vector<std::string>& users) {
    auto group = note_of(actor_kind::group, "g");
    group.info = "counter";
    book.note(5, nullptr, group);
    book.note(10, nullptr, note_of(actor_kind::worker, "w1", "g"));
    std::uint64_t actor = 100;
    for (auto& u : users)
      book.note(actor++, nullptr, user_note(u, "w1", user_state::active));
  }

  // A probed query of every user, started: its answer lands in `answer`.
  int answered = 0;
  json answer;
  std::optional<census_book::probes> start_user_query() {
    census_book::pending_query pq;
    pq.doc = census(query_of("user", true), pq);
    return book.start(std::move(pq), [this](json&& d) {
      ++answered;
      answer = std::move(d);
    });
  }

  json census(const census_query& q, census_book::pending_query& pq) {
    auto doc = book.census_json(q, pq, "");
    if (!doc)
      throw std::runtime_error("census_json failed");
    return *doc;
  }
};

TEST(census_book, a_member_is_monitored_on_first_sight_only) {
  book_rig r;
  EXPECT_TRUE(r.book.note(10, nullptr, note_of(actor_kind::worker, "w1", "g")));
  EXPECT_FALSE(r.book.note(10, nullptr, note_of(actor_kind::worker, "w1", "g", 1))) << "the same actor again";
  census_book::pending_query pq;
  auto doc = r.census(query_of("worker"), pq);
  ASSERT_EQ(doc["actors"].size(), 1u);
  EXPECT_EQ(doc["actors"][0]["state"], "draining") << "its last note counts";
}

TEST(census_book, rows_and_totals_follow_the_notes) {
  book_rig r;
  r.populate({"alice", "bob"});
  census_book::pending_query pq;
  auto doc = r.census(query_of("user"), pq);
  EXPECT_EQ(doc["matched"], 2);
  ASSERT_EQ(doc["actors"].size(), 2u);
  EXPECT_EQ(doc["actors"][0]["id"], "user:alice");
  EXPECT_EQ(doc["actors"][0]["parent"], "worker:w1");
  EXPECT_EQ(doc["actors"][0]["actor"], 100);
  EXPECT_EQ(doc["totals"]["users"]["all"], 2);
  EXPECT_EQ(doc["totals"]["workers"], 1);
  EXPECT_EQ(doc["totals"]["groups"], 1);
  EXPECT_EQ(doc["groups"][0]["user_type"], "counter");
  EXPECT_EQ(doc["groups"][0]["users"]["all"], 2) << "a group sums its workers";
  EXPECT_TRUE(pq.targets.empty()) << "no probe was asked for";
}

TEST(census_book, a_stale_down_leaves_the_newer_actor_of_the_name) {
  book_rig r;
  r.book.note(10, nullptr, note_of(actor_kind::worker, "w1", "g"));
  r.book.note(11, nullptr, note_of(actor_kind::worker, "w1", "g"));  // restarted before the old one's down
  r.book.note(100, nullptr, user_note("alice", "w1", user_state::active));
  r.book.note(101, nullptr, user_note("alice", "w1", user_state::active));  // woken again, same race
  r.book.down(10);
  r.book.down(100);
  census_book::pending_query pq;
  auto workers = r.census(query_of("worker"), pq);
  ASSERT_EQ(workers["actors"].size(), 1u);
  EXPECT_EQ(workers["actors"][0]["actor"], 11);
  auto users = r.census(query_of("user"), pq);
  ASSERT_EQ(users["actors"].size(), 1u);
  EXPECT_EQ(users["actors"][0]["actor"], 101);
  r.book.down(11);
  r.book.down(101);
  EXPECT_TRUE(r.census(query_of("worker"), pq)["actors"].empty());
  EXPECT_EQ(r.census(query_of("user"), pq)["matched"], 0) << "a user who was not frozen leaves";
  r.book.down(999);  // never seen: nothing happens
}

TEST(census_book, a_frozen_user_stays_known_without_an_actor) {
  book_rig r;
  r.populate({});
  r.book.note(100, nullptr, user_note("alice", "w1", user_state::frozen, 3));
  r.book.down(100);
  census_book::pending_query pq;
  auto doc = r.census(query_of("user", true), pq);
  ASSERT_EQ(doc["actors"].size(), 1u);
  EXPECT_EQ(doc["actors"][0]["state"], "frozen");
  EXPECT_TRUE(doc["actors"][0]["actor"].is_null());
  EXPECT_TRUE(doc["actors"][0]["parent"].is_null());
  EXPECT_EQ(doc["actors"][0]["connections"], 0) << "a frozen user holds no connection";
  EXPECT_TRUE(pq.targets.empty()) << "nobody is woken to be probed";
  auto detail = r.book.detail_json("user:alice", pq, "");
  ASSERT_TRUE(detail);
  EXPECT_NE((*detail)["note"].get<std::string>().find("frozen"), std::string::npos);
  EXPECT_TRUE(pq.targets.empty());
}

TEST(census_book, the_scan_adds_frozen_users_but_never_overrides_a_live_one) {
  book_rig r;
  r.populate({"alice"});
  r.book.scanned({"alice", "carol"}, false);
  census_book::pending_query pq;
  auto doc = r.census(query_of("user"), pq);
  EXPECT_EQ(doc["scan"], json({{"done", false}, {"frozen_found", 2}}));
  EXPECT_EQ(doc["actors"][0]["state"], "active");
  EXPECT_EQ(doc["actors"][1]["state"], "frozen");
  r.book.scanned({}, true);
  r.book.drop("carol");
  doc = r.census(query_of("user"), pq);
  EXPECT_EQ(doc["scan"]["done"], true);
  EXPECT_EQ(doc["matched"], 1) << "a dropped user is forgotten";
}

TEST(census_book, a_bad_query_names_its_parameter) {
  book_rig r;
  r.populate({"alice"});
  census_book::pending_query pq;
  auto message = [&](census_query q, bool part = false) {
    auto doc = r.book.census_json(q, pq, "", part);
    EXPECT_FALSE(doc);
    EXPECT_TRUE(doc || troupe::is(doc.error(), troupe::errc::bad_request));
    return doc ? std::string() : caf::to_string(doc.error().context());
  };
  EXPECT_NE(message(query_of("page")).find("kind:"), std::string::npos);
  auto q = query_of("user");
  q.limit = 0;
  EXPECT_NE(message(q).find("limit:"), std::string::npos);
  q.limit = census_book::max_limit + 1;
  EXPECT_NE(message(q).find("limit:"), std::string::npos);
  q = query_of("user");
  q.state = "asleep";
  EXPECT_NE(message(q).find("state:"), std::string::npos);
  q = query_of("user");
  q.worker = "w9";
  EXPECT_NE(message(q).find("no worker called w9"), std::string::npos);
  auto part = r.book.census_json(q, pq, "", true);
  ASSERT_TRUE(part) << "a member's part: an unknown worker selects nobody";
  EXPECT_EQ((*part)["matched"], 0);
}

TEST(census_book, a_query_answers_when_its_last_probe_is_back) {
  book_rig r;
  r.populate({"alice", "bob"});
  auto probes = r.start_user_query();
  ASSERT_TRUE(probes);
  EXPECT_EQ(probes->members.size(), 2u);
  EXPECT_FALSE(probes->members[0].second) << "a row is not asked in detail";
  troupe::actor_probe p;
  p.query = probes->query;
  p.mailbox = 7;
  p.last_user_ms = 1'700'000'000'000;
  r.book.probe_answered(100, p);
  EXPECT_EQ(r.answered, 0) << "bob has not answered";
  r.book.probe_answered(100, p);  // twice: ignored
  p.mailbox = 0;
  r.book.probe_answered(101, p);
  ASSERT_EQ(r.answered, 1);
  EXPECT_EQ(r.answer["actors"][0]["mailbox"], 7);
  EXPECT_EQ(r.answer["actors"][0]["clocks"]["last_user"], 1'700'000'000.0);
  EXPECT_TRUE(r.answer["actors"][0]["clocks"]["last_rpc"].is_null());
  EXPECT_EQ(r.answer["actors"][1]["mailbox"], 0);
  EXPECT_EQ(r.book.pending(), 0u);
  r.book.probe_timeout(probes->query);  // its timer fires after all: nothing happens
  EXPECT_EQ(r.answered, 1);
}

TEST(census_book, a_timed_out_probe_is_marked_and_its_late_answer_dropped) {
  book_rig r;
  r.populate({"alice", "bob"});
  auto probes = r.start_user_query();
  ASSERT_TRUE(probes);
  troupe::actor_probe p;
  p.query = probes->query;
  r.book.probe_answered(100, p);
  r.book.probe_timeout(probes->query);
  ASSERT_EQ(r.answered, 1);
  EXPECT_FALSE(r.answer["actors"][0].contains("probe"));
  EXPECT_EQ(r.answer["actors"][1]["probe"], "timeout");
  r.book.probe_answered(101, p);  // late
  EXPECT_EQ(r.answered, 1);
}

TEST(census_book, a_member_gone_before_its_probe_is_not_waited_for) {
  book_rig r;
  r.populate({"alice"});
  census_book::pending_query pq;
  pq.doc = r.census(query_of("user", true), pq);
  r.book.down(100);  // between the page and its probes
  int answered = 0;
  EXPECT_FALSE(r.book.start(std::move(pq), [&](json&&) { ++answered; })) << "no probe to send";
  EXPECT_EQ(answered, 1) << "answered at once";
  EXPECT_EQ(r.book.pending(), 0u);
}

TEST(census_book, details_probe_live_actors_in_detail_and_name_unknown_ones) {
  book_rig r;
  r.populate({"alice"});
  census_book::pending_query pq;
  auto alice = r.book.detail_json("user:alice", pq, "/detail");
  ASSERT_TRUE(alice);
  ASSERT_EQ(pq.targets.count(100), 1u);
  EXPECT_TRUE(pq.targets[100][0].detail);
  pq.doc = json{{"detail", *alice}};
  json answer;
  auto probes = r.book.start(std::move(pq), [&](json&& d) { answer = std::move(d); });
  ASSERT_TRUE(probes);
  EXPECT_TRUE(probes->members[0].second) << "asked in detail";
  troupe::actor_probe p;
  p.query = probes->query;
  p.detail = R"({"store": {"n": 3}, "connections": []})";
  r.book.probe_answered(100, p);
  EXPECT_EQ(answer["detail"]["store"]["n"], 3) << "the member's own description is merged";
  auto unknown = r.book.detail_json("user:nobody", pq, "");
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(troupe::is(unknown.error(), troupe::errc::no_such_user));
  EXPECT_FALSE(r.book.detail_json("worker:w9", pq, ""));
  EXPECT_FALSE(r.book.detail_json("thing", pq, ""));
  EXPECT_TRUE(r.book.detail_json("group:g", pq, ""));
  auto commander = r.book.detail_json("commander", pq, "");
  ASSERT_TRUE(commander);
  EXPECT_TRUE((*commander)["actor"].is_null()) << "no commander noted";
  auto node = r.book.detail_json("node", pq, "");
  ASSERT_TRUE(node);
  EXPECT_EQ((*node)["totals"]["users"]["all"], 1);
}

TEST(census_book, operator_actions_go_to_the_log) {
  book_rig r;
  troupe::orchestration_entry e;
  e.who = "admin";
  e.what = "freeze";
  e.on = "user:alice";
  e.outcome = "ok";
  e.numbers = R"({"users": 1})";
  r.book.record(e);
  e.numbers = "not json";
  r.book.record(e);
  auto lines = r.book.log_json(10);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["what"], "freeze");
  EXPECT_EQ(lines[0]["numbers"]["users"], 1);
  EXPECT_EQ(lines[1]["numbers"], (json{{"generation", 1}})) << "numbers that are not JSON are left out";
}

// Every line carries the settings generation in force when it was written,
// unless it names one itself (the orchestrator's own lines do).
TEST(census_book, each_line_carries_the_settings_generation_in_force) {
  book_rig r;
  troupe::orchestration_entry e;
  e.what = "worker_start";
  r.book.record(e);
  r.book.settings_in_force(4, "profile", "busy");
  r.book.record(e);
  e.numbers = R"({"generation": 9})";
  r.book.record(e);
  auto lines = r.book.log_json(10);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["numbers"]["generation"], 1);
  EXPECT_EQ(lines[1]["numbers"]["generation"], 4);
  EXPECT_EQ(lines[2]["numbers"]["generation"], 9);
  auto settings = r.book.settings_json();
  EXPECT_EQ(settings["generation"], 4);
  EXPECT_EQ(settings["source"], "profile");
  EXPECT_EQ(settings["active_profile"], "busy");
}

}  // namespace
}  // namespace census_book_test_file
