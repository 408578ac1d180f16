// The gate's handshake and its worker tokens as plain code (gate/handshake.hpp,
// gate/token_table.hpp): fixed sizes, kinds kept apart, one use per token.
#include "gate/handshake.hpp"
#include "gate/token_table.hpp"

#include <gtest/gtest.h>

namespace handshake_test_file {

using namespace troupe::gate;

namespace {

TEST(GateHandshake, AChallengeAndItsAnswerHaveFixedSizesAndParseBack) {
  auto n = make_nonce();
  auto challenge = encode_challenge(kind::worker, n);
  EXPECT_EQ(challenge.size(), challenge_size);
  auto parsed = parse_challenge(challenge, kind::worker);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, n);
  auto m = sign("key", kind::worker, n);
  auto answer = encode_answer(m);
  EXPECT_EQ(answer.size(), answer_size);
  auto back = parse_answer(answer);
  ASSERT_TRUE(back);
  EXPECT_TRUE(same(*back, m));
}

TEST(GateHandshake, WhatIsNotAGateOfTheKindAskedIsRefused) {
  auto n = make_nonce();
  EXPECT_FALSE(parse_challenge(encode_challenge(kind::cluster, n), kind::worker)) << "another kind of gate";
  EXPECT_FALSE(parse_challenge(std::string(challenge_size, '\0'), kind::worker));
  EXPECT_FALSE(parse_challenge(encode_challenge(kind::worker, n).substr(1), kind::worker)) << "short";
  EXPECT_FALSE(parse_answer(std::string(answer_size, '\xff')));
  EXPECT_FALSE(parse_answer("TRPJOIN1")) << "short";
  auto fake_header = std::string("\0\0\0\0\xff\xff\xff\xff", 8) + std::string(answer_size - 8, '\0');
  EXPECT_FALSE(parse_answer(fake_header)) << "a CAF header announcing 4 GB";
}

TEST(GateHandshake, AnAnswerBindsTheKeyTheKindAndTheNonce) {
  auto n = make_nonce(), other = make_nonce();
  ASSERT_NE(n, other);
  auto m = sign("key", kind::cluster, n);
  EXPECT_TRUE(same(m, sign("key", kind::cluster, n)));
  EXPECT_FALSE(same(m, sign("kez", kind::cluster, n))) << "another key";
  EXPECT_FALSE(same(m, sign("key", kind::worker, n))) << "a worker token opens no cluster port";
  EXPECT_FALSE(same(m, sign("key", kind::cluster, other))) << "a recorded answer is worthless for a fresh nonce";
}

TEST(GateHandshake, TheClusterKeyIsDerivedNotTheSecretItself) {
  auto k = cluster_key("the cookie secret of every member");
  EXPECT_EQ(k.size(), 32u);
  EXPECT_EQ(k, cluster_key("the cookie secret of every member"));
  EXPECT_NE(k, cluster_key("another secret"));
  EXPECT_EQ(k.find("cookie"), std::string::npos);
}

TEST(GateTokens, ATokenLetsItsChildThroughOnceAndNobodyElse) {
  token_table tokens;
  auto t1 = token_table::make_token(), t2 = token_table::make_token();
  ASSERT_NE(t1, t2);
  EXPECT_EQ(t1.size(), 32u);
  tokens.expect(t1, published{nullptr, {"first"}});
  tokens.expect(t2, published{nullptr, {"second"}});
  auto n = make_nonce();
  EXPECT_FALSE(tokens.take(n, sign("guessed", kind::worker, n)));
  EXPECT_FALSE(tokens.take(n, sign(t1, kind::cluster, n))) << "signed for another kind of gate";
  auto second = tokens.take(n, sign(t2, kind::worker, n));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->interface, std::set<std::string>{"second"});
  EXPECT_FALSE(tokens.take(n, sign(t2, kind::worker, n))) << "replayed: one use";
  auto n2 = make_nonce();
  EXPECT_FALSE(tokens.take(n2, sign(t2, kind::worker, n2))) << "used, whatever the nonce";
  EXPECT_EQ(tokens.size(), 1u);
  tokens.drop(t1);
  EXPECT_EQ(tokens.size(), 0u);
  EXPECT_FALSE(tokens.take(n, sign(t1, kind::worker, n))) << "dropped: its child will not come";
}

}  // namespace

}  // namespace handshake_test_file
