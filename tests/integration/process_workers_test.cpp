// Workers as processes (issue 13, [[group]] isolation = "process"): the real
// node starts its workers as OS processes of its own and supervises them.
#include "../support/test_support.hpp"
#include "../support/worker_processes.hpp"

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace process_workers_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

const std::string token = "process-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

long long incr(http_client& c) { return count_of(c.post("/api/counter/incr")); }

// Polls POST /api/counter/incr until it answers `status` (a connection cut by a
// dying worker reconnects); its last answer is left in `r`.
bool incr_until(http_client& c, response& r, int status = 200, milliseconds within = milliseconds(10000)) {
  return eventually([&] {
    try {
      r = c.post("/api/counter/incr");
      return r.status == status;
    } catch (const std::exception&) {
      c.close();
      return false;
    }
  }, within);
}

class ProcessWorkers : public node_test {
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

  // Waits until worker `name` runs in a process other than `old` (-1: any) and answers it.
  pid_t wait_for_worker(pid_t node, const std::string& name, pid_t old, milliseconds timeout = milliseconds(20000)) {
    pid_t found = -1;
    eventually([&] {
      found = worker_pid(node, name);
      return found > 0 && found != old;
    }, timeout);
    return found != old ? found : -1;
  }
};

TEST_F(ProcessWorkers, AProcessWorkerServesItsUsersAndKeepsTheirState) {
  auto& n = start_process({"--set", "group.default.workers=2"});
  ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 2; }, milliseconds(20000)))
    << "worker processes: " << worker_processes(n.pid()).size();
  http_client c(n.port());
  auto worker = login(c, "alice");
  ASSERT_FALSE(worker.empty());
  for (long long i = 1; i <= 5; ++i)
    ASSERT_EQ(incr(c), i);
  auto who = c.get("/api/whoami").json();
  EXPECT_EQ(who.value("worker", ""), worker);
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0) << "no process for worker " << worker;
  EXPECT_NE(pid, n.pid());
  EXPECT_EQ(parent_of(pid), n.pid());
  // The node counts the users living in its worker processes.
  EXPECT_TRUE(eventually([&] {
    return troupe::test::metric(n.port(), bearer(), "troupe_users", "state=\"active\"") >= 1;
  }, milliseconds(10000)));
  EXPECT_TRUE(eventually([&] {
    return troupe::test::metric(n.port(), bearer(), "troupe_workers", "group=\"default\",state=\"open\"") == 2;
  }, milliseconds(10000)));
  EXPECT_EQ(troupe::test::metric(n.port(), bearer(), "troupe_actors", "kind=\"worker\""), 2);
}

