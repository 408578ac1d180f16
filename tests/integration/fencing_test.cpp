// Fencing (issue 11, "No user lives twice"; docs/CLUSTER.md "Fencing"), against real
// node processes: two independent nodes on ONE deposit directory are exactly the
// split brain the owner epochs must survive. The same user is woken on node A, then
// on node B, whose commander started later and so has the newer generation: A's next
// write of him is refused by the deposit, counted in A's metrics, A stops serving him,
// and B's state is the one that stands (on disk: a third node reads it back).
#include "../support/prometheus.hpp"
#include "../support/test_support.hpp"

#include "store/deposit.hpp"

#include <fstream>
#include <iterator>
#include <memory>

namespace fencing_test_file {

using namespace troupe::test;
using std::chrono::milliseconds;

namespace {

const std::string token = "fencing-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

long long incr(http_client& c) { return count_of(c.post("/api/counter/incr")); }
long long counter(http_client& c) { return count_of(c.get("/api/counter")); }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double metric(uint16_t port, const std::string& name) { return troupe::test::metric(port, bearer(), name); }

class Fencing : public ::testing::Test {
protected:
  // A node of its own on the shared deposit `dir` (every change durable before its
  // reply). Holds and request timeouts far beyond the client's 10 s: a fenced user
  // whose answer waited for one of them (as a fenced wake's adoption once did, for
  // hold_seconds) fails the test instead of passing slowly.
  node_process& start_on(const std::string& dir) {
    node_options o;
    o.with_deposit = false;
    nodes_.push_back(std::make_unique<node_process>(
      std::vector<std::string>{"--admin-token", token, "--deposit", dir, "--set", "group.default.durability=reply",
                               "--set", "limits.hold_seconds=60", "--set", "limits.request_timeout_seconds=120"},
      o));
    return *nodes_.back();
  }
  void TearDown() override {
    if (HasFailure())
      for (auto& n : nodes_)
        print_node_diagnostics(*n);
  }
  std::vector<std::unique_ptr<node_process>> nodes_;
};

}  // namespace

TEST_F(Fencing, TheOlderOwnerOfAUserWokenOnTwoNodesIsFencedAndTheNewerStateStands) {
  scratch_dir dir;
  auto& a = start_on(dir.path);
  http_client on_a(a.port());
  ASSERT_STATUS(on_a.post_json("/api/login", {{"user", "zoe"}}), 200);
  ASSERT_EQ(incr(on_a), 1);
  ASSERT_EQ(incr(on_a), 2);  // durable (durability = reply), written at A's epoch
  EXPECT_EQ(metric(a.port(), "troupe_fenced_writes_total"), 0.0);

  // B starts later: its commander's generation, hence zoe's epoch there, is newer.
  auto& b = start_on(dir.path);
  http_client on_b(b.port());
  ASSERT_STATUS(on_b.post_json("/api/login", {{"user", "zoe"}}), 200);  // woken on B: claimed at B's epoch
  ASSERT_EQ(counter(on_b), 2);
  ASSERT_EQ(incr(on_b), 3);
  ASSERT_EQ(incr(on_b), 4);

  // A still hosts zoe (nobody told it); its next write of her is refused.
  auto stale = on_a.post("/api/counter/incr");
  EXPECT_STATUS(stale, 503);
  EXPECT_TRUE(stale.has("Retry-After")) << stale.describe();
  EXPECT_GE(metric(a.port(), "troupe_fenced_writes_total"), 1.0);
  EXPECT_GE(metric(a.port(), "troupe_users_fenced_total"), 1.0);
  EXPECT_EQ(metric(b.port(), "troupe_fenced_writes_total"), 0.0);

  // A does not serve her any more: every request is 503 (its new placements
  // of her are older than B's claim too: each is refused at its wake), and her
  // parcel is not touched by any of them.
  const std::string parcel = troupe::store::filesystem_parcel_path(dir.path, troupe::store::parcel_kind::user, "zoe");
  const std::string before = read_bytes(parcel);
  ASSERT_FALSE(before.empty()) << listing(dir.path);
  const double fenced_before = metric(a.port(), "troupe_fenced_writes_total");
  for (int i = 0; i < 3; ++i) {
    auto r = on_a.post("/api/counter/incr");
    EXPECT_STATUS(r, 503);
    EXPECT_TRUE(r.has("Retry-After")) << r.describe();
  }
  EXPECT_GE(metric(a.port(), "troupe_fenced_writes_total"), fenced_before + 3);
  EXPECT_EQ(read_bytes(parcel), before);

  // B goes on, untouched: its state is the one in memory and on disk.
  EXPECT_EQ(counter(on_b), 4);
  ASSERT_EQ(incr(on_b), 5);
  EXPECT_EQ(metric(b.port(), "troupe_users_fenced_total"), 0.0);
  b.kill9();
  auto& c = start_on(dir.path);  // a third node reads what the deposit kept: B's, never A's
  http_client on_c(c.port());
  ASSERT_STATUS(on_c.post_json("/api/login", {{"user", "zoe"}}), 200);
  EXPECT_EQ(counter(on_c), 5);
}

TEST_F(Fencing, EachNodeOnTheDepositGetsANewerCommanderGeneration) {
  // Three commanders one after the other on one deposit: generations 1, 2, 3
  // (the file under the deposit), whatever process asked.
  scratch_dir dir;
  for (int expected = 1; expected <= 3; ++expected) {
    auto& n = start_on(dir.path);
    http_client c(n.port());
    ASSERT_EQ(incr(c), 1);  // a placement: the commander has its generation by now
    std::ifstream in(dir.path + "/commander-generation");
    int generation = 0;
    in >> generation;
    EXPECT_EQ(generation, expected);
  }
}

TEST_F(Fencing, AUserRestartedAfterACrashKeepsHisPlacementsEpochAndIsNotFenced) {
  // His worker restarts him under the same placement: his writes after the
  // crash carry the same epoch, so the deposit takes them (an epoch lost on
  // the way would be 0, the oldest: refused, and he would be fenced).
  scratch_dir dir;
  auto& n = start_on(dir.path);
  http_client c(n.port());
  ASSERT_STATUS(c.post_json("/api/login", {{"user", "rex"}}), 200);
  ASSERT_EQ(incr(c), 1);
  for (int crash = 0; crash < 2; ++crash) {
    EXPECT_STATUS(c.post("/api/crash"), 502);
    EXPECT_EQ(incr(c), crash + 2);  // written (durability = reply) by the restarted actor
  }
  EXPECT_EQ(metric(n.port(), "troupe_fenced_writes_total"), 0.0);
  EXPECT_EQ(metric(n.port(), "troupe_users_fenced_total"), 0.0);
  EXPECT_GE(metric(n.port(), "troupe_user_restarts_total"), 2.0);
}

TEST_F(Fencing, NoUserIsPlacedWithoutAGenerationAndPlacementsResumeOnceItIsBack) {
  // A generation file that does not hold a number is never guessed over: the
  // commander places nobody (503 + Retry-After) and asks again at the next
  // placement; once an operator restores the file, users are placed above it.
  scratch_dir dir;
  {
    std::ofstream(dir.path + "/commander-generation") << "not a number\n";
  }
  auto& n = start_on(dir.path);
  http_client c(n.port());
  auto refused = c.get("/api/counter");
  EXPECT_STATUS(refused, 503);
  EXPECT_TRUE(refused.has("Retry-After")) << refused.describe();
  {
    std::ofstream(dir.path + "/commander-generation") << "41\n";
  }
  EXPECT_TRUE(eventually([&] { return c.get("/api/counter").status == 200; }, milliseconds(10000)));
  std::ifstream in(dir.path + "/commander-generation");
  int generation = 0;
  in >> generation;
  EXPECT_EQ(generation, 42);
}

}  // namespace fencing_test_file
