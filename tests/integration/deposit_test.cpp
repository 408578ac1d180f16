// Freezing users to the deposit and waking them (issue 3), against the real node and
// real files: ordered freeze, idle freeze, soft quit + restart, a burst on a frozen user
// (one parcel read), durability "reply" and "interval" under kill -9, a corrupt parcel
// quarantined, a failed write aborting a freeze, the expiry sweep, and the metrics.
//
// Deposit layout relied upon (store/deposit.hpp): DIR/users/<2 hex>/<escaped>.parcel,
// DIR/connections/..., DIR/quarantine/<escaped>.parcel.<time>.<n>; escaping keeps
// [a-z0-9_@-] and writes any other byte as %hh (lower-case hex).
#include "../support/prometheus.hpp"
#include "../support/deposit_backend.hpp"
#include "../support/test_support.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace deposit_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

const std::string token = "deposit-admin-" + random_token(16);

headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

// ---- files ------------------------------------------------------------------------

// The deposit's escaping of a key (independent re-statement of the documented rule).
std::string escaped(const std::string& key) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '@' || c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

// Every regular file under `dir` (recursively) named exactly `name`.
std::vector<fs::path> files_named(const fs::path& dir, const std::string& name) {
  std::vector<fs::path> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return found;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().filename().string() == name)
      found.push_back(it->path());
  }
  return found;
}

// The user parcel of `user` in the deposit, if there is one.
std::optional<fs::path> user_parcel(const std::string& deposit, const std::string& user) {
  auto f = files_named(fs::path(deposit) / "users", escaped(user) + ".parcel");
  if (f.empty())
    return std::nullopt;
  return f.front();
}

// Files in DIR/quarantine whose name starts with "<escaped user>.parcel".
std::vector<fs::path> quarantined(const std::string& deposit, const std::string& user) {
  std::vector<fs::path> found;
  const std::string prefix = escaped(user) + ".parcel";
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fs::path(deposit) / "quarantine", ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().filename().string().rfind(prefix, 0) == 0)
      found.push_back(it->path());
  }
  return found;
}

// ---- metrics ----------------------------------------------------------------------

// The node's metrics, read with this suite's admin token.
std::string metrics_text(uint16_t port) { return troupe::test::metrics_text(port, bearer()); }
double metric(uint16_t port, const std::string& name, const std::string& labels = "") {
  return troupe::test::metric(port, bearer(), name, labels);
}

// ---- requests ---------------------------------------------------------------------

std::string whoami_user(http_client& c) {
  auto r = c.get("/api/whoami");
  if (r.status != 200) {
    ADD_FAILURE() << "GET /api/whoami: " << r.describe();
    return "";
  }
  return r.json().value("user", "");
}

response freeze(uint16_t port, const std::string& user, headers_t h = bearer()) {
  http_client a(port);
  return a.post("/_troupe/users/" + user + "/freeze", {}, h, milliseconds(10000));
}

::testing::AssertionResult froze(const response& r, const std::string& user) {
  if (r.status != 200)
    return ::testing::AssertionFailure() << "freeze of " << user << ": " << r.describe();
  try {
    if (r.json() != json({{"frozen", user}}))
      return ::testing::AssertionFailure() << "freeze of " << user << " answered " << r.body;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << e.what();
  }
  return ::testing::AssertionSuccess();
}

long long incr(http_client& c) { return count_of(c.post("/api/counter/incr")); }
long long counter(http_client& c) { return count_of(c.get("/api/counter")); }

// A live user as the census shows him (GET /_troupe/actors/user:NAME), or an empty object.
json actor_of(uint16_t port, const std::string& user) {
  http_client a(port);
  auto r = a.get("/_troupe/actors/user:" + user, bearer());
  return r.status == 200 ? r.json() : json::object();
}

// Waits until every change of the live `user` is durable in the deposit, without
// freezing him: his census detail says nothing is left unsaved (his last checkpoint
// went to the deposit), then another user is frozen — answered once his parcel is
// durable, and the deposit writes what it was sent in order, so the checkpoint sent
// before it is durable too. Returns why not, or "" once done.
std::string checkpointed(uint16_t port, const std::string& user) {
  json seen;
  if (!eventually([&] {
        seen = actor_of(port, user);
        return seen.value("state", "") == "active" && seen.value("dirty", true) == false;
      }, milliseconds(10000)))
    return "user " + user + " still has unsaved changes: " + seen.dump();
  http_client other(port);
  if (count_of(other.post("/api/counter/incr")) != 1)
    return "the other user was not served";
  const auto name = whoami_user(other);
  auto r = freeze(port, name);
  if (r.status != 200)
    return "the other user's freeze: " + r.describe();
  return "";
}

std::vector<std::string> with_token(std::vector<std::string> args) {
  args.insert(args.begin(), {"--admin-token", token});
  return args;
}

// One node at a time; earlier nodes of the test (restart scenarios) are kept for the
// diagnostics printed when the test fails.
template <class Base>
class with_admin_token : public Base {
protected:
  node_process& start_tok(std::vector<std::string> args = {}) { return Base::start(with_token(std::move(args))); }
  // With the admin token, on `dir` (node_test::start_on).
  node_process& start_on(const std::string& dir, std::vector<std::string> args = {}) {
    return Base::start_on(dir, with_token(std::move(args)));
  }
};

// On both deposit backends (tests/support/deposit_backend.hpp).
class Deposit : public with_admin_token<backend_node_test> {
protected:
  // Whether the deposit holds a parcel of `user`: a file under `dir`, or a row.
  bool has_parcel(const std::string& dir, const std::string& user) {
    if (!on_postgres())
      return user_parcel(dir, user).has_value();
    return pg_has_user_parcel(pg_url, schema, user);
  }
};
TROUPE_ON_EVERY_DEPOSIT_BACKEND(Deposit);

// What only the filesystem backend has (files to corrupt, a directory to take away).
class DepositFiles : public with_admin_token<node_test> {};

}  // namespace

// ---------------------------------------------------------------------------------

