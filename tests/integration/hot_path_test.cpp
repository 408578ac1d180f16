// The hot path without hand-offs on a real node (issue 26, docs/design.md "The
// hot path"): handlers run on the front's io threads; one that runs past
// limits.shard_stall_ms is counted and logged; with two io threads (two
// shards) every user is served and counted exactly, whichever thread took his
// connection; node.inline_handlers = false serves the same.
#include "../support/test_support.hpp"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace hot_path_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class HotPath : public admin_node_test {
protected:
  // `users` users on as many connections, each incrementing his counter `n` times
  // from a thread of his own; true when every counter reads n afterwards.
  bool every_counter_exact(int users, int n) {
    std::vector<std::thread> clients;
    std::atomic<int> wrong{0};
    for (int u = 0; u < users; ++u)
      clients.emplace_back([&, u] {
        http_client c(port());
        login(c, "hot" + std::to_string(u));
        for (int i = 0; i < n; ++i)
          if (c.post("/api/counter/incr").status != 200)
            ++wrong;
        if (c.get("/api/counter").json().value("count", -1) != n)
          ++wrong;
      });
    for (auto& t : clients)
      t.join();
    return wrong == 0;
  }
};

}  // namespace

TEST_F(HotPath, AHandlerPastTheStallBoundIsCountedAndLogged) {
  auto& node = start_with({"--set", "limits.shard_stall_ms=20"});
  http_client c(port());
  ASSERT_STATUS(c.post_json("/api/spin", {{"ms", 1}}), 200);
  EXPECT_EQ(m("troupe_shard_stalls_total"), 0);
  ASSERT_STATUS(c.post_json("/api/spin", {{"ms", 80}}), 200);
  EXPECT_EQ(m("troupe_shard_stalls_total"), 1);
  // Logged when it ended, and by the watchdog while it ran.
  EXPECT_TRUE(eventually([&] { return node.stderr_log().find("ms on an io thread (limits.shard_stall_ms = 20)") !=
                                      std::string::npos; }))
    << node.stderr_tail();
  EXPECT_NE(node.stderr_log().find("has been running one handler for"), std::string::npos) << node.stderr_tail();
}

TEST_F(HotPath, TwoIoThreadsServeEveryUserExactly) {
  start_with({"--set", "node.io_threads=2"});
  EXPECT_TRUE(every_counter_exact(8, 50));
}

TEST_F(HotPath, WithoutInlineHandlersTheSameIsServed) {
  start_with({"--set", "node.inline_handlers=false", "--set", "limits.shard_stall_ms=20"});
  EXPECT_TRUE(every_counter_exact(4, 25));
  http_client c(port());
  ASSERT_STATUS(c.post_json("/api/spin", {{"ms", 80}}), 200);
  EXPECT_EQ(m("troupe_shard_stalls_total"), 0) << "no handler ran on an io thread";
}

}  // namespace hot_path_test_file
