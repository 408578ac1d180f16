// A user's connections and pages as records: limits, counts, erasure.
#include "actors/connection_table.hpp"

#include <gtest/gtest.h>

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
