// The front's routing cache watches the actors it points at: an entry dies with its actor.
#include "actors/messages.hpp"
#include "transport/route_cache.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

class route_cache_test : public ::testing::Test {
protected:
  route_cache_test() {
    cfg.set("scheduler.max-threads", 1);
    sys.emplace(cfg);
  }
  ~route_cache_test() override { sys.reset(); }

  caf::actor spawn_dummy() {
    return sys->spawn([]() -> caf::behavior { return {[](int x) { return x; }}; });
  }

  // The cache forgets asynchronously (on the dying actor's cleanup): poll briefly.
  static bool eventually_forgotten(route_cache& cache, const std::string& cid) {
    for (int i = 0; i < 200; ++i) {
      if (!cache.find(cid))
        return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
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
