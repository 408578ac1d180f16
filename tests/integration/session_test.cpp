// Session fixation (issue 10, defect 7), against the real node: a connection id
// the node did not mint is replaced like no cookie at all; login and logout
// rotate the id (a new cookie, the old id dead); the ids are signed with a
// secret that is generated once into the deposit (0600, reused across restarts)
// or configured and shared by several nodes; on PostgreSQL the generated
// secret lives in the database, so a node on another host keeps every session.
#include "../support/deposit_backend.hpp"
#include "../support/test_support.hpp"

#include <filesystem>
#include <fstream>

#include <sys/stat.h>

namespace session_test_file {

using namespace troupe::test;
namespace fs = std::filesystem;

namespace {

std::string unique_name(const std::string& prefix) { return prefix + random_token(10); }

// GET /api/whoami with exactly this cookie (no jar).
response whoami_as(uint16_t port, const std::string& cid) {
  http_client c(port);
  c.use_cookie_jar(false);
  return c.get("/api/whoami", {{"Cookie", "troupe_cid=" + cid}});
}

// The troupe_cid a response sets, "" when none.
std::string set_cid(const response& r) {
  auto sc = troupe_cid_cookie(r);
  return sc ? sc->value : std::string();
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class Session : public node_test {
protected:
  // A client whose first request minted its cookie; returns it with the id.
  http_client fresh_guest(std::string& cid) {
    http_client c(port());
    auto r = c.get("/api/whoami");
    EXPECT_STATUS(r, 200);
    cid = set_cid(r);
    EXPECT_FALSE(cid.empty()) << r.describe();
    return c;
  }
};

}  // namespace

TEST_F(Session, AWellFormedIdTheNodeNeverMintedIsReplaced) {
  start();
  std::string minted;
  auto first = fresh_guest(minted);
  EXPECT_EQ(minted.size(), 32u) << minted;
  ASSERT_TRUE(is_url_safe_b64(minted)) << minted;

  // Forged: the shape the node mints, never minted — random, or a minted id with one character changed.
  std::string flipped = minted;
  flipped[3] = flipped[3] == 'A' ? 'B' : 'A';
  for (const std::string& forged : {random_token(minted.size()), flipped}) {
    SCOPED_TRACE("forged id " + forged);
    auto r = whoami_as(port(), forged);
    ASSERT_STATUS(r, 200);
    auto fresh = set_cid(r);
    ASSERT_FALSE(fresh.empty()) << "a forged id was adopted without a new cookie: " << r.describe();
    EXPECT_NE(fresh, forged);
    EXPECT_EQ(fresh.size(), 32u);
    auto j = r.json();
    EXPECT_EQ(j.value("connection", ""), fresh) << r.body;
    EXPECT_EQ(j.value("user", ""), "guest_" + fresh) << r.body;
    EXPECT_NE(j.value("user", ""), "guest_" + forged) << r.body;
    // The replacement is a real id: used again, it is kept.
    auto again = whoami_as(port(), fresh);
    ASSERT_STATUS(again, 200);
    EXPECT_FALSE(again.has("Set-Cookie")) << again.describe();
    EXPECT_EQ(again.json().value("user", ""), "guest_" + fresh);
  }
  // The genuine id is untouched by all that.
  auto r = first.get("/api/whoami");
  EXPECT_FALSE(r.has("Set-Cookie")) << r.describe();
  EXPECT_EQ(r.json().value("connection", ""), minted);
}

TEST_F(Session, LoginRotatesTheIdAndTheOldOneNeverReachesTheUser) {
  start();
  std::string old_cid;
  auto c = fresh_guest(old_cid);
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(count_of(c.post("/api/counter/incr")), i);
  const auto alice = unique_name("alice_");
  auto r = c.post_json("/api/login", {{"user", alice}});
  ASSERT_STATUS(r, 200);
  auto sc = troupe_cid_cookie(r);
  ASSERT_TRUE(sc) << "login kept the connection id: " << r.describe();
  const auto new_cid = sc->value;
  EXPECT_NE(new_cid, old_cid);
  EXPECT_EQ(new_cid.size(), 32u);
  EXPECT_TRUE(sc->has_attribute("Path=/")) << r.get("Set-Cookie");
  EXPECT_TRUE(sc->has_attribute("HttpOnly")) << r.get("Set-Cookie");
  EXPECT_TRUE(sc->has_attribute("SameSite=Lax")) << r.get("Set-Cookie");
  EXPECT_EQ(r.get_all("Set-Cookie").size(), 1u) << r.describe();
  EXPECT_EQ(r.json().value("user", ""), alice);
  EXPECT_EQ(r.json().value("connection", ""), new_cid);

  // The new id is alice's, with what the guest had.
  auto mine = whoami_as(port(), new_cid);
  ASSERT_STATUS(mine, 200);
  EXPECT_FALSE(mine.has("Set-Cookie")) << mine.describe();
  EXPECT_EQ(mine.json().value("user", ""), alice);
  EXPECT_EQ(count_of(c.get("/api/counter")), 3);

  // The old id is dead: a stranger's, with nothing — never alice.
  http_client stale(port());
  stale.use_cookie_jar(false);
  const headers_t old_cookie{{"Cookie", "troupe_cid=" + old_cid}};
  auto w = stale.get("/api/whoami", old_cookie);
  ASSERT_STATUS(w, 200);
  EXPECT_NE(w.json().value("user", ""), alice) << w.body;
  EXPECT_EQ(w.json().value("user", ""), "guest_" + old_cid) << w.body;
  EXPECT_EQ(count_of(stale.get("/api/counter", old_cookie)), 0);
  // and what it does stays away from alice
  ASSERT_EQ(count_of(stale.post("/api/counter/incr", {}, old_cookie)), 1);
  EXPECT_EQ(count_of(c.get("/api/counter")), 3);
}

TEST_F(Session, ALoginWithoutACookieSetsOneCookieTheNewId) {
  start();
  http_client c(port());
  const auto erin = unique_name("erin_");
  auto r = c.post_json("/api/login", {{"user", erin}});  // minted for this request, then rotated
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.get_all("Set-Cookie").size(), 1u) << r.describe();
  const auto cid = set_cid(r);
  EXPECT_EQ(r.json().value("connection", ""), cid);
  auto w = whoami_as(port(), cid);
  EXPECT_FALSE(w.has("Set-Cookie")) << w.describe();
  EXPECT_EQ(w.json().value("user", ""), erin);
}

TEST_F(Session, LoginFromOneUserToAnotherAndLogoutRotateToo) {
  start();
  std::string guest_cid;
  auto c = fresh_guest(guest_cid);
  const auto bob = unique_name("bob_"), carol = unique_name("carol_");
  auto r = c.post_json("/api/login", {{"user", bob}});
  ASSERT_STATUS(r, 200);
  const auto bobs = set_cid(r);
  ASSERT_FALSE(bobs.empty()) << r.describe();
  ASSERT_EQ(count_of(c.post("/api/counter/incr")), 1);  // bob has 1

  r = c.post_json("/api/login", {{"user", carol}});
  ASSERT_STATUS(r, 200);
  const auto carols = set_cid(r);
  ASSERT_FALSE(carols.empty()) << r.describe();
  EXPECT_NE(carols, bobs);
  EXPECT_EQ(whoami_as(port(), carols).json().value("user", ""), carol);
  auto stale = whoami_as(port(), bobs);
  EXPECT_NE(stale.json().value("user", ""), bob) << stale.body;

  r = c.post("/api/logout");
  ASSERT_STATUS(r, 200);
  const auto guests = set_cid(r);
  ASSERT_FALSE(guests.empty()) << "logout kept the connection id: " << r.describe();
  EXPECT_NE(guests, carols);
  EXPECT_EQ(r.json().value("user", ""), "guest_" + guests) << r.body;
  EXPECT_EQ(r.json().value("connection", ""), guests) << r.body;
  EXPECT_EQ(count_of(c.get("/api/counter")), 0);
  EXPECT_EQ(c.get("/api/whoami").json().value("user", ""), "guest_" + guests);
  // carol's old id no longer reaches carol
  auto w = whoami_as(port(), carols);
  ASSERT_STATUS(w, 200);
  EXPECT_NE(w.json().value("user", ""), carol) << w.body;
  // bob kept his own store
  http_client again(port());
  ASSERT_STATUS(again.post_json("/api/login", {{"user", bob}}), 200);
  EXPECT_EQ(count_of(again.get("/api/counter")), 1);
}

TEST_F(Session, AnIdSurvivesARestartOnTheSameDeposit) {
  scratch_dir dir;
  const std::vector<std::string> args{"--set", "group.default.durability=reply"};
  start_on(dir.path, args);
  const auto secret_file = fs::path(dir.path) / "cookie.secret";
  ASSERT_TRUE(fs::exists(secret_file)) << "no secret generated into the deposit";
  struct stat st {};
  ASSERT_EQ(::stat(secret_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  const auto secret = file_text(secret_file);

  http_client c(port());
  const auto dora = unique_name("dora_");
  auto r = c.post_json("/api/login", {{"user", dora}});
  ASSERT_STATUS(r, 200);
  ASSERT_TRUE(c.cookie());
  const auto cid = *c.cookie();
  ASSERT_EQ(count_of(c.post("/api/counter/incr")), 1);
  ASSERT_EQ(count_of(c.post("/api/counter/incr")), 2);

  node().kill9();  // no soft quit: what is on disk must suffice
  start_on(dir.path, args);
  EXPECT_EQ(file_text(secret_file), secret) << "the secret was made anew";
  auto w = whoami_as(port(), cid);
  ASSERT_STATUS(w, 200);
  EXPECT_FALSE(w.has("Set-Cookie")) << "the restarted node refused its own id: " << w.describe();
  EXPECT_EQ(w.json().value("user", ""), dora) << w.body;
  http_client back(port());
  back.set_cookie(cid);
  EXPECT_EQ(count_of(back.get("/api/counter")), 2);
  // The secret is never logged.
  ASSERT_GE(secret.size(), 64u);
  EXPECT_EQ(node().stderr_log().find(secret.substr(0, 64)), std::string::npos);
}

TEST_F(Session, NodesSharingAConfiguredSecretAcceptEachOthersIds) {
  const std::string secret = "shared-" + random_token(24);
  const std::vector<std::string> shared{"--set", "node.cookie_secret=" + secret};
  node_process a(shared), b(shared);  // each on a deposit of its own
  node_process other({"--set", "node.cookie_secret=other-" + random_token(24)});
  EXPECT_FALSE(fs::exists(fs::path(a.deposit_dir()) / "cookie.secret")) << "a configured secret is not generated";

  http_client ca(a.port());
  auto first = ca.get("/api/whoami");
  ASSERT_STATUS(first, 200);
  const auto cid = set_cid(first);
  ASSERT_FALSE(cid.empty()) << first.describe();

  auto at_b = whoami_as(b.port(), cid);
  ASSERT_STATUS(at_b, 200);
  EXPECT_FALSE(at_b.has("Set-Cookie")) << "a member sharing the secret refused the id: " << at_b.describe();
  EXPECT_EQ(at_b.json().value("connection", ""), cid);
  // and the other way round
  http_client cb(b.port());
  const auto from_b = set_cid(cb.get("/api/whoami"));
  ASSERT_FALSE(from_b.empty());
  auto at_a = whoami_as(a.port(), from_b);
  EXPECT_FALSE(at_a.has("Set-Cookie")) << at_a.describe();
  EXPECT_EQ(at_a.json().value("connection", ""), from_b);

  // Another secret, another deployment: the id is replaced there.
  auto elsewhere = whoami_as(other.port(), cid);
  ASSERT_STATUS(elsewhere, 200);
  auto replaced = set_cid(elsewhere);
  EXPECT_FALSE(replaced.empty()) << elsewhere.describe();
  EXPECT_NE(replaced, cid);
  for (auto* n : {&a, &b})
    EXPECT_EQ(n->stderr_log().find(secret), std::string::npos) << "the secret was logged";
}

TEST_F(Session, ABadSecretStopsTheNodeAtStart) {
  scratch_dir dir;
  {  // too short to be a key
    auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--deposit", dir.path + "/a", "--set",
                         "node.cookie_secret=short"},
                        milliseconds(5000));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("troupe: node.cookie_secret: "), std::string::npos) << r.err;
  }
  {  // a generated secret file that is damaged is never replaced silently
    fs::create_directories(dir.path + "/b");
    std::ofstream(dir.path + "/b/cookie.secret") << "0123456789abcdef\n";
    auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--deposit", dir.path + "/b"}, milliseconds(5000));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("troupe: node.cookie_secret: "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("0123456789abcdef"), std::string::npos) << "the secret was shown: " << r.err;
    EXPECT_EQ(file_text(dir.path + "/b/cookie.secret"), "0123456789abcdef\n");
  }
}

