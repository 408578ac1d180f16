// A user's connections and pages as records: limits, counts, erasure.
#include "actors/connection_table.hpp"

#include <gtest/gtest.h>

namespace connection_table_test_file {

using namespace troupe;
using outcome = connection_table::touch_outcome;

TEST(connection_table, records_connections_once_and_pages_within_the_limits) {
  connection_table t;
  EXPECT_TRUE(t.add("c1"));
  EXPECT_FALSE(t.add("c1"));
  EXPECT_TRUE(t.add("c2"));
  ASSERT_EQ(t.size(), 2u);
  auto* c1 = t.find("c1");
  ASSERT_NE(c1, nullptr);
  EXPECT_EQ(t.find("nope"), nullptr);

  EXPECT_EQ(t.touch_page(*c1, "p1", 2, 3).outcome, outcome::added);
  auto again = t.touch_page(*c1, "p1", 2, 3);
  EXPECT_EQ(again.outcome, outcome::known);
  ASSERT_NE(again.page, nullptr);
  EXPECT_EQ(again.page->id, "p1");
  EXPECT_EQ(t.touch_page(*c1, "p2", 2, 3).outcome, outcome::added);
  EXPECT_EQ(t.touch_page(*c1, "p3", 2, 3).outcome, outcome::too_many_on_connection);
  auto* c2 = t.find("c2");
  EXPECT_EQ(t.touch_page(*c2, "q1", 2, 3).outcome, outcome::added);
  c1->find_page("p1")->channel = std::make_unique<page_channel>();  // c1 is in use: none of its pages makes room
  EXPECT_EQ(t.touch_page(*c2, "q2", 2, 3).outcome, outcome::too_many_for_user);
  EXPECT_EQ(t.touch_page(*c2, "bad id!", 2, 3).outcome, outcome::invalid_id);
  EXPECT_EQ(t.touch_page(*c2, "", 2, 3).outcome, outcome::invalid_id);
  EXPECT_EQ(t.page_count(), 3u);

  EXPECT_TRUE(t.erase("c1"));  // its two pages go with it
  EXPECT_FALSE(t.erase("c1"));
  EXPECT_EQ(t.page_count(), 1u);
  EXPECT_EQ(t.touch_page(*t.find("c2"), "q2", 2, 3).outcome, outcome::added);
  EXPECT_TRUE(t.erase("c2"));
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.page_count(), 0u);
}

// Issue 23 (7): at the per-user limit a new page takes the place of the least
// recently used page of another connection that has no open channel.
TEST(connection_table, a_page_past_the_user_limit_reclaims_the_oldest_page_of_an_idle_connection) {
  using namespace std::chrono_literals;
  const auto t0 = registry::wall_clock::now();
  connection_table t;
  for (auto cid : {"gone1", "gone2", "live", "new"})
    t.add(cid);
  auto stamp = [&](const char* cid, const char* page, std::chrono::seconds at) {
    auto touched = t.touch_page(*t.find(cid), page, 8, 8);
    ASSERT_EQ(touched.outcome, outcome::added);
    EXPECT_FALSE(touched.reclaimed);
    touched.page->clocks.stamp_rpc(t0 + at);
  };
  stamp("gone1", "a", 3s);
  stamp("gone1", "b", 5s);
  stamp("gone2", "c", 2s);
  stamp("live", "oldest", 1s);  // the oldest page of all, but its connection has a channel open
  stamp("live", "open", 9s);
  t.find("live")->find_page("open")->channel = std::make_unique<page_channel>();
  ASSERT_EQ(t.page_count(), 5u);

  // At 5 of 5: gone2's c goes (2 s), then gone1's a (3 s), then gone1's b.
  auto* fresh = t.find("new");
  auto r = t.touch_page(*fresh, "n1", 8, 5);
  ASSERT_EQ(r.outcome, outcome::added);
  EXPECT_TRUE(r.reclaimed);
  EXPECT_EQ(t.page_count(), 5u);
  EXPECT_TRUE(t.find("gone2")->pages.empty());
  EXPECT_EQ(t.touch_page(*fresh, "n2", 8, 5).outcome, outcome::added);
  ASSERT_EQ(t.find("gone1")->pages.size(), 1u);
  EXPECT_EQ(t.find("gone1")->pages.front().id, "b");
  EXPECT_TRUE(t.touch_page(*fresh, "n3", 8, 5).reclaimed);
  EXPECT_TRUE(t.find("gone1")->pages.empty());
  // Left: the pages of the connection with a channel open, and the requester's own.
  auto refused = t.touch_page(*fresh, "n4", 8, 5);
  EXPECT_EQ(refused.outcome, outcome::too_many_for_user);
  EXPECT_FALSE(refused.reclaimed);
  EXPECT_EQ(t.page_count(), 5u);
  EXPECT_EQ(t.find("live")->pages.size(), 2u);
  // Known pages are served as ever; the per-connection limit is never relieved by a reclaim.
  EXPECT_EQ(t.touch_page(*fresh, "n1", 8, 5).outcome, outcome::known);
  EXPECT_EQ(t.touch_page(*fresh, "n4", 3, 99).outcome, outcome::too_many_on_connection);

  // Its channel closed, the connection is idle: its oldest page goes now.
  t.find("live")->find_page("open")->channel.reset();
  EXPECT_TRUE(t.touch_page(*fresh, "n4", 8, 5).reclaimed);
  EXPECT_EQ(t.find("live")->find_page("oldest"), nullptr);
  // A reclaimed page named again is recorded afresh (no clocks, no channel).
  auto again = t.touch_page(*t.find("gone1"), "a", 8, 6);
  ASSERT_EQ(again.outcome, outcome::added);
  EXPECT_EQ(again.page->clocks.last_activity(), registry::wall_clock::time_point{});
  EXPECT_EQ(t.page_count(), 6u);
}

}  // namespace connection_table_test_file