// kill -9 of one worker process under load: the users of the other worker see
// no error; the dead worker's user is served again, from his last durable state.
TEST_F(ProcessWorkers, AKilledWorkerProcessIsReplacedAndOnlyItsUsersNoticeIt) {
  auto& n = start_process({"--set", "group.default.workers=2", "--set", "group.default.durability=reply"});
  ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 2; }, milliseconds(20000)));
  // Two users on two different workers.
  http_client victim(n.port()), bystander(n.port());
  auto victim_worker = login(victim, "victim");
  std::string bystander_worker;
  for (int i = 0; i < 8 && (bystander_worker.empty() || bystander_worker == victim_worker); ++i) {
    bystander.clear_cookie();
    bystander_worker = login(bystander, "bystander" + std::to_string(i));
  }
  ASSERT_NE(bystander_worker, victim_worker) << "every user landed on " << victim_worker;
  auto victim_pid = worker_pid(n.pid(), victim_worker);
  ASSERT_GT(victim_pid, 0);

  std::atomic<long long> bystander_errors{0}, bystander_served{0}, victim_acked{0};
  background_load load;
  load.run([&](const std::atomic<bool>& stopping) {
    long long expected = 0;
    while (!stopping) {
      try {
        auto r = bystander.post("/api/counter/incr");
        if (r.status != 200 || count_of(r) != ++expected)
          ++bystander_errors;
        else
          ++bystander_served;
      } catch (const std::exception&) {
        ++bystander_errors;  // his worker lives on: his connection must too
        bystander.close();
      }
    }
  });
  load.run([&](const std::atomic<bool>& stopping) {
    http_client c(n.port());
    c.set_cookie(*victim.cookie());
    while (!stopping) {
      try {
        auto r = c.post("/api/counter/incr", {}, {}, milliseconds(5000));
        if (r.status == 200)
          victim_acked = count_of(r);
      } catch (const std::exception&) {
        c.close();  // its connection may be cut with the process: reconnect
      }
    }
  });
  ASSERT_TRUE(eventually([&] { return victim_acked > 5 && bystander_served > 5; }, milliseconds(10000)))
    << "victim acknowledged " << victim_acked << ", bystander served " << bystander_served << " with "
    << bystander_errors << " errors";
  ASSERT_TRUE(worker_pid(n.pid(), victim_worker) == victim_pid) << "worker " << victim_worker << " changed process before the kill";
  ASSERT_EQ(::kill(victim_pid, SIGKILL), 0) << std::strerror(errno);
  auto replacement = wait_for_worker(n.pid(), victim_worker, victim_pid);
  EXPECT_GT(replacement, 0) << "worker " << victim_worker << " was not started again";
  auto acked_at_kill = victim_acked.load();
  EXPECT_TRUE(eventually([&] { return victim_acked > acked_at_kill + 3; }, milliseconds(20000)))
    << "the victim was not served again";
  load.stop();
  EXPECT_EQ(bystander_errors, 0) << "the other worker's user saw errors";
  // Every acknowledged increment was durable: the count goes on from the last one acknowledged.
  auto last = victim_acked.load();
  auto now = count_of(victim.get("/api/counter"));
  EXPECT_GE(now, last);
  EXPECT_LE(now, last + 1);  // the one in flight at the end may have landed unacknowledged
  EXPECT_GE(troupe::test::metric(n.port(), bearer(), "troupe_worker_restarts_total", "group=\"default\""), 1);
}

// A handler in an endless loop blocks its process's scheduler: the heartbeat
// goes unanswered, the process is killed and replaced.
TEST_F(ProcessWorkers, AStuckWorkerProcessIsKilledAndReplaced) {
  auto& n = start_process({"--set", "group.default.stuck_timeout_seconds=1", "--set", "node.actor_threads=1"});
  http_client c(n.port());
  auto worker = login(c, "spinner");
  ASSERT_EQ(incr(c), 1);
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0);
  std::thread spin([&] {
    http_client s(n.port());
    s.set_cookie(*c.cookie());
    try {
      s.post_json("/api/spin", {{"ms", 20000}}, {}, milliseconds(30000));
    } catch (const std::exception&) {
    }
  });
  auto replacement = wait_for_worker(n.pid(), worker, pid, milliseconds(15000));
  spin.join();
  ASSERT_GT(replacement, 0) << "the stuck worker process was not replaced";
  EXPECT_TRUE(process_gone(pid));
  EXPECT_TRUE(eventually([&] {
    auto r = c.get("/api/counter");
    return r.status == 200;
  }, milliseconds(10000))) << "not served after the replacement";
}

// A stopped process (SIGSTOP) keeps its connection open: only the heartbeat sees it.
TEST_F(ProcessWorkers, AFrozenWorkerProcessIsSeenByItsHeartbeatAndReplaced) {
  auto& n = start_process({"--set", "group.default.stuck_timeout_seconds=1"});
  http_client c(n.port());
  auto worker = login(c, "sleeper");
  ASSERT_EQ(incr(c), 1);
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  auto replacement = wait_for_worker(n.pid(), worker, pid, milliseconds(15000));
  ASSERT_GT(replacement, 0) << "the stopped worker process was not replaced";
  EXPECT_TRUE(eventually([&] { return process_gone(pid); }, milliseconds(5000)));
  EXPECT_TRUE(eventually([&] { return c.get("/api/counter").status == 200; }, milliseconds(10000)));
}

