#include "registry/url.hpp"

#include <gtest/gtest.h>

using namespace troupe::registry;

TEST(url, percent_decodes_strictly) {
  EXPECT_EQ(percent_decode("user%3Aalice"), "user:alice");
  EXPECT_EQ(percent_decode("a+b"), "a+b");
  EXPECT_EQ(percent_decode("a+b", true), "a b");
  EXPECT_EQ(percent_decode("%c3%BC"), "\xc3\xbc");
  EXPECT_FALSE(percent_decode("bad%2"));
  EXPECT_FALSE(percent_decode("bad%zz"));
  EXPECT_EQ(hex_digit('F'), 15);
  EXPECT_EQ(hex_digit('g'), -1);
}

TEST(url, parses_query_strings_in_order) {
  auto q = parse_query("kind=user&prefix=al%20x&&state=");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ((*q)[1], std::make_pair(std::string("prefix"), std::string("al x")));
  EXPECT_EQ((*q)[2].second, "");
  EXPECT_FALSE(parse_query("a=%zz"));
}
