// Issue 23 (3): stray clients on the ports CAF's middleman serves — a node's
// worker gate (any local process reaches it) and a cluster member's port —
// must not delay a heartbeat. For TROUPE_STORM_SECONDS (default 60) two
// members whose workers are processes are stormed on all four ports at once:
// random bytes, NULs, a fake CAF header announcing 0xffffffff bytes, 300 idle
// connections held open, slow writers. Meanwhile the slots heartbeat their
// worker processes (stuck_timeout_seconds = 3) and the members each other
// (failure_timeout_ms = 2000), and users are served through both fronts.
// Counted at the end: zero worker processes killed or restarted, zero members
// declared down, and every stray connection refused by the gates (counted).
#include "../support/cluster_fixture.hpp"
#include "../support/test_support.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

namespace gate_storm_test_file {

using namespace troupe::test;
using std::chrono::milliseconds;

namespace {

const std::string token = "storm-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

std::chrono::seconds storm_length() {
  const char* s = std::getenv("TROUPE_STORM_SECONDS");
  return std::chrono::seconds(s && *s ? std::atoi(s) : 60);
}

int connect_to(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    fd = -1;
  }
  return fd;
}

std::uint16_t port_in(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? static_cast<std::uint16_t>(std::stoi(m[1])) : 0;
}

// The worker gate's port of node `node`: on its worker processes' command lines (--parent 127.0.0.1:PORT).
std::uint16_t worker_gate_of(pid_t node) {
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    auto name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])))
      continue;
    std::ifstream stat(e.path() / "stat"), cmd(e.path() / "cmdline", std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(stat)), {}), c((std::istreambuf_iterator<char>(cmd)), {});
    auto close = s.rfind(')');
    if (close == std::string::npos || std::atoi(s.c_str() + close + 4) != node)
      continue;
    std::replace(c.begin(), c.end(), '\0', ' ');
    if (auto port = port_in(c, "worker --parent 127\\.0\\.0\\.1:([0-9]+)"))
      return port;
  }
  return 0;
}

// Stray clients on `ports` until `stop`: each thread one kind of abuse.
class storm {
public:
  explicit storm(std::vector<std::uint16_t> ports) : ports_(std::move(ports)) {
    for (auto port : ports_) {
      threads_.emplace_back([this, port] { spray(port, random_bytes(4096)); });
      threads_.emplace_back([this, port] { spray(port, std::string(65536, '\0')); });
      // A CAF header: source/dest node, operation, ... and payload_len 0xffffffff.
      threads_.emplace_back([this, port] {
        spray(port, std::string("\x00\x00\x00\x00\xff\xff\xff\xff", 8) + std::string(120, '\x01'));
      });
      threads_.emplace_back([this, port] { hold_idle(port, 300 / ports_.size()); });
      threads_.emplace_back([this, port] { write_slowly(port); });
    }
  }
  ~storm() { stop(); }

  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
  }

  std::uint64_t connections() const { return connections_; }

private:
  static std::string random_bytes(std::size_t n) {
    std::mt19937 rng(42);
    std::string out(n, '\0');
    for (auto& c : out)
      c = static_cast<char>(rng());
    return out;
  }

  // Connects, sends `bytes`, lets it go; again and again.
  void spray(std::uint16_t port, const std::string& bytes) {
    while (!stop_) {
      int fd = connect_to(port);
      if (fd < 0) {
        std::this_thread::sleep_for(milliseconds(5));  // pacing the storm: no descriptor now, try again soon
        continue;
      }
      ++connections_;
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      std::this_thread::sleep_for(milliseconds(2));  // a storm, not a CPU hog that starves the tests beside it
    }
  }

  // Keeps `n` connections open that never say a word (reopened as the gate closes them).
  void hold_idle(std::uint16_t port, std::size_t n) {
    std::vector<int> held;
    while (!stop_) {
      for (auto i = held.begin(); i != held.end();) {
        char c;
        auto r = ::recv(*i, &c, 1, MSG_DONTWAIT | MSG_PEEK);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          ::close(*i);
          i = held.erase(i);
        } else {
          ++i;
        }
      }
      while (held.size() < n && !stop_) {
        int fd = connect_to(port);
        if (fd < 0)
          break;
        ++connections_;
        held.push_back(fd);
      }
      std::this_thread::sleep_for(milliseconds(100));  // pacing: how often the idle ones are counted and reopened
    }
    for (int fd : held)
      ::close(fd);
  }

  // A byte every 200 ms on a few connections at a time.
  void write_slowly(std::uint16_t port) {
    std::vector<int> slow;
    while (!stop_) {
      while (slow.size() < 20) {
        int fd = connect_to(port);
        if (fd < 0)
          break;
        ++connections_;
        slow.push_back(fd);
      }
      for (auto i = slow.begin(); i != slow.end();) {
        if (::send(*i, "T", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) {
          ::close(*i);
          i = slow.erase(i);
        } else {
          ++i;
        }
      }
      std::this_thread::sleep_for(milliseconds(200));  // the load itself: a byte every 200 ms
    }
    for (int fd : slow)
      ::close(fd);
  }

  std::vector<std::uint16_t> ports_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> connections_{0};
};

}  // namespace