// An operator's drain of a process worker: its users freeze, the process
// stops and is not started again; its users wake on another worker.
TEST_F(ProcessWorkers, ADrainedWorkerProcessStopsAndIsNotReplaced) {
  auto& n = start_process({"--set", "group.default.workers=2"});
  ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 2; }, milliseconds(20000)));
  http_client c(n.port());
  auto worker = login(c, "drained");
  ASSERT_EQ(incr(c), 1);
  ASSERT_EQ(incr(c), 2);
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0);
  http_client admin(n.port());
  auto r = admin.post("/_troupe/workers/" + worker + "/drain", {}, bearer(), milliseconds(20000));
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json().value("frozen", -1), 1) << r.describe();
  EXPECT_TRUE(eventually([&] { return process_gone(pid); }, milliseconds(10000)));
  EXPECT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 1; }, milliseconds(10000)));
  EXPECT_EQ(worker_pid(n.pid(), worker), -1) << "a drained worker was started again";
  EXPECT_EQ(troupe::test::metric(n.port(), bearer(), "troupe_worker_restarts_total", "group=\"default\""), 0);
  EXPECT_EQ(count_of(c.get("/api/counter")), 2);
  EXPECT_NE(c.get("/api/whoami").json().value("worker", ""), worker);
}

// An operator's freeze and drop reach the user in his worker process through its slot.
TEST_F(ProcessWorkers, FreezeAndDropReachTheUserInAWorkerProcess) {
  auto& n = start_process({"--set", "group.default.workers=2"});
  http_client c(n.port());
  login(c, "ordered");
  ASSERT_EQ(incr(c), 1);
  http_client admin(n.port());
  auto f = admin.post("/_troupe/users/ordered/freeze", {}, bearer(), milliseconds(15000));
  ASSERT_EQ(f.status, 200) << f.describe();
  EXPECT_EQ(f.json().value("frozen", ""), "ordered");
  EXPECT_EQ(count_of(c.get("/api/counter")), 1) << "woken from his frozen parcel";
  auto d = admin.post("/_troupe/users/ordered/drop", {}, bearer(), milliseconds(15000));
  ASSERT_EQ(d.status, 200) << d.describe();
  EXPECT_EQ(d.json().value("dropped", ""), "ordered");
}

// std::abort() in a worker process ends that process only: the node serves on.
TEST_F(ProcessWorkers, AnAbortInAWorkerProcessLeavesTheNodeServing) {
  auto& n = start_process({"--set", "group.default.durability=reply"});
  http_client c(n.port());
  auto worker = login(c, "aborter");
  ASSERT_EQ(incr(c), 1);
  ASSERT_EQ(incr(c), 2);
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0);
  try {
    c.post("/api/abort", {}, {}, milliseconds(10000));
  } catch (const std::exception&) {
    c.close();
  }
  auto replacement = wait_for_worker(n.pid(), worker, pid);
  ASSERT_GT(replacement, 0);
  EXPECT_TRUE(n.running());
  response r;
  EXPECT_TRUE(incr_until(c, r));
  EXPECT_EQ(count_of(r), 3) << "not woken from his last durable state";
}

