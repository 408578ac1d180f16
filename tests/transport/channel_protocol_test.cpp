// The page channel's plain classes: the envelope parser, the reply frames and
// the bounded outgoing queue with both overflow policies (docs/channels.md).
#include "actors/channel.hpp"
#include "transport/channel_outbox.hpp"
#include "transport/channel_protocol.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace channel_protocol_test_file {

using namespace troupe;
using nlohmann::json;

namespace {

channel_envelope ok(std::string_view text) {
  auto r = parse_envelope(text);
  if (auto* e = std::get_if<envelope_error>(&r))
    ADD_FAILURE() << "refused: " << e->text;
  return std::get<channel_envelope>(r);
}

envelope_error refused(std::string_view text) {
  auto r = parse_envelope(text);
  EXPECT_TRUE(std::holds_alternative<envelope_error>(r)) << "accepted: " << text;
  return std::holds_alternative<envelope_error>(r) ? std::get<envelope_error>(r) : envelope_error{};
}

}  // namespace

TEST(ChannelEnvelope, FullEnvelopeIsRead) {
  auto e = ok(R"({"page":"p1","id":7,"method":"PUT","path":"/api/x?a=1","data":{"k":[1,2]}})");
  EXPECT_EQ(e.page, "p1");
  EXPECT_EQ(e.id, 7);
  EXPECT_EQ(e.method, "PUT");
  EXPECT_EQ(e.path, "/api/x?a=1");
  EXPECT_EQ(json::parse(e.body), json::parse(R"({"k":[1,2]})"));
}

TEST(ChannelEnvelope, MethodDefaultsToPostAndDataToNoBody) {
  auto e = ok(R"({"id":"a","path":"/api/counter/incr"})");
  EXPECT_EQ(e.method, "POST");
  EXPECT_EQ(e.body, "");
  EXPECT_EQ(e.page, "");
  EXPECT_EQ(e.id, "a");
  auto n = ok(R"({"path":"/x","data":null})");
  EXPECT_TRUE(n.id.is_null());
  EXPECT_EQ(n.body, "null");
}

TEST(ChannelEnvelope, BadFramesAreRefusedWithTheirIdWhenReadable) {
  EXPECT_EQ(refused("not json").text, "the frame is not JSON");
  EXPECT_NE(refused("[1,2]").text.find("not a JSON object"), std::string::npos);
  auto e = refused(R"({"id":3})");
  EXPECT_EQ(e.id, 3);
  EXPECT_NE(e.text.find("\"path\""), std::string::npos);
  EXPECT_EQ(refused(R"({"id":4,"path":"relative"})").id, 4);
  EXPECT_NE(refused(R"({"id":5,"path":"/x","method":"BREW"})").text.find("method"), std::string::npos);
  EXPECT_NE(refused(R"({"id":6,"path":"/x","page":12})").text.find("page"), std::string::npos);
  EXPECT_TRUE(refused(R"({"id":{"x":1},"path":"/x"})").id.is_null());
  EXPECT_NE(refused(R"({"path":"/)" + std::string(max_envelope_path, 'a') + R"("})").text.find("longer"),
            std::string::npos);
}

TEST(ChannelFrames, ReplyCarriesJsonDataOrText) {
  EXPECT_EQ(json::parse(reply_frame(1, 200, R"({"count":2})")), json::parse(R"({"id":1,"status":200,"data":{"count":2}})"));
  EXPECT_EQ(json::parse(reply_frame("x", 200, "hello", "text/plain")),
            json::parse(R"({"id":"x","status":200,"data":"hello"})"));
  EXPECT_EQ(json::parse(reply_frame(2, 204, "")), json::parse(R"({"id":2,"status":204,"data":null})"));
  EXPECT_EQ(json::parse(error_frame(nullptr, 400, "bad")),
            json::parse(R"({"id":null,"status":400,"data":{"error":"bad"}})"));
  EXPECT_EQ(json::parse(push_frame("/notes/x", R"({"text":"hi"})")),
            json::parse(R"({"push":"/notes/x","data":{"text":"hi"}})"));
  EXPECT_EQ(json::parse(push_frame("/p\"q", "")), json::parse(R"({"push":"/p\"q","data":null})"));
}

