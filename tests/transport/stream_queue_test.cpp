// The stream sink's queue: bounded in bytes (in flight included), one write in
// flight, credit granted back in batches, free bytes (keep-alives) never granted.
#include "transport/stream_sink.hpp"

#include <gtest/gtest.h>

namespace stream_queue_test_file {

using troupe::stream_queue;

TEST(stream_queue, is_bounded_in_bytes_counting_the_write_in_flight) {
  stream_queue q(100, 10);
  EXPECT_TRUE(q.push(std::string(60, 'a')));
  EXPECT_TRUE(q.push(std::string(40, 'b')));
  EXPECT_FALSE(q.push("c"));  // 101 > 100: refused, nothing queued
  EXPECT_EQ(q.queued_bytes(), 100u);
  auto batch = q.next_batch(1000);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->size(), 100u);
  EXPECT_EQ(q.queued_bytes(), 100u);  // still held: it is on the wire
  EXPECT_FALSE(q.push("c"));
  EXPECT_EQ(q.written(), 100u);
  EXPECT_EQ(q.queued_bytes(), 0u);
  EXPECT_TRUE(q.push("c"));
}

TEST(stream_queue, keeps_one_write_in_flight_and_coalesces_up_to_the_batch_size) {
  stream_queue q(1000, 1);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(q.push(std::string(30, static_cast<char>('0' + i))));
  auto first = q.next_batch(70);  // two chunks fit in 70
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, std::string(30, '0') + std::string(30, '1'));
  EXPECT_TRUE(q.in_flight());
  EXPECT_FALSE(q.next_batch(70));  // one write in flight
  EXPECT_EQ(q.written(), 60u);
  auto second = q.next_batch(10);  // smaller than a chunk: still one whole chunk
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, std::string(30, '2'));
  EXPECT_EQ(q.written(), 30u);
  auto rest = q.next_batch(1000);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->size(), 60u);
  EXPECT_EQ(q.written(), 60u);
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.next_batch(1000));
}

TEST(stream_queue, grants_credit_in_batches_and_everything_owed_once_drained) {
  stream_queue q(1000, 50);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(q.push(std::string(20, 'x')));
  ASSERT_TRUE(q.next_batch(20));
  EXPECT_EQ(q.written(), 0u);  // 20 < 50 and more is queued: collected
  ASSERT_TRUE(q.next_batch(20));
  EXPECT_EQ(q.written(), 0u);  // 40
  ASSERT_TRUE(q.next_batch(20));
  EXPECT_EQ(q.written(), 60u);  // 60 ≥ 50
  ASSERT_TRUE(q.next_batch(20));
  EXPECT_EQ(q.written(), 20u);  // drained: all that is owed
}

TEST(stream_queue, free_bytes_count_against_the_bound_but_are_never_granted) {
  stream_queue q(100, 1);
  ASSERT_TRUE(q.push_free(std::string(90, ':')));
  EXPECT_FALSE(q.push(std::string(20, 'x')));
  ASSERT_TRUE(q.push(std::string(10, 'x')));
  auto b = q.next_batch(1000);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->size(), 100u);
  EXPECT_EQ(q.written(), 10u);  // only the paid bytes
}

}  // namespace stream_queue_test_file
