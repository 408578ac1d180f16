// The forwarder: its bookkeeping alone (forward_table, no actor system), then the
// actor between two actor systems of this process, each with CAF's middleman on
// 127.0.0.1: answers come back, and requests in flight to a node that dies (or is
// declared down, or whose target exits) are failed through the down path, never
// by waiting out their timeout (the timeouts here are far beyond the polls' deadlines).
#include "transport/forwarder.hpp"
#include "../support/eventually.hpp"

#include "actors/messages.hpp"
#include "config/recipe.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace forwarder_test_file {

using namespace troupe;
using namespace std::chrono_literals;
using troupe::test::eventually;

namespace {

// What happened to one slot: answered (with what), or released undelivered.
struct slot_record {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<http_response> answers;
  int dropped = 0;

  void answer(http_response&& r) {
    std::lock_guard<std::mutex> guard{mutex};
    answers.push_back(std::move(r));
    changed.notify_all();
  }
  void drop() {
    std::lock_guard<std::mutex> guard{mutex};
    ++dropped;
    changed.notify_all();
  }
  // Waits until `n` slots are answered or dropped (or the deadline passes).
  bool wait_settled(std::size_t n, std::chrono::milliseconds deadline = 10s) {
    std::unique_lock<std::mutex> lock{mutex};
    return changed.wait_for(lock, deadline, [&] { return answers.size() + dropped >= n; });
  }
  std::size_t answered() {
    std::lock_guard<std::mutex> guard{mutex};
    return answers.size();
  }
  int drops() {
    std::lock_guard<std::mutex> guard{mutex};
    return dropped;
  }
};

class test_slot final : public reply_slot {
public:
  test_slot(http_request req, std::shared_ptr<slot_record> rec) : req_(std::move(req)), rec_(std::move(rec)) {}
  ~test_slot() override {
    if (!delivered_)
      rec_->drop();
  }
  const http_request& request() const override { return req_; }
  void deliver(http_response&& r) override {
    delivered_ = true;
    rec_->answer(std::move(r));
  }

private:
  http_request req_;
  std::shared_ptr<slot_record> rec_;
  bool delivered_ = false;
};

http_request request_for(const std::string& path, std::int64_t deadline_ms = 0, const std::string& query = "") {
  http_request r;
  r.method = "GET";
  r.path = path;
  r.query = query;
  r.cid = "c1";
  r.deadline_ms = deadline_ms;
  return r;
}

local_reply make_slot(const std::shared_ptr<slot_record>& rec, const std::string& path = "/x",
                      std::int64_t deadline_ms = 0, const std::string& query = "") {
  return std::make_shared<test_slot>(request_for(path, deadline_ms, query), rec);
}

caf::node_id node_number(std::uint8_t n) {
  caf::node_id::default_data::host_id_type host{};
  host[0] = n;
  return caf::make_node_id(1000 + n, host);
}

// -- forward_table --------------------------------------------------------------------------

using table = forward_table;
const auto t0 = table::clock::now();

TEST(forward_table, an_answer_takes_the_slot_and_a_target_is_watched_once) {
  table t(100, 1s, 16);
  auto rec = std::make_shared<slot_record>();
  auto a = node_number(1);
  auto s1 = make_slot(rec), s2 = make_slot(rec);
  auto first = t.add({a, 7}, {}, s1, t0);
  auto second = t.add({a, 7}, {}, s2, t0);
  EXPECT_EQ(first.outcome, table::admission::accepted);
  EXPECT_TRUE(first.watch);
  EXPECT_FALSE(second.watch);  // the same target: monitored once
  EXPECT_EQ(s1, nullptr);      // taken by the table
  EXPECT_EQ(t.pending(), 2u);
  EXPECT_EQ(t.pending_to(a), 2u);
  auto taken = t.take(first.id);
  ASSERT_TRUE(taken);
  (*taken)->deliver(http_response{});
  taken.reset();
  EXPECT_FALSE(t.take(first.id));  // once only
  EXPECT_EQ(t.pending(), 1u);
  EXPECT_TRUE(t.watching({a, 7}));  // still watched while idle: the next request needs no monitor
  EXPECT_EQ(rec->answered(), 1u);
  EXPECT_EQ(rec->drops(), 0);
}

TEST(forward_table, a_node_failing_releases_every_request_to_it_and_no_other) {
  table t(100, 1s, 16);
  auto rec_a = std::make_shared<slot_record>(), rec_b = std::make_shared<slot_record>();
  auto a = node_number(1), b = node_number(2);
  for (caf::actor_id target : {5, 6, 6}) {
    auto s = make_slot(rec_a);
    t.add({a, target}, {}, s, t0);
  }
  auto sb = make_slot(rec_b);
  auto kept = t.add({b, 5}, {}, sb, t0);  // the same actor id on another node: another actor
  EXPECT_TRUE(kept.watch);
  auto f = t.fail_node(a, false, t0);
  EXPECT_EQ(f.released.size(), 3u);
  EXPECT_EQ(f.unwatched.size(), 2u);  // targets 5 and 6 of node a
  EXPECT_EQ(rec_a->drops(), 0);       // the caller counts them first,
  f.released.clear();
  EXPECT_EQ(rec_a->drops(), 3);       // then drops them: released undelivered
  EXPECT_EQ(rec_b->drops(), 0);
  EXPECT_EQ(t.pending(), 1u);
  EXPECT_EQ(t.pending_to(a), 0u);
  EXPECT_TRUE(t.watching({b, 5}));
  EXPECT_FALSE(t.watching({a, 5}));
  EXPECT_TRUE(t.take(kept.id));
}

TEST(forward_table, a_target_failing_releases_only_its_own_requests) {
  table t(100, 1s, 16);
  auto rec = std::make_shared<slot_record>(), other = std::make_shared<slot_record>();
  auto a = node_number(1);
  auto s1 = make_slot(rec), s2 = make_slot(rec), s3 = make_slot(other);
  t.add({a, 1}, {}, s1, t0);
  t.add({a, 1}, {}, s2, t0);
  auto third = t.add({a, 2}, {}, s3, t0);
  auto f = t.fail_target({a, 1});
  EXPECT_EQ(f.released.size(), 2u);
  EXPECT_EQ(f.unwatched.size(), 1u);
  f.released.clear();
  EXPECT_EQ(rec->drops(), 2);
  EXPECT_EQ(other->drops(), 0);
  EXPECT_FALSE(t.watching({a, 1}));
  EXPECT_EQ(t.watched(), 1u);
  EXPECT_TRUE(t.take(third.id));
  // A target failing again (its second down message) releases nothing.
  EXPECT_TRUE(t.fail_target({a, 1}).released.empty());
}

TEST(forward_table, past_max_pending_a_request_is_refused_and_its_slot_left_to_the_caller) {
  table t(2, 1s, 16);
  auto rec = std::make_shared<slot_record>();
  auto a = node_number(1);
  auto s1 = make_slot(rec), s2 = make_slot(rec), s3 = make_slot(rec);
  EXPECT_EQ(t.add({a, 1}, {}, s1, t0).outcome, table::admission::accepted);
  auto second = t.add({a, 2}, {}, s2, t0);
  EXPECT_EQ(t.add({a, 3}, {}, s3, t0).outcome, table::admission::full);
  ASSERT_NE(s3, nullptr);  // not taken: the caller answers it 503
  EXPECT_FALSE(t.watching({a, 3}));
  t.take(second.id);
  auto s4 = make_slot(rec);
  EXPECT_EQ(t.add({a, 3}, {}, s4, t0).outcome, table::admission::accepted);  // room again
}

TEST(forward_table, a_node_declared_down_is_refused_for_a_moment_then_tried_again) {
  table t(100, 2s, 16);
  auto rec = std::make_shared<slot_record>();
  auto a = node_number(1), b = node_number(2);
  auto s1 = make_slot(rec);
  t.add({a, 1}, {}, s1, t0);
  EXPECT_EQ(t.fail_node(a, true, t0).released.size(), 1u);
  auto s2 = make_slot(rec);
  EXPECT_EQ(t.add({a, 1}, {}, s2, t0 + 1s).outcome, table::admission::node_down);
  EXPECT_NE(s2, nullptr);
  auto s3 = make_slot(rec);
  EXPECT_EQ(t.add({b, 1}, {}, s3, t0 + 1s).outcome, table::admission::accepted);  // other nodes are served
  EXPECT_EQ(t.add({a, 1}, {}, s2, t0 + 3s).outcome, table::admission::accepted);  // a new incarnation may come
  // A proxy's death (not a declaration) refuses nothing later.
  t.fail_node(b, false, t0 + 3s);
  auto s4 = make_slot(rec);
  EXPECT_EQ(t.add({b, 1}, {}, s4, t0 + 3s).outcome, table::admission::accepted);
}

TEST(forward_table, idle_watches_past_the_bound_are_let_go_busy_ones_stay) {
  table t(100, 1s, 3);
  auto rec = std::make_shared<slot_record>();
  auto a = node_number(1);
  std::vector<std::uint64_t> ids;
  for (caf::actor_id target = 1; target <= 5; ++target) {
    auto s = make_slot(rec);
    ids.push_back(t.add({a, target}, {}, s, t0).id);
  }
  EXPECT_EQ(t.watched(), 5u);
  for (std::size_t i = 0; i < 3; ++i) {
    t.take(ids[i]);
    EXPECT_TRUE(t.sweep_idle_watches().empty());  // 3 idle: within the bound
  }
  t.take(ids[3]);
  auto let_go = t.sweep_idle_watches();  // 4 idle: all of them go at once
  EXPECT_EQ(let_go.size(), 4u);
  EXPECT_EQ(t.watched(), 1u);
  EXPECT_TRUE(t.watching({a, 5}));
  auto s = make_slot(rec);
  EXPECT_TRUE(t.add({a, 1}, {}, s, t0).watch);  // watched again on its next request
}

// -- the actor, between two actor systems ------------------------------------------------------

// A user actor's remote interface, as a test serves it: "/hold" is never
// answered (it stays in flight), anything else is echoed.
struct serving_state {
  static inline const char* name = "test.serving";
  std::vector<caf::response_promise> held;
};

caf::behavior serving_actor(caf::stateful_actor<serving_state>* self, std::shared_ptr<std::atomic<int>> held) {
  return {
    [=](http_atom, http_request& req) -> caf::result<http_response> {
      if (req.path == "/hold") {
        self->state.held.push_back(self->make_response_promise());
        held->fetch_add(1);
        return caf::delegated<http_response>();
      }
      http_response r;
      r.body = req.path + "?" + req.query;
      return r;
    },
  };
}

class forwarder_cluster_test : public ::testing::Test {
protected:
  forwarder_cluster_test() {
    for (auto* cfg : {&serving_cfg, &front_cfg}) {
      register_types(*cfg);
      cfg->load<caf::io::middleman>();
      cfg->set("scheduler.max-threads", 2);
    }
    serving.emplace(serving_cfg);
    front_sys.emplace(front_cfg);
    ctx = std::make_shared<node_context>();
    ctx->recipe().limits.request_timeout_seconds = 120;  // far beyond every poll: only the down path can settle them
  }