TEST(ChannelOutbox, CloseOnOverflowRefusesAndCloses) {
  channel_outbox q({3, 1000, channel_outbox::policy::close});
  using r = channel_outbox::offer_result;
  EXPECT_EQ(q.offer("a"), r::queued);
  EXPECT_EQ(q.offer("b"), r::queued);
  EXPECT_EQ(q.offer("c"), r::queued);
  EXPECT_EQ(q.offer("d"), r::overflow);
  EXPECT_TRUE(q.overflowed());
  EXPECT_TRUE(q.closed());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.offer("e"), r::closed);
  EXPECT_FALSE(q.take());
}

TEST(ChannelOutbox, DropOldestKeepsTheNewest) {
  channel_outbox q({3, 1000, channel_outbox::policy::drop_oldest});
  std::size_t dropped = 0;
  for (auto f : {"1", "2", "3", "4", "5"})
    ASSERT_EQ(q.offer(f, &dropped), channel_outbox::offer_result::queued);
  EXPECT_EQ(dropped, 1u);  // the last offer dropped one
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(*q.take(), "3");
  EXPECT_EQ(*q.take(), "4");
  EXPECT_EQ(*q.take(), "5");
  EXPECT_FALSE(q.take());
  EXPECT_FALSE(q.overflowed());
}

TEST(ChannelOutbox, BytesAreBoundedToo) {
  channel_outbox q({100, 10, channel_outbox::policy::drop_oldest});
  std::size_t dropped = 0;
  EXPECT_EQ(q.offer("aaaa"), channel_outbox::offer_result::queued);
  EXPECT_EQ(q.offer("bbbb"), channel_outbox::offer_result::queued);
  EXPECT_EQ(q.offer("cccc", &dropped), channel_outbox::offer_result::queued);
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(q.bytes(), 8u);
  // A frame larger than the whole budget is refused and changes nothing.
  EXPECT_EQ(q.offer(std::string(11, 'x')), channel_outbox::offer_result::too_big);
  EXPECT_EQ(q.size(), 2u);
  channel_outbox c({100, 10, channel_outbox::policy::close});
  EXPECT_EQ(c.offer(std::string(11, 'x')), channel_outbox::offer_result::too_big);
  EXPECT_FALSE(c.closed());
  EXPECT_EQ(c.offer("123456"), channel_outbox::offer_result::queued);
  EXPECT_EQ(c.offer("123456"), channel_outbox::offer_result::overflow);
}

// An app WebSocket's frames keep their kind through the queue, in order: a
// binary message, then the close (its code and reason) after what came before it.
TEST(ChannelOutbox, FramesKeepTheirKindAndOrder) {
  channel_outbox q({8, 1000, channel_outbox::policy::close});
  EXPECT_EQ(q.offer(ws_frame("text")), channel_outbox::offer_result::queued);
  EXPECT_EQ(q.offer(ws_frame(std::string("\0\xff", 2), frame_kind::binary)), channel_outbox::offer_result::queued);
  EXPECT_EQ(q.offer(ws_frame("bye", frame_kind::close, 4001)), channel_outbox::offer_result::queued);
  auto a = q.take(), b = q.take(), c = q.take();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->kind, frame_kind::text);
  EXPECT_EQ(b->kind, frame_kind::binary);
  EXPECT_EQ(b->data, std::string("\0\xff", 2));
  EXPECT_EQ(c->kind, frame_kind::close);
  EXPECT_EQ(c->close_code, 4001);
  EXPECT_EQ(c->data, "bye");
  EXPECT_EQ(q.bytes(), 0u);
}

}  // namespace channel_protocol_test_file