TEST_P(Deposit, MetricsAreExported) {
  start_tok();
  http_client c(port());
  ASSERT_EQ(incr(c), 1);
  auto text = metrics_text(port());
  for (const char* name :
       {"troupe_user_freezes_total", "troupe_user_wakes_total", "troupe_deposit_reads_total",
        "troupe_deposit_writes_total", "troupe_deposit_failures_total",
        "troupe_deposit_quarantined_total", "troupe_deposit_heals_total",
        "troupe_deposit_consecutive_failures", "troupe_users_expired_total",
        "troupe_user_wake_seconds_sum", "troupe_user_wake_seconds_count"}) {
    auto v = prometheus_sample(text, name);
    EXPECT_TRUE(v) << "no sample " << name << " in:\n" << text;
    if (v) {
      EXPECT_EQ(*v, 0.0) << name << " on a node that froze nobody";
    }
  }
  EXPECT_EQ(prometheus_sample(text, "troupe_users", "state=\"active\""), 1.0) << text;
  EXPECT_EQ(prometheus_sample(text, "troupe_users", "state=\"frozen\""), 0.0) << text;
  EXPECT_TRUE(prometheus_sample(text, "troupe_user_wake_seconds_bucket", "le=\"+Inf\"")) << text;
  EXPECT_NE(text.find("# TYPE troupe_user_wake_seconds histogram"), std::string::npos) << text;
}

TEST_P(Deposit, OrderedFreezeNeedsTheTokenAndAHostedUser) {
  start_tok();
  http_client c(port());
  ASSERT_EQ(incr(c), 1);
  auto user = whoami_user(c);
  ASSERT_FALSE(user.empty());

  EXPECT_TRUE(is_json_error(freeze(port(), user, {}), 401));
  EXPECT_TRUE(is_json_error(freeze(port(), user, {{"Authorization", "Bearer wrong"}}), 401));
  EXPECT_TRUE(is_json_error(freeze(port(), "nobody_" + random_token(6), bearer()), 404));
  EXPECT_TRUE(is_json_error(freeze(port(), "never-seen", bearer()), 404));
  EXPECT_EQ(metric(port(), "troupe_user_freezes_total"), 0.0);
  EXPECT_FALSE(has_parcel(node().deposit_dir(), user)) << listing(node().deposit_dir());

  ASSERT_TRUE(froze(freeze(port(), user), user));
  // Already frozen: not hosted any more.
  EXPECT_TRUE(is_json_error(freeze(port(), user), 404));
  EXPECT_EQ(metric(port(), "troupe_user_freezes_total"), 1.0);
}

TEST_P(Deposit, OrderedFreezeAndWakeKeepCounterAndNotes) {
  start_tok();
  const auto& dep = node().deposit_dir();
  http_client c(port());
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(incr(c), i);
  ASSERT_STATUS(c.post_json("/api/notes", {{"text", "first"}}), 200);
  ASSERT_STATUS(c.post_json("/api/notes", {{"text", "second \xc3\xa9"}}), 200);
  auto user = whoami_user(c);
  ASSERT_EQ(user.rfind("guest_", 0), 0u) << user;
  const double writes0 = metric(port(), "troupe_deposit_writes_total");

  // The reply comes only once the parcel is durable: the file is there right away.
  ASSERT_TRUE(froze(freeze(port(), user), user));
  ASSERT_TRUE(has_parcel(dep, user)) << "no user parcel for " << user << " (escaped " << escaped(user)
                                      << ") after the ordered freeze:\n"
                                      << listing(dep);
  if (!on_postgres()) {
    EXPECT_GT(fs::file_size(*user_parcel(dep, user)), 0u);
  }
  {
    auto t = metrics_text(port());
    EXPECT_EQ(prometheus_sample(t, "troupe_user_freezes_total"), 1.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"frozen\""), 1.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"active\""), 0.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_user_wakes_total"), 0.0) << t;
    auto w = prometheus_sample(t, "troupe_deposit_writes_total");
    ASSERT_TRUE(w) << t;
    EXPECT_GE(*w, writes0 + 1) << t;
  }

  // The next request wakes him with his state.
  const double reads0 = metric(port(), "troupe_deposit_reads_total");
  EXPECT_EQ(counter(c), 3);
  EXPECT_EQ(note_texts(c.get("/api/notes")),
            (std::vector<std::string>{"first", "second \xc3\xa9"}));
  EXPECT_EQ(whoami_user(c), user);
  EXPECT_EQ(incr(c), 4);
  {
    auto t = metrics_text(port());
    EXPECT_EQ(prometheus_sample(t, "troupe_user_wakes_total"), 1.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"frozen\""), 0.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"active\""), 1.0) << t;
    auto r = prometheus_sample(t, "troupe_deposit_reads_total");
    ASSERT_TRUE(r) << t;
    EXPECT_GE(*r, reads0 + 1) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_user_wake_seconds_count"), 1.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_user_wake_seconds_bucket", "le=\"+Inf\""), 1.0) << t;
  }
  // Installed: the parcel stays until a newer one replaces it (a parcel is
  // removed only once a newer one is durable).
  EXPECT_TRUE(has_parcel(dep, user)) << "the user parcel was removed by his wake:\n" << listing(dep);

  // And again: a second freeze/wake cycle.
  ASSERT_TRUE(froze(freeze(port(), user), user));
  EXPECT_EQ(incr(c), 5);
  EXPECT_EQ(note_texts(c.get("/api/notes")).size(), 2u);
  EXPECT_EQ(metric(port(), "troupe_user_wakes_total"), 2.0);
}

