#include "registry/census_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace census_model_test_file {

using namespace troupe::registry;

namespace {

user_entry live(std::uint16_t worker, user_state s = user_state::active, std::uint64_t actor = 1,
                std::uint32_t connections = 1, std::uint32_t pages = 0) {
  user_entry e;
  e.state = s;
  e.worker = worker;
  e.actor = actor;
  e.connections = connections;
  e.pages = pages;
  return e;
}

std::vector<std::string> names(const census_model::page& p) {
  std::vector<std::string> out;
  for (auto& r : p.rows)
    out.push_back(*r.name);
  return out;
}

}  // namespace

TEST(census_model, keeps_node_and_worker_totals_exact_through_a_life) {
  census_model m;
  auto w1 = m.worker_number("default-w1");
  auto w2 = m.worker_number("default-w2");
  EXPECT_EQ(m.worker_number("default-w1"), w1);
  m.update("alice", live(w1, user_state::unfreezing, 10));
  m.update("alice", live(w1, user_state::active, 10, 2, 3));
  m.update("bob", live(w2, user_state::active, 11));
  EXPECT_EQ(m.totals().users.all(), 2);
  EXPECT_EQ(m.totals().users[user_state::active], 2);
  EXPECT_EQ(m.totals().connections, 3);
  EXPECT_EQ(m.totals().pages, 3);
  EXPECT_EQ(m.worker_totals(w1).connections, 2);
  EXPECT_EQ(m.worker_totals(w2).users.all(), 1);

  // alice freezes: departing, then frozen (no worker), then her actor leaves: she stays known.
  m.update("alice", live(w1, user_state::departing, 10, 2, 3));
  user_entry frozen = live(user_entry::no_worker, user_state::frozen, 10, 0, 0);
  m.update("alice", frozen);
  m.actor_down("alice", 10);
  ASSERT_NE(m.find("alice"), nullptr);
  EXPECT_EQ(m.find("alice")->state, user_state::frozen);
  EXPECT_EQ(m.find("alice")->actor, 0u);
  EXPECT_EQ(m.totals().users[user_state::frozen], 1);
  EXPECT_EQ(m.worker_totals(w1).users.all(), 0);
  EXPECT_EQ(m.worker_totals(w1).connections, 0);
  EXPECT_EQ(m.totals().connections, 1);

  // bob crashes: a new actor of his name speaks before the old one's down arrives.
  m.update("bob", live(w2, user_state::unfreezing, 12));
  m.actor_down("bob", 11);
  ASSERT_NE(m.find("bob"), nullptr);
  EXPECT_EQ(m.find("bob")->actor, 12u);
  m.actor_down("bob", 12);  // a guest retiring, say: not frozen, so he leaves
  EXPECT_EQ(m.find("bob"), nullptr);
  EXPECT_EQ(m.totals().users.all(), 1);
  EXPECT_EQ(m.worker_totals(w2).users.all(), 0);

  m.erase("alice");
  EXPECT_EQ(m.totals().users.all(), 0);
  EXPECT_EQ(m.totals().connections, 0);
}

TEST(census_model, frozen_users_from_the_deposit_never_override_a_live_one) {
  census_model m;
  auto w = m.worker_number("w");
  m.update("carol", live(w));
  m.add_frozen("carol");
  m.add_frozen("dave");
  m.add_frozen("dave");
  EXPECT_EQ(m.find("carol")->state, user_state::active);
  EXPECT_EQ(m.totals().users[user_state::frozen], 1);
  EXPECT_EQ(m.totals().users.all(), 2);
}

