#include "registry/lease_table.hpp"

#include <gtest/gtest.h>

namespace lease_table_test_file {

using namespace troupe::registry;
using namespace std::chrono_literals;

namespace {

using table = lease_table<int>;  // a waiter is just a number here
using clock_t_ = table::clock;

struct fixture : ::testing::Test {
  table t;
  clock_t_::time_point now = clock_t_::time_point{} + 1000s;
  std::vector<table::outcome> next;
  lease_refusal refused = lease_refusal::none;

  std::optional<table::grant> ask(const std::string& key, const std::string& holder, int waiter,
                                  clock_t_::duration ttl = 5s, clock_t_::duration wait = 5s) {
    return t.for_update(key, holder, ttl, now + wait, waiter, now, refused);
  }
};

}  // namespace

TEST_F(fixture, plain_set_get_erase_and_their_limits) {
  EXPECT_EQ(t.set("k", "v"), lease_refusal::none);
  EXPECT_EQ(t.get("k"), "v");
  EXPECT_EQ(t.keys(), 1u);
  EXPECT_EQ(t.set("", "v"), lease_refusal::invalid_key);
  EXPECT_EQ(t.set(std::string(257, 'k'), "v"), lease_refusal::invalid_key);
  EXPECT_EQ(t.set(std::string(256, 'k'), "v"), lease_refusal::none);
  EXPECT_EQ(t.set("bad\xff", "v"), lease_refusal::invalid_key);
  EXPECT_EQ(t.set("caf\xc3\xa9", "v"), lease_refusal::none);
  table small{{256, 4, 8, std::chrono::minutes(1)}};
  EXPECT_EQ(small.set("k", "12345"), lease_refusal::value_too_big);
  EXPECT_FALSE(small.get("k"));  // nothing stored
  EXPECT_EQ(t.erase("k"), lease_refusal::none);
  EXPECT_FALSE(t.get("k"));
  EXPECT_EQ(t.erase("k"), lease_refusal::no_such_key);
}

TEST_F(fixture, a_lease_is_exclusive_and_waiters_are_granted_in_fifo_order) {
  t.set("n", "1");
  auto g1 = ask("n", "a", 1);
  ASSERT_TRUE(g1);
  EXPECT_EQ(g1->value, "1");
  EXPECT_FALSE(ask("n", "b", 2));
  EXPECT_EQ(refused, lease_refusal::none);  // queued
  EXPECT_FALSE(ask("n", "c", 3));
  EXPECT_EQ(t.set("n", "x"), lease_refusal::key_leased);
  EXPECT_EQ(t.commit("n", g1->token, std::string("2"), now, next), lease_refusal::none);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].waiter, 2);
  ASSERT_TRUE(next[0].granted);
  EXPECT_EQ(next[0].granted->value, "2");
  EXPECT_GT(next[0].granted->token, g1->token);
  auto g2 = *next[0].granted;
  next.clear();
  EXPECT_EQ(t.abort("n", g2.token, now, next), lease_refusal::none);  // nothing applied
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].waiter, 3);
  EXPECT_EQ(next[0].granted->value, "2");
}

TEST_F(fixture, the_waiters_are_listed_in_the_order_they_will_be_granted) {
  auto listed = [&](const std::string& key) {
    std::vector<std::pair<std::string, clock_t_::duration>> out;
    t.for_each_waiter(key, [&](const std::string& holder, clock_t_::duration ttl) { out.emplace_back(holder, ttl); });
    return out;
  };
  EXPECT_TRUE(listed("n").empty());  // no such key
  auto g1 = ask("n", "a", 1);
  ASSERT_TRUE(g1);
  EXPECT_TRUE(listed("n").empty());  // the holder is not a waiter
  EXPECT_FALSE(ask("n", "b", 2, 7s));
  EXPECT_FALSE(ask("n", "c", 3, 9s));
  using listing = std::vector<std::pair<std::string, clock_t_::duration>>;
  EXPECT_EQ(listed("n"), (listing{{"b", 7s}, {"c", 9s}}));
  EXPECT_EQ(t.commit("n", g1->token, std::string("2"), now, next), lease_refusal::none);
  EXPECT_EQ(listed("n"), (listing{{"c", 9s}}));  // b holds it now
}

TEST_F(fixture, a_stale_token_is_refused) {
  auto g = ask("k", "a", 1, 1s);
  ASSERT_TRUE(g);
  now += 2s;
  EXPECT_EQ(t.expire(now, next), 1u);  // TTL reclaimed
  EXPECT_EQ(t.commit("k", g->token, std::string("late"), now, next), lease_refusal::lease_expired);
  EXPECT_FALSE(t.get("k"));
  auto g2 = ask("k", "b", 2);
  ASSERT_TRUE(g2);
  EXPECT_EQ(t.commit("k", g->token, std::string("late"), now, next), lease_refusal::lease_expired);
  EXPECT_EQ(t.commit("k", g2->token, std::string("new"), now, next), lease_refusal::none);
  EXPECT_EQ(t.get("k"), "new");
}

