// Shutdown and health under a failing deposit (issue 10, defects 2, 10, 12), against
// the real node: a soft quit whose deposit is gone or full parks the users in the
// fallback deposit (exit code 3) and a node started on it has them back; a request
// still in flight when node.shutdown_grace_seconds ends is answered 503 and the node
// exits within grace + node.shutdown_freeze_seconds; /_troupe/health turns 503
// "degraded" while the deposit cannot be written and back to ok once it can.
//
// Deposit layout relied upon (store/deposit.hpp): DIR/users/<2 hex>/<escaped>.parcel;
// user names of [a-z0-9_] are their own escaped form.
#include "../support/deposit_backend.hpp"
#include "../support/test_support.hpp"

#include "store/deposit.hpp"

#include <sys/mount.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

namespace shutdown_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

// A fixed secret: cookies and logins stay valid whichever directory the next node uses.
const std::string cookie_secret = "shutdown-test-secret-" + random_token(16);

// Whether `deposit` holds a user parcel of `user` (the deposit's own layout).
bool has_user_parcel(const fs::path& deposit, const std::string& user) {
  return fs::is_regular_file(troupe::store::filesystem_parcel_path(deposit.string(), troupe::store::parcel_kind::user, user));
}

// The node's arguments: the counter lives in memory only until the quit.
std::vector<std::string> quit_args(const std::string& fallback) {
  return {"--set", "group.default.durability=freeze",     "--set", "node.cookie_secret=" + cookie_secret,
          "--set", "node.shutdown_freeze_seconds=3",       "--set", "deposit.fallback_path=" + fallback};
}

// A user name that is its own escaped form ([a-z0-9_]).
std::string plain_name(const std::string& prefix) {
  std::string name = prefix;
  for (char ch : random_token(8))
    name += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '_';
  return name;
}

long long counter_of(http_client& c) { return count_of(c.get("/api/counter")); }

class Shutdown : public node_test {
protected:
  // Logs in as `user` and counts to `n` on the node now running.
  void count_as(const std::string& user, int n) {
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", user}}), 200);
    for (int i = 1; i <= n; ++i)
      ASSERT_EQ(count_of(c.post("/api/counter/incr")), i);
  }

  // SIGTERM; the node must exit 3 (saved, partly to the fallback only), name the
  // fallback directory in its log, and the fallback must hold the user's parcel.
  void quit_into_fallback(const std::string& fallback, const std::string& user) {
    node().terminate();
    auto code = node().wait_exit(milliseconds(30000));
    ASSERT_TRUE(code.has_value()) << "still running 30 s after SIGTERM";
    EXPECT_EQ(*code, 3) << "a soft quit whose deposit refuses the users must not report success (0) "
                           "nor lose them (1): they belong in the fallback (3)";
    auto log = node().stderr_log();
    EXPECT_NE(log.find(fallback), std::string::npos) << "the log does not name the fallback directory";
    EXPECT_TRUE(has_user_parcel(fallback, user)) << "no parcel of " << user << " in the fallback:\n"
                                                 << listing(fallback);
  }

  // A node on the fallback has the user's counter back.
  void restart_finds(const std::string& dir, const std::string& fallback, const std::string& user, int n) {
    start_on(fallback, quit_args(dir + "/rescue-of-rescue"));
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", user}}), 200);
    EXPECT_EQ(counter_of(c), n) << "the increments acknowledged before the quit are gone";
  }
};

TEST_F(Shutdown, SoftQuitWithTheDepositReplacedByAFileParksUsersInTheFallback) {
  scratch_dir dir;
  const std::string deposit = dir.path + "/deposit";
  const std::string fallback = dir.path + "/rescue";
  const std::string user = plain_name("quitter_");
  start_on(deposit, quit_args(fallback));
  count_as(user, 3);
  // The deposit goes, and nothing can recreate it: a regular file sits in its place.
  fs::remove_all(deposit);
  std::ofstream(deposit) << "not a directory\n";
  quit_into_fallback(fallback, user);
  restart_finds(dir.path, fallback, user, 3);
}

// The PostgreSQL deposit's database gone at the soft quit: the users go to the
// (filesystem) fallback all the same, and a node on it has them back.
TEST_F(Shutdown, SoftQuitWithThePostgresDepositGoneParksUsersInTheFallback) {
  scratch_database db;
  TROUPE_NEED_SCRATCH_DATABASE(db);
  scratch_dir dir;
  const std::string fallback = dir.path + "/rescue";
  const std::string user = plain_name("pg_quitter_");
  auto args = quit_args(fallback);
  auto pg = postgres_args(db.url());
  args.insert(args.end(), pg.begin(), pg.end());
  start_on(dir.path + "/local", args);
  count_as(user, 3);
  ASSERT_TRUE(db.cut());
  quit_into_fallback(fallback, user);
  restart_finds(dir.path, fallback, user, 3);
}