// A worker exiting with permanent_failure_exitcode parks its slot: not started
// again, its users refused; another exit code is an ordinary failure.
TEST_F(ProcessWorkers, APermanentFailureExitCodeParksTheSlot) {
  auto& n = start_process({"--set", "group.default.permanent_failure_exitcode=42"});
  http_client c(n.port());
  auto worker = login(c, "parker");
  auto pid = worker_pid(n.pid(), worker);
  ASSERT_GT(pid, 0);
  // An ordinary exit code: replaced.
  try {
    c.post_json("/api/exit", {{"code", 3}}, {}, milliseconds(10000));
  } catch (const std::exception&) {
    c.close();
  }
  auto second = wait_for_worker(n.pid(), worker, pid);
  ASSERT_GT(second, 0) << "exit code 3 did not restart the worker";
  ASSERT_TRUE(eventually([&] {
    try {
      return c.get("/api/counter").status == 200;
    } catch (const std::exception&) {
      c.close();
      return false;
    }
  }, milliseconds(10000)));
  // The permanent one: parked.
  try {
    c.post_json("/api/exit", {{"code", 42}}, {}, milliseconds(10000));
  } catch (const std::exception&) {
    c.close();
  }
  ASSERT_TRUE(eventually([&] {
    return troupe::test::metric(n.port(), bearer(), "troupe_workers", "group=\"default\",state=\"parked\"") == 1;
  }, milliseconds(10000)));
  EXPECT_TRUE(process_gone(second));
  EXPECT_EQ(worker_pid(n.pid(), worker), -1) << "a parked slot was started again";
  response r;
  try {
    r = c.get("/api/counter", {}, milliseconds(15000));
  } catch (const std::exception&) {
    c.close();
    r = c.get("/api/counter", {}, milliseconds(15000));
  }
  EXPECT_EQ(r.status, 503) << r.describe();
  EXPECT_FALSE(r.has("Retry-After")) << "retrying a parked slot does not help: " << r.describe();
  EXPECT_TRUE(n.running());
}

// SIGTERM: the soft quit freezes the users of the worker processes, then every
// process is gone; a node started again on the deposit wakes them as they were.
TEST_F(ProcessWorkers, SigtermFreezesTheUsersOfWorkerProcessesAndLeavesNoProcess) {
  scratch_dir dir;
  auto deposit = dir.path + "/deposit";
  node_options o;
  o.with_deposit = false;
  std::vector<std::string> args{"--admin-token", token, "--set", "group.default.isolation=process",
                                "--set", "group.default.workers=2", "--deposit", deposit};
  std::vector<pid_t> children;
  {
    node_process n(args, o);
    ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 2; }, milliseconds(20000)));
    children = worker_processes(n.pid());
    http_client a(n.port()), b(n.port());
    login(a, "ann");
    login(b, "bea");
    for (int i = 0; i < 3; ++i)
      incr(a);
    incr(b);
    n.terminate();
    auto code = n.wait_exit(milliseconds(30000));
    ASSERT_TRUE(code.has_value()) << "the node did not stop";
    EXPECT_EQ(*code, 0) << n.stderr_tail();
    for (auto pid : children)
      EXPECT_TRUE(eventually([&] { return process_gone(pid); }, milliseconds(5000)))
        << "worker process " << pid << " survived its node";
  }
  node_process again(args, o);
  http_client a(again.port()), b(again.port());
  login(a, "ann");
  login(b, "bea");
  EXPECT_EQ(count_of(a.get("/api/counter")), 3);
  EXPECT_EQ(count_of(b.get("/api/counter")), 1);
}

