// cluster_bench: what a cluster costs and what a member's death costs (issue 11,
// "Measured"), with real member processes on loopback sharing one deposit.
//
//   cluster_bench [--kills N] [--seconds S] [--only C1|C2] [--troupe PATH]
//
// C1, failover: three members (durability "reply"); 30 users who live on n3
// (found through whoami), each incremented once; `kill -9` of n3, then every
// user is polled through n1's front, in turn, as fast as answers come; the
// time from the kill to the first of n3's users answered 200 again (and to the
// last), over N kills (a new member joins, the youngest, before each kill: the
// third, fourth, … member). p50/p99 of both.
// C2, throughput: sticky GET /api/counter over 300 users, wrk -t2 -c64 for S
// seconds against one node alone, then against n1's front of three members
// (two thirds of the users forwarded), then spread over the three fronts (one
// wrk -t1 -c22 each, at once); requests/s of each and the ratios to one node.
// These machines are shared and have 2 cores: three members share them, so
// expect ≤ 1×; the figure is the cost, reported as it is.
#include "../tests/support/cluster_fixture.hpp"
#include "../tests/support/http_client.hpp"
#include "../tests/support/node_process.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

using namespace troupe::test;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

struct options {
  int kills = 10;
  int seconds = 5;
  std::string only;
};

// A guest who incremented once through `port`: his cookie and where he lives.
std::pair<std::string, std::string> new_user(uint16_t port) {
  http_client c(port);
  c.post("/api/counter/incr");
  auto who = c.get("/api/whoami");
  return {c.cookie().value_or(""), who.status == 200 ? who.json().value("node", "") : ""};
}

bool answered(uint16_t port, const std::string& cookie) {
  try {
    http_client c(port);
    c.set_cookie(cookie);
    return c.get("/api/counter", {}, milliseconds(5000)).status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void failover(const options& o) {
  cluster_fixture m(cluster_fixture::options{{"--set", "group.default.durability=reply", "--set",
                                              "cluster.heartbeat_interval_ms=500", "--set",
                                              "cluster.failure_timeout_ms=3000"},
                                             milliseconds(20000)});
  m.start(2);
  std::vector<double> first_ms, last_ms;
  for (int k = 0; k < o.kills; ++k) {
    auto victim = m.add();  // n3, then n4, … (each kill's member rejoins as a new one)
    auto& n3 = m.member(victim);
    std::this_thread::sleep_for(milliseconds(500));  // every member has it (heartbeats)
    std::vector<std::string> on3;
    for (int i = 0; i < 400 && on3.size() < 30; ++i) {
      auto [cookie, node] = new_user(n3.port());
      if (node == m.name(victim))
        on3.push_back(cookie);
    }
    if (on3.empty())
      throw std::runtime_error("no user was placed on " + m.name(victim));
    auto front = m.member(0).port();
    auto t0 = steady::now();
    n3.kill9();
    std::vector<bool> back(on3.size(), false);
    std::size_t served = 0;
    double first = -1;
    while (served < on3.size() && steady::now() - t0 < std::chrono::seconds(30))
      for (std::size_t i = 0; i < on3.size(); ++i)
        if (!back[i] && answered(front, on3[i])) {
          back[i] = true;
          ++served;
          auto ms = std::chrono::duration<double, std::milli>(steady::now() - t0).count();
          if (first < 0)
            first = ms;
          if (served == on3.size())
            last_ms.push_back(ms);
        }
    if (served < on3.size())
      throw std::runtime_error("users of the killed member were not all served again within 30 s");
    first_ms.push_back(first);
    std::cerr << "kill " << k + 1 << ": first of " << on3.size() << " users served again after " << first
              << " ms, the last after " << last_ms.back() << " ms\n";
  }
  std::printf("| C1 | kill -9 → first of its users served again, p50 / p99 (%d kills) | %.0f ms / %.0f ms | ≤ 3 s |\n",
              o.kills, percentile(first_ms, 0.5), percentile(first_ms, 0.99));
  std::printf("| C1 | kill -9 → last of its 30 users served again, p50 / p99 | %.0f ms / %.0f ms | |\n",
              percentile(last_ms, 0.5), percentile(last_ms, 0.99));
  std::printf("{\"C1\":{\"first_p50_ms\":%.1f,\"first_p99_ms\":%.1f,\"last_p50_ms\":%.1f,\"last_p99_ms\":%.1f}}\n",
              percentile(first_ms, 0.5), percentile(first_ms, 0.99), percentile(last_ms, 0.5),
              percentile(last_ms, 0.99));
}

// Writes `cookies` one per line for sticky.lua and runs wrk; returns requests/s.
double wrk(const std::string& url, const std::string& cookie_file, int threads, int connections, int seconds) {
  std::string cmd = "COOKIES=" + cookie_file + " wrk -t" + std::to_string(threads) + " -c" +
                    std::to_string(connections) + " -d" + std::to_string(seconds) + "s -s " BENCH_DIR "/sticky.lua " +
                    url + "/api/counter 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[512];
  while (p && fgets(buf, sizeof buf, p.get()))
    out += buf;
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("Requests/sec:\\s+([0-9.]+)")))
    throw std::runtime_error("wrk said: " + out);
  if (std::regex_search(out, std::regex("Non-2xx")))
    std::cerr << "wrk: non-2xx answers:\n" << out;
  return std::stod(m[1]);
}

