// The channel sockets by connection and by user (issue 23, 8), and the closing
// of a connection's other sockets when login or logout ends its id (issue 23, a).
#include "transport/channel_quota.hpp"

#include <gtest/gtest.h>

#include <set>

namespace channel_quota_test_file {

using troupe::channel_quota;

namespace {

// Records which sockets were told to close.
struct closed_log {
  std::set<std::uint64_t> sockets;
  channel_quota::closer closer(std::uint64_t socket) {
    return [this, socket] { sockets.insert(socket); };
  }
};

}  // namespace

TEST(channel_quota, refuses_past_the_connection_limit_and_counts_again_after_a_release) {
  channel_quota q(2, 10);
  closed_log log;
  EXPECT_TRUE(q.try_open(1, "c1", log.closer(1)));
  EXPECT_TRUE(q.try_open(2, "c1", log.closer(2)));
  EXPECT_FALSE(q.try_open(3, "c1", log.closer(3)));
  EXPECT_TRUE(q.try_open(4, "c2", log.closer(4)));  // another connection has its own count
  EXPECT_EQ(q.sockets_of_connection("c1"), 2u);
  q.release(3);  // never counted: nothing changes
  EXPECT_EQ(q.sockets_of_connection("c1"), 2u);
  q.release(1);
  EXPECT_EQ(q.sockets_of_connection("c1"), 1u);
  EXPECT_TRUE(q.try_open(5, "c1", log.closer(5)));
  q.release(2);
  q.release(5);
  q.release(4);
  EXPECT_EQ(q.sockets_of_connection("c1"), 0u);
  EXPECT_EQ(q.sockets_of_connection("c2"), 0u);
  EXPECT_TRUE(log.sockets.empty());
}

TEST(channel_quota, refuses_past_the_user_limit_over_all_his_connections) {
  channel_quota q(5, 3);
  closed_log log;
  for (std::uint64_t s = 1; s <= 4; ++s)
    ASSERT_TRUE(q.try_open(s, s <= 2 ? "a" : "b", log.closer(s)));
  EXPECT_TRUE(q.try_admit(1, "ann"));
  EXPECT_TRUE(q.try_admit(2, "ann"));
  EXPECT_TRUE(q.try_admit(3, "ann"));
  EXPECT_FALSE(q.try_admit(4, "ann"));
  EXPECT_EQ(q.sockets_of_user("ann"), 3u);
  EXPECT_FALSE(q.try_admit(99, "bob"));  // not open here
  EXPECT_FALSE(q.try_admit(4, ""));      // no name: counted under nobody
  EXPECT_TRUE(q.try_admit(4, "bob"));
  q.release(4);
  q.release(2);
  EXPECT_EQ(q.sockets_of_user("ann"), 2u);
  EXPECT_EQ(q.sockets_of_user("bob"), 0u);
  EXPECT_TRUE(q.try_open(6, "b", log.closer(6)));
  EXPECT_TRUE(q.try_admit(6, "ann"));
  q.release(1);
  q.release(3);
  q.release(6);
  EXPECT_EQ(q.sockets_of_user("ann"), 0u);
}

TEST(channel_quota, a_move_takes_the_counts_to_the_new_connection_and_user) {
  channel_quota q(2, 2);
  closed_log log;
  ASSERT_TRUE(q.try_open(1, "guest-id", log.closer(1)));
  ASSERT_TRUE(q.try_admit(1, "guest_x"));
  ASSERT_TRUE(q.try_open(2, "other", log.closer(2)));
  ASSERT_TRUE(q.try_admit(2, "carl"));
  ASSERT_TRUE(q.try_open(3, "other2", log.closer(3)));
  ASSERT_TRUE(q.try_admit(3, "carl"));
  EXPECT_TRUE(q.move(1, "new-id", "ann"));
  EXPECT_EQ(q.sockets_of_connection("guest-id"), 0u);
  EXPECT_EQ(q.sockets_of_connection("new-id"), 1u);
  EXPECT_EQ(q.sockets_of_user("guest_x"), 0u);
  EXPECT_EQ(q.sockets_of_user("ann"), 1u);
  // Carl holds his two already: a socket moving to him is counted under nobody.
  EXPECT_FALSE(q.move(1, "newer-id", "carl"));
  EXPECT_EQ(q.sockets_of_user("ann"), 0u);
  EXPECT_EQ(q.sockets_of_user("carl"), 2u);
  EXPECT_EQ(q.sockets_of_connection("newer-id"), 1u);
  q.release(1);
  EXPECT_EQ(q.sockets_of_connection("newer-id"), 0u);
  EXPECT_EQ(q.sockets_of_user("carl"), 2u);
}

TEST(channel_quota, closing_a_connection_closes_its_sockets_but_the_carrier) {
  channel_quota q(4, 8);
  closed_log log;
  for (std::uint64_t s = 1; s <= 3; ++s)
    ASSERT_TRUE(q.try_open(s, "old", log.closer(s)));
  ASSERT_TRUE(q.try_open(4, "else", log.closer(4)));
  EXPECT_EQ(q.close_connection("old", 2), 2u);
  EXPECT_EQ(log.sockets, (std::set<std::uint64_t>{1, 3}));
  EXPECT_EQ(q.sockets_of_connection("old"), 3u);  // counted until each one closed
  EXPECT_EQ(q.close_connection("nobody"), 0u);
  log.sockets.clear();
  EXPECT_EQ(q.close_connection("old"), 3u);  // over HTTP: no carrier
  EXPECT_EQ(log.sockets, (std::set<std::uint64_t>{1, 2, 3}));
}

// A closer may release its socket at once (a session gone already): no lock is held then.
TEST(channel_quota, a_closer_may_release_its_socket) {
  channel_quota q(4, 8);
  ASSERT_TRUE(q.try_open(1, "old", [&] { q.release(1); }));
  ASSERT_TRUE(q.try_open(2, "old", [&] { q.release(2); }));
  EXPECT_EQ(q.close_connection("old"), 2u);
  EXPECT_EQ(q.sockets_of_connection("old"), 0u);
}

}  // namespace channel_quota_test_file
