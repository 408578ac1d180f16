#include "store/parcel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace parcel_test_file {

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

TEST(parcel, format_3_round_trips_owner_state_version_epoch_and_group) {
  parcel p;
  p.generation = 9;
  p.writer_node = "n2";
  p.writer_worker = "default-w2";
  p.cause = parcel_cause::checkpoint;
  p.owner = "alice";
  p.state_version = 3;
  p.owner_epoch = 1234567890123ull;
  p.group = "staff";
  p.payload = pack(sample_state{1, {}, {}});
  auto bytes = encode(p);
  auto back = decode(bytes);
  EXPECT_EQ(back.group, "staff");
  EXPECT_EQ(back.owner, "alice");
  EXPECT_EQ(back.state_version, 3u);
  EXPECT_EQ(back.owner_epoch, 1234567890123ull);
  EXPECT_EQ(back.generation, 9u);
  EXPECT_EQ(back.cause, parcel_cause::checkpoint);
  EXPECT_EQ(back.payload, p.payload);
  // The wire says format 3.
  auto handle = msgpack::unpack(bytes.data(), bytes.size());
  ASSERT_EQ(handle.get().type, msgpack::type::ARRAY);
  EXPECT_EQ(handle.get().via.array.size, 12u);
  EXPECT_EQ(handle.get().via.array.ptr[1].as<int>(), 3);
  EXPECT_EQ(peek_owner_epoch(bytes.data(), bytes.size()), 1234567890123ull);
  // The group is under the checksum.
  auto edited = bytes;
  auto at = std::search(edited.begin(), edited.end(), p.group.begin(), p.group.end());
  ASSERT_NE(at, edited.end());
  std::copy_n("stuff", 5, at);
  EXPECT_THROW(decode(edited), codec_error);
  // encode(p, owner) writes another owner without touching p.
  EXPECT_EQ(decode(encode(p, "bob")).owner, "bob");
  EXPECT_EQ(p.owner, "alice");
}

TEST(parcel, checksum_covers_the_header) {
  parcel p;
  p.owner = "alice";
  p.generation = 4;
  p.state_version = 2;
  p.payload = pack(sample_state{5, {"n"}, {}});
  const auto good = encode(p);
  ASSERT_NO_THROW(decode(good));
  // The owner edited in place (same length: the msgpack framing stays valid).
  auto edited = good;
  auto at = std::search(edited.begin(), edited.end(), p.owner.begin(), p.owner.end());
  ASSERT_NE(at, edited.end());
  std::copy_n("mallo", 5, at);
  try {
    decode(edited);
    FAIL() << "a parcel whose owner was edited verified";
  } catch (const codec_error& e) {
    EXPECT_STREQ(e.what(), "parcel checksum mismatch");
  }
  // The generation (a positive fixint right after magic and version) edited.
  auto handle = msgpack::unpack(good.data(), good.size());
  auto arr = handle.get().via.array;
  ASSERT_EQ(arr.ptr[2].as<int>(), 4);
  parcel q = p;
  q.generation = 5;
  auto other = encode(q);
  ASSERT_EQ(other.size(), good.size());
  // Splice the header of q onto the checksum and payload of p: must fail.
  std::size_t differ = 0;
  while (differ < good.size() && good[differ] == other[differ])
    ++differ;
  auto spliced = good;
  spliced[differ] = other[differ];
  EXPECT_THROW(decode(spliced), codec_error);
}

namespace {
// Format 1 as version 1 of troupe wrote it.
struct wire_v1 {
  std::uint32_t magic = parcel::magic;
  std::uint16_t version = 1;
  std::uint64_t generation = 0;
  std::string writer_node;
  std::string writer_worker;
  std::uint8_t cause = 0;
  std::uint64_t sum = 0;
  msgpack::type::raw_ref payload;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, sum, payload);
};
}  // namespace

TEST(parcel, format_1_still_decodes_with_unknown_owner) {
  auto payload = pack(sample_state{11, {"old"}, {}});
  wire_v1 w;
  w.generation = 6;
  w.writer_node = "n1";
  w.writer_worker = "default-w1";
  w.cause = static_cast<std::uint8_t>(parcel_cause::quit);
  w.sum = checksum(payload.data(), payload.size());
  w.payload = msgpack::type::raw_ref(payload.data(), static_cast<std::uint32_t>(payload.size()));
  auto bytes = pack(w);
  auto back = decode(bytes);
  EXPECT_EQ(back.generation, 6u);
  EXPECT_EQ(back.writer_node, "n1");
  EXPECT_EQ(back.cause, parcel_cause::quit);
  EXPECT_EQ(back.owner, "");
  EXPECT_EQ(back.state_version, 0u);
  EXPECT_EQ(back.owner_epoch, 0u);
  EXPECT_EQ(back.payload, payload);
  // Format 1's checksum still guards its payload.
  bytes[bytes.size() - 2] ^= 0x01;
  EXPECT_THROW(decode(bytes), codec_error);
}