TEST_P(Deposit, LoggedInUserFreezesUnderHisNameAndLoginCarriesTheConnection) {
  start_tok();
  const auto& dep = node().deposit_dir();
  http_client a(port());
  ASSERT_STATUS(a.post_json("/api/login", {{"user", "alice"}}), 200);
  ASSERT_EQ(whoami_user(a), "alice");
  for (int i = 1; i <= 4; ++i)
    ASSERT_EQ(incr(a), i);
  ASSERT_STATUS(a.post_json("/api/notes", {{"text", "alice's note"}}), 200);

  ASSERT_TRUE(froze(freeze(port(), "alice"), "alice"));
  ASSERT_TRUE(has_parcel(dep, "alice")) << listing(dep);
  if (auto parcel = user_parcel(dep, "alice"); !on_postgres()) {
    ASSERT_TRUE(parcel);
    EXPECT_EQ(parcel->filename().string(), "alice.parcel");
    EXPECT_EQ(parcel->parent_path().parent_path(), fs::path(dep) / "users") << *parcel;
  }

  // A fresh guest logs in as the frozen alice: his connection is carried to her.
  http_client b(port());
  ASSERT_EQ(incr(b), 1);  // the guest has a store of his own
  const auto guest = whoami_user(b);
  ASSERT_EQ(guest.rfind("guest_", 0), 0u);
  ASSERT_STATUS(b.post_json("/api/login", {{"user", "alice"}}), 200);
  EXPECT_EQ(whoami_user(b), "alice");
  EXPECT_EQ(counter(b), 4) << "alice had a store: the guest's does not replace it";
  EXPECT_EQ(note_texts(b.get("/api/notes")), std::vector<std::string>{"alice's note"});
  EXPECT_EQ(metric(port(), "troupe_user_wakes_total"), 1.0);

  // Her first connection serves her as well, same actor, same counter.
  EXPECT_EQ(incr(a), 5);
  EXPECT_EQ(incr(b), 6);
  EXPECT_EQ(whoami_user(a), "alice");
}

TEST_P(Deposit, IdleUserIsFrozenAndWokenWithHisState) {
  // 3 s: ten times the busy user's 300 ms between requests, so that a loaded
  // machine (the test command runs 4 tests at a time on 2 cores) never makes him
  // look idle (a freeze begun and thawed by his next request leaves his parcel).
  start_tok({"--set", "group.default.user_idle_freeze_minutes=0.05"});
  const auto& dep = node().deposit_dir();
  http_client idle(port()), busy(port());
  ASSERT_EQ(incr(idle), 1);
  ASSERT_EQ(incr(idle), 2);
  ASSERT_STATUS(idle.post_json("/api/notes", {{"text", "before the nap"}}), 200);
  const auto idle_user = whoami_user(idle);
  ASSERT_EQ(incr(busy), 1);
  const auto busy_user = whoami_user(busy);

  // `busy` keeps making requests every 300 ms (he stays active); `idle` stays quiet
  // until the node says it froze somebody.
  long long busy_count = 1;
  bool frozen = eventually([&] {
    EXPECT_EQ(incr(busy), ++busy_count);
    return prometheus_sample(metrics_text(port()), "troupe_user_freezes_total").value_or(0) >= 1;
  }, milliseconds(10000), milliseconds(300));
  ASSERT_TRUE(frozen) << "the idle user was not frozen within 10 s (idle freeze 3 s)";
  EXPECT_TRUE(has_parcel(dep, idle_user)) << listing(dep);
  {
    auto t = metrics_text(port());
    EXPECT_EQ(prometheus_sample(t, "troupe_user_freezes_total"), 1.0)
        << "only the idle user may have been frozen:\n"
        << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_user_wakes_total"), 0.0) << "the busy user was frozen and woken:\n" << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"frozen\""), 1.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"active\""), 1.0) << t;
  }
  EXPECT_FALSE(has_parcel(dep, busy_user)) << listing(dep);

  // The next request wakes him with his state.
  EXPECT_EQ(counter(idle), 2);
  EXPECT_EQ(note_texts(idle.get("/api/notes")), std::vector<std::string>{"before the nap"});
  EXPECT_EQ(incr(idle), 3);
  EXPECT_EQ(whoami_user(idle), idle_user);
  EXPECT_EQ(metric(port(), "troupe_user_wakes_total"), 1.0);
  EXPECT_EQ(incr(busy), busy_count + 1);
}

TEST_P(Deposit, SoftQuitFreezesEverybodyAndARestartServesThemAll) {
  scratch_dir dir;
  start_on(dir.path);
  http_client g1(port()), g2(port()), alice(port()), bob(port());
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(incr(g1), i);
  ASSERT_STATUS(g1.post_json("/api/notes", {{"text", "g1 note"}}), 200);
  ASSERT_EQ(incr(g2), 1);
  ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(incr(alice), i);
  ASSERT_STATUS(alice.post_json("/api/notes", {{"text", "alice note"}}), 200);
  ASSERT_STATUS(bob.post_json("/api/login", {{"user", "bob"}}), 200);
  ASSERT_EQ(incr(bob), 1);
  ASSERT_EQ(incr(bob), 2);
  const auto g1_user = whoami_user(g1), g2_user = whoami_user(g2);
  const std::string c_g1 = *g1.cookie(), c_g2 = *g2.cookie(), c_alice = *alice.cookie(),
                    c_bob = *bob.cookie();

  node().terminate();
  auto code = node().wait_exit(milliseconds(10000));
  ASSERT_TRUE(code.has_value()) << "still running 10 s after SIGTERM";
  EXPECT_EQ(*code, 0);
  for (const auto& u : {g1_user, g2_user, std::string("alice"), std::string("bob")})
    EXPECT_TRUE(has_parcel(dir.path, u)) << "no parcel for " << u << " after the soft quit:\n"
                                          << listing(dir.path);

  start_on(dir.path);
  http_client n1(port()), n2(port()), na(port()), nb(port());
  n1.set_cookie(c_g1);
  n2.set_cookie(c_g2);
  na.set_cookie(c_alice);
  nb.set_cookie(c_bob);
  EXPECT_EQ(whoami_user(n1), g1_user);
  EXPECT_EQ(counter(n1), 3);
  EXPECT_EQ(note_texts(n1.get("/api/notes")), std::vector<std::string>{"g1 note"});
  EXPECT_EQ(incr(n2), 2);
  EXPECT_EQ(whoami_user(na), "alice");
  EXPECT_EQ(counter(na), 5);
  EXPECT_EQ(note_texts(na.get("/api/notes")), std::vector<std::string>{"alice note"});
  EXPECT_EQ(whoami_user(nb), "bob");
  EXPECT_EQ(incr(nb), 3);
  EXPECT_EQ(n1.cookie(), c_g1) << "the cookie was re-minted";
  EXPECT_EQ(na.cookie(), c_alice) << "the cookie was re-minted";
  // A new connection logging in finds alice by her name alone.
  http_client fresh(port());
  ASSERT_STATUS(fresh.post_json("/api/login", {{"user", "alice"}}), 200);
  EXPECT_EQ(incr(fresh), 6);
  EXPECT_EQ(metric(port(), "troupe_user_wakes_total"), 4.0);
}