TEST(census_model, pages_by_offset_and_by_cursor_with_exact_match_counts) {
  census_model m;
  auto w1 = m.worker_number("w1");
  auto w2 = m.worker_number("w2");
  for (int i = 0; i < 100; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "u%03d", i);
    if (i % 10 == 0)
      m.add_frozen(name);
    else
      m.update(name, live(i % 2 ? w1 : w2, user_state::active, 100 + i));
  }
  census_model::filter all;
  auto p = m.query(all, 0, 5);
  EXPECT_EQ(p.matched, 100);
  EXPECT_EQ(names(p), (std::vector<std::string>{"u000", "u001", "u002", "u003", "u004"}));
  ASSERT_TRUE(p.next);
  EXPECT_EQ(*p.next, "u004");
  EXPECT_EQ(names(m.query(all, 0, 2, *p.next)), (std::vector<std::string>{"u005", "u006"}));
  EXPECT_EQ(names(m.query(all, 98, 5)), (std::vector<std::string>{"u098", "u099"}));
  EXPECT_FALSE(m.query(all, 98, 5).next);
  EXPECT_TRUE(m.query(all, 100, 5).rows.empty());

  census_model::filter frozen;
  frozen.state = user_state::frozen;
  auto f = m.query(frozen, 2, 3);
  EXPECT_EQ(f.matched, 10);
  EXPECT_EQ(names(f), (std::vector<std::string>{"u020", "u030", "u040"}));

  census_model::filter on_w1;
  on_w1.worker = w1;
  EXPECT_EQ(m.query(on_w1, 0, 1000).matched, 50);  // the odd ones
  EXPECT_EQ(m.query(on_w1, 0, 1000).rows.size(), 50u);

  census_model::filter prefix;
  prefix.prefix = "u05";
  auto q = m.query(prefix, 0, 4);
  EXPECT_EQ(q.matched, 10);
  EXPECT_EQ(names(q), (std::vector<std::string>{"u050", "u051", "u052", "u053"}));
  EXPECT_EQ(names(m.query(prefix, 8, 4)), (std::vector<std::string>{"u058", "u059"}));
  EXPECT_EQ(names(m.query(prefix, 0, 3, "u058")), (std::vector<std::string>{"u059"}));
  EXPECT_EQ(names(m.query(prefix, 0, 2, "a")), (std::vector<std::string>{"u050", "u051"}));

  prefix.state = user_state::frozen;
  EXPECT_EQ(m.query(prefix, 0, 10).matched, 1);
  EXPECT_EQ(names(m.query(prefix, 0, 10)), (std::vector<std::string>{"u050"}));

  census_model::filter none;
  none.prefix = "zz";
  EXPECT_EQ(m.query(none, 0, 10).matched, 0);
  EXPECT_TRUE(m.query(none, 0, 10).rows.empty());
}

TEST(census_model, states_have_their_contract_names) {
  EXPECT_STREQ(to_string(user_state::unfreezing), "unfreezing");
  EXPECT_EQ(user_state_from("departing"), user_state::departing);
  EXPECT_FALSE(user_state_from("asleep"));
}

// The jumps (order statistics, prefix ranks) give what a plain scan of the rows gives.
TEST(census_model, pages_agree_with_a_scan_for_any_filter) {
  census_model m;
  std::uint16_t workers[] = {m.worker_number("w1"), m.worker_number("w2")};
  std::mt19937 rng(42);
  std::vector<std::pair<std::string, user_entry>> all;
  const std::string alphabet = "ab\xff";
  for (int i = 0; i < 2000; ++i) {
    std::string name;
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n)
      name += alphabet[rng() % alphabet.size()];
    name += std::to_string(i);
    auto s = static_cast<user_state>(rng() % user_state_count);
    user_entry e = s == user_state::frozen ? user_entry{user_state::frozen}
                                           : live(workers[rng() % 2], s, 1 + static_cast<std::uint64_t>(i));
    m.update(name, e);
    all.emplace_back(name, e);
  }
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (int round = 0; round < 300; ++round) {
    census_model::filter f;
    if (rng() % 2)
      for (int n = 1 + static_cast<int>(rng() % 2); n > 0; --n)
        f.prefix += alphabet[rng() % alphabet.size()];
    if (rng() % 3 == 0)
      f.worker = workers[rng() % 2];
    if (rng() % 3 == 0)
      f.state = static_cast<user_state>(rng() % user_state_count);
    std::vector<std::string> expected;
    for (auto& [name, e] : all)
      if (name.compare(0, f.prefix.size(), f.prefix) == 0 && (!f.worker || e.worker == *f.worker)
          && (!f.state || e.state == *f.state))
        expected.push_back(name);
    std::size_t offset = rng() % (expected.size() + 5), limit = 1 + rng() % 50;
    auto p = m.query(f, offset, limit);
    ASSERT_EQ(p.matched, static_cast<std::int64_t>(expected.size())) << "prefix " << f.prefix;
    std::vector<std::string> want(expected.begin() + std::min(offset, expected.size()),
                                  expected.begin() + std::min(offset + limit, expected.size()));
    ASSERT_EQ(names(p), want) << "prefix " << f.prefix << " offset " << offset;
    EXPECT_EQ(p.next.has_value(), offset + limit < expected.size());
  }
}

