// The commander's kept channel bindings (actors/kept_channels.hpp): what a
// frozen user's next placement binds again, bounded, oldest let go first.
#include "actors/kept_channels.hpp"

#include <gtest/gtest.h>

namespace kept_channels_test_file {

using troupe::channel_binding;
using troupe::kept_channels;

namespace {

std::vector<channel_binding> pages(const std::string& cid, int n) {
  std::vector<channel_binding> out;
  for (int i = 0; i < n; ++i)
    out.push_back(channel_binding{cid, "p" + std::to_string(i), {}, i % 2 == 1, {}, {}});
  return out;
}

TEST(kept_channels, a_user_gets_back_what_he_froze_with_once) {
  kept_channels kept(100);
  kept.keep("ann", pages("c1", 2));
  EXPECT_EQ(kept.users(), 1u);
  EXPECT_EQ(kept.bindings(), 2u);
  auto back = kept.take("ann");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].page, "p1");
  EXPECT_TRUE(back[1].sequential);
  EXPECT_TRUE(kept.take("ann").empty()) << "handed over once";
  EXPECT_EQ(kept.bindings(), 0u);
}

TEST(kept_channels, a_new_freeze_replaces_the_old_bindings_and_none_forgets_them) {
  kept_channels kept(100);
  kept.keep("ann", pages("c1", 3));
  kept.keep("ann", pages("c2", 1));
  EXPECT_EQ(kept.bindings(), 1u);
  EXPECT_EQ(kept.take("ann").front().cid, "c2");
  kept.keep("bob", pages("c3", 2));
  kept.keep("bob", {});
  EXPECT_EQ(kept.users(), 0u);
  EXPECT_EQ(kept.bindings(), 0u);
}

TEST(kept_channels, past_the_bound_the_users_who_froze_longest_ago_go_first) {
  kept_channels kept(5);
  kept.keep("ann", pages("a", 2));
  kept.keep("bob", pages("b", 2));
  kept.keep("ann", pages("a", 2));  // froze again: now the newest
  kept.keep("cid", pages("c", 2));  // 6 > 5: bob, the oldest now, goes
  EXPECT_TRUE(kept.take("bob").empty());
  EXPECT_EQ(kept.take("ann").size(), 2u);
  EXPECT_EQ(kept.take("cid").size(), 2u);
  // Freezing and waking over and over keeps nothing behind.
  for (int i = 0; i < 1000; ++i) {
    kept.keep("dan", pages("d", 1));
    kept.keep("eve", pages("e", 1));
    kept.take("dan");
  }
  EXPECT_EQ(kept.users(), 1u);
  EXPECT_EQ(kept.bindings(), 1u);
}

TEST(kept_channels, bindings_whose_sockets_are_gone_are_forgotten) {
  kept_channels kept(100);
  kept.keep("ann", pages("gone", 2));
  auto mixed = pages("gone", 1);
  mixed.push_back(channel_binding{"kept", "p", {}, false, {}, {}});
  kept.keep("bob", mixed);
  kept.forget_if([](const channel_binding& b) { return b.cid == "gone"; });
  EXPECT_EQ(kept.users(), 1u);
  EXPECT_EQ(kept.bindings(), 1u);
  EXPECT_EQ(kept.take("bob").front().cid, "kept");
}

}  // namespace

}  // namespace kept_channels_test_file
