// Deferred answers on a real node (issue 25, docs/http.md "Deferred answers"):
// the notes sample's POST /api/wait-note {"timeout_ms": N} defers its answer
// until another user's /api/tell brings a note, or 504 after N ms. The user
// serves his other requests meanwhile; a wait longer than the request timeout
// still gets its answer (the front waits as long as the promise); a freeze
// answers the waiting request 503; a worker process (the forwarder's path)
// defers the same way.
#include "../support/test_support.hpp"

#include <future>
#include <string>
#include <vector>

namespace deferred_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class Deferred : public admin_node_test {
protected:
  // alice's /api/wait-note on a connection of her own (her cookie), answered whenever.
  std::future<response> wait_note(http_client& alice, std::int64_t timeout_ms) {
    auto cookie = alice.cookie();
    return std::async(std::launch::async, [this, cookie, timeout_ms] {
      http_client c(port());
      if (cookie)
        c.set_cookie(*cookie);
      return c.post_json("/api/wait-note", {{"timeout_ms", timeout_ms}}, {},
                         std::chrono::milliseconds(timeout_ms) + 30s);
    });
  }
  double deferred(const std::string& outcome) {
    return m("troupe_deferred_answers_total", "outcome=\"" + outcome + "\"");
  }
  double pending() { return m("troupe_deferred_pending"); }
  void defer_in_a_worker_process(bool pipes);
  // Her deferred answers as her census entry shows them (also of a user in a worker process).
  int parked(const std::string& user) {
    http_client admin(port());
    auto r = admin.get("/_troupe/actors/user:" + user, auth);
    if (r.status != 200)
      return -1;
    return r.json().value("deferred", -1);
  }
};

}  // namespace

// Completed by a message: bob's note answers alice's waiting request; she
// serves her other requests while she waits.
TEST_F(Deferred, ANoteFromAnotherUserAnswersTheWaitingRequest) {
  start_with();
  http_client alice(port()), bob(port());
  login(alice, "alice");
  login(bob, "bob");
  auto waiting = wait_note(alice, 20000);
  ASSERT_TRUE(eventually([&] { return pending() == 1; })) << "the wait never parked";
  // Her queue is not blocked: another request of hers is answered now.
  ASSERT_STATUS(alice.post("/api/counter/incr"), 200);
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout);
  auto told = bob.post_json("/api/tell", {{"user", "alice"}, {"text", "ring"}});
  ASSERT_STATUS(told, 200);
  auto r = waiting.get();
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json(), (json{{"from", "bob"}, {"text", "ring"}})) << r.body;
  EXPECT_EQ(deferred("resolved"), 1);
  EXPECT_EQ(pending(), 0);
}

// Past its timeout: 504, counted; a note after that answers nobody (and
// the next wait gets it no more than it gets an old one).
TEST_F(Deferred, AWaitPastItsTimeoutIs504) {
  start_with();
  http_client alice(port()), bob(port());
  login(alice, "alice");
  login(bob, "bob");
  auto r = alice.post_json("/api/wait-note", {{"timeout_ms", 300}});
  EXPECT_STATUS(r, 504);
  EXPECT_EQ(deferred("timed_out"), 1);
  EXPECT_EQ(pending(), 0);
  ASSERT_STATUS(bob.post_json("/api/tell", {{"user", "alice"}, {"text", "too late"}}), 200);
  EXPECT_EQ(deferred("resolved"), 0);
  // Bad input: a clear 400.
  EXPECT_STATUS(alice.post_json("/api/wait-note", {{"timeout_ms", -1}}), 400);
  EXPECT_STATUS(alice.post_json("/api/wait-note", json::object()), 400);
}

// The front waits as long as the promise, not the request timeout (1 s here);
// limits.max_deferred_seconds caps what the handler asks for.
TEST_F(Deferred, AWaitLongerThanTheRequestTimeoutIsAnsweredAndTheCapHolds) {
  start_with({"--set", "limits.request_timeout_seconds=1", "--set", "limits.max_deferred_seconds=3"});
  http_client alice(port()), bob(port());
  login(alice, "alice");
  login(bob, "bob");
  auto waiting = wait_note(alice, 60000);
  ASSERT_TRUE(eventually([&] { return pending() == 1; }));
  // Past the request timeout, still waiting (a 504 from the front would be here by now).
  EXPECT_EQ(waiting.wait_for(1500ms), std::future_status::timeout);
  ASSERT_STATUS(bob.post_json("/api/tell", {{"user", "alice"}, {"text", "late but fine"}}), 200);
  auto r = waiting.get();
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("text", ""), "late but fine");
  // Asked 60 s, capped at 3 s: a 504 from her actor, not a hang.
  auto capped = wait_note(alice, 60000);
  ASSERT_EQ(capped.wait_for(20s), std::future_status::ready);
  EXPECT_STATUS(capped.get(), 504);
  EXPECT_EQ(deferred("timed_out"), 1);
}

// A freeze does not wait for a promise nobody could resolve once he is gone: 503, counted.
TEST_F(Deferred, AFreezeAnswersTheWaitingRequest503) {
  start_with();
  http_client alice(port());
  login(alice, "alice");
  auto waiting = wait_note(alice, 60000);
  ASSERT_TRUE(eventually([&] { return pending() == 1; }));
  http_client admin(port());
  ASSERT_STATUS(admin.post("/_troupe/users/alice/freeze", "", auth), 200);
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready);
  auto r = waiting.get();
  EXPECT_STATUS(r, 503);
  EXPECT_TRUE(r.has("Retry-After")) << r.describe();
  EXPECT_EQ(deferred("interrupted"), 1);
  EXPECT_EQ(pending(), 0);
  // She wakes for her next request, her state kept.
  EXPECT_STATUS(alice.get("/api/counter"), 200);
}

// A worker process: on its pipe (issue 26), the deferral comes as an
// `extend` frame and the answer later on the same pipe; with node.worker_pipes
// = false the request crosses the forwarder, which takes an interim answer
// and then the real one as a message.
void Deferred::defer_in_a_worker_process(bool pipes) {
  start_with({"--set", "group.default.isolation=process", "--set", "limits.request_timeout_seconds=1", "--set",
              std::string("node.worker_pipes=") + (pipes ? "true" : "false")});
  http_client alice(port()), bob(port());
  login(alice, "alice");
  login(bob, "bob");
  auto waiting = wait_note(alice, 30000);
  ASSERT_TRUE(eventually([&] { return parked("alice") == 1; })) << "the wait never parked";
  EXPECT_EQ(waiting.wait_for(1500ms), std::future_status::timeout);  // past the request timeout
  ASSERT_STATUS(bob.post_json("/api/tell", {{"user", "alice"}, {"text", "across"}}), 200);
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready);
  auto r = waiting.get();
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json(), (json{{"from", "bob"}, {"text", "across"}})) << r.body;
  auto timed = alice.post_json("/api/wait-note", {{"timeout_ms", 1500}});
  EXPECT_STATUS(timed, 504);
  auto piped = m("troupe_worker_pipe_requests_total", "outcome=\"answered\"");
  auto forwarded = m("troupe_forwarded_requests_total", "outcome=\"answered\"");
  EXPECT_GE(pipes ? piped : forwarded, 5) << "the path taken";
  EXPECT_EQ(pipes ? forwarded : piped, 0) << "the path not taken";
}

TEST_F(Deferred, AUserInAWorkerProcessDefersOnItsPipe) { defer_in_a_worker_process(true); }

TEST_F(Deferred, AUserInAWorkerProcessDefersThroughTheForwarder) { defer_in_a_worker_process(false); }

}  // namespace deferred_test_file