TEST(GateStorm, StrayClientsOnTheWorkerGateAndTheClusterPortDelayNoHeartbeat) {
  cluster_fixture cluster{cluster_fixture::options{{"--admin-token", token}, milliseconds(20000)}};
  const std::vector<std::string> args{"--set", "group.default.isolation=process",
                                      "--set", "group.default.stuck_timeout_seconds=3",
                                      "--set", "group.default.durability=reply",
                                      "--set", "cluster.failure_timeout_ms=2000"};
  cluster.start(2, args);
  auto metric = [&](std::size_t i, const std::string& name, const std::string& labels = "") {
    return troupe::test::metric(cluster.member(i).port(), bearer(), name, labels);
  };
  ASSERT_TRUE(eventually([&] { return metric(0, "troupe_cluster_members", "state=\"up\"") == 2; }, milliseconds(15000)));
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < 2; ++i) {
    std::uint16_t gate = 0;
    eventually([&] { return (gate = worker_gate_of(cluster.member(i).pid())) != 0; }, milliseconds(10000));
    ports.push_back(gate);
    ports.push_back(port_in(cluster.cluster_address(i), ":([0-9]+)$"));
  }
  for (auto p : ports)
    ASSERT_NE(p, 0) << "a port was not found in the members' logs";
  // Users in the worker processes of both members, served through both fronts during the storm.
  std::vector<std::string> cookies;
  for (int i = 0; i < 6; ++i) {
    http_client c(cluster.member(i % 2).port());
    ASSERT_STATUS(c.post("/api/counter/incr"), 200);
    cookies.push_back(c.cookie().value());
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> served{0}, failed{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;  // the first few, for the report
  auto note_failure = [&](std::string what) {
    ++failed;
    std::lock_guard<std::mutex> lock(failures_mutex);
    if (failures.size() < 5)
      failures.push_back(std::move(what));
  };
  std::thread traffic([&] {
    std::size_t k = 0;
    while (!stop) {
      const int member = static_cast<int>(k % 2);
      http_client c(cluster.member(member).port());
      c.set_cookie(cookies[k % cookies.size()]);
      const auto sent = std::chrono::steady_clock::now();
      auto took = [&] {
        return std::to_string(std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - sent).count());
      };
      try {
        auto r = c.get("/api/counter", {}, milliseconds(5000));
        if (r.status == 200)
          ++served;
        else
          note_failure(cluster.name(member) + ": " + std::to_string(r.status) + " after " + took() + " ms: " + r.body);
      } catch (const std::exception& e) {
        note_failure(cluster.name(member) + ": " + e.what() + " after " + took() + " ms");
      }
      ++k;
      std::this_thread::sleep_for(milliseconds(20));  // pacing the legitimate traffic (50 requests a second)
    }
  });
  storm abuse(ports);
  std::this_thread::sleep_for(storm_length());  // the storm's length: what is measured is what happened during it
  abuse.stop();
  stop = true;
  traffic.join();
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(metric(i, "troupe_worker_restarts_total", "group=\"default\""), 0)
      << cluster.name(i) << ": a worker process was restarted during the storm";
    EXPECT_EQ(cluster.member(i).stderr_log().find("killed"), std::string::npos)
      << cluster.name(i) << " killed a worker process:\n" << cluster.member(i).stderr_tail();
    EXPECT_EQ(metric(i, "troupe_cluster_members", "state=\"up\""), 2) << cluster.name(i);
    EXPECT_EQ(metric(i, "troupe_cluster_members", "state=\"down\""), 0) << cluster.name(i);
    EXPECT_EQ(cluster.member(i).stderr_log().find("declared down"), std::string::npos) << cluster.name(i);
    EXPECT_GT(metric(i, "troupe_worker_gate_refusals_total"), 0) << "the storm reached " << cluster.name(i);
    EXPECT_GT(metric(i, "troupe_cluster_gate_refusals_total"), 0) << "the storm reached " << cluster.name(i);
  }
  EXPECT_EQ(metric(0, "troupe_node_failovers_total") + metric(1, "troupe_node_failovers_total"), 0);
  EXPECT_GT(served.load(), 0u);
  std::string first_failures;
  for (const auto& f : failures)
    first_failures += "\n  " + f;
  EXPECT_EQ(failed.load(), 0u) << "requests failed during the storm (" << served << " served):" << first_failures;
  std::cerr << "storm: " << abuse.connections() << " stray connections in " << storm_length().count() << " s; "
            << served << " requests served, " << failed << " failed\n";
}

}  // namespace gate_storm_test_file