// Issue 23 (2): on PostgreSQL the generated secret is kept in the database (the
// source of truth every host shares), never on one host's disk: a node on the
// same database with a fresh deposit directory (another host, a fresh
// container) knows every cookie and every acknowledged change.
TEST_F(Session, OnPostgresTheGeneratedSecretLivesInTheDatabase) {
  scratch_database db;
  TROUPE_NEED_SCRATCH_DATABASE(db);
  auto args = postgres_args(db.url());
  for (auto s : {"group.default.durability=reply"}) {
    args.push_back("--set");
    args.push_back(s);
  }
  struct visitor {
    std::string cid, user;
    long long count = 0;
  };
  std::vector<visitor> seen;
  {
    node_process first(args);
    for (int i = 0; i < 60; ++i) {
      http_client c(first.port());
      visitor v;
      if (i % 2) {  // half of them named, half guests
        v.user = unique_name("pg_");
        ASSERT_STATUS(c.post_json("/api/login", {{"user", v.user}}), 200);
      }
      for (int k = 0; k <= i % 3; ++k)
        v.count = count_of(c.post("/api/counter/incr"));
      ASSERT_TRUE(c.cookie());
      v.cid = *c.cookie();
      if (v.user.empty())
        v.user = "guest_" + v.cid;
      seen.push_back(v);
    }
    EXPECT_FALSE(fs::exists(fs::path(first.deposit_dir()) / "cookie.secret"))
      << "the generated secret went to one host's disk";
    auto stored = psql(db.url(), "SELECT count(*) FROM troupe.secrets WHERE name = 'cookie';");
    ASSERT_TRUE(stored);
    EXPECT_EQ(*stored, "1") << "no secret in the database";
    first.terminate();
    ASSERT_EQ(first.wait_exit(milliseconds(30000)), 0) << first.diagnostics();
  }
  node_process second(args);  // a deposit directory of its own: nothing of the first host's disk
  for (auto& v : seen) {
    auto w = whoami_as(second.port(), v.cid);
    ASSERT_STATUS(w, 200);
    EXPECT_FALSE(w.has("Set-Cookie")) << "came back as a stranger: " << w.describe();
    EXPECT_EQ(w.json().value("user", ""), v.user);
    http_client c(second.port());
    c.use_cookie_jar(false);
    auto r = c.get("/api/counter", {{"Cookie", "troupe_cid=" + v.cid}});
    ASSERT_STATUS(r, 200);
    EXPECT_EQ(count_of(r), v.count) << v.user;
  }
}

}  // namespace session_test_file