TEST(census_model, a_resting_user_stays_on_his_worker_without_an_actor) {
  census_model m;
  auto w = m.worker_number("default-w1");
  m.update("carl", live(w, user_state::active, 20, 1, 1));
  m.update("carl", live(w, user_state::resting, 20, 1, 1));
  m.actor_down("carl", 20);  // his actor stopped to rest: he is still there
  ASSERT_NE(m.find("carl"), nullptr);
  EXPECT_EQ(m.find("carl")->state, user_state::resting);
  EXPECT_EQ(m.find("carl")->actor, 0u);
  EXPECT_EQ(m.find("carl")->worker, w);
  EXPECT_EQ(m.totals().users[user_state::resting], 1);
  EXPECT_EQ(m.worker_totals(w).users.all(), 1);
  EXPECT_EQ(m.totals().pages, 1);

  // Started again: the new actor's note replaces it.
  m.update("carl", live(w, user_state::active, 21, 1, 1));
  EXPECT_EQ(m.find("carl")->actor, 21u);
  EXPECT_EQ(m.totals().users[user_state::resting], 0);
  EXPECT_EQ(m.totals().users[user_state::active], 1);

  // An older actor's late "resting" note does not overwrite the newer actor's word.
  m.update("carl", live(w, user_state::resting, 20, 1, 1));
  EXPECT_EQ(m.find("carl")->state, user_state::active);
  EXPECT_EQ(m.find("carl")->actor, 21u);
  EXPECT_EQ(m.totals().users.all(), 1);
  EXPECT_STREQ(to_string(user_state::resting), "resting");
  EXPECT_EQ(user_state_from("resting"), user_state::resting);
}

TEST(census_model, counts_guests_apart_from_named_users_through_a_life) {
  census_model m;
  auto w = m.worker_number("default-w1");
  auto g1 = guest_name("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), g2 = guest_name("BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB");
  m.update(g1, live(w, user_state::active, 1));
  m.update(g2, live(w, user_state::active, 2));
  m.update("alice", live(w, user_state::active, 3));
  EXPECT_EQ(m.totals().users.all(), 3);
  EXPECT_EQ(m.totals().guests, 2);
  EXPECT_EQ(m.worker_totals(w).guests, 2);
  m.update(g1, live(w, user_state::departing, 1));  // a change of state is no new guest
  EXPECT_EQ(m.totals().guests, 2);
  m.actor_down(g1, 1);  // he retired
  EXPECT_EQ(m.totals().guests, 1);
  m.add_frozen(guest_name("CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"));  // found in the deposit
  EXPECT_EQ(m.totals().guests, 2);
  EXPECT_EQ(m.worker_totals(w).guests, 1);  // a frozen guest is on no worker
  m.erase(g2);
  m.erase("alice");
  EXPECT_EQ(m.totals().guests, 1);
  EXPECT_EQ(m.totals().users.all(), 1);
}

}  // namespace census_model_test_file
