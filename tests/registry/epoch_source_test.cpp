#include "registry/epoch_source.hpp"

#include <gtest/gtest.h>

namespace epoch_source_test_file {

using troupe::registry::epoch_source;

TEST(epoch_source, gives_nothing_before_a_generation) {
  epoch_source s;
  EXPECT_FALSE(s.started());
  EXPECT_FALSE(s.next().has_value());
  EXPECT_EQ(s.last(), 0u);
  EXPECT_FALSE(s.wants_new_generation());
}

TEST(epoch_source, epochs_are_generation_and_counter) {
  epoch_source s;
  ASSERT_TRUE(s.start(7));
  auto a = s.next();
  auto b = s.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (std::uint64_t{7} << 32) | 1);
  EXPECT_EQ(*b, (std::uint64_t{7} << 32) | 2);
  EXPECT_EQ(epoch_source::generation_of(*b), 7u);
  EXPECT_EQ(epoch_source::counter_of(*b), 2u);
  EXPECT_EQ(s.last(), *b);
  EXPECT_GT(*a, 0u);  // 0 stays the legacy epoch, older than all
}

TEST(epoch_source, a_newer_generation_beats_every_epoch_of_an_older_one) {
  epoch_source older, newer;
  ASSERT_TRUE(older.start(3));
  ASSERT_TRUE(newer.start(4));
  auto first_of_newer = newer.next();
  std::uint64_t last_of_older = 0;
  for (int i = 0; i < 1000; ++i)
    last_of_older = *older.next();
  EXPECT_GT(*first_of_newer, last_of_older);
  // Even the largest epoch of generation 3 is below the smallest of 4.
  EXPECT_LT(epoch_source::make(3, epoch_source::max_counter), epoch_source::make(4, 1));
}

TEST(epoch_source, a_generation_never_goes_back) {
  epoch_source s;
  EXPECT_FALSE(s.start(0));
  ASSERT_TRUE(s.start(5));
  auto e = *s.next();
  EXPECT_FALSE(s.start(5));
  EXPECT_FALSE(s.start(4));
  EXPECT_FALSE(s.start(epoch_source::max_generation + 1));
  EXPECT_EQ(s.generation(), 5u);
  EXPECT_GT(*s.next(), e);  // the refused starts changed nothing
  ASSERT_TRUE(s.start(6));
  EXPECT_GT(*s.next(), e);
}

TEST(epoch_source, every_epoch_grows) {
  epoch_source s;
  ASSERT_TRUE(s.start(1));
  std::uint64_t prev = 0;
  for (int i = 0; i < 10000; ++i) {
    auto e = s.next();
    ASSERT_TRUE(e);
    ASSERT_GT(*e, prev);
    prev = *e;
  }
}

TEST(epoch_source, asks_for_a_new_generation_at_half_and_stops_when_used_up) {
  epoch_source s(10);
  ASSERT_TRUE(s.start(2));
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(s.next());
    EXPECT_FALSE(s.wants_new_generation()) << i;
  }
  ASSERT_TRUE(s.next());
  EXPECT_TRUE(s.wants_new_generation());
  std::uint64_t last = 0;
  for (int i = 7; i <= 10; ++i)
    last = *s.next();
  EXPECT_EQ(epoch_source::counter_of(last), 10u);
  EXPECT_FALSE(s.next().has_value());  // used up: never wraps to a smaller epoch
  EXPECT_EQ(s.last(), last);
  ASSERT_TRUE(s.start(3));
  EXPECT_FALSE(s.wants_new_generation());
  EXPECT_GT(*s.next(), last);
}

}  // namespace epoch_source_test_file