  ~forwarder_cluster_test() override {
    for (auto& a : served)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    if (forwarder)
      caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
    front_sys.reset();
    serving.reset();
  }

  // Publishes a serving actor on 127.0.0.1 and returns its remote handle as the front's node sees it.
  // A user on another node, as the forwarder sees him (an untyped stand-in answering http_atom).
  user_handle publish_target() {
    auto actor = serving->spawn(serving_actor, held);
    served.push_back(actor);
    auto port = serving->middleman().publish(actor, 0, "127.0.0.1", true);
    EXPECT_TRUE(port) << serving->render(port.error());
    auto remote = front_sys->middleman().remote_actor("127.0.0.1", *port);
    EXPECT_TRUE(remote) << front_sys->render(remote.error());
    return remote ? caf::actor_cast<user_handle>(*remote) : user_handle{};
  }

  void start_forwarder() {
    forwarder = spawn_forwarder(*front_sys, ctx, [this](const caf::node_id& n) {
      std::lock_guard<std::mutex> guard{hook_mutex};
      hooked.push_back(n);
    });
  }

  void forward(const user_handle& target, const std::string& path, std::int64_t deadline_ms = 0) {
    caf::anon_send(forwarder, http_atom::value, target, make_slot(rec, path, deadline_ms));
  }

