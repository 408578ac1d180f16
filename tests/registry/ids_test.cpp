#include "registry/ids.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace troupe::registry;

TEST(ids, minted_cids_are_valid_url_safe_and_distinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto cid = mint_cid();
    EXPECT_EQ(cid.size(), cid_length);
    EXPECT_TRUE(valid_cid(cid)) << cid;
    EXPECT_EQ(cid.find_first_not_of(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
              std::string::npos);
    seen.insert(cid);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(ids, malformed_cids_are_rejected) {
  EXPECT_FALSE(valid_cid(""));
  EXPECT_FALSE(valid_cid("abc"));
  EXPECT_FALSE(valid_cid(std::string(cid_length, '!')));
  EXPECT_FALSE(valid_cid(std::string(cid_length + 1, 'a')));
  EXPECT_FALSE(valid_cid(std::string(cid_length - 1, 'a') + "="));
  EXPECT_TRUE(valid_cid(std::string(cid_length, 'a')));
}

TEST(ids, user_names) {
  EXPECT_TRUE(valid_user_name("alice"));
  EXPECT_TRUE(valid_user_name("a.b-c_d@example.org"));
  EXPECT_TRUE(valid_user_name(std::string(64, 'x')));
  EXPECT_FALSE(valid_user_name(std::string(65, 'x')));
  EXPECT_FALSE(valid_user_name(""));
  EXPECT_FALSE(valid_user_name("guest_abc"));
  EXPECT_FALSE(valid_user_name("al ice"));
  EXPECT_FALSE(valid_user_name("al/ice"));
  EXPECT_FALSE(valid_user_name("\xC3\xA9t\xC3\xA9"));
}

TEST(ids, page_ids) {
  EXPECT_TRUE(valid_page_id("p1"));
  EXPECT_TRUE(valid_page_id("tab-3.main_x"));
  EXPECT_FALSE(valid_page_id(""));
  EXPECT_FALSE(valid_page_id("a/b"));
  EXPECT_FALSE(valid_page_id(std::string(65, 'p')));
}

TEST(ids, guests_and_redaction) {
  auto cid = mint_cid();
  auto guest = guest_name(cid);
  EXPECT_EQ(guest, "guest_" + cid);
  EXPECT_TRUE(is_guest(guest));
  EXPECT_FALSE(is_guest("alice"));
  EXPECT_EQ(redact(cid).find(cid), std::string::npos);
  EXPECT_EQ(redact(guest).find(cid), std::string::npos);
  EXPECT_EQ(redact(guest).rfind("guest_" + cid.substr(0, 4), 0), 0u);
  EXPECT_EQ(redact("alice"), "alice");
}
