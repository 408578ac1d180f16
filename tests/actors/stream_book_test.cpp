// A user's streams and later() timers (actors/stream_book.hpp), without an actor system.
#include "actors/stream_book.hpp"

#include <gtest/gtest.h>

namespace stream_book_test_file {

using namespace std::chrono_literals;
using troupe::stream_book;
using troupe::stream_format;

namespace {

TEST(stream_book, opens_streams_up_to_the_limit) {
  stream_book b;
  auto now = stream_book::clock::now();
  auto a = b.open(stream_format::sse, {}, now, now - 30s, 2);
  auto c = b.open(stream_format::ndjson, {}, now, now - 30s, 2);
  ASSERT_TRUE(a && c);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(b.find(*c)->format, stream_format::ndjson);
  EXPECT_FALSE(b.open(stream_format::sse, {}, now, now - 30s, 2)) << "the limit holds";
  b.erase(*a);
  EXPECT_TRUE(b.open(stream_format::sse, {}, now, now - 30s, 2)) << "a place came free";
  EXPECT_EQ(b.streams(), 2u);
}

TEST(stream_book, a_stream_the_front_never_opened_gives_its_place_back_after_a_while) {
  stream_book b;
  auto t0 = stream_book::clock::now();
  auto old = b.open(stream_format::sse, {}, t0, t0 - 30s, 1);
  ASSERT_TRUE(old);
  EXPECT_FALSE(b.open(stream_format::sse, {}, t0 + 1s, t0 - 29s, 1)) << "not stale yet";
  auto fresh = b.open(stream_format::sse, {}, t0 + 31s, t0 + 1s, 1);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(b.find(*old), nullptr) << "dropped as stale";
  EXPECT_NE(b.find(*fresh), nullptr);
}

TEST(stream_book, ids_are_never_reused) {
  stream_book b;
  auto now = stream_book::clock::now();
  auto a = b.open(stream_format::sse, {}, now, now, 4);
  b.erase(*a);
  auto c = b.open(stream_format::sse, {}, now, now, 4);
  EXPECT_GT(*c, *a) << "a late event for the closed stream must not reach the new one";
  EXPECT_FALSE(b.find_by_sink(caf::actor_addr{})) << "no stream has a sink before the front opens it";
}

TEST(stream_book, timers_are_taken_once_and_bounded) {
  stream_book b;
  int runs = 0;
  auto t1 = b.add_timer([&] { ++runs; }, 2);
  auto t2 = b.add_timer([&] { runs += 10; }, 2);
  ASSERT_TRUE(t1 && t2);
  EXPECT_FALSE(b.add_timer([] {}, 2)) << "too many pending";
  auto fn = b.take_timer(*t2);
  ASSERT_TRUE(fn);
  (*fn)();
  EXPECT_EQ(runs, 10);
  EXPECT_FALSE(b.take_timer(*t2)) << "taken once";
  EXPECT_FALSE(b.empty());
  b.take_timer(*t1);
  EXPECT_TRUE(b.empty());
}

}  // namespace

}  // namespace stream_book_test_file
