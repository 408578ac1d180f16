// The front with a user whose actor lives on another node (a second actor system
// of this process, reached over CAF's middleman on 127.0.0.1): HTTP requests are
// served through the forwarder, and when that node dies with a request in flight
// the front re-resolves it once and serves it where the user lives now — long
// before any timeout (the request timeout here is far beyond the client's).
#include "transport/front.hpp"

#include "../support/eventually.hpp"
#include "../support/http_client.hpp"
#include "actors/errors.hpp"
#include "actors/user.hpp"
#include "config/recipe.hpp"
#include "transport/forwarder.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

namespace front_forwarding_test_file {

using namespace troupe;
using namespace std::chrono_literals;
using troupe::test::eventually;

namespace {

// Where the fake commander places the user now, and how often it was asked.
struct placement_board {
  std::mutex mutex;
  user_handle actor;  // a stand-in: an untyped actor answering the user's http messages
  int resolves = 0;
};

// A bridge whose resolves answer from the board (the rest of its interface is not used here).
bridge_handle::behavior_type fake_bridge(bridge_handle::pointer, std::shared_ptr<placement_board> board) {
  auto unused = [](local_admin& slot) { slot->done(error_response(404, "not in this test")); };
  return {
    [board](resolve_atom, std::string& cid, bool, local_resolve& slot) {
      std::lock_guard<std::mutex> guard{board->mutex};
      ++board->resolves;
      slot->placed(placement{"alice", "w1", "n", board->actor, cid, {}});
    },
    [](whois_atom, std::string&, local_resolve& slot) { slot->failed(troupe::make_error(troupe::errc::no_such_user)); },
    [unused](order_atom, operator_order&, local_admin& slot) { unused(slot); },
    [unused](global_atom, local_admin& slot) { unused(slot); },
    [unused](census_atom, census_query&, local_admin& slot) { unused(slot); },
    [unused](census_atom, std::string&, local_admin& slot) { unused(slot); },
    [unused](log_atom, std::uint32_t, local_admin& slot) { unused(slot); },
    [unused](orchestrate_atom, orchestration_request&, local_admin& slot) { unused(slot); },
  };
}

// The user's actor on the serving node: its remote interface; "/hold" stays unanswered.
caf::behavior remote_user(caf::event_based_actor* self, std::shared_ptr<std::atomic<int>> held) {
  auto promises = std::make_shared<std::vector<caf::response_promise>>();
  return {
    [=](http_atom, http_request& req) -> caf::result<http_response> {
      if (req.path == "/hold") {
        promises->push_back(self->make_response_promise());
        held->fetch_add(1);
        return caf::delegated<http_response>();
      }
      http_response r;
      r.body = "{\"served\":\"remote\"}";
      return r;
    },
  };
}

// The user woken on this node after his node died: the local fast path.
caf::behavior local_user() {
  return {
    [](http_atom, local_reply& slot) {
      http_response r;
      r.body = "{\"served\":\"local\"}";
      slot->deliver(std::move(r));
    },
  };
}

TEST(front_forwarding, a_remote_user_is_served_and_his_node_dying_costs_one_re_resolve_not_a_timeout) {
  caf::actor_system_config serving_cfg, node_cfg;
  for (auto* cfg : {&serving_cfg, &node_cfg}) {
    register_types(*cfg);
    cfg->load<caf::io::middleman>();
    cfg->set("scheduler.max-threads", 2);
  }
  caf::actor_system serving{serving_cfg};
  caf::actor_system sys{node_cfg};
  auto held = std::make_shared<std::atomic<int>>(0);
  auto user_there = serving.spawn(remote_user, held);
  auto port = serving.middleman().publish(user_there, 0, "127.0.0.1", true);
  ASSERT_TRUE(port);
  auto remote = sys.middleman().remote_actor("127.0.0.1", *port);
  ASSERT_TRUE(remote) << sys.render(remote.error());

  auto ctx = std::make_shared<node_context>();
  ctx->recipe().limits.request_timeout_seconds = 120;
  auto board = std::make_shared<placement_board>();
  board->actor = caf::actor_cast<user_handle>(*remote);
  auto bridge = sys.spawn(fake_bridge, board);
  auto routes = std::make_shared<route_cache>();
  auto forwarder = spawn_forwarder(sys, ctx, [routes](const caf::node_id& n) { routes->forget_node(n); });
  auto user_here = sys.spawn(local_user);
  {
    front http(ctx, bridge, forwarder, routes);
    http.listen("127.0.0.1", 0);
    http.start(1);
    test::http_client c(http.port());

    auto first = c.get("/api/x");
    ASSERT_EQ(first.status, 200) << first.describe();
    EXPECT_EQ(first.json()["served"], "remote");  // through the forwarder: a slot cannot cross nodes
    EXPECT_EQ(ctx->metrics.forwarded.answered.load(), 1u);
    auto second = c.get("/api/x");  // the cached route: no new resolve
    EXPECT_EQ(second.json()["served"], "remote");

    // A request in flight on the remote node when it dies.
    auto pending = std::async(std::launch::async, [&] { return c.get("/hold", {}, 10s); });
    eventually([&] { return held->load() >= 1; }, 10s);
    ASSERT_EQ(held->load(), 1);
    {
      std::lock_guard<std::mutex> guard{board->mutex};
      EXPECT_EQ(board->resolves, 1);
      board->actor = caf::actor_cast<user_handle>(user_here);  // the commander has woken him here
    }
    caf::anon_send_exit(serving.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP")),
                        caf::exit_reason::kill);
    auto after = pending.get();  // within the client's 10 s, of a 120 s request timeout
    ASSERT_EQ(after.status, 200) << after.describe();
    EXPECT_EQ(after.json()["served"], "local");
    EXPECT_EQ(ctx->metrics.forwarded.target_down.load(), 1u);
    {
      std::lock_guard<std::mutex> guard{board->mutex};
      EXPECT_EQ(board->resolves, 2);  // re-resolved once
    }
    http.begin_shutdown();
    http.stop();
  }
  for (auto& a : {caf::actor_cast<caf::actor>(bridge), caf::actor_cast<caf::actor>(forwarder), user_here, user_there})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

}  // namespace

}  // namespace front_forwarding_test_file