// More users than a worker freezes at once (its window of 1024): every one is
// frozen by the soft quit, none reported lost, and all come back.
TEST_P(Deposit, ASoftQuitOfMoreUsersThanTheFreezeWindowSavesEveryOne) {
  constexpr int users = 2100;  // three rounds of the window
  scratch_dir dir;
  start_on(dir.path);
  std::vector<std::string> cookies;
  for (int i = 0; i < users; ++i) {
    http_client c(port());
    ASSERT_EQ(incr(c), 1) << "user " << i;
    if (i % 2) {
      ASSERT_EQ(incr(c), 2);
    }
    cookies.push_back(*c.cookie());
  }
  node().terminate();
  auto code = node().wait_exit(milliseconds(60000));
  ASSERT_TRUE(code.has_value()) << "still running 60 s after SIGTERM";
  EXPECT_EQ(*code, 0) << "a soft quit that saved everybody exits 0";
  EXPECT_EQ(node().stderr_log().find("NOT SAVED"), std::string::npos);
  if (on_postgres()) {
    auto n = psql(pg_url, "SELECT count(*) FROM " + schema + ".users WHERE parcel IS NOT NULL AND "
                          "substring(key from 1 for 6) = convert_to('guest_', 'UTF8');");
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, std::to_string(users));
  } else {
    std::size_t parcels = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(fs::path(dir.path) / "users", ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file() && it->path().filename().string().rfind("guest_", 0) == 0)
        ++parcels;
    EXPECT_EQ(parcels, static_cast<std::size_t>(users));
  }
  start_on(dir.path);
  for (int i = 0; i < users; i += 97) {
    http_client c(port());
    c.set_cookie(cookies[i]);
    EXPECT_EQ(counter(c), i % 2 ? 2 : 1) << "user " << i;
  }
}

TEST_P(Deposit, BurstOnAFrozenUserReadsHisParcelOnce) {
  start_tok();
  http_client c(port());
  constexpr int before = 5, burst = 100;
  for (int i = 1; i <= before; ++i)
    ASSERT_EQ(incr(c), i);
  const auto user = whoami_user(c);
  const std::string cookie = *c.cookie();
  ASSERT_TRUE(froze(freeze(port(), user), user));
  const double reads0 = metric(port(), "troupe_deposit_reads_total");
  const double wakes0 = metric(port(), "troupe_user_wakes_total");

  std::vector<http_client> clients;
  clients.reserve(burst);
  for (int i = 0; i < burst; ++i) {
    clients.emplace_back(port());
    clients.back().set_cookie(cookie);
    ASSERT_NO_THROW(clients.back().connect(milliseconds(5000)));
  }
  std::vector<response> replies(burst);
  std::vector<std::string> errors(burst);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::vector<std::thread> threads;
  for (int i = 0; i < burst; ++i) {
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return go; });
      }
      try {
        replies[i] = clients[i].post("/api/counter/incr", {}, {}, milliseconds(10000));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads)
    t.join();

  std::vector<long long> counts;
  int bad = 0;
  for (int i = 0; i < burst; ++i) {
    if (!errors[i].empty()) {
      if (++bad <= 5)
        ADD_FAILURE() << "request " << i << ": " << errors[i];
      continue;
    }
    if (replies[i].status != 200) {
      if (++bad <= 5)
        ADD_FAILURE() << "request " << i << ": " << replies[i].describe();
      continue;
    }
    counts.push_back(replies[i].json().at("count").get<long long>());
  }
  EXPECT_EQ(bad, 0);
  std::sort(counts.begin(), counts.end());
  std::vector<long long> expected(burst);
  for (int i = 0; i < burst; ++i)
    expected[i] = before + 1 + i;
  EXPECT_EQ(counts, expected) << "the counts are not exactly " << before + 1 << ".."
                              << before + burst << " each once";
  EXPECT_EQ(counter(c), before + burst);

  auto t = metrics_text(port());
  EXPECT_EQ(prometheus_sample(t, "troupe_deposit_reads_total"), reads0 + 1)
      << "a burst of " << burst << " on a frozen user must read his parcel once:\n"
      << t;
  EXPECT_EQ(prometheus_sample(t, "troupe_user_wakes_total"), wakes0 + 1) << t;
}

TEST_P(Deposit, FreezesDuringTrafficLoseNothing) {
  // Ordered freezes keep hitting a user while he increments: every request is answered
  // once, on fresh state.
  start_tok();
  http_client c(port());
  ASSERT_EQ(incr(c), 1);
  const auto user = whoami_user(c);
  std::atomic<bool> stop{false};
  std::atomic<int> frozen{0};
  std::atomic<long long> served{1};  // the last count the client was answered
  std::string freezer_error;
  std::thread freezer([&] {
    try {
      http_client a(port());
      while (!stop) {
        auto r = a.post("/_troupe/users/" + user + "/freeze", {}, bearer(), milliseconds(10000));
        if (r.status == 200)
          ++frozen;
        else if (r.status != 404) {  // 404: frozen already, not woken yet
          freezer_error = r.describe();
          return;
        }
        // The next freeze only once he was woken and served a request since
        // this one ended (two counts: the first may have been served before
        // it). A request a freeze turns away is re-sent once, to his woken
        // actor, and a freeze that reaches that actor while it still reads his
        // parcel goes first and turns it away again: 503 "retry" by design.
        // With a fixed 10 ms between freezes that took a wake slower than
        // 10 ms (ThreadSanitizer: 1 run in 5 failed so; docs/RELIABILITY.md).
        auto after = served.load();
        eventually([&] { return stop || served.load() >= after + 2; }, milliseconds(60000), milliseconds(1));
      }
    } catch (const std::exception& e) {
      freezer_error = e.what();
    }
  });
  std::string error;
  long long expected = 1;
  auto t0 = std::chrono::steady_clock::now();
  while (ms_since(t0) < 3000 && error.empty()) {
    auto r = c.post("/api/counter/incr");
    if (r.status != 200) {
      error = "after count " + std::to_string(expected) + ": " + r.describe();
      break;
    }
    auto n = r.json().at("count").get<long long>();
    if (n != expected + 1)
      error = "count " + std::to_string(n) + " after " + std::to_string(expected);
    expected = n;
    served = n;
  }
  stop = true;
  freezer.join();
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_TRUE(freezer_error.empty()) << freezer_error;
  EXPECT_GE(frozen.load(), 3) << "too few freezes to mean anything";
  EXPECT_EQ(counter(c), expected);
  std::cerr << "[ stats    ] " << expected << " increments, " << frozen.load()
            << " ordered freezes\n";
}

