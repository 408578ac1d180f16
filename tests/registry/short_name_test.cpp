#include "registry/short_name.hpp"

#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <utility>

namespace short_name_test_file {

using troupe::registry::short_name;
using troupe::registry::short_name_hash;

TEST(ShortName, KeepsUpTo39CharactersInline) {
  short_name empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_TRUE(empty.is_inline());
  std::string cid(32, 'c'), guest = "guest_" + std::string(32, 'g'), max(39, 'm');
  for (auto& s : {cid, guest, max}) {
    short_name n(s);
    EXPECT_TRUE(n.is_inline()) << s.size();
    EXPECT_EQ(n.view(), s);
    EXPECT_EQ(n.size(), s.size());
  }
}

TEST(ShortName, LongerNamesGoToTheHeapAndStayEqual) {
  std::string login(64, 'a');
  short_name n(login);
  EXPECT_FALSE(n.is_inline());
  EXPECT_EQ(n.str(), login);
  short_name copy(n);
  EXPECT_EQ(copy, n);
  EXPECT_NE(copy.view().data(), n.view().data());  // its own buffer
  short_name moved(std::move(copy));
  EXPECT_EQ(moved.view(), login);
  EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from name is empty
  short_name assigned("x");
  assigned = n;
  EXPECT_EQ(assigned.view(), login);
  assigned = short_name("short");
  EXPECT_TRUE(assigned.is_inline());
  EXPECT_EQ(assigned.view(), "short");
  assigned = assigned;  // self-assignment keeps it
  EXPECT_EQ(assigned.view(), "short");
}

TEST(ShortName, OrdersAndHashesAsItsCharacters) {
  EXPECT_LT(short_name("alice"), short_name("bob"));
  EXPECT_LT(short_name("ab"), short_name("abc"));
  EXPECT_EQ(short_name_hash{}(short_name("alice")), std::hash<std::string_view>{}("alice"));
  std::unordered_map<short_name, int, short_name_hash> m;
  m[std::string("guest_abc")] = 1;
  m[std::string(50, 'z')] = 2;
  EXPECT_EQ(m.at(std::string("guest_abc")), 1);
  EXPECT_EQ(m.at(std::string(50, 'z')), 2);
  EXPECT_EQ(m.count(std::string("guest_abd")), 0u);
}

}  // namespace short_name_test_file
