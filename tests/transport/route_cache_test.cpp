// The front's routing cache watches the actors it points at: an entry dies with its actor.
#include "actors/messages.hpp"
#include "transport/route_cache.hpp"
#include "../support/eventually.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <gtest/gtest.h>

#include <thread>

namespace route_cache_test_file {

using namespace troupe;
using troupe::test::eventually;
using namespace std::chrono_literals;

namespace {

class route_cache_test : public ::testing::Test {
protected:
  route_cache_test() {
    cfg.set("scheduler.max-threads", 1);
    cfg.load<caf::io::middleman>();  // as on a node: without it, every node id is the empty one
    sys.emplace(cfg);
  }
  ~route_cache_test() override { sys.reset(); }

  // A stand-in for a user actor, on `on`: the cache only watches and compares handles.
  static user_handle dummy_on(caf::actor_system& on) {
    return caf::actor_cast<user_handle>(on.spawn([]() -> caf::behavior { return {[](int x) { return x; }}; }));
  }
  user_handle spawn_dummy() { return dummy_on(*sys); }

  // The cache forgets asynchronously (on the dying actor's cleanup): poll briefly.
  static bool eventually_forgotten(route_cache& cache, const std::string& cid) {
    return eventually([&] { return !cache.find(cid); }, 10s);
  }

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

}  // namespace

TEST_F(route_cache_test, routes_and_forgets) {
  auto cache = std::make_shared<route_cache>();
  auto a = spawn_dummy();
  cache->put("c1", a);
  cache->put("c2", a);
  ASSERT_TRUE(cache->find("c1"));
  EXPECT_EQ(*cache->find("c1"), a);
  cache->erase("c1");
  EXPECT_FALSE(cache->find("c1"));
  EXPECT_TRUE(cache->find("c2"));
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(eventually_forgotten(*cache, "c2"));
  EXPECT_EQ(cache->size(), 0u);
}

TEST_F(route_cache_test, an_actor_death_removes_only_its_own_entries) {
  auto cache = std::make_shared<route_cache>();
  auto a = spawn_dummy(), b = spawn_dummy();
  cache->put("c1", a);
  cache->put("c2", b);
  cache->put("c3", a);
  cache->put("c3", b);  // c3 moved from a to b: a's death must not take it
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(eventually_forgotten(*cache, "c1"));
  ASSERT_TRUE(cache->find("c3"));
  EXPECT_EQ(*cache->find("c3"), b);
  EXPECT_TRUE(cache->find("c2"));
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(eventually_forgotten(*cache, "c2"));
  EXPECT_TRUE(eventually_forgotten(*cache, "c3"));
}

TEST_F(route_cache_test, routing_to_an_already_dead_actor_is_forgotten_at_once) {
  auto cache = std::make_shared<route_cache>();
  auto a = spawn_dummy();
  {
    caf::scoped_actor self{*sys};
    self->monitor(a);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {});
  }
  cache->put("c1", a);
  EXPECT_FALSE(cache->find("c1"));
}

// Actor ids are unique on their node only: in a cluster the cache holds actors
// of several nodes, and two of them may share an id. Each is watched for
// itself, and one's death takes only its own routes.
TEST_F(route_cache_test, actors_of_two_nodes_with_the_same_id_are_told_apart) {
  caf::actor_system_config other_cfg;  // another node of this process
  other_cfg.set("scheduler.max-threads", 1);
  other_cfg.load<caf::io::middleman>();
  caf::actor_system other{other_cfg};
  ASSERT_NE(other.node(), sys->node());
  auto spawn_other = [&] { return dummy_on(other); };
  // Ids grow by one per spawn on each node: spawn on the one behind until they meet.
  auto a = spawn_dummy();
  auto twin = spawn_other();
  std::vector<user_handle> spawned;
  for (int i = 0; i < 1000 && a.id() != twin.id(); ++i) {
    spawned.push_back(a.id() < twin.id() ? a : twin);
    if (a.id() < twin.id())
      a = spawn_dummy();
    else
      twin = spawn_other();
  }
  ASSERT_EQ(a.id(), twin.id()) << "no two actors with the same id";
  auto cache = std::make_shared<route_cache>();
  cache->put("on_a", a);
  cache->put("on_twin", twin);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(eventually_forgotten(*cache, "on_a"));
  ASSERT_TRUE(cache->find("on_twin"));  // not the other node's actor of the same id
  EXPECT_EQ(*cache->find("on_twin"), twin);
  caf::anon_send_exit(twin, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(eventually_forgotten(*cache, "on_twin"));  // and he was watched for himself
  for (auto& s : spawned)
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

TEST_F(route_cache_test, a_node_declared_down_takes_its_routes_and_only_them) {
  caf::actor_system_config other_cfg;  // another node of this process
  other_cfg.set("scheduler.max-threads", 1);
  other_cfg.load<caf::io::middleman>();
  caf::actor_system other{other_cfg};
  auto local = spawn_dummy();
  auto remote = dummy_on(other);
  auto cache = std::make_shared<route_cache>();
  cache->put("here", local);
  cache->put("there", remote);
  cache->put("there_too", remote);
  cache->forget_node(other.node());
  EXPECT_FALSE(cache->find("there"));
  EXPECT_FALSE(cache->find("there_too"));
  ASSERT_TRUE(cache->find("here"));
  cache->put("there", remote);  // routed there again later (the member came back): watched again
  caf::anon_send_exit(remote, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(eventually_forgotten(*cache, "there"));
  EXPECT_TRUE(cache->find("here"));
}

}  // namespace route_cache_test_file
