#include "cluster/membership.hpp"

#include <gtest/gtest.h>

namespace membership_test_file {

using namespace troupe::cluster;
using namespace std::chrono_literals;

namespace {

member_record rec(std::string name, std::uint64_t inc = 1, std::uint64_t seq = 0) {
  return member_record{std::move(name), inc, "127.0.0.1:1", seq};
}

const auto t0 = steady::time_point{} + 1000h;

// a (seq 1) admits b and c; returns a's view.
membership three_members() {
  membership a{rec("a"), 3000ms};
  a.start_alone(t0);
  EXPECT_TRUE(a.admit(rec("b"), t0));
  EXPECT_TRUE(a.admit(rec("c"), t0));
  return a;
}

}  // namespace

TEST(Membership, AdmitGivesGrowingAgesAndTheOldestLeads) {
  auto a = three_members();
  ASSERT_EQ(a.members().size(), 3u);
  EXPECT_EQ(a.find("b")->record.seq, 2u);
  EXPECT_EQ(a.find("c")->record.seq, 3u);
  ASSERT_NE(a.leader(), nullptr);
  EXPECT_EQ(a.leader()->name, "a");
  EXPECT_TRUE(a.leads());
}

TEST(Membership, ANameOfALiveMemberIsRefusedARetriedJoinIsNot) {
  auto a = three_members();
  EXPECT_FALSE(a.admit(rec("b", 2), t0)) << "another incarnation under a live member's name";
  auto again = a.admit(rec("b", 1), t0);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->seq, 2u) << "the same member asking again gets the same answer";
  EXPECT_FALSE(a.admit(rec("a", 7), t0)) << "nobody may take the admitting member's own name";
}

TEST(Membership, AJoinerLearnsTheListAndItsOwnAge) {
  membership c{rec("c"), 3000ms};
  c.joined({rec("a", 1, 1), rec("b", 1, 2), rec("c", 1, 3)}, t0);
  EXPECT_EQ(c.self().seq, 3u);
  EXPECT_EQ(c.leader()->name, "a");
  EXPECT_FALSE(c.leads());
  EXPECT_EQ(c.up_count(), 3u);
}

TEST(Membership, SilentMemberIsDeclaredDownAfterTheFailureTimeoutOnly) {
  auto a = three_members();
  a.heard("b", 1, t0 + 2500ms);
  EXPECT_TRUE(a.check(t0 + 2999ms).declared_down.empty());
  auto v = a.check(t0 + 3001ms);
  ASSERT_EQ(v.declared_down.size(), 1u);
  EXPECT_EQ(v.declared_down[0].name, "c");
  EXPECT_FALSE(v.fenced);
  EXPECT_EQ(a.up_count(), 2u);
  EXPECT_FALSE(a.heard("c", 1, t0 + 3002ms)) << "a down member's heartbeat is not taken: it must be told";
  EXPECT_TRUE(a.check(t0 + 3003ms).declared_down.empty()) << "declared once";
}

TEST(Membership, MinorityFencesItselfInsteadOfDeclaringTheOthersDown) {
  membership c{rec("c"), 3000ms};
  c.joined({rec("a", 1, 1), rec("b", 1, 2), rec("c", 1, 3)}, t0);
  EXPECT_TRUE(c.has_quorum(t0 + 1s));
  // c hears nobody (SIGSTOPped, or cut off): one of three is a minority.
  EXPECT_FALSE(c.has_quorum(t0 + 4s));
  auto v = c.check(t0 + 4s);
  EXPECT_TRUE(v.fenced);
  EXPECT_TRUE(v.declared_down.empty());
  EXPECT_TRUE(c.fenced());
  EXPECT_FALSE(c.leads());
  EXPECT_EQ(c.up_count(), 3u) << "a fenced member declares nobody down";
}

TEST(Membership, EvenSplitTheSideOfTheOldestLives) {
  membership a{rec("a"), 3000ms};
  a.start_alone(t0);
  a.admit(rec("b"), t0);
  membership b{rec("b"), 3000ms};
  b.joined({rec("a", 1, 1), rec("b", 1, 2)}, t0);
  // The link between them breaks: each hears nobody.
  auto va = a.check(t0 + 4s);
  auto vb = b.check(t0 + 4s);
  EXPECT_FALSE(va.fenced);
  ASSERT_EQ(va.declared_down.size(), 1u);
  EXPECT_TRUE(vb.fenced) << "b is younger: its side of an even split fences";
  EXPECT_TRUE(a.leads());
}

TEST(Membership, LostConnectionCountsAtOnce) {
  auto a = three_members();
  a.heard("b", 1, t0 + 100ms);
  a.heard("c", 1, t0 + 100ms);
  a.lost("c", 1);
  auto v = a.check(t0 + 200ms);
  ASSERT_EQ(v.declared_down.size(), 1u);
  EXPECT_EQ(v.declared_down[0].name, "c");
  a.lost("c", 7);  // another incarnation: nothing of ours
  EXPECT_EQ(a.up_count(), 2u);
}

TEST(Membership, LeaderDiesTheNextOldestLeads) {
  membership b{rec("b"), 3000ms};
  b.joined({rec("a", 1, 1), rec("b", 1, 2), rec("c", 1, 3)}, t0);
  b.heard("c", 1, t0 + 3500ms);
  auto v = b.check(t0 + 3600ms);
  ASSERT_EQ(v.declared_down.size(), 1u);
  EXPECT_EQ(v.declared_down[0].name, "a");
  EXPECT_TRUE(b.leads());
}

