// The leader's roll call (actors/settings_roll_call.hpp): who receives the
// cluster's settings generations and whether each acknowledged the one in force.
#include "actors/settings_roll_call.hpp"

#include <gtest/gtest.h>

namespace settings_roll_call_test_file {

using troupe::settings_roll_call;

TEST(settings_roll_call, the_leader_is_first_and_a_member_acknowledges_only_the_generation_in_force) {
  settings_roll_call rc;
  rc.join("n2");
  rc.join("n3");
  auto m = rc.members("n1", 4);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["node"], "n1");
  EXPECT_EQ(m[0]["acknowledged"], true);
  EXPECT_EQ(m[1]["outcome"], "pending");
  EXPECT_TRUE(m[1]["generation"].is_null());
  EXPECT_EQ(m[1]["acknowledged"], false);

  rc.answered("n2", 4, "applied", "");
  rc.answered("n3", 3, "rejected", "limits.x: needs a restart");
  m = rc.members("n1", 4);
  EXPECT_EQ(m[1]["node"], "n2");
  EXPECT_EQ(m[1]["generation"], 4);
  EXPECT_EQ(m[1]["acknowledged"], true);
  EXPECT_EQ(m[2]["acknowledged"], false);
  EXPECT_EQ(m[2]["outcome"], "rejected");
  EXPECT_EQ(m[2]["detail"], "limits.x: needs a restart");

  // The next generation: n2's acknowledgement was of the last one.
  EXPECT_EQ(rc.members("n1", 5)[1]["acknowledged"], false);
  // A generation refused by a member is never acknowledged, even at the same number.
  rc.answered("n3", 5, "rejected", "x");
  EXPECT_EQ(rc.members("n1", 5)[2]["acknowledged"], false);

  rc.unanswered("n2", "timeout");
  EXPECT_EQ(rc.members("n1", 5)[1]["outcome"], "unanswered");
  rc.leave("n2");
  EXPECT_FALSE(rc.has("n2"));
  EXPECT_EQ(rc.members("n1", 5).size(), 2u);
  // An answer from a member that left is not recorded.
  rc.answered("n2", 5, "applied", "");
  EXPECT_EQ(rc.members("n1", 5).size(), 2u);
  // Subscribing again forgets the old answer.
  rc.answered("n3", 5, "applied", "");
  rc.join("n3");
  EXPECT_EQ(rc.members("n1", 5)[1]["outcome"], "pending");
}

}  // namespace settings_roll_call_test_file
