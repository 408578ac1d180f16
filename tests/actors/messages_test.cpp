// Every message type that crosses actors round-trips through CAF's binary
// serializer, alone and inside a caf::message (which needs its registration):
// the same messages can later cross nodes.
#include "actors/census.hpp"
#include "actors/channel.hpp"
#include "actors/commander.hpp"
#include "actors/errors.hpp"
#include "actors/deposit.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

namespace messages_test_file {

using namespace troupe;

namespace {

class messages : public ::testing::Test {
protected:
  messages() {
    register_types(cfg);
    cfg.set("scheduler.max-threads", 1);
    sys.emplace(cfg);
  }

  template <class T>
  T round_trip(T value) {
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    EXPECT_FALSE(sink(value));
    T back;
    caf::binary_deserializer source{*sys, buf};
    EXPECT_FALSE(source(back));
    return back;
  }

  // Serializes `value` inside a message: fails for unregistered types.
  template <class T>
  T through_message(T value) {
    auto msg = caf::make_message(std::move(value));
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    EXPECT_FALSE(sink(msg));
    caf::message back;
    caf::binary_deserializer source{*sys, buf};
    EXPECT_FALSE(source(back));
    EXPECT_TRUE(back.match_element<T>(0)) << to_string(back);
    return back.get_as<T>(0);
  }

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

http_request sample_request() {
  return http_request{"POST", "/api/notes", "a=1&b=2", R"({"text":"hi"})", "cid-123", "p1",
                      {{"Content-Type", "application/json"}, {"X-Troupe-Page", "p1"}}, 0, {}, "203.0.113.9", {}, 0, {}};
}

void expect_same(const http_request& a, const http_request& b) {
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.query, b.query);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.cid, b.cid);
  EXPECT_EQ(a.page, b.page);
  EXPECT_EQ(a.client, b.client);
  ASSERT_EQ(a.headers.size(), b.headers.size());
  for (std::size_t i = 0; i < a.headers.size(); ++i) {
    EXPECT_EQ(a.headers[i].name, b.headers[i].name);
    EXPECT_EQ(a.headers[i].value, b.headers[i].value);
  }
}

}  // namespace

TEST_F(messages, http_request_round_trips) {
  expect_same(round_trip(sample_request()), sample_request());
  expect_same(through_message(sample_request()), sample_request());
}

// A channel call carries its socket (its front's hub and number, actors/channel.hpp); a push names socket and page.
TEST_F(messages, channel_call_and_push_round_trip) {
  auto hub = sys->spawn([]() -> channel_handle::behavior_type {
    return {[](bind_atom, std::uint64_t, std::string&, std::string&, channel_owner_handle&) {},
            [](unbind_atom, std::uint64_t, std::string&) {}, [](push_atom, channel_push&) { return false; }};
  });
  auto req = sample_request();
  req.channel = channel_ref{hub, 42};
  auto back = through_message(req);
  expect_same(back, req);
  EXPECT_EQ(back.channel, (channel_ref{hub, 42}));
  EXPECT_NE(back.channel, (channel_ref{hub, 43})) << "another socket of the same hub";
  EXPECT_FALSE(round_trip(sample_request()).channel);  // an HTTP request carries none
  auto p = through_message(channel_push{42, "cid-1", "tab", R"({"push":"/x","data":1})"});
  EXPECT_EQ(p.socket, 42u);
  EXPECT_EQ(p.cid, "cid-1");
  EXPECT_EQ(p.page, "tab");
  EXPECT_EQ(p.frame, R"({"push":"/x","data":1})");
  caf::anon_send_exit(hub, caf::exit_reason::user_shutdown);
}

