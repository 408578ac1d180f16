// Messages between users, the plain parts (README "Messages between users"):
// a type's message table (names, decoding, dispatch), the encoding a tell()
// sends, the outcomes, their wire form through CAF, and the notes sample's
// state reading parcels written before it had an inbox.
#include "actors/app.hpp"
#include "actors/messages.hpp"
#include "actors/tell.hpp"
#include "actors/user_access.hpp"
#include "samples/notes/notes.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tell_test_file {

using namespace troupe;

namespace {

struct ping {
  static constexpr const char* message_name = "test.ping";
  std::string text;
  std::int64_t n = 0;
  MSGPACK_DEFINE_MAP(text, n);
};

struct pong {  // no message_name: registered under a name given to on()
  std::int64_t n = 0;
  MSGPACK_DEFINE(n);
};

struct box_state {
  std::vector<std::string> seen;
  MSGPACK_DEFINE(seen);
};

class box : public user_actor<box_state> {
public:
  static void messages(message_table<box>& m) {
    m.on<ping>([](box& b, const ping& p, const std::string& from) {
      b.mutate().seen.push_back(from + ":" + p.text + ":" + std::to_string(p.n));
    });
    m.on<pong>("test.pong", [](box& b, const pong& p) { b.mutate().seen.push_back("pong" + std::to_string(p.n)); });
  }
  const box_state& peek() const { return state(); }
};

class silent : public user_actor<box_state> {};

struct notes_before_inbox {  // notes_state as it was before issue 14
  std::int64_t count = 0;
  std::vector<std::string> notes;
  MSGPACK_DEFINE_MAP(count, notes);
};  // declares no message

struct quiet_host : detail::user_host {
  std::string name = "bob", none;
  const std::string& user() const override { return name; }
  const std::string& connection() const override { return none; }
  const std::string& page() const override { return none; }
  const std::string& node() const override { return none; }
  const std::string& worker() const override { return none; }
  void changed() override { ++changes; }
  caf::local_actor* actor() override { return nullptr; }
  void push(detail::push_order) override {}
  int changes = 0;
};

}  // namespace

TEST(MessageTable, ATypeDeclaresItsMessagesOnceAndTheyDispatchByName) {
  auto types = user_types<box>("box");
  types.add<silent>("silent");
  const message_router* m = types.messages("box");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->size(), 2u);
  EXPECT_EQ(m->names(), (std::vector<std::string>{"test.ping", "test.pong"}));
  ASSERT_NE(types.messages("silent"), nullptr) << "a type without messages() has an empty table";
  EXPECT_EQ(types.messages("silent")->size(), 0u);
  EXPECT_EQ(types.messages("silent")->find("test.ping"), nullptr) << "not accepted";
  EXPECT_EQ(types.messages("nope"), nullptr);

  box b;
  quiet_host host;
  detail::user_access::bind(b, &host);
  auto enc = detail::encode_message("bob", ping{"hi", 7});
  EXPECT_EQ(enc.to, "bob");
  EXPECT_EQ(enc.name, "test.ping");
  const auto* h = m->find(enc.name);
  ASSERT_NE(h, nullptr);
  (*h)(b, enc.data, "alice");
  auto pong_enc = detail::encode_message("bob", pong{3}, "test.pong");
  (*m->find("test.pong"))(b, pong_enc.data, "carol");
  EXPECT_EQ(b.peek().seen, (std::vector<std::string>{"alice:hi:7", "pong3"}));
  EXPECT_EQ(host.changes, 2) << "a handler's mutate() marks the state changed, as for a request";
}

TEST(MessageTable, BytesOfAnotherShapeAreABadMessageNotAHandlerFailure) {
  auto types = user_types<box>("box");
  box b;
  quiet_host host;
  detail::user_access::bind(b, &host);
  const auto* h = types.messages("box")->find("test.ping");
  ASSERT_NE(h, nullptr);
  store::bytes garbage{'\xc1', '\x00'};  // 0xc1: never used in msgpack
  EXPECT_THROW((*h)(b, garbage, "alice"), bad_message);
  auto wrong = store::pack(std::vector<int>{1, 2, 3});  // an array, not ping's map
  EXPECT_THROW((*h)(b, wrong, "alice"), bad_message);
  EXPECT_TRUE(b.peek().seen.empty());
  EXPECT_EQ(host.changes, 0);
}