// The file of `pid`'s /proc entry `what` ("cmdline", "environ"), NULs kept.
std::string proc_file(pid_t pid, const std::string& what) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + what, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Issue 23 (6): the worker gate answers only a process that proves the token
// its slot made for it; one that cannot (none, a guessed one) is refused,
// says so on stderr, and the node logs it with the peer's address and counts it.
TEST_F(ProcessWorkers, AProcessThatCannotShowItsTokenIsRefusedAndTheNodeSaysSo) {
  auto& n = start_process();
  ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 1; }, milliseconds(20000)));
  auto child = worker_processes(n.pid()).front();
  auto cmd = cmdline_of(child);
  auto at = cmd.find("--parent ");
  ASSERT_NE(at, std::string::npos) << cmd;
  auto gate = cmd.substr(at + 9, cmd.find(' ', at + 9) - (at + 9));
  EXPECT_EQ(gate.rfind("127.0.0.1:", 0), 0u) << "the gate is not on loopback: " << gate;
  scratch_dir dir;
  const auto guessed = dir.path + "/guessed.json";
  std::ofstream(guessed) << R"({"token":"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",)"
                         << R"("cookie_secret":"","config_file":"","env":[],"sets":[]})";
  // None at all (no bootstrap, so no token), and a guessed one on the descriptor a node would use.
  for (const auto& bootstrap : {std::string(), " --bootstrap-fd 5 5<" + guessed}) {
    auto [rc, out] = run_command("'" + troupe_binary() + "' worker --parent " + gate +
                                 " --parent-pid 1 --worker intruder" + bootstrap + " 2>&1");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("refused this worker"), std::string::npos) << out;
  }
  EXPECT_TRUE(eventually([&] {
    return troupe::test::metric(n.port(), bearer(), "troupe_worker_gate_refusals_total") >= 2;
  }, milliseconds(5000)));
  EXPECT_NE(n.stderr_log().find("worker gate: refused a connection from 127.0.0.1:"), std::string::npos)
    << n.stderr_tail();
  EXPECT_EQ(worker_processes(n.pid()).size(), 1u);
  http_client c(n.port());
  EXPECT_EQ(incr(c), 1);
}

// Issue 23 (4, 5): no secret of the node's reaches a worker process's command
// line or environment (any local user reads them in /proc), whichever way the
// node got it: the admin token on its own command line, the cookie secret in
// its environment, the deposit URL's password in its recipe file; nor the
// worker's gate token.
TEST_F(ProcessWorkers, NoSecretIsOnAWorkerProcessCommandLineOrInItsEnvironment) {
  scratch_dir dir;
  const std::string admin = "admin-" + random_token(20), cookie = "cookie-" + random_token(24),
                    password = "dbpass-" + random_token(16);
  const auto recipe = dir.path + "/troupe.toml";
  std::ofstream(recipe) << "[deposit]\nurl = \"postgresql://troupe:" << password << "@127.0.0.1:1/troupe\"\n"
                        << "[[group]]\nname = \"default\"\nisolation = \"process\"\nworkers = 2\n";
  ::setenv("TROUPE_NODE_COOKIE_SECRET", cookie.c_str(), 1);
  node_process n({"--config", recipe, "--admin-token", admin});
  ::unsetenv("TROUPE_NODE_COOKIE_SECRET");
  ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 2; }, milliseconds(20000)));
  for (auto pid : worker_processes(n.pid())) {
    auto cmdline = proc_file(pid, "cmdline"), environ = proc_file(pid, "environ");
    for (auto& secret : {admin, cookie, password}) {
      EXPECT_EQ(cmdline.find(secret), std::string::npos) << "on the command line of " << pid;
      EXPECT_EQ(environ.find(secret), std::string::npos) << "in the environment of " << pid;
    }
    EXPECT_EQ(environ.find("TROUPE_"), std::string::npos) << "a TROUPE_ variable in the environment of " << pid;
    EXPECT_EQ(cmdline.find("--set"), std::string::npos) << cmdline_of(pid);
    EXPECT_EQ(cmdline.find("token"), std::string::npos) << cmdline_of(pid);
  }
  // They work as the node does: same recipe, same cookie key (a cookie the node minted serves).
  http_client c(n.port());
  EXPECT_EQ(incr(c), 1);
  EXPECT_EQ(incr(c), 2);
  auto who = c.get("/api/whoami").json();
  EXPECT_EQ(who.value("worker", "").rfind("default-w", 0), 0u) << who.dump();
  http_client a(n.port());
  EXPECT_STATUS(a.get("/_troupe/metrics", {{"Authorization", "Bearer " + admin}}), 200);
}

// kill -9 of the node itself: its worker processes do not survive it.
TEST_F(ProcessWorkers, NoWorkerProcessSurvivesAKilledNode) {
  auto& n = start_process({"--set", "group.default.workers=2"});
  ASSERT_TRUE(eventually([&] { return worker_processes(n.pid()).size() == 2; }, milliseconds(20000)));
  auto children = worker_processes(n.pid());
  n.kill9();
  for (auto pid : children)
    EXPECT_TRUE(eventually([&] { return process_gone(pid); }, milliseconds(5000)))
      << "worker process " << pid << " survived its killed node";
}

}  // namespace

