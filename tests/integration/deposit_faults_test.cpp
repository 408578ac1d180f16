// Deposit faults against a real node (issue 10): the deposit directory removed while
// the node runs (it heals), a parcel of one user copied over another's (quarantined,
// never served to the wrong user), and the modes of the files a node writes.
//
// Layout relied upon (store/deposit.hpp): DIR/users/<2 hex>/<escaped>.parcel,
// DIR/connections/..., DIR/quarantine/<escaped>.parcel.<time>.<n>; the names used
// here (alice, bob) escape to themselves.
#include "../support/prometheus.hpp"
#include "../support/test_support.hpp"

#include "store/deposit.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

namespace deposit_faults_test_file {

using namespace troupe::test;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

const std::string token = "faults-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

double metric(uint16_t port, const std::string& name) {
  return troupe::test::metric(port, bearer(), name, "");
}

// The user parcel of `user` in `deposit`, if there is one (the deposit's own layout).
std::optional<fs::path> user_parcel(const std::string& deposit, const std::string& user) {
  fs::path p = troupe::store::filesystem_parcel_path(deposit, troupe::store::parcel_kind::user, user);
  if (!fs::is_regular_file(p))
    return std::nullopt;
  return p;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0)
    return 0xffff;
  return st.st_mode & 07777;
}

response freeze(uint16_t port, const std::string& user) {
  http_client a(port);
  return a.post("/_troupe/users/" + user + "/freeze", {}, bearer(), milliseconds(10000));
}

long long incr(http_client& c) { return count_of(c.post("/api/counter/incr")); }

class DepositFaults : public node_test {
protected:
  node_process& start_on(const std::string& dir) {
    return node_test::start_on(dir, {"--admin-token", token});
  }
  void soft_quit() {
    node().terminate();
    auto code = node().wait_exit(milliseconds(15000));
    ASSERT_TRUE(code.has_value()) << "still running 15 s after SIGTERM";
    EXPECT_EQ(*code, 0);
  }
};

}  // namespace

TEST_F(DepositFaults, RemovedDepositDirectoryHealsAndAFreezeLands) {
  scratch_dir scratch;
  const std::string dep = scratch.path + "/deposit";
  start_on(dep);
  // Placed before her: her owner epoch is not the generation's first, so a
  // restart whose generation started again from 1 would find her parcel newer
  // than its placement and refuse her as stale.
  for (const char* other : {"bob", "carol"}) {
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", other}}), 200);
  }
  http_client alice(port());
  ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(incr(alice), i);
  const std::string cookie = *alice.cookie();
  EXPECT_EQ(metric(port(), "troupe_deposit_heals_total"), 0.0);

  fs::remove_all(dep);  // rm -rf DIR under the running node
  ASSERT_FALSE(fs::exists(dep));

  auto r = freeze(port(), "alice");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json(), nlohmann::json({{"frozen", "alice"}}));
  EXPECT_GE(metric(port(), "troupe_deposit_heals_total"), 1.0);
  EXPECT_EQ(metric(port(), "troupe_deposit_failures_total"), 0.0);
  EXPECT_EQ(metric(port(), "troupe_deposit_consecutive_failures"), 0.0);
  ASSERT_TRUE(user_parcel(dep, "alice")) << listing(dep);
  for (const auto* sub : {"", "/users", "/connections", "/quarantine"})
    EXPECT_EQ(mode_of(dep + sub), 0700u) << dep + sub;
  EXPECT_NE(node().stderr_log().find("recreated"), std::string::npos) << "the heal is not logged";
  EXPECT_TRUE(fs::exists(dep + "/commander-generation")) << "the commander generation did not come back: " << listing(dep);

  soft_quit();
  start_on(dep);
  http_client again(port());
  again.set_cookie(cookie);
  auto who = again.get("/api/whoami");
  ASSERT_STATUS(who, 200);
  EXPECT_EQ(who.json().value("user", ""), "alice") << "her connection parcel was not written";
  EXPECT_EQ(count_of(again.get("/api/counter")), 3) << "she did not wake with her count";
}

