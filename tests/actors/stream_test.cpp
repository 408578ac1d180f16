// The plain classes of streaming responses: SSE and NDJSON framing, the writer's credit window.
#include "actors/stream.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace stream_test_file {

using namespace troupe;
using namespace troupe::streaming;

TEST(stream_framing, sse_event_has_its_fields_and_one_data_line_per_line) {
  EXPECT_EQ(sse_event("hello"), "data: hello\n\n");
  EXPECT_EQ(sse_event("{\"a\":1}", "tick", "7"), "event: tick\nid: 7\ndata: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("one\ntwo\r\nthree\rfour"), "data: one\ndata: two\ndata: three\ndata: four\n\n");
  EXPECT_EQ(sse_event(""), "data: \n\n");
  EXPECT_EQ(sse_event("end\n"), "data: end\ndata: \n\n");  // a trailing line break is kept (an empty line)
}

TEST(stream_framing, sse_fields_cannot_be_forged_by_line_breaks) {
  auto e = sse_event("x", "tick\ndata: forged", "1\r\nevent: other");
  EXPECT_EQ(e, "event: tick data: forged\nid: 1  event: other\ndata: x\n\n");
  EXPECT_EQ(sse_comment("keep\nalive"), ": keep alive\n\n");
}

TEST(stream_framing, ndjson_line_is_one_line_of_json) {
  nlohmann::json v{{"text", "two\nlines"}, {"n", 3}};
  auto line = ndjson_line(v);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // the value's own line break is escaped
  EXPECT_EQ(nlohmann::json::parse(line), v);
  EXPECT_EQ(ndjson_line(std::string("bad \xff utf8")).back(), '\n');  // replaced, never thrown
}

TEST(stream_credit, takes_while_credit_lasts_then_turns_slow_once) {
  credit_window w(100);
  EXPECT_TRUE(w.take(60));
  EXPECT_EQ(w.available(), 40u);
  EXPECT_FALSE(w.take(50));  // more than is left: nothing taken
  EXPECT_EQ(w.available(), 40u);
  EXPECT_TRUE(w.slow());
  EXPECT_TRUE(w.became_slow());
  EXPECT_FALSE(w.became_slow());  // one notice per spell
  EXPECT_FALSE(w.take(10));       // while slow, everything is refused (order is kept)
  EXPECT_FALSE(w.became_slow());
}

TEST(stream_credit, a_grant_covering_the_refused_write_ends_the_slow_spell) {
  credit_window w(100);
  ASSERT_TRUE(w.take(100));
  ASSERT_FALSE(w.take(30));
  EXPECT_FALSE(w.grant(10));  // 10 < 30: still slow
  EXPECT_TRUE(w.slow());
  EXPECT_TRUE(w.grant(20));   // 30: ready
  EXPECT_FALSE(w.slow());
  EXPECT_TRUE(w.take(30));
  EXPECT_FALSE(w.grant(5));   // not slow: a grant is just credit
  EXPECT_EQ(w.available(), 5u);
  ASSERT_FALSE(w.take(6));
  EXPECT_TRUE(w.became_slow());  // a new spell is told again
}

TEST(stream_messages, content_types) {
  EXPECT_STREQ(content_type_of(stream_format::sse), "text/event-stream");
  EXPECT_STREQ(content_type_of(stream_format::ndjson), "application/x-ndjson");
}

}  // namespace stream_test_file