TEST_F(fixture, a_holder_going_down_gives_its_leases_back_with_nothing_applied) {
  t.set("k", "0");
  auto g = ask("k", "dead", 1);
  ASSERT_TRUE(g);
  EXPECT_FALSE(ask("k", "alive", 2));
  EXPECT_TRUE(ask("other", "dead", 3));  // granted: "other" was free
  EXPECT_EQ(t.holder_down("dead", now, next), 2u);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].waiter, 2);
  EXPECT_EQ(next[0].granted->value, "0");
  EXPECT_EQ(t.leases(), 1u);
}

TEST_F(fixture, waits_are_bounded_in_length_and_time) {
  table small{{256, 1024, 2, std::chrono::minutes(1)}};
  auto g = small.for_update("k", "a", 5s, now + 5s, 1, now, refused);
  ASSERT_TRUE(g);
  EXPECT_FALSE(small.for_update("k", "b", 5s, now + 1s, 2, now, refused));
  EXPECT_FALSE(small.for_update("k", "c", 5s, now + 9s, 3, now, refused));
  EXPECT_FALSE(small.for_update("k", "d", 5s, now + 9s, 4, now, refused));
  EXPECT_EQ(refused, lease_refusal::queue_full);
  EXPECT_EQ(small.next_deadline(), now + 1s);
  now += 2s;
  small.expire(now, next);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].waiter, 2);
  EXPECT_EQ(next[0].refused, lease_refusal::wait_expired);
  EXPECT_FALSE(next[0].granted);
}

TEST_F(fixture, ttls_are_checked) {
  EXPECT_FALSE(ask("k", "a", 1, 0s));
  EXPECT_EQ(refused, lease_refusal::invalid_ttl);
  EXPECT_FALSE(ask("k", "a", 1, std::chrono::hours(1)));
  EXPECT_EQ(refused, lease_refusal::invalid_ttl);
}

TEST_F(fixture, commit_of_an_oversize_value_keeps_the_lease) {
  table small{{256, 4, 8, std::chrono::minutes(1)}};
  auto g = small.for_update("k", "a", 5s, now + 5s, 1, now, refused);
  ASSERT_TRUE(g);
  EXPECT_EQ(small.commit("k", g->token, std::string("12345"), now, next), lease_refusal::value_too_big);
  EXPECT_EQ(small.leases(), 1u);
  EXPECT_EQ(small.commit("k", g->token, std::string("1234"), now, next), lease_refusal::none);
  EXPECT_EQ(small.get("k"), "1234");
  EXPECT_EQ(small.snapshot().size(), 1u);
}

TEST(utf8, accepts_valid_and_refuses_invalid) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("\xe2\x82\xac\xf0\x9f\x98\x80"));
  EXPECT_FALSE(valid_utf8(std::string("a\0b", 3)));
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(valid_utf8("\xe2\x82"));          // truncated
}

// Durable changes (durability "reply"): staged, written as a batch, applied
// only when the batch is settled as applied; get shows the settled value. A
// lease ends at its commit and the next holder reads the staged value (a hot
// key's commits share a write); what read a refused batch's value is refused
// with it, and nothing that remains was derived from a refused value.
TEST_F(fixture, a_staged_commit_is_settled_by_its_batch_and_the_next_holder_reads_it) {
  t.set("n", "1");
  auto g1 = ask("n", "a", 1);
  ASSERT_TRUE(g1);
  EXPECT_FALSE(ask("n", "b", 2));
  bool depends = true;
  EXPECT_EQ(t.stage_commit("n", g1->token, std::string("2"), now, next, depends), lease_refusal::none);
  EXPECT_FALSE(depends) << "no batch is open: it read the settled value";
  EXPECT_EQ(t.stage_commit("n", g1->token, std::string("3"), now, next, depends), lease_refusal::lease_expired)
      << "one commit per lease";
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].waiter, 2);
  ASSERT_TRUE(next[0].granted);
  EXPECT_EQ(next[0].granted->value, "2") << "the next holder reads the staged value";
  EXPECT_GT(next[0].granted->token, g1->token);
  auto g2 = *next[0].granted;
  next.clear();
  EXPECT_EQ(t.get("n"), "1") << "not durable yet";
  EXPECT_TRUE(t.has_staged());
  EXPECT_EQ(t.stage_commit("n", g2.token, std::string("3"), now, next, depends), lease_refusal::none);
  EXPECT_FALSE(depends) << "it read a value of the same batch";
  EXPECT_EQ(t.begin_batch(), (std::map<std::string, std::string>{{"n", "3"}}));
  EXPECT_TRUE(t.batch_open());
  EXPECT_FALSE(t.has_staged());
  EXPECT_TRUE(t.settle(true).empty());
  EXPECT_FALSE(t.batch_open());
  EXPECT_EQ(t.get("n"), "3");
  EXPECT_EQ(t.leases(), 0u);
}