TEST_F(DepositFaults, ParcelCopiedOverAnotherUsersIsQuarantinedNeverServed) {
  scratch_dir scratch;
  const std::string dep = scratch.path + "/deposit";
  start_on(dep);
  http_client alice(port()), bob(port());
  ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
  ASSERT_EQ(incr(alice), 1);
  ASSERT_STATUS(bob.post_json("/api/login", {{"user", "bob"}}), 200);
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(incr(bob), i);
  ASSERT_STATUS(freeze(port(), "alice"), 200);
  ASSERT_STATUS(freeze(port(), "bob"), 200);
  auto alice_file = user_parcel(dep, "alice"), bob_file = user_parcel(dep, "bob");
  ASSERT_TRUE(alice_file && bob_file) << listing(dep);
  const std::string bobs = read_all(*bob_file);
  fs::copy_file(*bob_file, *alice_file, fs::copy_options::overwrite_existing);
  const double quarantined0 = metric(port(), "troupe_deposit_quarantined_total");

  // Her next wake reads bob's parcel under her name: never served as hers.
  auto r = alice.get("/api/counter");
  EXPECT_NE(r.status, 200) << "alice was served bob's parcel (or started empty): " << r.describe();
  EXPECT_EQ(r.status, 503) << r.describe();
  EXPECT_EQ(metric(port(), "troupe_deposit_quarantined_total"), quarantined0 + 1);
  EXPECT_FALSE(fs::exists(*alice_file)) << listing(dep);
  std::optional<fs::path> q;
  for (const auto& e : fs::directory_iterator(fs::path(dep) / "quarantine"))
    if (e.path().filename().string().rfind("alice.parcel.", 0) == 0)
      q = e.path();
  ASSERT_TRUE(q) << "nothing of alice in quarantine/:\n" << listing(dep);
  EXPECT_EQ(read_all(*q), bobs) << "the quarantined file is not the copied parcel as it was";
  const auto log = node().stderr_log();
  EXPECT_NE(log.find(q->string()), std::string::npos) << "the log does not name " << *q;
  EXPECT_NE(log.find("'bob'"), std::string::npos) << "the log does not name the parcel's owner";
  EXPECT_NE(log.find("'alice'"), std::string::npos) << "the log does not name the user";
  // Not started empty afterwards either (her refusal stays), and bob is intact.
  auto again = alice.get("/api/counter");
  EXPECT_EQ(again.status, 503) << again.describe();
  EXPECT_EQ(metric(port(), "troupe_deposit_quarantined_total"), quarantined0 + 1);
  EXPECT_EQ(count_of(bob.get("/api/counter")), 5);
}

TEST_F(DepositFaults, NodeFilesAre0600AndDirectories0700) {
  scratch_dir scratch;
  const std::string dep = scratch.path + "/deposit";
  // An existing deposit open to others is narrowed at start.
  fs::create_directories(dep + "/users");
  fs::permissions(dep, fs::perms(0755));
  fs::permissions(dep + "/users", fs::perms(0777));
  start_on(dep);
  EXPECT_EQ(mode_of(dep), 0700u);
  EXPECT_EQ(mode_of(dep + "/users"), 0700u);
  EXPECT_NE(node().stderr_log().find("narrowed to 700"), std::string::npos) << "the narrowing is not logged";

  http_client guest(port()), carol(port());
  ASSERT_EQ(incr(guest), 1);
  ASSERT_STATUS(carol.post_json("/api/login", {{"user", "carol"}}), 200);
  ASSERT_EQ(incr(carol), 1);
  ASSERT_STATUS(freeze(port(), "carol"), 200);
  soft_quit();  // freezes the guest too

  std::size_t files = 0, dirs = 0;
  for (const auto* top : {"users", "connections", "quarantine"}) {
    EXPECT_EQ(mode_of(fs::path(dep) / top), 0700u) << top;
    for (fs::recursive_directory_iterator it(fs::path(dep) / top), end; it != end; ++it) {
      if (it->is_directory()) {
        ++dirs;
        EXPECT_EQ(mode_of(it->path()), 0700u) << it->path();
      } else {
        ++files;
        EXPECT_EQ(mode_of(it->path()), 0600u) << it->path();
      }
    }
  }
  EXPECT_GE(files, 4u) << listing(dep);  // 2 user parcels, 2 connection parcels
  EXPECT_GE(dirs, 2u) << listing(dep);
}

namespace {

// The deposit's shard of a key (store/deposit.hpp: the xor-folded low byte of the
// 64-bit FNV-1a of the raw key, two lower-case hex digits), restated independently.
std::string shard_of(const std::string& key) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 32;
  h ^= h >> 16;
  h ^= h >> 8;
  static const char hex[] = "0123456789abcdef";
  return {hex[(h >> 4) & 0xf], hex[h & 0xf]};
}

}  // namespace

// The global store's snapshot is the platform key "%global" (escaped "%25global"):
// a corrupt one is quarantined and the start stops cleanly (exit 1, no abort), and
// stays stopped until the operator decides — never an empty global store silently.
TEST_F(DepositFaults, QuarantinedGlobalSnapshotStopsTheStartCleanly) {
  scratch_dir scratch;
  const std::string dep = scratch.path + "/deposit";
  const auto shard = fs::path(dep) / "users" / shard_of("%global");
  fs::create_directories(shard);
  { std::ofstream(shard / "%25global.parcel") << "not a parcel"; }
  for (int attempt = 1; attempt <= 2; ++attempt) {
    SCOPED_TRACE("start " + std::to_string(attempt));
    auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--deposit", dep}, milliseconds(10000));
    EXPECT_FALSE(r.timed_out) << "the node started on a quarantined global snapshot:\n" << r.err;
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("the global store's snapshot cannot be read"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("quarantine/%25global.parcel."), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(fs::exists(shard / "%25global.parcel"));
  EXPECT_TRUE(fs::exists(shard / ".quarantined-%25global.parcel")) << listing(dep);
  // The operator lets it go: the node starts (with an empty global store).
  fs::remove(shard / ".quarantined-%25global.parcel");
  start_on(dep);
  EXPECT_EQ(metric(port(), "troupe_deposit_quarantined_total"), 0.0);
}

}  // namespace deposit_faults_test_file