TEST_F(Shutdown, SoftQuitWhoseFallbackFailsTooExitsNonZeroNamingTheUser) {
  scratch_dir dir;
  const std::string deposit = dir.path + "/deposit";
  const std::string blocker = dir.path + "/blocker";
  std::ofstream(blocker) << "a file: nothing can be created under it\n";
  const std::string user = plain_name("lost_");
  start_on(deposit, quit_args(blocker + "/rescue"));
  count_as(user, 2);
  fs::remove_all(deposit);
  std::ofstream(deposit) << "not a directory\n";
  node().terminate();
  auto code = node().wait_exit(milliseconds(30000));
  ASSERT_TRUE(code.has_value()) << "still running 30 s after SIGTERM";
  EXPECT_EQ(*code, 1) << "state written nowhere must not exit 0 (nor 3)";
  auto log = node().stderr_log();
  auto line = log.find("NOT SAVED");
  ASSERT_NE(line, std::string::npos) << "no NOT SAVED line";
  auto end = log.find('\n', line);
  EXPECT_NE(log.substr(line, end - line).find(user), std::string::npos) << "the lost user is not named";
}

// A deposit on a full 1 MB tmpfs (needs mount(2): root, or skipped).
TEST_F(Shutdown, SoftQuitOnAFullDiskParksUsersInTheFallback) {
  scratch_dir dir;
  small_tmpfs deposit(dir.path + "/deposit");
  if (!deposit.mounted())
    GTEST_SKIP() << deposit.why();
  const std::string fallback = dir.path + "/rescue";
  const std::string user = plain_name("fullness_");
  start_on(deposit.path, quit_args(fallback));
  count_as(user, 3);
  deposit.fill();
  ASSERT_LT(fs::space(deposit.path).available, 64u * 1024) << "the tmpfs is not full";
  quit_into_fallback(fallback, user);
  restart_finds(dir.path, fallback, user, 3);
}

TEST_F(Shutdown, RequestsStillInFlightAfterTheGraceAreAnswered503AndTheExitIsBounded) {
  const std::string token = "shutdown-admin-" + random_token(12);
  start({"--admin-token", token, "--set", "node.shutdown_grace_seconds=1", "--set",
         "node.shutdown_freeze_seconds=5"});
  http_client sleeper(port());
  ASSERT_STATUS(sleeper.get("/api/whoami"), 200);
  auto user = sleeper.get("/api/whoami").json().value("user", "");
  auto answer = std::async(std::launch::async, [&] {
    return sleeper.post_json("/api/sleep", {{"ms", 40000}}, {}, milliseconds(30000));
  });
  // It is in flight once the node counts it.
  headers_t auth{{"Authorization", "Bearer " + token}};
  ASSERT_TRUE(eventually([&] { return metric(port(), auth, "troupe_http_inflight") >= 1; }, milliseconds(10000)))
      << "the sleep never got in flight";
  auto t0 = std::chrono::steady_clock::now();
  node().terminate();

  response r;
  ASSERT_NO_THROW(r = answer.get()) << "the in-flight request was cut without an answer";
  EXPECT_TRUE(is_json_error(r, 503));
  EXPECT_TRUE(r.has("Retry-After")) << r.describe();
  EXPECT_FALSE(r.keep_alive) << "the 503 of a stopping node should close its connection: " << r.describe();

  // Bounded by grace 1 s + budget 5 s (+ stopping), not by the sleep's 40 s: it exits
  // before the sleep could have ended (how close to 6 s: bench/README.md).
  auto code = node().wait_exit(milliseconds(30000));
  ASSERT_TRUE(code.has_value()) << "still running 30 s after SIGTERM: the shutdown is not bounded by grace + "
                                   "freeze budget";
  std::cerr << "[ info ] the node exited " << ms_since(t0) << " ms after SIGTERM\n";
  // The sleeper either froze (0) or is named as not saved (1); never a silent success for a loss.
  auto log = node().stderr_log();
  if (*code != 0) {
    EXPECT_EQ(*code, 1);
    EXPECT_NE(log.find("NOT SAVED"), std::string::npos) << "a non-zero exit must name who was not saved";
    EXPECT_NE(log.find(user.substr(0, 10)), std::string::npos) << "the sleeper is not named in the log";
  }
}