TEST_F(fixture, a_refused_batch_takes_what_read_its_values_with_it) {
  t.set("n", "1");
  bool depends = false;
  auto g1 = ask("n", "a", 1);
  ASSERT_TRUE(g1);
  ASSERT_EQ(t.stage_commit("n", g1->token, std::string("2"), now, next, depends), lease_refusal::none);
  EXPECT_EQ(t.stage_set("fresh", "v", depends), lease_refusal::none);
  EXPECT_EQ(t.begin_batch(), (std::map<std::string, std::string>{{"fresh", "v"}, {"n", "2"}}));
  // While it is written: a holder reads its value and commits on it, a third holds on that.
  auto g2 = ask("n", "b", 2);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->value, "2");
  ASSERT_EQ(t.stage_commit("n", g2->token, std::string("3"), now, next, depends), lease_refusal::none);
  EXPECT_TRUE(depends) << "it read a value the deposit may refuse";
  auto g3 = ask("n", "c", 3);
  ASSERT_TRUE(g3);
  EXPECT_EQ(g3->value, "3");
  EXPECT_EQ(t.stage_set("other", "o", depends), lease_refusal::none);
  EXPECT_FALSE(depends);
  EXPECT_EQ(t.settle(false), (std::vector<std::string>{"fresh", "n"}));
  EXPECT_EQ(t.get("n"), "1");
  EXPECT_FALSE(t.get("fresh"));
  EXPECT_EQ(t.stage_commit("n", g3->token, std::string("4"), now, next, depends), lease_refusal::not_durable)
      << "a lease on a value of a refused batch cannot commit";
  EXPECT_EQ(t.leases(), 0u) << "and it ends";
  auto g4 = ask("n", "d", 4);
  ASSERT_TRUE(g4);
  EXPECT_EQ(g4->value, "1") << "the next holder reads the durable value";
  EXPECT_GT(g4->token, g3->token) << "tokens keep growing over a refusal";
  EXPECT_EQ(t.begin_batch(), (std::map<std::string, std::string>{{"n", "1"}, {"other", "o"}}))
      << "nothing derived from the refused batch is written";
  EXPECT_TRUE(t.settle(true).empty());
  EXPECT_EQ(t.snapshot(), (std::map<std::string, std::string>{{"n", "1"}, {"other", "o"}}));
}

TEST_F(fixture, a_blind_write_after_a_dependent_change_survives_the_refusal) {
  t.set("k", "0");
  bool depends = false;
  auto g1 = ask("k", "a", 1);
  ASSERT_EQ(t.stage_commit("k", g1->token, std::string("1"), now, next, depends), lease_refusal::none);
  EXPECT_EQ(t.stage_set("e", "x", depends), lease_refusal::none);
  t.begin_batch();
  auto g2 = ask("k", "b", 2);
  ASSERT_TRUE(g2);
  ASSERT_EQ(t.stage_commit("k", g2->token, std::string("2"), now, next, depends), lease_refusal::none);
  EXPECT_TRUE(depends);
  EXPECT_EQ(t.stage_set("k", "9", depends), lease_refusal::none);
  EXPECT_FALSE(depends);
  EXPECT_EQ(t.stage_erase("e", depends), lease_refusal::none);
  EXPECT_TRUE(depends) << "it found the key in the batch being written";
  EXPECT_EQ(t.stage_erase("never", depends), lease_refusal::no_such_key);
  EXPECT_EQ(t.settle(false), (std::vector<std::string>{"e", "k"}));
  EXPECT_FALSE(t.get("e"));
  EXPECT_EQ(t.begin_batch(), (std::map<std::string, std::string>{{"k", "9"}}));
}

TEST_F(fixture, a_batch_of_unknown_outcome_is_kept_and_written_again_by_the_next) {
  bool depends = false;
  EXPECT_EQ(t.stage_set("k", "1", depends), lease_refusal::none);
  t.begin_batch();
  EXPECT_TRUE(t.settle(true).empty());  // not answered: kept, as the write may have landed
  EXPECT_EQ(t.get("k"), "1");
  EXPECT_EQ(t.stage_set("j", "2", depends), lease_refusal::none);
  EXPECT_EQ(t.begin_batch(), (std::map<std::string, std::string>{{"j", "2"}, {"k", "1"}}));
}

TEST(lease_table_tokens, a_floor_raises_the_next_tokens_and_never_lowers_them) {
  using table = troupe::registry::lease_table<int>;
  table t(table::limits{16, 1024, 16, std::chrono::seconds(60)});
  auto now = std::chrono::steady_clock::now();
  troupe::registry::lease_refusal refused;
  auto a = t.for_update("k", "h1", std::chrono::seconds(5), now, 0, now, refused);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->token, 1u);
  std::vector<table::outcome> next;
  t.abort("k", a->token, now, next);
  t.tokens_above(5ull << 32);
  auto b = t.for_update("k", "h1", std::chrono::seconds(5), now, 0, now, refused);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->token, (5ull << 32) + 1);
  t.abort("k", b->token, now, next);
  t.tokens_above(3);
  auto c = t.for_update("k", "h1", std::chrono::seconds(5), now, 0, now, refused);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->token, (5ull << 32) + 2) << "a lower floor changes nothing";
}

}  // namespace lease_table_test_file