TEST(parcel, refuses_unknown_format_versions_and_non_arrays) {
  wire_v1 w;
  w.version = 4;
  auto payload = pack(1);
  w.payload = msgpack::type::raw_ref(payload.data(), static_cast<std::uint32_t>(payload.size()));
  try {
    decode(pack(w));
    FAIL() << "format 4 decoded";
  } catch (const codec_error& e) {
    EXPECT_STREQ(e.what(), "unknown parcel format version 4");
  }
  EXPECT_THROW(decode(pack(std::vector<int>{})), codec_error);
  EXPECT_THROW(decode(pack(std::vector<std::uint32_t>{parcel::magic})), codec_error);
  EXPECT_THROW(decode(pack(42)), codec_error);
  EXPECT_THROW(decode(std::vector<char>{}), codec_error);
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

TEST(parcel, peek_owner_epoch_reads_the_header_of_any_prefix_that_holds_it) {
  parcel p;
  p.generation = 3;
  p.writer_node = std::string(300, 'n');  // a str16 in the header
  p.writer_worker = "default-w1";
  p.owner = "alice";
  p.state_version = 2;
  p.payload = pack(sample_state{5, {std::string(5000, 'x')}, {}});
  for (std::uint64_t epoch : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{200}, std::uint64_t{70000},
                              (std::uint64_t{9} << 32) | 77, ~std::uint64_t{0}}) {
    p.owner_epoch = epoch;
    auto bytes = encode(p);
    bool truncated = true;
    auto got = peek_owner_epoch(bytes.data(), bytes.size(), &truncated);
    ASSERT_TRUE(got) << epoch;
    EXPECT_EQ(*got, epoch);
    EXPECT_FALSE(truncated);
    // The header alone is enough: 400 bytes of a 5 KB parcel.
    EXPECT_EQ(peek_owner_epoch(bytes.data(), 400), epoch);
    // Cut inside the header: not known yet, and said so.
    auto cut = peek_owner_epoch(bytes.data(), 20, &truncated);
    EXPECT_FALSE(cut);
    EXPECT_TRUE(truncated);
  }
}

TEST(parcel, peek_owner_epoch_is_zero_for_format_1_and_nothing_for_foreign_bytes) {
  auto payload = pack(1);
  wire_v1 w;
  w.payload = msgpack::type::raw_ref(payload.data(), static_cast<std::uint32_t>(payload.size()));
  auto v1 = pack(w);
  EXPECT_EQ(peek_owner_epoch(v1.data(), v1.size()), 0u);
  bool truncated = true;
  auto foreign = pack(std::vector<int>{1, 2, 3});
  EXPECT_FALSE(peek_owner_epoch(foreign.data(), foreign.size(), &truncated));
  EXPECT_FALSE(truncated);
  w.version = 3;
  auto v3 = pack(w);
  EXPECT_FALSE(peek_owner_epoch(v3.data(), v3.size()));
  EXPECT_FALSE(peek_owner_epoch(nullptr, 0, &truncated));
  EXPECT_TRUE(truncated);
}

namespace {
// Format 2 as troupe wrote it before parcels carried their group.
struct wire_header_v2 {
  std::uint32_t magic = parcel::magic;
  std::uint16_t version = 2;
  std::uint64_t generation = 0;
  std::string writer_node;
  std::string writer_worker;
  std::uint8_t cause = 0;
  std::string owner;
  std::uint32_t state_version = 0;
  std::uint64_t owner_epoch = 0;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, owner, state_version, owner_epoch);
};
}  // namespace

TEST(parcel, format_2_still_decodes_with_unknown_group) {
  auto payload = pack(sample_state{12, {"two"}, {}});
  wire_header_v2 h;
  h.generation = 6;
  h.writer_node = "n1";
  h.writer_worker = "default-w1";
  h.owner = "carol";
  h.state_version = 1;
  h.owner_epoch = 77;
  auto head = pack(h);
  auto sum = checksum(payload.data(), payload.size(), checksum(head.data(), head.size()));
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(11);
  pk.pack(h.magic);
  pk.pack(h.version);
  pk.pack(h.generation);
  pk.pack(h.writer_node);
  pk.pack(h.writer_worker);
  pk.pack(h.cause);
  pk.pack(h.owner);
  pk.pack(h.state_version);
  pk.pack(h.owner_epoch);
  pk.pack(sum);
  pk.pack(msgpack::type::raw_ref(payload.data(), static_cast<std::uint32_t>(payload.size())));
  bytes wire(buf.data(), buf.data() + buf.size());
  auto back = decode(wire);
  EXPECT_EQ(back.owner, "carol");
  EXPECT_EQ(back.owner_epoch, 77u);
  EXPECT_EQ(back.group, "") << "unknown: the default group";
  EXPECT_EQ(back.payload, payload);
  EXPECT_EQ(peek_owner_epoch(wire.data(), wire.size()), 77u);
  wire[wire.size() - 2] ^= 0x01;
  EXPECT_THROW(decode(wire), codec_error);
}

}  // namespace parcel_test_file