// Polls /_troupe/health until `want` says yes or 15 s pass; the last answer.
response health_until(uint16_t port, const std::function<bool(const response&)>& want) {
  http_client c(port);
  response r;
  eventually([&] {
    r = c.get("/_troupe/health");
    return want(r);
  }, milliseconds(15000), milliseconds(50));
  return r;
}

TEST_F(Shutdown, HealthIsDegradedAnd503WhileTheDepositCannotBeWritten) {
  scratch_dir dir;
  const std::string deposit = dir.path + "/deposit";
  start_on(deposit, {"--set", "node.health_probe_seconds=0.2"});
  auto ok = [](const response& r) { return r.status == 200 && r.body == R"({"status":"ok"})"; };
  auto r = health_until(port(), ok);
  ASSERT_TRUE(ok(r)) << r.describe();

  fs::rename(deposit, deposit + ".aside");
  std::ofstream(deposit) << "not a directory\n";
  r = health_until(port(), [](const response& r) { return r.status == 503; });
  ASSERT_STATUS(r, 503);
  auto j = r.json();
  EXPECT_EQ(j.value("status", ""), "degraded") << r.describe();
  ASSERT_TRUE(j.contains("reasons") && j["reasons"].is_array() && !j["reasons"].empty()) << r.describe();
  EXPECT_NE(j["reasons"].dump().find("deposit"), std::string::npos) << "no reason names the deposit: " << r.describe();

  fs::remove(deposit);
  fs::rename(deposit + ".aside", deposit);
  r = health_until(port(), ok);
  EXPECT_TRUE(ok(r)) << "health did not come back once the deposit was restored: " << r.describe();
}

}  // namespace

namespace {

bool degraded_for(const response& r, const std::string& reason) {
  if (r.status != 200)  // degraded, but state is still made durable
    return false;
  try {
    auto j = r.json();
    if (j.value("status", "") != "degraded")
      return false;
    for (auto& x : j.at("reasons"))
      if (x.value("reason", "") == reason)
        return true;
  } catch (const std::exception&) {
  }
  return false;
}

TEST_F(Shutdown, HealthIsDegradedDuringARestartStorm) {
  start({"--set", "node.health_max_restart_rate=1", "--set", "group.default.max_user_restarts=1000"});
  auto r = health_until(port(), [](const response& r) { return r.status == 200; });
  ASSERT_EQ(r.body, R"({"status":"ok"})") << r.describe();
  http_client c(port());
  for (int i = 0; i < 40; ++i)
    ASSERT_EQ(c.post("/api/crash").status, 502);
  r = health_until(port(), [](const response& r) { return degraded_for(r, "restart_storm"); });
  EXPECT_TRUE(degraded_for(r, "restart_storm")) << r.describe();
}

TEST_F(Shutdown, HealthIsDegradedWhenParcelsAreQuarantined) {
  const std::string token = "shutdown-admin-" + random_token(12);
  start({"--admin-token", token});
  const std::string user = plain_name("quarantined_");
  {
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", user}}), 200);
    ASSERT_EQ(count_of(c.post("/api/counter/incr")), 1);
  }
  ASSERT_STATUS(http_client(port()).post("/_troupe/users/" + user + "/freeze", {},
                                         {{"Authorization", "Bearer " + token}}, milliseconds(10000)),
                200);
  std::optional<fs::path> parcel;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fs::path(node().deposit_dir()) / "users", ec), end; !ec && it != end;
       it.increment(ec))
    if (it->path().filename() == user + ".parcel")
      parcel = it->path();
  ASSERT_TRUE(parcel) << listing(node().deposit_dir());
  {  // One byte of it flipped: it fails verification when he wakes.
    std::fstream f(*parcel, std::ios::in | std::ios::out | std::ios::binary);
    auto size = static_cast<std::streamoff>(fs::file_size(*parcel));
    ASSERT_GT(size, 4);
    f.seekg(size - 3);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x5a);
    f.seekp(size - 3);
    f.write(&b, 1);
    ASSERT_TRUE(f.good());
  }
  http_client c(port());
  c.post_json("/api/login", {{"user", user}});  // wakes him: the parcel is quarantined (whatever he answers)
  auto r = health_until(port(), [](const response& r) { return degraded_for(r, "quarantine_growing"); });
  EXPECT_TRUE(degraded_for(r, "quarantine_growing")) << r.describe();
}

}  // namespace

}  // namespace shutdown_test_file
