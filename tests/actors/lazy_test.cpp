#include "actors/lazy.hpp"

#include <gtest/gtest.h>

#include <string>

namespace lazy_test_file {

using troupe::lazy;
using troupe::lazy_function;

TEST(Lazy, IsOnePointerAndBehavesAsAnOptional) {
  static_assert(sizeof(lazy<std::string>) == sizeof(void*));
  lazy<std::string> s;
  EXPECT_FALSE(s);
  s = std::string("why");
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, "why");
  EXPECT_EQ(s->size(), 3u);
  s = "again";  // assigns into the held value
  EXPECT_EQ(*s, "again");
  auto moved = std::move(s);
  EXPECT_EQ(*moved, "again");
  auto copy = moved;
  EXPECT_EQ(*copy, "again");
  copy.reset();
  EXPECT_FALSE(copy);
  EXPECT_TRUE(moved);
  EXPECT_EQ(moved.emplace(3, 'x'), "xxx");
}

TEST(Lazy, FunctionIsEmptyUntilGivenACallable) {
  static_assert(sizeof(lazy_function<int>) == sizeof(void*));
  lazy_function<int> f;
  EXPECT_FALSE(f);
  f = [] { return 7; };
  ASSERT_TRUE(f);
  EXPECT_EQ(f(), 7);
  auto g = std::move(f);
  EXPECT_EQ(g(), 7);
  g = nullptr;
  EXPECT_FALSE(g);
  g = std::function<int()>{};  // an empty std::function leaves it empty
  EXPECT_FALSE(g);
}

}  // namespace lazy_test_file
