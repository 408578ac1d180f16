// The node loads CAF's middleman (so that user actors of other members can be
// reached through its forwarder), but a single node without a cluster opens no
// port for it: the only socket it listens on is its HTTP front. Its users are
// served on the local fast path as before (nothing is forwarded), and
// troupe_forwarded_requests_total is in /_troupe/metrics.
#include "../support/http_client.hpp"
#include "../support/node_process.hpp"
#include "../support/prometheus.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace forwarding_test_file {

using namespace troupe::test;

namespace {

// The socket inodes the process holds (its /proc/<pid>/fd links "socket:[N]").
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d)
    return out;
  while (auto* e = readdir(d)) {
    char target[256] = {};
    auto n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    std::string link(target, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (link.rfind("socket:[", 0) == 0)
      out.insert(link.substr(8, link.size() - 9));
  }
  closedir(d);
  return out;
}

// Local ports of the TCP sockets in LISTEN state (0A) among `inodes`, from the
// process's own view of /proc/net/tcp and tcp6.
std::vector<unsigned> listening_ports(pid_t pid, const std::set<std::string>& inodes) {
  std::vector<unsigned> ports;
  for (const char* table : {"tcp", "tcp6"}) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/" + table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && inodes.count(inode))
        ports.push_back(std::stoul(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

TEST(Forwarding, a_single_node_listens_on_its_http_port_alone) {
  node_process node({"--admin-token", "forward-test-token"});
  http_client c(node.port());
  ASSERT_EQ(c.get("/api/whoami").status, 200);  // every part of the node is up
  auto inodes = socket_inodes(node.pid());
  ASSERT_FALSE(inodes.empty()) << node.diagnostics();
  auto ports = listening_ports(node.pid(), inodes);
  ASSERT_EQ(ports.size(), 1u) << node.diagnostics();  // no middleman port, no automatic-connections listener
  EXPECT_EQ(ports[0], node.port());
}

TEST(Forwarding, local_users_are_served_without_the_forwarder_and_it_is_counted) {
  node_process node({"--admin-token", "forward-test-token"});
  http_client c(node.port());
  for (int i = 1; i <= 5; ++i) {
    auto r = c.post("/api/counter/incr");
    ASSERT_EQ(r.status, 200) << r.describe();
    EXPECT_EQ(r.json()["count"], i);
  }
  auto m = c.get("/_troupe/metrics", {{"Authorization", "Bearer forward-test-token"}});
  ASSERT_EQ(m.status, 200);
  for (const char* outcome : {"answered", "target_down", "timeout", "refused", "error"})
    EXPECT_EQ(prometheus_sample(m.body, "troupe_forwarded_requests_total", std::string("outcome=\"") + outcome + "\""),
              0.0)
      << outcome << "\n" << m.body;
  EXPECT_EQ(prometheus_sample(m.body, "troupe_forwarded_pending"), 0.0);
}

}  // namespace

}  // namespace forwarding_test_file
