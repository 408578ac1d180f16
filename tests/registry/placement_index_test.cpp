#include "registry/placement_index.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace placement_index_test_file {

using troupe::registry::placement_index;

TEST(placement_index, binds_connections_and_reports_the_previous_user) {
  placement_index ix{2};
  EXPECT_FALSE(ix.user_of("c1"));
  EXPECT_FALSE(ix.bind("c1", "guest_c1"));
  ASSERT_TRUE(ix.user_of("c1"));
  EXPECT_EQ(*ix.user_of("c1"), "guest_c1");
  auto before = ix.bind("c1", "alice");
  ASSERT_TRUE(before);
  EXPECT_EQ(*before, "guest_c1");
  EXPECT_EQ(*ix.user_of("c1"), "alice");
  ix.unbind("c1");
  EXPECT_FALSE(ix.user_of("c1"));
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

TEST(placement_index, a_slot_out_of_service_gets_no_new_users_and_the_last_one_stays) {
  troupe::registry::placement_index idx(2);
  EXPECT_EQ(idx.place("a"), 0u);
  ASSERT_TRUE(idx.set_in_service(0, false));
  EXPECT_EQ(idx.place("a"), 0u);  // placed before: stays where he is
  EXPECT_EQ(idx.place("b"), 1u);
  EXPECT_EQ(idx.place("c"), 1u);  // slot 0 is lighter, but out of service
  EXPECT_FALSE(idx.set_in_service(1, false));  // the last slot in service
  EXPECT_TRUE(idx.in_service(1));
  EXPECT_FALSE(idx.set_in_service(7, true));
  ASSERT_TRUE(idx.set_in_service(0, true));
  EXPECT_EQ(idx.place("d"), 0u);
}

TEST(placement_index, unbinds_every_connection_of_a_user) {
  troupe::registry::placement_index idx(1);
  idx.bind("c1", "alice");
  idx.bind("c2", "bob");
  idx.bind("c3", "alice");
  auto cids = idx.unbind_user("alice");
  std::sort(cids.begin(), cids.end());
  EXPECT_EQ(cids, (std::vector<std::string>{"c1", "c3"}));
  EXPECT_FALSE(idx.user_of("c1"));
  ASSERT_TRUE(idx.user_of("c2"));
  EXPECT_EQ(idx.connections(), 1u);
}

TEST(PlacementIndex, SlotsOfAnotherMemberJoinAndRetireWithTheirUsers) {
  troupe::registry::placement_index ix(1);
  EXPECT_EQ(ix.place("a"), 0u);
  EXPECT_EQ(ix.add_slots(2), 1u);
  EXPECT_EQ(ix.place("b"), 1u) << "the new slots are empty: they get the newcomers";
  EXPECT_EQ(ix.place("c"), 2u);
  EXPECT_TRUE(ix.place_at("d", 2));
  EXPECT_FALSE(ix.place_at("d", 1)) << "placed elsewhere already";
  auto gone = ix.retire_slot(2);
  std::sort(gone.begin(), gone.end());
  EXPECT_EQ(gone, (std::vector<std::string>{"c", "d"}));
  EXPECT_FALSE(ix.worker_of("c"));
  EXPECT_TRUE(ix.retired(2));
  EXPECT_FALSE(ix.set_in_service(2, true)) << "a retired slot never comes back";
  EXPECT_FALSE(ix.place_at("e", 2));
  EXPECT_EQ(ix.place("c"), 0u) << "woken again on a live slot (0 and 1 hold one each: the lower wins)";
}

TEST(PlacementIndex, NoSlotInServiceMeansNoPlacement) {
  troupe::registry::placement_index ix(1);
  ix.retire_slot(0);
  EXPECT_FALSE(ix.place("a"));
  EXPECT_EQ(ix.users(), 0u);
}

TEST(PlacementIndex, OnlyNoticesOfTheCurrentPlacementAreCurrent) {
  troupe::registry::placement_index ix(2);
  ASSERT_EQ(ix.place("a", 7), 0u);
  EXPECT_TRUE(ix.is_current("a", 7));
  EXPECT_FALSE(ix.is_current("a", 5)) << "a notice from an older placement (a fenced member's user)";
  EXPECT_TRUE(ix.is_current("a", 0)) << "an epoch the sender does not know matches";
  EXPECT_FALSE(ix.is_current("b", 7)) << "not placed";
  EXPECT_EQ(ix.place("a", 9), 0u);
  EXPECT_TRUE(ix.is_current("a", 7)) << "placed already: he keeps the epoch of his placement";
  EXPECT_FALSE(ix.is_current("a", 9));
  ix.remove("a");
  ASSERT_EQ(ix.place("a", 9), 0u);
  EXPECT_TRUE(ix.is_current("a", 9)) << "placed again: the new epoch";
  EXPECT_FALSE(ix.is_current("a", 7));
  ASSERT_TRUE(ix.place_at("c", 1));
  EXPECT_TRUE(ix.is_current("c", 3)) << "a takeover that learnt no epoch accepts any";
  ASSERT_TRUE(ix.place_at("d", 1, 4));
  EXPECT_FALSE(ix.is_current("d", 3));
}

TEST(PlacementIndex, ConnectionsOfUsersNoLongerLiveAreForgottenAtTheSecondSweep) {
  troupe::registry::placement_index ix(1);
  ix.bind("c-live", "ann");
  ASSERT_TRUE(ix.place("ann"));
  ix.bind("c-frozen", "ben");  // ben froze: not placed
  ix.bind("c-soon", "cai");    // bound for a placement about to come
  EXPECT_EQ(ix.forget_unplaced_connections(), 0u) << "the first sweep only notes them";
  ASSERT_TRUE(ix.place("cai"));
  EXPECT_EQ(ix.forget_unplaced_connections(), 1u);
  EXPECT_FALSE(ix.user_of("c-frozen"));
  ASSERT_TRUE(ix.user_of("c-live"));
  EXPECT_EQ(*ix.user_of("c-live"), "ann");
  ASSERT_TRUE(ix.user_of("c-soon")) << "placed before the second sweep";
  ix.remove("ann");
  ix.bind("c-live", "ann");  // used again (a login rebinds): noted afresh
  EXPECT_EQ(ix.forget_unplaced_connections(), 0u);
  EXPECT_EQ(ix.forget_unplaced_connections(), 1u);
  EXPECT_EQ(ix.connections(), 1u);
}

// -- groups and admission (issue 13) ------------------------------------------------------

TEST(PlacementIndex, NewcomersStayInTheirGroupAndLiveUsersStayWhereTheyAre) {
  placement_index ix(1, "main");
  EXPECT_EQ(ix.add_slots(2, "staff"), 1u);
  EXPECT_EQ(ix.group_of(0), "main");
  EXPECT_EQ(ix.group_of(2), "staff");
  EXPECT_EQ(ix.place("a", 0, "main"), 0u);
  EXPECT_EQ(ix.place("b", 0, "main"), 0u) << "the staff slots are empty, but not his group's";
  EXPECT_EQ(ix.place("s1", 0, "staff"), 1u);
  EXPECT_EQ(ix.place("s2", 0, "staff"), 2u);
  EXPECT_EQ(ix.place("a", 0, "staff"), 0u) << "live: he stays where he is";
  EXPECT_FALSE(ix.place("x", 0, "nowhere")) << "a group without slots places nobody";
  EXPECT_EQ(ix.live_slots("staff"), 2u);
  EXPECT_EQ(ix.live_slots("main"), 1u);
}

TEST(PlacementIndex, TheLastSlotInServiceIsCountedPerGroup) {
  placement_index ix(1, "main");
  ix.add_slots(1, "staff");
  EXPECT_FALSE(ix.set_in_service(0, false)) << "the last of main, though staff has one";
  ix.add_slots(1, "main");
  EXPECT_TRUE(ix.set_in_service(0, false));
  EXPECT_FALSE(ix.set_in_service(2, false));
}

TEST(PlacementIndex, ASlotThatDoesNotAdmitGetsNoNewcomerButKeepsItsUsers) {
  placement_index ix(2, "g");
  EXPECT_EQ(ix.place("a", 0, "g"), 0u);
  EXPECT_TRUE(ix.set_admission(1, false, 0, 7));
  EXPECT_FALSE(ix.set_admission(1, false, 0, 5)) << "no change of state";
  EXPECT_EQ(ix.place("b", 0, "g"), 0u) << "slot 1 is lighter but closed";
  EXPECT_TRUE(ix.set_admission(0, false, 1, 3));
  EXPECT_EQ(ix.place("a", 0, "g"), 0u) << "a live user is served where he is";
  EXPECT_FALSE(ix.place("c", 0, "g")) << "every slot of g is closed";
  auto c = ix.closure("g", 2);
  EXPECT_EQ(c.in_service, 2u);
  EXPECT_EQ(c.closed, 2u);
  EXPECT_EQ(c.degraded, 0u);
  EXPECT_EQ(c.retry_after, 3u) << "the smallest reported";
  EXPECT_EQ(c.reason, 1u) << "the reason of the slot that reopens first";
  EXPECT_TRUE(ix.set_admission(1, true));
  EXPECT_EQ(ix.place("c", 0, "g"), 1u);
  EXPECT_EQ(ix.closure("g", 2).closed, 1u);
}

TEST(PlacementIndex, DegradedSlotsAreToldApart) {
  placement_index ix(2, "g");
  ix.set_admission(0, false, 2, 9);
  ix.set_admission(1, false, 2, 4);
  auto c = ix.closure("g", 2);
  EXPECT_EQ(c.degraded, 2u);
  EXPECT_EQ(c.closed, 2u);
  EXPECT_EQ(c.retry_after, 4u);
  ix.set_admission(1, false, 0, 0);  // closed for cpu, no estimate
  c = ix.closure("g", 2);
  EXPECT_EQ(c.degraded, 1u);
  EXPECT_EQ(c.retry_after, 9u) << "an unknown retry_after (0) is not the smallest";
}

TEST(PlacementIndex, ASlotThatJustAdmittedIsSkippedForTheIntervalUnlessNoOtherAdmits) {
  using clock = placement_index::clock;
  placement_index ix(2, "g");
  ix.set_admission_interval("g", std::chrono::seconds(1));
  auto t0 = clock::now();
  EXPECT_EQ(ix.place("a", 0, "g", t0), 0u);
  EXPECT_EQ(ix.place("b", 0, "g", t0), 1u);
  // Both admitted just now: the least loaded of them still takes the next one.
  EXPECT_EQ(ix.place("c", 0, "g", t0 + std::chrono::milliseconds(100)), 0u);
  ix.remove("a");
  ix.remove("b");
  // Slot 0 (1 user, admitted at t0+100ms) rests; slot 1 (0 users, at t0) rested until t0+1s.
  EXPECT_EQ(ix.place("d", 0, "g", t0 + std::chrono::milliseconds(1050)), 1u);
  // Now slot 1 rests and slot 0 does not any more: slot 0 though it is no lighter.
  EXPECT_EQ(ix.place("e", 0, "g", t0 + std::chrono::milliseconds(1200)), 0u);
  EXPECT_EQ(ix.loads(), (std::vector<std::size_t>{2, 1}));
}

}  // namespace placement_index_test_file