// A crash storm of worker processes (abort() in a handler) past max_restarts
// within restart_window_seconds makes the group degraded: its requests get
// 503 with a Retry-After, health answers 503 naming the group, the metrics say
// so; after recovery_interval_seconds the worker is started again and its
// user is served from his last durable state.
TEST_F(ProcessWorkers, ACrashStormDegradesTheGroupUntilItsRecovery) {
  auto& n = start_process({"--set", "group.default.durability=reply", "--set", "group.default.max_restarts=2",
                           "--set", "group.default.restart_window_seconds=60", "--set",
                           "group.default.recovery_interval_seconds=3"});
  http_client c(n.port());
  auto worker = login(c, "stormy");
  ASSERT_EQ(incr(c), 1);
  auto abort_it = [&] {
    try {
      c.post("/api/abort", {}, {}, milliseconds(10000));
    } catch (const std::exception&) {
      c.close();
    }
  };
  auto served_again = [&](response& r) { return incr_until(c, r, 200, milliseconds(15000)); };
  // Two deaths are within max_restarts: replaced each time.
  response r;
  for (int death = 1; death <= 2; ++death) {
    auto pid = worker_pid(n.pid(), worker);
    ASSERT_GT(pid, 0) << "death " << death;
    abort_it();
    ASSERT_GT(wait_for_worker(n.pid(), worker, pid), 0) << "death " << death;
    ASSERT_TRUE(served_again(r)) << "death " << death << ": " << r.describe();
  }
  EXPECT_EQ(count_of(r), 3);
  EXPECT_EQ(metric(n.port(), bearer(), "troupe_worker_restarts_total", "group=\"default\""), 2);
  // The third: degraded.
  abort_it();
  ASSERT_TRUE(eventually([&] {
    return metric(n.port(), bearer(), "troupe_group_degraded", "group=\"default\"") == 1;
  }, milliseconds(15000)));
  response refused;
  ASSERT_TRUE(incr_until(c, refused, 503)) << refused.describe();
  EXPECT_NE(refused.body.find("degraded"), std::string::npos) << refused.describe();
  auto retry = refused.get("Retry-After");
  ASSERT_FALSE(retry.empty()) << refused.describe();
  EXPECT_GE(std::stoi(retry), 1);
  EXPECT_LE(std::stoi(retry), 3);
  http_client h(n.port());
  auto health = h.get("/_troupe/health");
  EXPECT_EQ(health.status, 503) << health.describe();
  EXPECT_NE(health.body.find("\"group\":\"default\""), std::string::npos) << health.describe();
  // The recovery: started again, served from his last durable state.
  ASSERT_TRUE(served_again(r)) << r.describe();
  EXPECT_EQ(count_of(r), 4);
  EXPECT_EQ(metric(n.port(), bearer(), "troupe_group_degraded", "group=\"default\""), 0);
  EXPECT_TRUE(eventually([&] { return h.get("/_troupe/health").status == 200; }, milliseconds(5000)));
}