TEST(MessageTable, NamesAreValidatedAndDeclaredOnce) {
  message_router r;
  auto noop = [](user_actor_base&, const store::bytes&, const std::string&) {};
  r.on("a.b:c-d_1", noop);
  EXPECT_THROW(r.on("a.b:c-d_1", noop), std::invalid_argument) << "declared twice";
  EXPECT_THROW(r.on("", noop), std::invalid_argument);
  EXPECT_THROW(r.on("has space", noop), std::invalid_argument);
  EXPECT_THROW(r.on(std::string(65, 'x'), noop), std::invalid_argument);
  EXPECT_THROW(r.on("ok.name", {}), std::invalid_argument) << "no handler";
  EXPECT_TRUE(message_router::valid_name(std::string(64, 'x')));
  EXPECT_EQ(r.size(), 1u);
}

TEST(MessageTable, TheEncodingIsTheTypesMsgpackUnderItsStableName) {
  auto enc = detail::encode_message("ann", notes_sample::note_message{"bob", "hello"});
  EXPECT_EQ(enc.name, "notes.note");
  notes_sample::note_message back;
  store::unpack(enc.data, back);
  EXPECT_EQ(back.from, "bob");
  EXPECT_EQ(back.text, "hello");
  EXPECT_EQ(enc.data, store::pack(notes_sample::note_message{"bob", "hello"}));
}

TEST(TellOutcome, EachResultHasANameAndAStatus) {
  using R = tell_outcome::result;
  struct row {
    R r;
    const char* name;
    std::uint16_t status;
  };
  for (auto [r, name, status] : {row{R::delivered, "delivered", 200}, row{R::unknown_user, "unknown_user", 404},
                                 row{R::not_accepted, "not_accepted", 422}, row{R::too_big, "too_big", 413},
                                 row{R::invalid, "invalid", 400}, row{R::unavailable, "unavailable", 503},
                                 row{R::handler_failed, "handler_failed", 502}}) {
    tell_outcome o{r, ""};
    EXPECT_STREQ(to_string(r), name);
    EXPECT_EQ(o.status(), status) << name;
    EXPECT_EQ(o.delivered(), r == R::delivered);
  }
  // The internal "not here" (routed again by the commander) is never shown as such.
  tell_reply moved{tell_reply::not_here, ""};
  EXPECT_EQ(moved.outcome().what, R::unavailable);
  EXPECT_FALSE(moved.outcome().text.empty());
  EXPECT_EQ(tell_reply::of(R::too_big, "x").outcome().what, R::too_big);
}

TEST(TellWire, MessagesAndRepliesCrossActorsAsRegisteredTypes) {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system sys{cfg};
  auto trip = [&](auto value) {
    using T = decltype(value);
    auto msg = caf::make_message(std::move(value));
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    EXPECT_FALSE(sink(msg));
    caf::message back;
    caf::binary_deserializer source{sys, buf};
    EXPECT_FALSE(source(back));
    EXPECT_TRUE(back.match_element<T>(0)) << to_string(back);
    return back.get_as<T>(0);
  };
  user_message m{"alice", "bob", "notes.note", store::pack(notes_sample::note_message{"alice", "hi"})};
  auto m2 = trip(m);
  EXPECT_EQ(m2.from, "alice");
  EXPECT_EQ(m2.to, "bob");
  EXPECT_EQ(m2.name, "notes.note");
  EXPECT_EQ(m2.data, m.data);
  auto r2 = trip(tell_reply::of(tell_outcome::result::not_accepted, "no"));
  EXPECT_EQ(r2.result, static_cast<std::uint8_t>(tell_outcome::result::not_accepted));
  EXPECT_EQ(r2.text, "no");
}

// notes_state gained `inbox`: a parcel written before (a map without the key) still loads.
TEST(NotesState, AParcelWithoutAnInboxStillLoads) {
  auto old = store::pack(notes_before_inbox{5, {"a", "b"}});
  notes_sample::notes_state now;
  store::unpack(old, now);
  EXPECT_EQ(now.count, 5);
  EXPECT_EQ(now.notes, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(now.inbox.empty());
  now.inbox.push_back({"bob", "hi"});
  notes_sample::notes_state again;
  store::unpack(store::pack(now), again);
  ASSERT_EQ(again.inbox.size(), 1u);
  EXPECT_EQ(again.inbox[0].from, "bob");
  EXPECT_EQ(again.inbox[0].text, "hi");
}

}  // namespace tell_test_file