TEST(Membership, DeclaredDownByAnotherOrItselfFenced) {
  auto a = three_members();
  EXPECT_TRUE(a.declared_down("b", 1));
  EXPECT_FALSE(a.declared_down("b", 1)) << "once";
  EXPECT_FALSE(a.declared_down("c", 9)) << "another incarnation";
  EXPECT_FALSE(a.fenced());
  a.declared_down("a", 1);
  EXPECT_TRUE(a.fenced()) << "told it is down: it stops serving";
  EXPECT_FALSE(a.has_quorum(t0));
}

TEST(Membership, AComebackIsANewIncarnationAndTheYoungest) {
  auto a = three_members();
  a.declared_down("b", 1);
  auto back = a.admit(rec("b", 2), t0 + 10s);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->seq, 4u) << "it rejoins as the youngest";
  EXPECT_TRUE(a.heard("b", 2, t0 + 10s));
  EXPECT_FALSE(a.heard("b", 1, t0 + 10s)) << "the old incarnation is not taken";
  EXPECT_EQ(a.up_count(), 3u);
}

TEST(Membership, RejoiningAfterFenceStartsFresh) {
  membership c{rec("c"), 3000ms};
  c.joined({rec("a", 1, 1), rec("b", 1, 2), rec("c", 1, 3)}, t0);
  c.check(t0 + 4s);
  ASSERT_TRUE(c.fenced());
  c.joined({rec("a", 1, 1), rec("b", 1, 2), rec("c", 1, 5)}, t0 + 5s);
  EXPECT_FALSE(c.fenced());
  EXPECT_EQ(c.self().seq, 5u);
  EXPECT_TRUE(c.has_quorum(t0 + 5s));
}

TEST(Membership, AMemberThatDidNotRunForAFailureTimeoutFencesItselfThoughItHearsEverybody) {
  auto a = three_members();
  a.heard("b", 1, t0);
  a.heard("c", 1, t0);
  EXPECT_FALSE(a.check(t0).fenced);
  EXPECT_FALSE(a.check(t0 + 2500ms).fenced) << "a late tick within the timeout";
  // SIGSTOP for 4 s; on resuming it reads the beats b and c sent before they
  // declared it down: they look fresh, its own silence is what counts.
  a.heard("b", 1, t0 + 6500ms);
  a.heard("c", 1, t0 + 6500ms);
  EXPECT_FALSE(a.has_quorum(t0 + 6500ms)) << "no right to serve before its check runs either";
  auto v = a.check(t0 + 6500ms);
  EXPECT_TRUE(v.fenced);
  EXPECT_TRUE(v.paused);
  EXPECT_TRUE(v.declared_down.empty()) << "it declares nobody down: it is the one that was gone";
  EXPECT_TRUE(a.fenced());
  EXPECT_FALSE(a.has_quorum(t0 + 6500ms));
}

TEST(Membership, AMemberAloneIsNeverFencedByAPause) {
  membership a{rec("a"), 3000ms};
  a.start_alone(t0);
  EXPECT_FALSE(a.check(t0).fenced);
  EXPECT_FALSE(a.check(t0 + 60s).fenced) << "nobody could have declared it down";
  EXPECT_TRUE(a.leads());
}

TEST(Membership, AfterAStallOfOverHalfTheTimeoutItJudgesNobodyThatRound) {
  auto a = three_members();
  a.heard("b", 1, t0);
  a.heard("c", 1, t0);
  EXPECT_TRUE(a.check(t0).declared_down.empty());
  EXPECT_TRUE(a.check(t0 + 1200ms).declared_down.empty());
  a.heard("b", 1, t0 + 2000ms);
  // c was last heard at t0: 3.2 s ago. But this member itself stalled 2 s (< 3 s).
  auto v = a.check(t0 + 3200ms);
  EXPECT_FALSE(v.fenced);
  EXPECT_TRUE(v.declared_down.empty()) << "a stale view judges nobody";
  auto next = a.check(t0 + 3700ms);  // a normal tick later
  ASSERT_EQ(next.declared_down.size(), 1u);
  EXPECT_EQ(next.declared_down.front().name, "c");
}

TEST(Membership, TheRightToServeRestsOnBeatsAQuorumConfirmed) {
  auto a = three_members();
  const auto s = [](steady::time_point t) { return membership::stamp_of(t); };
  EXPECT_EQ(a.lease_base(t0), t0) << "admitted at t0: nobody times it from before";
  // a's beats sent at t0+1s and t0+2s; b confirms the later one, c the earlier.
  a.heard("b", 1, t0 + 2100ms, 77, s(t0 + 2s));
  a.heard("c", 1, t0 + 2100ms, 88, s(t0 + 1s));
  EXPECT_EQ(a.lease_base(t0 + 2100ms), t0 + 2s) << "itself and b: a majority confirmed the beat of t0+2s";
  EXPECT_EQ(a.echo_for("b"), 77);
  // Stopped for 2.9 s: the beats read on resuming still echo the old stamps.
  a.heard("b", 1, t0 + 5000ms, 99, s(t0 + 2s));
  EXPECT_EQ(a.lease_base(t0 + 5000ms), t0 + 2s) << "nothing newer was confirmed: its lease ran out at t0+5s";
  // Two members, the other confirming nothing: half, with the oldest (itself) — enough.
  membership lone{rec("a"), 3000ms};
  lone.start_alone(t0);
  ASSERT_TRUE(lone.learn(rec("b", 1, 2), t0));
  EXPECT_EQ(lone.lease_base(t0 + 1s), t0 + 1s);
  membership young{rec("z", 1, 2), 3000ms};
  young.joined({rec("a", 1, 1), rec("z", 1, 2)}, t0 + 10ms, t0);
  EXPECT_EQ(young.lease_base(t0 + 20ms), t0) << "the join request's time";
  young.declared_down("z", 1);
  EXPECT_FALSE(young.lease_base(t0 + 30ms)) << "fenced";
}

}  // namespace membership_test_file