// Memory admission with worker processes: each process is judged against its
// share of the group's budget (memory_max_percent of the machine /
// worker_max_number). A user growing his worker past
// worker_memory_admission_percent of it closes that worker; the next
// newcomer makes the group start another process and lands there, while the
// grown user keeps being served where he is. The share is set to 300 MB from
// /proc/meminfo, so the test needs no small machine.
TEST_F(ProcessWorkers, MemoryAdmissionClosesAWorkerProcessAndTheGroupOpensAnother) {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  std::uint64_t machine = 0;
  while (std::getline(meminfo, line))
    if (line.rfind("MemTotal:", 0) == 0)
      machine = std::stoull(line.substr(9)) << 10;
  ASSERT_GT(machine, 0u);
  const double share = 300.0 * (1 << 20);
  const double percent = 100.0 * share * 2 / static_cast<double>(machine);  // two workers at most
  ASSERT_LT(percent, 100) << "a machine this small cannot run this test";
  std::ostringstream budget;
  budget.precision(6);
  budget << std::fixed << "group.default.memory_max_percent=" << percent;
  // Closed past 50 % of the share (150 MB); the occupancy replacement off (its own test is the actors').
  auto& n = start_process({"--set", budget.str(), "--set", "group.default.worker_max_number=2", "--set",
                           "group.default.worker_memory_admission_percent=50", "--set",
                           "group.default.restart_occupancy_max_percent=0"});
  http_client fat(n.port());
  ASSERT_EQ(login(fat, "fat"), "default-w1");
  auto pid = worker_pid(n.pid(), "default-w1");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(fat.post_json("/api/grow", {{"mb", 200}}).status, 200);
  http_client probe(n.port());
  ASSERT_TRUE(eventually([&] {
    auto r = probe.get("/_troupe/actors/worker:default-w1", bearer());
    return r.status == 200 && r.json().value("admits", true) == false;
  }, milliseconds(20000))) << probe.get("/_troupe/actors/worker:default-w1", bearer()).describe();
  EXPECT_EQ(probe.get("/_troupe/actors/worker:default-w1", bearer()).json().value("reason", ""), "memory");
  http_client newcomer(n.port());
  auto who = newcomer.get("/api/whoami");
  ASSERT_EQ(who.status, 200) << who.describe();
  EXPECT_EQ(who.json().value("worker", ""), "default-w2") << who.describe();
  auto second = worker_pid(n.pid(), "default-w2");
  EXPECT_GT(second, 0) << "the group did not start a second worker process";
  EXPECT_NE(second, pid);
  EXPECT_EQ(fat.get("/api/counter").status, 200) << "the grown user keeps being served";
  EXPECT_EQ(worker_pid(n.pid(), "default-w1"), pid) << "closed, not replaced";
}

// Past restart_occupancy_max_percent of its share a worker process freezes its
// users and is replaced by a fresh process (not counted as a restart); its
// users wake there from their parcels on their next request.
TEST_F(ProcessWorkers, AWorkerProcessPastItsOccupancyIsReplacedAfterFreezingItsUsers) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "under ThreadSanitizer every process starts past a 300 MB share (its shadow memory)";
#endif
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  std::uint64_t machine = 0;
  while (std::getline(meminfo, line))
    if (line.rfind("MemTotal:", 0) == 0)
      machine = std::stoull(line.substr(9)) << 10;
  ASSERT_GT(machine, 0u);
  const double percent = 100.0 * 300.0 * (1 << 20) / static_cast<double>(machine);  // one worker: a 300 MB share
  ASSERT_LT(percent, 100) << "a machine this small cannot run this test";
  std::ostringstream budget;
  budget.precision(6);
  budget << std::fixed << "group.default.memory_max_percent=" << percent;
  auto& n = start_process({"--set", budget.str(), "--set", "group.default.worker_max_number=1", "--set",
                           "group.default.restart_occupancy_max_percent=50"});
  http_client fat(n.port());
  ASSERT_EQ(login(fat, "fat"), "default-w1");
  ASSERT_EQ(incr(fat), 1);
  auto pid = worker_pid(n.pid(), "default-w1");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(fat.post_json("/api/grow", {{"mb", 200}}).status, 200);
  auto fresh = wait_for_worker(n.pid(), "default-w1", pid);
  ASSERT_GT(fresh, 0) << "the worker process was not replaced";
  response r;
  EXPECT_TRUE(incr_until(fat, r)) << r.describe();
  EXPECT_EQ(count_of(r), 2) << "he froze before the replacement: nothing lost";
  EXPECT_EQ(metric(n.port(), bearer(), "troupe_worker_restarts_total", "group=\"default\""), 0);
}

}  // namespace process_workers_test_file
