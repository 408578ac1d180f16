// cluster_fixture: a cluster of real `troupe` members on loopback, sharing one deposit.
//
//   troupe::test::cluster_fixture cluster;
//   cluster.start(3, {"--admin-token", token});       // n1 starts the cluster, n2, n3 join through it
//   troupe::test::http_client c(cluster.member(1).port());
//   cluster.kill9(2);                                  // SIGKILL n3 (and reap it)
//   cluster.add({"--admin-token", token});             // n4 joins through the oldest live member
//
// Member i is named n<i+1> (node.name) and started as
//   TROUPE_BIN node --listen 127.0.0.1:0 --deposit <shared deposit> --set node.name=n<i+1>
//                   --set cluster.listen=127.0.0.1:0 [--join <an earlier member's cluster address>] <args>
// Its cluster address is read from its stderr line "cluster: member NAME of CLUSTER at HOST:PORT".
// The destructor SIGKILLs the members still running and removes the shared deposit.
#pragma once

#include "node_process.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe::test {

class cluster_fixture {
public:
  struct options {
    /// Arguments every member gets (e.g. the admin token, cluster.* timeouts).
    std::vector<std::string> common_args;
    /// How long one member may take to start and join.
    std::chrono::milliseconds start_timeout{20000};
  };

  cluster_fixture();
  explicit cluster_fixture(options opts);
  ~cluster_fixture();
  cluster_fixture(const cluster_fixture&) = delete;
  cluster_fixture& operator=(const cluster_fixture&) = delete;

  /// Starts `n` members, one after the other (each joins through the first
  /// live member); `args` go to each of them after the common ones. Throws
  /// (with the member's diagnostics) when one does not start.
  void start(std::size_t n, const std::vector<std::string>& args = {});
  /// Starts one more member, joining through member `through` (default: the
  /// oldest live member; none at all: it starts the cluster). Returns its index.
  std::size_t add(const std::vector<std::string>& args = {}, std::optional<std::size_t> through = std::nullopt);

  std::size_t size() const { return members_.size(); }
  node_process& member(std::size_t i);
  /// Its node.name: n1, n2, …
  std::string name(std::size_t i) const;
  /// Its cluster address (HOST:PORT, what --join takes).
  const std::string& cluster_address(std::size_t i) const;
  /// The deposit directory every member shares.
  const std::string& deposit_dir() const { return deposit_; }

  /// SIGKILL member `i` (and reap it). Its index stays taken.
  void kill9(std::size_t i);
  /// SIGSTOP / SIGCONT member `i` (a member that stops answering but keeps its sockets).
  void pause(std::size_t i);
  void resume(std::size_t i);
  bool running(std::size_t i);
  /// Indexes of the members still running.
  std::vector<std::size_t> live();

  /// Every member's diagnostics (command line, exit state, stderr tail), for a failure message.
  std::string diagnostics();

private:
  options opts_;
  std::string dir_, deposit_;
  std::vector<std::unique_ptr<node_process>> members_;
  std::vector<std::string> addresses_;
};

}  // namespace troupe::test
