#include "store/parcel.hpp"

#include <gtest/gtest.h>

#include <map>

using namespace troupe::store;

namespace {
struct sample_state {
  std::int64_t count = 0;
  std::vector<std::string> notes;
  std::map<std::string, double> scores;
  MSGPACK_DEFINE_MAP(count, notes, scores);
};
}  // namespace

TEST(codec, round_trips_a_state) {
  sample_state s{42, {"a", "b"}, {{"x", 1.5}}};
  sample_state back;
  unpack(pack(s), back);
  EXPECT_EQ(back.count, 42);
  EXPECT_EQ(back.notes, s.notes);
  EXPECT_EQ(back.scores, s.scores);
}

TEST(codec, refuses_truncated_or_foreign_bytes_and_leaves_the_target_alone) {
  sample_state s{7, {"note"}, {}};
  auto b = pack(s);
  sample_state target{99, {}, {}};
  EXPECT_THROW(unpack(b.data(), b.size() - 2, target), codec_error);
  EXPECT_EQ(target.count, 99);
  auto foreign = pack(std::string("not a map"));
  EXPECT_THROW(unpack(foreign, target), codec_error);
  EXPECT_EQ(target.count, 99);
}

TEST(parcel, round_trips_with_header) {
  parcel p;
  p.generation = 3;
  p.writer_node = "n1";
  p.writer_worker = "default-w1";
  p.cause = parcel_cause::login;
  p.payload = pack(sample_state{5, {"x"}, {}});
  auto back = decode(encode(p));
  EXPECT_EQ(back.generation, 3u);
  EXPECT_EQ(back.writer_node, "n1");
  EXPECT_EQ(back.writer_worker, "default-w1");
  EXPECT_EQ(back.cause, parcel_cause::login);
  EXPECT_EQ(back.payload, p.payload);
  EXPECT_STREQ(to_string(back.cause), "login");
}

TEST(parcel, detects_corruption) {
  parcel p;
  p.payload = pack(sample_state{5, {"a fairly long note to flip a bit in"}, {}});
  auto bytes = encode(p);
  auto flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x20;  // inside the payload
  EXPECT_THROW(decode(flipped), codec_error);
  auto truncated = bytes;
  truncated.resize(bytes.size() / 2);
  EXPECT_THROW(decode(truncated), codec_error);
  auto bad_magic = pack(std::string("hello"));
  EXPECT_THROW(decode(bad_magic), codec_error);
}

// A corrupt length (found by fuzz/parcel_fuzz): msgpack allocates a
// container's elements as soon as it reads the length, so 5 bytes claiming
// 4294967295 elements asked for 64 GiB — an allocation failure (or, under
// ASan, an out-of-memory abort) instead of a refused parcel.
TEST(codec, refuses_a_length_the_bytes_cannot_hold_without_allocating_it) {
  const char array_claim[] = {'\xdd', '\xff', '\xff', '\xff', '\xff', '\x01'};
  const char map_claim[] = {'\xdf', '\xff', '\xff', '\xff', '\xff', '\x01', '\x02'};
  std::vector<std::int64_t> list;
  std::map<std::int64_t, std::int64_t> map;
  for (auto [data, size] : {std::pair{array_claim, sizeof array_claim}, std::pair{map_claim, sizeof map_claim}}) {
    try {
      unpack(data, size, list);
      unpack(data, size, map);
      ADD_FAILURE() << "decoded";
    } catch (const codec_error& e) {
      EXPECT_NE(std::string(e.what()).find("size overflow"), std::string::npos) << e.what();
    }
    try {
      decode(data, size);
      ADD_FAILURE() << "decoded";
    } catch (const codec_error& e) {
      EXPECT_NE(std::string(e.what()).find("size overflow"), std::string::npos) << e.what();
    }
  }
  // The limits refuse nothing real: the densest containers still decode.
  std::vector<bool> flags(1000, true);
  std::map<std::int64_t, std::int64_t> pairs;
  for (int i = 0; i < 100; ++i)
    pairs[i] = i;
  std::vector<bool> flags_back;
  std::map<std::int64_t, std::int64_t> pairs_back;
  unpack(pack(flags), flags_back);
  unpack(pack(pairs), pairs_back);
  EXPECT_EQ(flags_back, flags);
  EXPECT_EQ(pairs_back, pairs);
}