TEST_F(messages, http_response_round_trips) {
  http_response r;
  r.status = 503;
  r.body = R"({"error":"x"})";
  r.content_type = "application/json";
  r.route = route_note::changed;
  r.retry_after = 7;
  r.headers = {{"Cache-Control", "no-store"}, {"Set-Cookie", "theme=dark; Path=/"}};  // a forwarded answer keeps them
  for (auto back : {round_trip(r), through_message(r)}) {
    ASSERT_EQ(back.headers.size(), 2u);
    EXPECT_EQ(back.headers[1].value, "theme=dark; Path=/");
    EXPECT_EQ(back.status, 503);
    EXPECT_EQ(back.body, r.body);
    EXPECT_EQ(back.content_type, r.content_type);
    EXPECT_EQ(back.route, route_note::changed);
    EXPECT_EQ(back.retry_after, 7u);
  }
}

TEST_F(messages, placement_round_trips_with_its_actor_handle) {
  auto target = sys->spawn([]() -> caf::behavior { return {[](int x) { return x; }}; });
  placement p{"alice", "default-w1", "n1", caf::actor_cast<user_handle>(target)};  // a stand-in for a user
  for (auto back : {round_trip(p), through_message(p)}) {
    EXPECT_EQ(back.user, "alice");
    EXPECT_EQ(back.worker, "default-w1");
    EXPECT_EQ(back.node, "n1");
    EXPECT_EQ(back.actor.address(), target.address());
  }
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
}

TEST_F(messages, attach_and_login_orders_round_trip) {
  attach_order a{"bob", "cid-1", {'\x01', '\x02', '\xff'}, true, 0, {}};
  for (auto back : {round_trip(a), through_message(a)}) {
    EXPECT_EQ(back.user, "bob");
    EXPECT_EQ(back.cid, "cid-1");
    EXPECT_EQ(back.parcel, a.parcel);
  }
  login_request l{"cid-2", "guest_cid-2", "carol", {'x', 'y'}};
  for (auto back : {round_trip(l), through_message(l)}) {
    EXPECT_EQ(back.cid, "cid-2");
    EXPECT_EQ(back.from_user, "guest_cid-2");
    EXPECT_EQ(back.to_user, "carol");
    EXPECT_EQ(back.parcel, l.parcel);
  }
}

TEST_F(messages, worker_lists_round_trip) {
  auto w = caf::actor_cast<worker_handle>(sys->spawn([]() -> caf::behavior { return {[](int) {}}; }));
  // A typed handle of the right interface is only needed as a value here.
  std::vector<worker_handle> workers{w, w};
  auto back = through_message(workers);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], w);
  caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}

TEST_F(messages, troupe_errors_round_trip_and_render) {
  auto err = make_error(errc::busy, "queue full");
  auto back = round_trip(err);
  EXPECT_TRUE(is(back, errc::busy));
  EXPECT_FALSE(is(back, errc::not_here));
  EXPECT_NE(sys->render(back).find("busy"), std::string::npos) << sys->render(back);
}

TEST_F(messages, global_store_operations_round_trip) {
  detail::global_op op;
  op.what = detail::global_op::kind::commit;
  op.key = "hits:home";
  op.has_value = true;
  op.value = "42";
  op.ttl_ms = 5000;
  op.wait_ms = 100;
  op.token = 7;
  for (auto back : {round_trip(op), through_message(op)}) {
    EXPECT_EQ(back.what, detail::global_op::kind::commit);
    EXPECT_EQ(back.key, "hits:home");
    EXPECT_TRUE(back.has_value);
    EXPECT_EQ(back.value, "42");
    EXPECT_EQ(back.ttl_ms, 5000);
    EXPECT_EQ(back.wait_ms, 100);
    EXPECT_EQ(back.token, 7u);
  }
  detail::global_reply r{"lease_expired", true, "41", 9};
  for (auto back : {round_trip(r), through_message(r)}) {
    EXPECT_EQ(back.refusal, "lease_expired");
    EXPECT_EQ(back.current(), std::optional<std::string>("41"));
    EXPECT_EQ(back.token, 9u);
  }
}