TEST_P(Deposit, DurabilityReplyLosesNoAcknowledgedIncrementOnKill9) {
  scratch_dir dir;
  start_on(dir.path, {"--set", "group.default.durability=reply"});
  constexpr int users = 8;
  std::vector<std::unique_ptr<http_client>> clients;
  for (int i = 0; i < users; ++i) {
    clients.push_back(std::make_unique<http_client>(port()));
    auto r = clients.back()->post_json("/api/login", {{"user", "r" + std::to_string(i)}});
    ASSERT_STATUS(r, 200);
  }
  std::vector<long long> last_ack(users, 0);
  std::vector<std::string> errors(users);
  std::atomic<bool> stop{false};
  std::atomic<long long> acked{0};  // acknowledged increments, all users together
  std::vector<std::thread> threads;
  for (int i = 0; i < users; ++i) {
    threads.emplace_back([&, i] {
      try {
        while (!stop) {
          auto r = clients[i]->post("/api/counter/incr", {}, {}, milliseconds(3000));
          if (r.status != 200) {
            errors[i] = "after " + std::to_string(last_ack[i]) + ": " + r.describe();
            return;
          }
          auto n = r.json().at("count").get<long long>();
          if (n != last_ack[i] + 1) {
            errors[i] = "count " + std::to_string(n) + " after " + std::to_string(last_ack[i]);
            return;
          }
          last_ack[i] = n;
          ++acked;
        }
      } catch (const transport_error&) {
        // the node was killed under us: the request in flight is not acknowledged
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  // Killed in the middle of the traffic, once every user could have had a few increments acknowledged.
  EXPECT_TRUE(eventually([&] { return acked.load() >= 5 * users; }, milliseconds(20000)))
      << acked.load() << " acknowledged increments";
  node().kill9();
  stop = true;
  for (auto& t : threads)
    t.join();
  for (int i = 0; i < users; ++i) {
    EXPECT_TRUE(errors[i].empty()) << "user r" << i << ": " << errors[i];
    EXPECT_GT(last_ack[i], 0) << "user r" << i << " got no increment through before the kill";
  }

  start_on(dir.path, {"--set", "group.default.durability=reply"});
  for (int i = 0; i < users; ++i) {
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", "r" + std::to_string(i)}}), 200);
    auto n = counter(c);
    EXPECT_GE(n, last_ack[i]) << "user r" << i << " lost acknowledged increments";
    EXPECT_LE(n, last_ack[i] + 1) << "user r" << i << " has more than one unacknowledged increment";
  }
  long long total = 0;
  for (auto v : last_ack)
    total += v;
  std::cerr << "[ stats    ] " << total << " acknowledged increments before the kill (durability=reply)\n";
}

TEST_P(Deposit, DurabilityIntervalCheckpointsSurviveKill9) {
  scratch_dir dir;
  const std::vector<std::string> args{"--set", "group.default.durability=interval", "--set",
                                      "group.default.checkpoint_seconds=0.3"};
  start_on(dir.path, args);
  http_client c(port());
  ASSERT_STATUS(c.post_json("/api/login", {{"user", "ivy"}}), 200);
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(incr(c), i);
  auto why = checkpointed(port(), "ivy");
  ASSERT_TRUE(why.empty()) << why;
  // Checkpointed while still active: a parcel, written by a checkpoint; he was not frozen.
  EXPECT_TRUE(has_parcel(dir.path, "ivy")) << listing(dir.path);
  EXPECT_EQ(actor_of(port(), "ivy").value("state", ""), "active");
  {
    auto t = metrics_text(port());
    EXPECT_EQ(prometheus_sample(t, "troupe_user_freezes_total"), 1.0) << "only the other user was frozen:\n" << t;
    EXPECT_GE(prometheus_sample(t, "troupe_deposit_writes_total").value_or(0), 1.0) << t;
    EXPECT_GE(prometheus_sample(t, "troupe_deposit_checkpoints_total").value_or(0), 1.0) << t;
  }
  node().kill9();

  start_on(dir.path, args);
  http_client d(port());
  ASSERT_STATUS(d.post_json("/api/login", {{"user", "ivy"}}), 200);
  EXPECT_EQ(counter(d), 5);
}

// A guest with durability "interval" who logs in while his checkpoint is due:
// the login moves his store to the user and kills his id; no parcel of the
// guest may be written after the login removed it, or his dead cookie would
// wake him again with it (a resurrection). His checkpoint is due 20 ms after
// his first change; the guests log in at moments spread over 0-30 ms after it
// (each reads his counter until his moment comes), so some login meets the
// checkpoint in flight.
TEST_P(Deposit, AGuestLoggingInAsHisCheckpointIsDueLeavesNoParcelBehind) {
  start_tok({"--set", "group.default.durability=interval", "--set", "group.default.checkpoint_seconds=0.02"});
  constexpr int guests = 60;
  std::vector<std::pair<std::string, std::string>> dead;  // guest name, his old cookie
  for (int i = 0; i < guests; ++i) {
    http_client g(port());
    const auto guest = whoami_user(g);
    const auto first_change = std::chrono::steady_clock::now();
    ASSERT_EQ(incr(g), 1);
    const auto moment = first_change + std::chrono::microseconds(30000 * i / guests);
    while (std::chrono::steady_clock::now() < moment)
      ASSERT_EQ(counter(g), 1);
    const std::string cookie = *g.cookie();
    ASSERT_STATUS(g.post_json("/api/login", {{"user", "li" + std::to_string(i)}}), 200);
    EXPECT_EQ(counter(g), 1) << "the user inherits the guest's store";
    dead.emplace_back(guest, cookie);
  }
  // Any checkpoint still on its way has landed once a freeze of somebody else
  // is durable: the deposit writes in order.
  http_client other(port());
  ASSERT_STATUS(other.post_json("/api/login", {{"user", "witness"}}), 200);
  ASSERT_EQ(incr(other), 1);
  ASSERT_TRUE(froze(freeze(port(), "witness"), "witness"));
  int resurrected = 0;
  for (auto& [guest, cookie] : dead) {
    SCOPED_TRACE(guest);
    EXPECT_FALSE(has_parcel(node().deposit_dir(), guest)) << "the guest's parcel outlived his login";
    http_client stranger(port());
    stranger.set_cookie(cookie);
    auto n = counter(stranger);
    EXPECT_EQ(n, 0) << "the dead id woke the guest's store";
    resurrected += n != 0;
  }
  EXPECT_EQ(resurrected, 0) << "of " << guests << " guests";
}

// DISABLED: node bug. A guest whose user parcel was written by a checkpoint
// (durability "interval") or before a reply (durability "reply") -- but who was never
// frozen, so there is no connection parcel -- is started EMPTY after kill -9 + restart
// instead of being woken from his parcel: commander.cpp resolve() finds no connection
// parcel, sets known=false and attaches guest_<cid> with wake=false, so the deposit is
// never read (troupe_deposit_reads_total stays 0, count 0). The next freeze or soft quit
// then overwrites the good parcel with the empty store.
TEST_P(Deposit, DurableGuestResumesFromHisCookieAfterKill9) {
  for (const char* mode : {"interval", "reply"}) {
    SCOPED_TRACE(std::string("durability=") + mode);
    scratch_dir dir;
    const std::vector<std::string> args{"--set", std::string("group.default.durability=") + mode,
                                        "--set", "group.default.checkpoint_seconds=0.3"};
    start_on(dir.path, args);
    http_client c(port());
    for (int i = 1; i <= 5; ++i)
      ASSERT_EQ(incr(c), i);
    const auto user = whoami_user(c);
    const std::string cookie = *c.cookie();
    auto why = checkpointed(port(), user);  // "reply": durable already, once answered
    ASSERT_TRUE(why.empty()) << why;
    ASSERT_TRUE(has_parcel(dir.path, user)) << listing(dir.path);
    node().kill9();

    start_on(dir.path, args);
    http_client d(port());
    d.set_cookie(cookie);
    EXPECT_EQ(whoami_user(d), user);
    EXPECT_EQ(counter(d), 5) << "the guest's durable parcel was not read";
    EXPECT_EQ(metric(port(), "troupe_user_wakes_total"), 1.0);
  }
}

// A corrupt parcel is quarantined and the user refused (503), never started empty
// (issue 10): the deposit answers bad_state, and keeps answering it (its marker).
TEST_F(DepositFiles, CorruptParcelIsQuarantinedAndTheUserRefused) {
  start_tok();
  const auto& dep = node().deposit_dir();
  http_client c(port());
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(incr(c), i);
  const auto user = whoami_user(c);
  ASSERT_TRUE(froze(freeze(port(), user), user));
  auto parcel = user_parcel(dep, user);
  ASSERT_TRUE(parcel) << listing(dep);
  {
    std::fstream f(*parcel, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f) << *parcel;
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

  auto r = c.get("/api/counter");
  EXPECT_STATUS(r, 503);
  EXPECT_FALSE(fs::exists(*parcel)) << "the corrupt parcel is still in its place";
  auto q = quarantined(dep, user);
  ASSERT_EQ(q.size(), 1u) << "expected one quarantined parcel:\n" << listing(dep);
  EXPECT_EQ(q.front().parent_path(), fs::path(dep) / "quarantine");
  EXPECT_EQ(metric(port(), "troupe_deposit_quarantined_total"), 1.0);
  auto log = node().stderr_log();
  EXPECT_NE(log.find(q.front().filename().string()), std::string::npos)
      << "the log does not name the quarantined file " << q.front() << ":\n"
      << log;
  EXPECT_NE(log.find(q.front().string()), std::string::npos)
      << "the log does not name the quarantine path " << q.front() << ":\n"
      << log;
  // He is not started empty on the next try either.
  EXPECT_STATUS(c.post("/api/counter/incr"), 503);
  EXPECT_EQ(metric(port(), "troupe_deposit_quarantined_total"), 1.0);
}

TEST_F(DepositFiles, FailedWriteAbortsTheFreezeAndTheUserKeepsBeingServed) {
  start_tok();
  const std::string dep = node().deposit_dir();
  http_client c(port());
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(incr(c), i);
  ASSERT_STATUS(c.post_json("/api/notes", {{"text", "kept"}}), 200);
  const auto user = whoami_user(c);
  const double freezes0 = metric(port(), "troupe_user_freezes_total");
  const double failures0 = metric(port(), "troupe_deposit_failures_total");

  // DIR/users becomes a regular file: every write under it fails with ENOTDIR (root
  // ignores permission bits, so chmod would not do).
  const fs::path users = fs::path(dep) / "users", away = fs::path(dep) / "users.away";
  fs::rename(users, away);
  { std::ofstream(users.string()) << "not a directory\n"; }
  struct restore {
    fs::path users, away;
    ~restore() {
      std::error_code ec;
      if (fs::is_regular_file(users, ec))
        fs::remove(users, ec);
      if (!fs::exists(users, ec))
        fs::rename(away, users, ec);
    }
  } restore_guard{users, away};

  auto r = freeze(port(), user);
  EXPECT_TRUE(is_json_error(r, 503)) << "a freeze whose write failed must not succeed";
  // Still served where he was, state intact.
  EXPECT_EQ(incr(c), 4);
  EXPECT_EQ(note_texts(c.get("/api/notes")), std::vector<std::string>{"kept"});
  {
    auto t = metrics_text(port());
    EXPECT_GE(prometheus_sample(t, "troupe_deposit_failures_total").value_or(-1), failures0 + 1) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_user_freezes_total"), freezes0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"active\""), 1.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_users", "state=\"frozen\""), 0.0) << t;
    EXPECT_EQ(prometheus_sample(t, "troupe_user_wakes_total"), 0.0) << t;
  }

  // The directory back: the freeze works again, and nothing was lost.
  fs::remove(users);
  fs::rename(away, users);
  ASSERT_TRUE(froze(freeze(port(), user), user));
  EXPECT_TRUE(user_parcel(dep, user)) << listing(dep);
  EXPECT_EQ(incr(c), 5);
  EXPECT_EQ(note_texts(c.get("/api/notes")), std::vector<std::string>{"kept"});
}

TEST_P(Deposit, ExpiredGuestParcelsAreSwept) {
  // 0.0003 h ≈ 1.08 s; the sweep runs every max(1 s, min(expiry)/10).
  start_tok({"--set", "commander.guest_expiry_hours=0.0003"});
  const auto& dep = node().deposit_dir();
  http_client g(port()), a(port());
  ASSERT_EQ(incr(g), 1);
  ASSERT_EQ(incr(g), 2);
  const auto guest = whoami_user(g);
  ASSERT_STATUS(a.post_json("/api/login", {{"user", "alice"}}), 200);
  ASSERT_EQ(incr(a), 1);
  ASSERT_TRUE(froze(freeze(port(), guest), guest));
  ASSERT_TRUE(froze(freeze(port(), "alice"), "alice"));
  ASSERT_TRUE(has_parcel(dep, guest)) << listing(dep);

  bool swept = eventually([&] {
    return prometheus_sample(metrics_text(port()), "troupe_users_expired_total").value_or(0) >= 1 &&
           !has_parcel(dep, guest);
  }, milliseconds(6000));
  EXPECT_TRUE(swept) << "the guest's parcel was not expired within 6 s:\n"
                     << listing(dep) << metrics_text(port());
  EXPECT_EQ(metric(port(), "troupe_users_expired_total"), 1.0);
  // A user (not a guest) has his own, much longer expiry.
  EXPECT_TRUE(has_parcel(dep, "alice")) << listing(dep);
  EXPECT_EQ(metric(port(), "troupe_users", "state=\"frozen\""), 1.0) << "only alice is still frozen";

  // The guest was forgotten: he starts over; alice was not.
  EXPECT_EQ(counter(g), 0);
  EXPECT_EQ(counter(a), 1);
}

// ---------------------------------------------------------------------------------
// The PostgreSQL deposit goes away (issue 12): active users keep being served from
// memory, a change that cannot be made durable is refused and rolled back, wakes wait
// their hold budget and then answer 503 + Retry-After, health says degraded; when the
// database is back the node reconnects by itself and nothing acknowledged is lost.
TEST_F(DepositFiles, PostgresGoneServesActiveUsersHoldsWakesAndLosesNothing) {
  scratch_database db;
  TROUPE_NEED_SCRATCH_DATABASE(db);
  scratch_dir dir;
  auto args = postgres_args(db.url());
  for (auto s : {"group.default.durability=reply", "limits.hold_seconds=4", "node.health_probe_seconds=0.5"}) {
    args.push_back("--set");
    args.push_back(s);
  }
  start_on(dir.path, args);
  http_client active(port()), sleeper(port());
  ASSERT_STATUS(active.post_json("/api/login", {{"user", "ann"}}), 200);
  ASSERT_EQ(incr(active), 1);
  ASSERT_EQ(incr(active), 2);
  ASSERT_STATUS(sleeper.post_json("/api/login", {{"user", "ben"}}), 200);
  ASSERT_EQ(incr(sleeper), 1);
  ASSERT_TRUE(froze(freeze(port(), "ben"), "ben"));
  http_client third(port());
  ASSERT_STATUS(third.post_json("/api/login", {{"user", "cai"}}), 200);
  ASSERT_EQ(incr(third), 1);
  ASSERT_EQ(incr(third), 2);
  ASSERT_TRUE(froze(freeze(port(), "cai"), "cai"));

  // A short outage: the wake waits for the database instead of failing.
  ASSERT_TRUE(db.cut());
  auto waking = std::async(std::launch::async, [&] { return third.get("/api/counter"); });
  EXPECT_TRUE(eventually([&] { return metric(port(), "troupe_deposit_reads_waiting") >= 1; }, milliseconds(5000)))
    << "the wake's read waits for the deposit";
  ASSERT_TRUE(db.restore());
  auto woken = waking.get();
  EXPECT_STATUS(woken, 200);
  EXPECT_EQ(count_of(woken), 2) << "woken with his state once the database was back";
  EXPECT_EQ(metric(port(), "troupe_deposit_reads_waiting"), 0);

  // A longer one.
  ASSERT_TRUE(db.cut());
  EXPECT_EQ(counter(active), 2) << "an active user is served from memory";
  auto change = active.post("/api/counter/incr");
  EXPECT_STATUS(change, 503) << "a change that cannot be made durable is refused";
  EXPECT_EQ(counter(active), 2) << "... and rolled back";
  auto wake = sleeper.get("/api/counter");
  EXPECT_STATUS(wake, 503) << "a wake waits its hold budget, then gives up";
  EXPECT_TRUE(wake.has("Retry-After")) << wake.describe();
  http_client admin(port());
  EXPECT_TRUE(eventually([&] { return admin.get("/_troupe/health").status == 503; }, milliseconds(10000)))
    << "health is degraded while the deposit is away";

  ASSERT_TRUE(db.restore());
  long long after = -1;
  EXPECT_TRUE(eventually([&] {
    auto r = active.post("/api/counter/incr");
    if (r.status == 200)
      after = count_of(r);
    return r.status == 200;
  }, milliseconds(15000))) << "the node reconnects by itself";
  EXPECT_EQ(after, 3) << "each refused change was applied nowhere";
  EXPECT_EQ(counter(sleeper), 1) << "the frozen user wakes with his state";
  EXPECT_TRUE(eventually([&] { return admin.get("/_troupe/health").status == 200; }, milliseconds(10000)));

  // Nothing acknowledged was lost: a kill -9 and a restart on the same database.
  node().kill9();
  start_on(dir.path, args);
  http_client again(port());
  ASSERT_STATUS(again.post_json("/api/login", {{"user", "ann"}}), 200);
  EXPECT_EQ(counter(again), 3);
  ASSERT_STATUS(again.post_json("/api/login", {{"user", "ben"}}), 200);
  EXPECT_EQ(counter(again), 1);
}

// The commander's connection bindings are bounded by the live users: those of a
// frozen user are forgotten (after two sweeps) and his cookie still finds him,
// from his connection's parcel.
TEST_P(Deposit, BindingsOfFrozenUsersAreForgottenAndTheirCookiesStillFindThem) {
  start_tok({"--set", "commander.guest_expiry_hours=0.003"});  // the sweep runs every ~1.1 s
  http_client a(port());
  ASSERT_STATUS(a.post_json("/api/login", {{"user", "alice"}}), 200);
  ASSERT_EQ(incr(a), 1);
  ASSERT_EQ(incr(a), 2);
  EXPECT_TRUE(eventually([&] { return metric(port(), "troupe_connections_bound") == 1; }, milliseconds(10000)));
  ASSERT_TRUE(froze(freeze(port(), "alice"), "alice"));
  EXPECT_TRUE(eventually([&] { return metric(port(), "troupe_connections_bound") == 0; }, milliseconds(10000)))
    << "the binding of a frozen user's connection is kept forever";
  EXPECT_EQ(whoami_user(a), "alice") << "her cookie finds her from the deposit";
  EXPECT_EQ(counter(a), 2);
  EXPECT_TRUE(eventually([&] { return metric(port(), "troupe_connections_bound") == 1; }, milliseconds(10000)));
}

// The PostgreSQL deposit full: its tables in a tablespace on a small tmpfs that a
// filler table fills (root only). A change that cannot be made durable is refused
// and rolled back, never acknowledged; once there is room again it lands, and
// what was acknowledged survives a kill -9.
TEST_F(DepositFiles, PostgresDepositFullRefusesAndRollsBackTheChangeAndLosesNothing) {
  scratch_database db;
  TROUPE_NEED_SCRATCH_DATABASE(db);
  scratch_dir dir;
  small_tmpfs space(dir.path + "/tablespace", "8m");
  if (!space.mounted())
    GTEST_SKIP() << space.why();
  if (::geteuid() == 0) {  // the server runs as Debian's postgres user (scripts/pg_server.sh)
    auto* pw = ::getpwnam("postgres");
    ASSERT_NE(pw, nullptr);
    ASSERT_EQ(::chown(space.path.c_str(), pw->pw_uid, pw->pw_gid), 0);
    ASSERT_EQ(::chmod(dir.path.c_str(), 0755), 0);
  }
  const std::string ts = "ts_" + db.url().substr(db.url().rfind('/') + 1);
  ASSERT_TRUE(psql(db.url(), "CREATE TABLESPACE " + ts + " LOCATION '" + space.path + "';"));
  ASSERT_TRUE(psql(db.url(), "ALTER DATABASE " + db.url().substr(db.url().rfind('/') + 1) +
                               " SET default_tablespace = " + ts + ";"));
  struct drop_tablespace {
    scratch_database& db;
    std::string ts;
    ~drop_tablespace() {
      psql(db.url(), "DROP SCHEMA IF EXISTS troupe CASCADE; DROP TABLE IF EXISTS filler;");
      psql(db.url(), "ALTER DATABASE " + db.url().substr(db.url().rfind('/') + 1) + " RESET default_tablespace;");
      psql(db.url(), "DROP TABLESPACE IF EXISTS " + ts + ";");
    }
  } cleanup{db, ts};
  auto args = postgres_args(db.url());
  args.insert(args.end(), {"--set", "group.default.durability=reply"});
  start_on(dir.path + "/local", args);
  http_client ann(port());
  ASSERT_STATUS(ann.post_json("/api/login", {{"user", "ann"}}), 200);
  ASSERT_EQ(incr(ann), 1);

  // Fill the tablespace: committed chunks of incompressible rows until it refuses.
  ASSERT_TRUE(psql(db.url(), "CREATE TABLE filler (x text); ALTER TABLE filler ALTER x SET STORAGE PLAIN;"));
  std::string why;
  for (int i = 0; i < 100 && why.empty(); ++i)
    psql(db.url(),
         "INSERT INTO filler SELECT (SELECT string_agg(md5(random()::text || g || h), '') "
         "FROM generate_series(1, 30) h) FROM generate_series(1, 500) g;",
         &why);
  ASSERT_NE(why.find("No space left on device"), std::string::npos) << "the tablespace did not fill: " << why;

  // Notes of incompressible text until one cannot be stored: it is refused (503)
  // and rolled back; every one acknowledged before is kept.
  std::size_t acknowledged = 0;
  response refused;
  for (int i = 0; i < 200; ++i) {
    std::string text;
    for (int k = 0; k < 4000 / 24; ++k)
      text += random_token(24);
    auto r = ann.post_json("/api/notes", {{"text", text.substr(0, 4000)}});
    if (r.status != 200) {
      refused = r;
      break;
    }
    acknowledged = r.json().at("notes").size();
  }
  ASSERT_STATUS(refused, 503) << "a change the full deposit could not keep must be refused";
  EXPECT_EQ(note_texts(ann.get("/api/notes")).size(), acknowledged) << "the refused note was applied";
  EXPECT_EQ(counter(ann), 1);

  // Room again: the change lands.
  ASSERT_TRUE(psql(db.url(), "DROP TABLE filler;"));
  auto again = ann.post_json("/api/notes", {{"text", "after the disk was freed"}});
  ASSERT_STATUS(again, 200);
  EXPECT_EQ(again.json().at("notes").size(), acknowledged + 1);

  // Nothing acknowledged was lost.
  node().kill9();
  start_on(dir.path + "/local", args);
  http_client back(port());
  ASSERT_STATUS(back.post_json("/api/login", {{"user", "ann"}}), 200);
  EXPECT_EQ(note_texts(back.get("/api/notes")).size(), acknowledged + 1);
  EXPECT_EQ(counter(back), 1);
}

}  // namespace deposit_test_file