std::string cookie_file(const std::vector<uint16_t>& fronts, int users, const std::string& dir) {
  std::string path = dir + "/cookies.txt";
  std::ofstream out(path);
  for (int i = 0; i < users; ++i)
    out << "troupe_cid=" << new_user(fronts[i % fronts.size()]).first << "\n";
  return path;
}

void throughput(const options& o) {
  auto dir = make_temp_dir("troupe-cluster-bench-wrk-");
  double alone = 0, one_front = 0, three_fronts = 0;
  {
    node_process lone(std::vector<std::string>{});
    alone = wrk("http://127.0.0.1:" + std::to_string(lone.port()), cookie_file({lone.port()}, 300, dir), 2, 64,
                o.seconds);
  }
  {
    cluster_fixture m;
    m.start(3);
    std::vector<uint16_t> fronts{m.member(0).port(), m.member(1).port(), m.member(2).port()};
    auto cookies = cookie_file(fronts, 300, dir);
    one_front = wrk("http://127.0.0.1:" + std::to_string(fronts[0]), cookies, 2, 64, o.seconds);
    std::vector<std::thread> runs;
    std::vector<double> each(3);
    for (int i = 0; i < 3; ++i)
      runs.emplace_back([&, i] {
        each[i] = wrk("http://127.0.0.1:" + std::to_string(fronts[i]), cookies, 1, 22, o.seconds);
      });
    for (auto& t : runs)
      t.join();
    three_fronts = each[0] + each[1] + each[2];
  }
  std::filesystem::remove_all(dir);
  std::printf("| C2 | sticky GET, one node alone | %.0f req/s | |\n", alone);
  std::printf("| C2 | three members, all load on one front (2/3 forwarded) | %.0f req/s (%.2f×) | ≤ 1× expected on 2 cores |\n",
              one_front, one_front / alone);
  std::printf("| C2 | three members, load spread over the three fronts | %.0f req/s (%.2f×) | ≤ 1× expected on 2 cores |\n",
              three_fronts, three_fronts / alone);
  std::printf("{\"C2\":{\"alone\":%.0f,\"one_front\":%.0f,\"three_fronts\":%.0f}}\n", alone, one_front, three_fronts);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--kills")
      o.kills = std::max(1, std::stoi(v));
    else if (a == "--seconds")
      o.seconds = std::max(1, std::stoi(v));
    else if (a == "--only")
      o.only = v;
    else if (a == "--troupe")
      setenv("TROUPE_TEST_BIN", v.c_str(), 1);
    else {
      std::cerr << "usage: cluster_bench [--kills N] [--seconds S] [--only C1|C2] [--troupe PATH]\n";
      return 2;
    }
  }
  try {
    std::printf("| id | figure | value | goal |\n| --- | --- | --- | --- |\n");
    if (o.only.empty() || o.only == "C1")
      failover(o);
    if (o.only.empty() || o.only == "C2")
      throughput(o);
  } catch (const std::exception& e) {
    std::cerr << "cluster_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