TEST_F(messages, parcels_round_trip) {
  store::parcel p;
  p.generation = 12;
  p.writer_node = "n";
  p.writer_worker = "default-w1";
  p.cause = store::parcel_cause::quit;
  p.owner = "alice";
  p.state_version = 3;
  p.owner_epoch = 77;
  p.payload = {'a', '\0', 'b'};
  for (auto back : {round_trip(p), through_message(p)}) {
    EXPECT_EQ(back.generation, 12u);
    EXPECT_EQ(back.writer_worker, "default-w1");
    EXPECT_EQ(back.cause, store::parcel_cause::quit);
    EXPECT_EQ(back.owner, "alice");
    EXPECT_EQ(back.state_version, 3u);
    EXPECT_EQ(back.owner_epoch, 77u);
    EXPECT_EQ(back.payload, p.payload);
  }
  auto many = through_message(std::vector<store::parcel>{p, p});
  EXPECT_EQ(many.size(), 2u);
}

TEST_F(messages, census_messages_round_trip) {
  census_note n{static_cast<std::uint8_t>(actor_kind::user), "alice", "default-w1", "", 2, 3, 4, 5};
  for (auto back : {round_trip(n), through_message(n)}) {
    EXPECT_EQ(back.kind, n.kind);
    EXPECT_EQ(back.name, "alice");
    EXPECT_EQ(back.parent, "default-w1");
    EXPECT_EQ(back.state, 2);
    EXPECT_EQ(back.connections, 3u);
    EXPECT_EQ(back.pages, 4u);
    EXPECT_EQ(back.restarts, 5u);
  }
  actor_probe p{7, 8, 9, 10, 11, 12, 13, 14, R"({"store":{"count":1}})"};
  for (auto back : {round_trip(p), through_message(p)}) {
    EXPECT_EQ(back.query, 7u);
    EXPECT_EQ(back.mailbox, 8u);
    EXPECT_EQ(back.service_ns, 10u);
    EXPECT_EQ(back.last_rpc_ms, 14);
    EXPECT_EQ(back.detail, p.detail);
  }
  census_query q;
  q.kind = "worker";
  q.prefix = "u";
  q.state = "frozen";
  q.offset = 40;
  q.limit = 20;
  q.after = "u9";
  q.probe = false;
  q.console = true;
  q.open = "user:u1";
  q.node = "n2";
  for (auto back : {round_trip(q), through_message(q)}) {
    EXPECT_EQ(back.kind, "worker");
    EXPECT_EQ(back.offset, 40u);
    EXPECT_EQ(back.limit, 20u);
    EXPECT_EQ(back.after, "u9");
    EXPECT_FALSE(back.probe);
    EXPECT_TRUE(back.console);
    EXPECT_EQ(back.open, "user:u1");
    EXPECT_EQ(back.node, "n2");  // crosses to another member's census
  }
  orchestration_entry e{"ops", "127.0.0.1", "drain", "worker:w1", "ok", R"({"frozen":3})", ""};
  for (auto back : {round_trip(e), through_message(e)}) {
    EXPECT_EQ(back.who, "ops");
    EXPECT_EQ(back.on, "worker:w1");
    EXPECT_EQ(back.numbers, e.numbers);
  }
}

// A refusal keeps its text and Retry-After across a node boundary (the front
// of one member answers what the commander or a worker on another decided).
TEST_F(messages, ARefusalKeepsItsTextAndRetryAfterThroughTheSerializer) {
  auto err = through_message(make_refusal(errc::group_degraded, "group staff is degraded", 17));
  EXPECT_TRUE(is(err, errc::group_degraded));
  auto r = refusal_of(err);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->text, "group staff is degraded");
  EXPECT_EQ(r->retry_after, 17u);
  EXPECT_FALSE(refusal_of(make_error(errc::unavailable, "plain")));
  EXPECT_FALSE(refusal_of(caf::make_error(caf::sec::request_timeout)));
  EXPECT_STREQ(to_string(refusal_reason::quarantined), "quarantined");
}

}  // namespace messages_test_file
