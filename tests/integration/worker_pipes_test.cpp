// The worker pipes (issue 26, transport/worker_pipe.hpp) on a real node:
// requests to the users of worker processes take the pipes, or the forwarder
// with node.worker_pipes = false; a killed process releases what was in flight
// on its pipe at once. (A stuck handler on the pipe thread is
// process_workers_test's AStuckWorkerProcessIsKilledAndReplaced.)
#include "../support/test_support.hpp"
#include "../support/worker_processes.hpp"

#include <csignal>
#include <cstring>
#include <future>

namespace worker_pipes_test_file {

using namespace troupe::test;
using std::chrono::milliseconds;

namespace {

const std::string token = "pipes-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

long long incr(http_client& c) { return count_of(c.post("/api/counter/incr")); }

class WorkerPipes : public node_test {
protected:
  node_process& start_process(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--admin-token", token, "--set", "group.default.isolation=process"};
    args.insert(args.end(), extra.begin(), extra.end());
    return start(std::move(args));
  }

  // Logs `c` in as `user` and answers his worker's name.
  std::string login(http_client& c, const std::string& user) {
    auto r = c.post_json("/api/login", {{"user", user}});
    EXPECT_EQ(r.status, 200) << r.describe();
    return r.json().value("worker", "");
  }
};

}  // namespace

// Requests to the users of worker processes go on the pipes (issue 26,
// transport/worker_pipe.hpp), not through the forwarder; node.worker_pipes =
// false sends them through the forwarder again. Same answers either way.
TEST_F(WorkerPipes, RequestsToAWorkerProcessTakeItsPipesOrWithoutThemTheForwarder) {
  for (bool pipes : {true, false}) {
    SCOPED_TRACE(pipes ? "worker_pipes = true" : "worker_pipes = false");
    auto& n = start_process({"--set", std::string("node.worker_pipes=") + (pipes ? "true" : "false")});
    http_client c(n.port());
    login(c, "piper");
    for (int i = 1; i <= 20; ++i)
      ASSERT_EQ(incr(c), i);
    auto piped = troupe::test::metric(n.port(), bearer(), "troupe_worker_pipe_requests_total", "outcome=\"answered\"");
    auto forwarded =
      troupe::test::metric(n.port(), bearer(), "troupe_forwarded_requests_total", "outcome=\"answered\"");
    if (pipes) {
      EXPECT_GE(piped, 20);
      EXPECT_EQ(forwarded, 0);
      EXPECT_GE(troupe::test::metric(n.port(), bearer(), "troupe_worker_pipe_writes_total"), 1);
    } else {
      EXPECT_EQ(piped, 0);
      EXPECT_GE(forwarded, 20);
    }
  }
}

// A request in flight on a pipe when its process is killed is released at
// once (not at its deadline): a change's outcome is unknown (503, no
// Retry-After), as through the forwarder.
TEST_F(WorkerPipes, AKilledWorkerProcessReleasesTheRequestsOnItsPipeAtOnce) {
  auto& n = start_process({"--set", "limits.request_timeout_seconds=120", "--set", "group.default.stuck_timeout_seconds=60"});
  http_client c(n.port());
  auto worker = login(c, "spun");
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0);
  auto spun = std::async(std::launch::async, [&] {
    http_client s(n.port());
    s.set_cookie(*c.cookie());
    return s.post_json("/api/spin", {{"ms", 60000}}, {}, milliseconds(90000));
  });
  ASSERT_TRUE(eventually([&] { return troupe::test::metric(n.port(), bearer(), "troupe_worker_pipe_pending") == 1; }));
  ASSERT_EQ(::kill(pid, SIGKILL), 0) << std::strerror(errno);
  ASSERT_EQ(spun.wait_for(std::chrono::seconds(30)), std::future_status::ready)
    << "the request waited for its deadline (120 s) instead of being released";
  auto r = spun.get();
  EXPECT_EQ(r.status, 503) << r.describe();
  EXPECT_NE(r.body.find("outcome is unknown"), std::string::npos) << r.body;
  EXPECT_GE(troupe::test::metric(n.port(), bearer(), "troupe_worker_pipe_requests_total", "outcome=\"released\""), 1);
  EXPECT_EQ(troupe::test::metric(n.port(), bearer(), "troupe_worker_pipe_pending"), 0);
}

}  // namespace worker_pipes_test_file
