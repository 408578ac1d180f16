#include "registry/placement_index.hpp"

#include <gtest/gtest.h>

using troupe::registry::placement_index;

TEST(placement_index, binds_connections_and_reports_the_previous_user) {
  placement_index ix{2};
  EXPECT_EQ(ix.user_of("c1"), nullptr);
  EXPECT_FALSE(ix.bind("c1", "guest_c1"));
  ASSERT_NE(ix.user_of("c1"), nullptr);
  EXPECT_EQ(*ix.user_of("c1"), "guest_c1");
  auto before = ix.bind("c1", "alice");
  ASSERT_TRUE(before);
  EXPECT_EQ(*before, "guest_c1");
  EXPECT_EQ(*ix.user_of("c1"), "alice");
  ix.unbind("c1");
  EXPECT_EQ(ix.user_of("c1"), nullptr);
  EXPECT_EQ(ix.connections(), 0u);
}

TEST(placement_index, places_on_the_least_loaded_worker_once) {
  placement_index ix{3};
  EXPECT_EQ(ix.place("a"), 0u);
  EXPECT_EQ(ix.place("b"), 1u);
  EXPECT_EQ(ix.place("c"), 2u);
  EXPECT_EQ(ix.place("a"), 0u);  // already placed: same slot, no double count
  EXPECT_EQ(ix.loads(), (std::vector<std::size_t>{1, 1, 1}));
  ix.remove("b");
  EXPECT_FALSE(ix.worker_of("b"));
  EXPECT_EQ(ix.place("d"), 1u);
  EXPECT_EQ(*ix.worker_of("d"), 1u);
  EXPECT_EQ(ix.users(), 3u);
}

TEST(placement_index, needs_a_worker) {
  EXPECT_THROW(placement_index{0}, std::invalid_argument);
}