  // Polls (with a deadline) until the serving side holds `n` requests.
  bool wait_held(int n) {
    return eventually([&] { return held->load() >= n; }, 10s);
  }

  caf::actor_system_config serving_cfg, front_cfg;
  std::optional<caf::actor_system> serving, front_sys;
  node_context_ptr ctx;
  forwarder_handle forwarder;
  std::vector<caf::actor> served;
  std::shared_ptr<std::atomic<int>> held = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<slot_record> rec = std::make_shared<slot_record>();
  std::mutex hook_mutex;
  std::vector<caf::node_id> hooked;
};

TEST_F(forwarder_cluster_test, answers_of_a_remote_actor_come_back_into_their_slots) {
  start_forwarder();
  auto target = publish_target();
  ASSERT_TRUE(target);
  ASSERT_NE(target.node(), front_sys->node());  // another node, for real
  constexpr int n = 20;
  for (int i = 0; i < n; ++i)
    caf::anon_send(forwarder, http_atom::value, target, make_slot(rec, "/echo", 0, std::to_string(i)));
  ASSERT_TRUE(rec->wait_settled(n));
  EXPECT_EQ(rec->answered(), static_cast<std::size_t>(n));
  EXPECT_EQ(rec->drops(), 0);
  std::set<std::string> bodies;
  {
    std::lock_guard<std::mutex> guard{rec->mutex};
    for (auto& r : rec->answers) {
      EXPECT_EQ(r.status, 200);
      bodies.insert(r.body);
    }
  }
  EXPECT_EQ(bodies.size(), static_cast<std::size_t>(n));
  EXPECT_TRUE(bodies.count("/echo?7"));
  EXPECT_EQ(ctx->metrics.forwarded.answered.load(), static_cast<std::uint64_t>(n));
  EXPECT_EQ(ctx->metrics.forwarded.pending.load(), 0);
  EXPECT_NE(ctx->metrics.prometheus_text().find("troupe_forwarded_requests_total{outcome=\"answered\"} 20"),
            std::string::npos);
}

TEST_F(forwarder_cluster_test, requests_in_flight_fail_at_once_when_the_serving_node_dies) {
  start_forwarder();
  auto target = publish_target();
  auto second = publish_target();  // another actor of the same node: it dies with it
  ASSERT_TRUE(target && second);
  for (int i = 0; i < 4; ++i)
    forward(target, "/hold");
  forward(second, "/hold");
  ASSERT_TRUE(wait_held(5));
  // The serving node's network side goes away (as with kill -9: its connections
  // close) while its actors still hold the requests: nothing will ever answer them.
  caf::anon_send_exit(serving->middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP")),
                      caf::exit_reason::kill);
  ASSERT_TRUE(rec->wait_settled(5)) << "in flight: " << ctx->metrics.forwarded.pending.load();
  EXPECT_EQ(rec->drops(), 5);  // released undelivered: the front re-resolves each once
  EXPECT_EQ(rec->answered(), 0u);
  EXPECT_EQ(ctx->metrics.forwarded.target_down.load(), 5u);
  EXPECT_EQ(ctx->metrics.forwarded.timed_out.load(), 0u);
  // A request sent to the dead proxy afterwards is not dropped silently either.
  forward(target, "/echo");
  ASSERT_TRUE(rec->wait_settled(6));
  EXPECT_EQ(rec->drops(), 6);
}

TEST_F(forwarder_cluster_test, a_node_declared_down_fails_its_requests_though_its_connection_lives) {
  start_forwarder();
  auto target = publish_target();
  ASSERT_TRUE(target);
  for (int i = 0; i < 3; ++i)
    forward(target, "/hold");
  ASSERT_TRUE(wait_held(3));
  // As the membership does for a member that stopped answering (SIGSTOP): its TCP connection is still up.
  caf::anon_send(forwarder, node_down_atom::value, target.node());
  ASSERT_TRUE(rec->wait_settled(3));
  EXPECT_EQ(rec->drops(), 3);
  {
    std::lock_guard<std::mutex> guard{hook_mutex};
    ASSERT_EQ(hooked.size(), 1u);  // the route cache is told
    EXPECT_EQ(hooked[0], target.node());
  }
  // Right after, a request to that node is refused at once (no 120 s wait on a
  // silent member) as "not here": it was never sent, so the front may re-resolve
  // it whatever its method.
  forward(target, "/echo");
  ASSERT_TRUE(rec->wait_settled(4));
  EXPECT_EQ(rec->drops(), 3);
  ASSERT_EQ(rec->answered(), 1u);
  std::lock_guard<std::mutex> guard{rec->mutex};
  EXPECT_EQ(rec->answers[0].route, route_note::not_here);
}

TEST_F(forwarder_cluster_test, a_target_that_exits_fails_its_own_requests_only) {
  start_forwarder();
  auto leaving = publish_target();
  auto staying = publish_target();
  ASSERT_TRUE(leaving && staying);
  forward(leaving, "/hold");
  forward(leaving, "/hold");
  forward(staying, "/hold");
  ASSERT_TRUE(wait_held(3));
  caf::anon_send_exit(served[0], caf::exit_reason::user_shutdown);  // a user frozen away, say
  ASSERT_TRUE(rec->wait_settled(2));
  EXPECT_EQ(rec->drops(), 2);
  forward(staying, "/echo");  // his node is well: served
  ASSERT_TRUE(rec->wait_settled(3));
  EXPECT_EQ(rec->answered(), 1u);
  EXPECT_EQ(rec->drops(), 2);
}

TEST_F(forwarder_cluster_test, past_max_forwarded_requests_the_answer_is_503_with_retry_after) {
  ctx->recipe().limits.max_forwarded_requests = 2;
  ctx->recipe().limits.hold_seconds = 3;
  start_forwarder();
  auto target = publish_target();
  ASSERT_TRUE(target);
  forward(target, "/hold");
  forward(target, "/hold");
  ASSERT_TRUE(wait_held(2));
  forward(target, "/echo");
  ASSERT_TRUE(rec->wait_settled(1));
  std::lock_guard<std::mutex> guard{rec->mutex};
  ASSERT_EQ(rec->answers.size(), 1u);
  EXPECT_EQ(rec->answers[0].status, 503);
  EXPECT_EQ(rec->answers[0].retry_after, 3u);
  EXPECT_EQ(ctx->metrics.forwarded.refused.load(), 1u);
}

TEST_F(forwarder_cluster_test, the_request_deadline_is_the_backstop_504) {
  start_forwarder();
  auto target = publish_target();
  ASSERT_TRUE(target);
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  forward(target, "/hold", now_ms + 100);  // never answered, its node well: the deadline ends it
  ASSERT_TRUE(rec->wait_settled(1));
  std::lock_guard<std::mutex> guard{rec->mutex};
  ASSERT_EQ(rec->answers.size(), 1u);
  EXPECT_EQ(rec->answers[0].status, 504);
  EXPECT_EQ(ctx->metrics.forwarded.timed_out.load(), 1u);
}

// A serving node in a process of its own (REMOTE_USER_BIN), killed with SIGKILL
// while requests to it are in flight: its connection closes, and they fail at once.
class serving_process {
public:
  serving_process() {
    int out[2];
    if (pipe(out) != 0)
      return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    char* argv[] = {const_cast<char*>(REMOTE_USER_BIN), nullptr};
    if (posix_spawn(&pid_, REMOTE_USER_BIN, &actions, nullptr, argv, environ) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    // "port N\n", read with a deadline.
    std::string line;
    auto until = std::chrono::steady_clock::now() + 15s;
    char c;
    while (pid_ > 0 && std::chrono::steady_clock::now() < until) {
      fd_set fds;
      FD_ZERO(&fds);
      FD_SET(out[0], &fds);
      timeval tv{0, 100000};
      if (select(out[0] + 1, &fds, nullptr, nullptr, &tv) <= 0)
        continue;
      if (read(out[0], &c, 1) != 1 || c == '\n')
        break;
      line += c;
    }
    close(out[0]);
    if (line.rfind("port ", 0) == 0)
      port_ = static_cast<std::uint16_t>(std::stoi(line.substr(5)));
  }
  ~serving_process() { kill9(); }
  std::uint16_t port() const { return port_; }
  void kill9() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

TEST_F(forwarder_cluster_test, requests_in_flight_fail_at_once_when_the_serving_process_is_killed) {
  start_forwarder();
  serving_process other;
  ASSERT_NE(other.port(), 0) << REMOTE_USER_BIN << " did not start";
  auto remote = front_sys->middleman().remote_actor("127.0.0.1", other.port());
  ASSERT_TRUE(remote) << front_sys->render(remote.error());
  auto user = caf::actor_cast<user_handle>(*remote);  // an untyped stand-in answering http_atom
  forward(user, "/echo");
  ASSERT_TRUE(rec->wait_settled(1));
  ASSERT_EQ(rec->answered(), 1u);  // it serves
  for (int i = 0; i < 3; ++i)
    forward(user, "/hold");
  eventually([&] { return ctx->metrics.forwarded.pending.load() >= 3; }, 10s);
  ASSERT_EQ(ctx->metrics.forwarded.pending.load(), 3);
  other.kill9();
  ASSERT_TRUE(rec->wait_settled(4)) << "in flight: " << ctx->metrics.forwarded.pending.load();
  EXPECT_EQ(rec->drops(), 3);  // not waited out: the request timeout is 120 s, the wait 10 s
  EXPECT_EQ(ctx->metrics.forwarded.target_down.load(), 3u);
  EXPECT_EQ(ctx->metrics.forwarded.pending.load(), 0);
}

}  // namespace

}  // namespace forwarder_test_file
