#include "store/deposit.hpp"
#include "store/postgres_deposit.hpp"
#include "../support/eventually.hpp"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <limits>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

namespace deposit_test_file {

using namespace troupe::store;
using troupe::test::eventually;
namespace fs = std::filesystem;

namespace {

parcel make_parcel(std::uint64_t generation, const std::string& text) {
  parcel p;
  p.generation = generation;
  p.writer_node = "n1";
  p.writer_worker = "default-w1";
  p.cause = parcel_cause::freeze;
  p.payload = pack(text);
  return p;
}

std::string text_of(const parcel& p) {
  std::string s;
  unpack(p.payload, s);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

/// Sets the mtime of `path` to `age` ago.
void age_file(const std::string& path, std::chrono::seconds age) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age.count();
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    out.push_back(e.path().filename().string());
  return out;
}

/// files_in without the users' claim files (fencing: a user's first write makes his).
std::vector<std::string> files_but_claims_in(const std::string& dir) {
  auto all = files_in(dir);
  all.erase(std::remove_if(all.begin(), all.end(), [](const std::string& f) { return f.rfind(".claim-", 0) == 0; }),
            all.end());
  return all;
}

const std::string guest_a = "guest_abcdefghijklmnopqrstuvwx";  // 24-char cid
const std::string guest_b = "guest_ABCDEFGHIJKLMNOPQRSTUV-_";

class deposit_test : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/deposit_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    dep = make_filesystem_deposit(dir);
  }
  void TearDown() override {
    dep.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string user_path(const std::string& key) const {
    return filesystem_parcel_path(dir, parcel_kind::user, key);
  }
  std::string conn_path(const std::string& key) const {
    return filesystem_parcel_path(dir, parcel_kind::connection, key);
  }

  std::string dir;
  std::unique_ptr<deposit> dep;
};

// ---- the backend-agnostic tests: TEST_P over {filesystem, postgres} ---------------------
// The postgres parameter needs a server: TROUPE_TEST_PG_URL (scripts/pg_server.sh start DIR
// prints one). Without it those tests are skipped, or fail when TROUPE_TEST_PG_REQUIRED=1.
// Each test has a schema of its own, dropped at its end.

enum class backend { filesystem, postgres };

void PrintTo(backend b, std::ostream* os) {
  *os << (b == backend::filesystem ? "filesystem" : "postgres");
}

std::string pg_url() {
  const char* u = std::getenv("TROUPE_TEST_PG_URL");
  return u ? u : "";
}

bool pg_required() {
  const char* r = std::getenv("TROUPE_TEST_PG_REQUIRED");
  return r && std::string(r) == "1";
}

std::string hex_of(std::string_view s) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

std::string unhex(std::string_view h) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(v(h[i]) * 16 + v(h[i + 1]));
  return out;
}

/// A bytea literal of `s`.
std::string bytea(std::string_view s) {
  return "'\\x" + hex_of(s) + "'::bytea";
}

/// A second connection to the test server, bypassing the deposit (libpq, text results).
class pg_admin {
public:
  explicit pg_admin(const std::string& url)
      : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK)
      throw std::runtime_error(std::string("test server: ") + PQerrorMessage(conn_));
    exec("SET client_min_messages = warning");
  }
  ~pg_admin() { PQfinish(conn_); }
  pg_admin(const pg_admin&) = delete;
  pg_admin& operator=(const pg_admin&) = delete;

  /// Every row's values (text), or throws with the server's message.
  std::vector<std::vector<std::string>> rows(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error(sql + ": " + msg);
    }
    std::vector<std::vector<std::string>> out;
    for (int i = 0; i < PQntuples(r); ++i) {
      out.emplace_back();
      for (int j = 0; j < PQnfields(r); ++j)
        out.back().emplace_back(PQgetvalue(r, i, j));
    }
    PQclear(r);
    return out;
  }
  /// The first value of the first row; "" when there is none.
  std::string one(const std::string& sql) {
    auto r = rows(sql);
    return r.empty() || r[0].empty() ? std::string() : r[0][0];
  }
  void exec(const std::string& sql) { rows(sql); }

private:
  PGconn* conn_;
};

std::string unique_schema() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "t_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_";
  for (char c : std::string(info ? info->name() : "x"))
    name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return name.substr(0, 63);
}

class any_deposit : public ::testing::TestWithParam<backend> {
protected:
  void SetUp() override {
    if (GetParam() == backend::filesystem) {
      char tmpl[] = "/tmp/deposit_test.XXXXXX";
      ASSERT_NE(::mkdtemp(tmpl), nullptr);
      dir = tmpl;
    } else {
      url = pg_url();
      if (url.empty()) {
        if (pg_required())
          FAIL() << "TROUPE_TEST_PG_REQUIRED=1 but TROUPE_TEST_PG_URL is not set (scripts/pg_server.sh start DIR)";
        GTEST_SKIP() << "TROUPE_TEST_PG_URL is not set: the PostgreSQL deposit is not tested "
                        "(scripts/pg_server.sh start DIR prints a server's URL)";
      }
      schema = unique_schema();
      admin = std::make_unique<pg_admin>(url);
      admin->exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    }
    dep = open();
  }
  void TearDown() override {
    dep.reset();
    if (!dir.empty()) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    if (admin)
      admin->exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
  }

  bool is_fs() const { return GetParam() == backend::filesystem; }

  postgres_options pg_options() const {
    postgres_options o;
    o.url = url;
    o.schema = schema;
    o.reconnect_backoff_min = std::chrono::milliseconds(20);
    o.reconnect_backoff_max = std::chrono::milliseconds(200);
    return o;
  }
  /// Another view of the same deposit (another process's, or a restart).
  std::unique_ptr<deposit> open() const {
    return is_fs() ? make_filesystem_deposit(dir) : make_postgres_deposit(pg_options());
  }

  std::string user_path(const std::string& key) const { return filesystem_parcel_path(dir, parcel_kind::user, key); }
  std::string conn_path(const std::string& key) const {
    return filesystem_parcel_path(dir, parcel_kind::connection, key);
  }
  std::string table(const char* name) const { return schema + "." + name; }

  // --- the stored bytes, bypassing the deposit ---
  std::string raw(bool user, const std::string& key) {
    if (is_fs()) {
      return read_file(user ? user_path(key) : conn_path(key));
    }
    return unhex(admin->one("SELECT encode(parcel, 'hex') FROM " +
                            table(user ? "users" : "connections") + " WHERE key = " + bytea(key)));
  }
  void write_raw(bool user, const std::string& key, const std::string& data) {
    if (is_fs()) {
      const auto path = user ? user_path(key) : conn_path(key);
      fs::create_directories(fs::path(path).parent_path());
      write_file(path, data);
      return;
    }
    admin->exec("INSERT INTO " + table(user ? "users" : "connections") + " (key, parcel) VALUES (" + bytea(key) +
                ", " + bytea(data) + ") ON CONFLICT (key) DO UPDATE SET parcel = EXCLUDED.parcel");
  }
  bool stored(bool user, const std::string& key) {
    if (is_fs()) {
      return fs::exists(user ? user_path(key) : conn_path(key));
    }
    return admin->one("SELECT count(*) FROM " + table(user ? "users" : "connections") + " WHERE key = " +
                      bytea(key) + " AND parcel IS NOT NULL") == "1";
  }
  /// Makes the last write of his parcel `age` ago.
  void age(bool user, const std::string& key, std::chrono::seconds age) {
    if (is_fs()) {
      age_file(user ? user_path(key) : conn_path(key), age);
      return;
    }
    admin->exec("UPDATE " + table(user ? "users" : "connections") + " SET written_at = now() - interval '" +
                std::to_string(age.count()) + " seconds' WHERE key = " + bytea(key));
  }
  /// Makes his claim `age` old.
  void age_claim(const std::string& key, std::chrono::seconds age) {
    if (is_fs()) {
      age_file((fs::path(user_path(key)).parent_path() / (".claim-" + escape_key(key) + ".parcel")).string(), age);
      return;
    }
    admin->exec("UPDATE " + table("users") + " SET claimed_at = now() - interval '" + std::to_string(age.count()) +
                " seconds' WHERE key = " + bytea(key));
  }
  /// What the quarantine holds, oldest first.
  std::vector<std::string> quarantined() {
    std::vector<std::string> out;
    if (is_fs()) {
      auto names = files_in(dir + "/quarantine");
      std::sort(names.begin(), names.end());
      for (const auto& n : names)
        out.push_back(read_file(dir + "/quarantine/" + n));
      return out;
    }
    for (const auto& row : admin->rows("SELECT encode(bytes, 'hex') FROM " + table("quarantine") + " ORDER BY id"))
      out.push_back(unhex(row[0]));
    return out;
  }
  /// Whether `where` (parcel_quarantined::quarantine_path) names a place in this deposit's quarantine.
  bool in_quarantine(const std::string& where) const {
    if (is_fs()) {
      return fs::path(where).parent_path() == fs::path(dir + "/quarantine");
    }
    return where.rfind("postgres:" + schema + ".quarantine id ", 0) == 0;
  }

  std::string dir;               // filesystem
  std::string url, schema;       // postgres
  std::unique_ptr<pg_admin> admin;
  std::unique_ptr<deposit> dep;
};

std::string backend_name(const ::testing::TestParamInfo<backend>& info) {
  return info.param == backend::filesystem ? "filesystem" : "postgres";
}

}  // namespace

TEST_F(deposit_test, creates_its_directories) {
  EXPECT_TRUE(fs::is_directory(dir + "/users"));
  EXPECT_TRUE(fs::is_directory(dir + "/connections"));
  EXPECT_TRUE(fs::is_directory(dir + "/quarantine"));
  EXPECT_TRUE(files_in(dir + "/users").empty());  // the write probe leaves nothing
}





TEST_F(deposit_test, escape_scheme) {
  EXPECT_EQ(escape_key("alice"), "alice");
  EXPECT_EQ(escape_key("A"), "%41");
  EXPECT_EQ(escape_key("."), "%2e");
  EXPECT_EQ(escape_key(".."), "%2e%2e");
  EXPECT_EQ(escape_key(".hidden"), "%2ehidden");
  EXPECT_EQ(escape_key("a@b.c"), "a@b%2ec");
  EXPECT_EQ(escape_key("a/b%"), "a%2fb%25");
  EXPECT_EQ(escape_key(std::string("x\0y", 3)), "x%00y");
  EXPECT_EQ(escape_key(guest_a), guest_a);
}

TEST_F(deposit_test, tricky_names_are_distinct_files_inside_the_deposit) {
  std::vector<std::string> names = {".",   "..",    ".hidden", "a@b.c",  "A",     "a",    guest_a,
                                    guest_b, "Alice", "alice",   "x.y-z_w", "%2e",   "a/../../etc", "users"};
  std::set<std::string> paths;
  const std::string users_root = fs::weakly_canonical(dir + "/users").string() + "/";
  for (std::size_t i = 0; i < names.size(); ++i) {
    dep->put_user(names[i], make_parcel(i + 1, "state " + names[i]));
    auto path = user_path(names[i]);
    auto canon = fs::weakly_canonical(path).string();
    EXPECT_EQ(canon.rfind(users_root, 0), 0u) << names[i] << " -> " << canon;
    auto file = fs::path(path).filename().string();
    EXPECT_NE(file[0], '.') << names[i];
    // Case-insensitive filesystems: no two files may differ only by case.
    std::string lower = canon;
    for (auto& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(paths.insert(lower).second) << names[i] << " collides";
    EXPECT_TRUE(fs::is_regular_file(path)) << names[i];
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto back = dep->get_user(names[i]);
    ASSERT_TRUE(back) << names[i];
    EXPECT_EQ(back->generation, i + 1) << names[i];
    EXPECT_EQ(text_of(*back), "state " + names[i]);
  }
  // Keys starting with '%' are the platform's own (never a user name): not counted.
  auto platform = std::count_if(names.begin(), names.end(), [](const std::string& n) { return n[0] == '%'; });
  EXPECT_EQ(platform, 1);
  EXPECT_EQ(dep->count_users(), names.size() - platform);
}



TEST_F(deposit_test, leftover_temp_files_are_ignored_by_reads) {
  dep->put_user("dave", make_parcel(1, "good"));
  auto shard = fs::path(user_path("dave")).parent_path().string();
  write_file(shard + "/.tmp-99999-0", "half a parcel");
  auto back = dep->get_user("dave");
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "good");
  EXPECT_EQ(dep->count_users(), 1u);
}



TEST_F(deposit_test, empty_file_and_long_key_are_quarantined_too) {
  const std::string upper(255, 'Q');
  dep->put_user(upper, make_parcel(1, "x"));
  write_file(user_path(upper), "");
  EXPECT_THROW(dep->get_user(upper), parcel_quarantined);
  EXPECT_EQ(dep->counters().quarantined, 1u);
  auto q = files_in(dir + "/quarantine");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_LE(q[0].size(), 255u);
  EXPECT_THROW(dep->get_user(upper), parcel_quarantined);  // the marker fits next to a 200-character piece
  dep->remove_user(upper);
  EXPECT_FALSE(dep->get_user(upper));
}

// Root ignores modes, so the write is made to fail in a root-proof way: the
// shard directory is replaced by a regular file (ENOTDIR).
TEST_F(deposit_test, failed_write_throws_and_keeps_the_previous_parcel) {
  dep->put_user("gina", make_parcel(1, "old state"));
  auto shard = fs::path(user_path("gina")).parent_path().string();
  fs::rename(shard, shard + ".aside");
  write_file(shard, "not a directory");

  try {
    dep->put_user("gina", make_parcel(2, "new state"));
    FAIL() << "put did not throw";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find(shard), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dep->counters().failures, 1u);
  EXPECT_EQ(dep->counters().writes, 1u);

  fs::remove(shard);
  fs::rename(shard + ".aside", shard);
  auto back = dep->get_user("gina");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 1u);
  EXPECT_EQ(text_of(*back), "old state");
  EXPECT_EQ(files_but_claims_in(shard).size(), 1u);  // no temp file left
}

// A write that fails half-way (as on a full disk): RLIMIT_FSIZE binds root too.
TEST_F(deposit_test, write_failing_halfway_removes_the_temp_and_keeps_the_previous_parcel) {
  dep->put_user("hank", make_parcel(1, "old state"));
  auto shard = fs::path(user_path("hank")).parent_path().string();

  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    dep->put_user("hank", make_parcel(2, std::string(64 * 1024, 'z')));
  } catch (const deposit_error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("/.tmp-"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_TRUE(threw);
  EXPECT_EQ(dep->counters().failures, 1u);
  auto back = dep->get_user("hank");
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "old state");
  EXPECT_EQ(files_but_claims_in(shard).size(), 1u);  // the temp file was removed
}

TEST(deposit_creation, refuses_an_unusable_directory) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string base = tmpl;
  write_file(base + "/plain", "a file");
  EXPECT_THROW(make_filesystem_deposit(base + "/plain/deposit"), deposit_error);
  EXPECT_THROW(make_filesystem_deposit(base + "/plain"), deposit_error);
  EXPECT_THROW(make_filesystem_deposit("/proc/troupe-deposit"), deposit_error);
  EXPECT_THROW(make_filesystem_deposit(""), deposit_error);
  // An existing deposit is reopened as it is.
  auto d1 = make_filesystem_deposit(base + "/dep/");
  d1->put_user("ivy", make_parcel(4, "kept"));
  d1.reset();
  auto d2 = make_filesystem_deposit(base + "/dep");
  auto back = d2->get_user("ivy");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 4u);
  EXPECT_EQ(d2->count_users(), 1u);
  fs::remove_all(base);
}





TEST(deposit_keys, unescape_inverts_escape) {
  for (std::string key : {"alice", "Bob.Smith", "%global", "über", ".."})
    EXPECT_EQ(troupe::store::unescape_key(troupe::store::escape_key(key)), key);
  EXPECT_FALSE(troupe::store::unescape_key("bad%2"));
  EXPECT_FALSE(troupe::store::unescape_key("bad%zz"));
  EXPECT_FALSE(troupe::store::unescape_key(""));
}

// ---- issue 10: owners, things in place of parcels, modes, healing, full disk --------

namespace {

/// The mode bits (permissions) of `path`, not following a symlink.
unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return 0xffff;
  return st.st_mode & 07777;
}

/// Files whose name starts with ".tmp-" anywhere under `dir`.
std::vector<std::string> temp_files_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(".tmp-", 0) == 0)
      out.push_back(it->path().string());
  return out;
}


}  // namespace





// Format 1 parcels (written before owners) are read: owner unknown, not checked.
namespace {
// A parcel as format 1 wrote it.
struct wire_v1 {
  std::uint32_t magic = parcel::magic;
  std::uint16_t version = 1;
  std::uint64_t generation = 8;
  std::string writer_node = "old";
  std::string writer_worker = "default-w1";
  std::uint8_t cause = 0;
  std::uint64_t sum = 0;
  msgpack::type::raw_ref payload;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, sum, payload);
};
}  // namespace


TEST_F(deposit_test, directory_in_place_of_a_parcel_is_quarantined_and_a_write_succeeds) {
  const auto path = user_path("carl");
  fs::create_directories(path + "/inside");
  write_file(path + "/inside/file", "kept as is");
  try {
    dep->get_user("carl");
    FAIL() << "a directory in place of a parcel was not reported";
  } catch (const parcel_quarantined& e) {
    EXPECT_NE(e.reason().find("directory"), std::string::npos) << e.reason();
    EXPECT_EQ(read_file(e.quarantine_path() + "/inside/file"), "kept as is");  // moved as is
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_THROW(dep->get_user("carl"), parcel_quarantined);
  dep->put_user("carl", make_parcel(1, "fresh"));
  EXPECT_EQ(text_of(*dep->get_user("carl")), "fresh");

  // A write over a directory (never read) moves it to quarantine and lands.
  const auto dpath = user_path("dora");
  fs::create_directories(dpath + "/x");
  dep->put_user("dora", make_parcel(1, "dora"));
  EXPECT_EQ(text_of(*dep->get_user("dora")), "dora");
  EXPECT_EQ(dep->counters().quarantined, 2u);
  auto errors = dep->put_batch({{false, "ed", make_parcel(1, "ed")}, {false, "fay", make_parcel(1, "fay")}});
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  fs::create_directories(user_path("ed") + ".dir");  // unrelated: must not matter
  fs::remove(user_path("fay"));
  fs::create_directories(user_path("fay") + "/y");
  errors = dep->put_batch({{false, "ed", make_parcel(2, "ed2")}, {false, "fay", make_parcel(2, "fay2")}});
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(text_of(*dep->get_user("fay")), "fay2");
  EXPECT_EQ(dep->counters().quarantined, 3u);
  EXPECT_EQ(dep->count_users(), 4u);
}

TEST_F(deposit_test, fifo_socket_and_symlink_in_place_are_quarantined_never_followed) {
  dep->put_user("target", make_parcel(1, "target's"));
  // symlink to a valid parcel: not followed (and would be another owner's anyway)
  const auto link = user_path("lena");
  fs::create_directories(fs::path(link).parent_path());
  fs::create_symlink(user_path("target"), link);
  EXPECT_THROW(dep->get_user("lena"), parcel_quarantined);
  EXPECT_TRUE(fs::exists(user_path("target")));
  // fifo: the open must not block
  const auto fifo = user_path("finn");
  fs::create_directories(fs::path(fifo).parent_path());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(dep->get_user("finn"), parcel_quarantined);
  // socket
  const auto sock_path = user_path("sam");
  fs::create_directories(fs::path(sock_path).parent_path());
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  EXPECT_THROW(dep->get_user("sam"), parcel_quarantined);
  ::close(fd);
  EXPECT_EQ(dep->counters().quarantined, 3u);
  for (const auto& p : {link, fifo, sock_path})
    EXPECT_FALSE(fs::exists(fs::symlink_status(p))) << p;
  std::set<std::string> kinds;
  for (const auto& q : files_in(dir + "/quarantine")) {
    auto st = fs::symlink_status(dir + "/quarantine/" + q).type();
    kinds.insert(st == fs::file_type::symlink ? "symlink" : st == fs::file_type::fifo ? "fifo"
                 : st == fs::file_type::socket ? "socket" : "other");
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"symlink", "fifo", "socket"}));
  // A write over any of them lands (rename replaces them).
  fs::create_symlink(user_path("target"), link);
  dep->put_user("lena", make_parcel(1, "lena"));
  EXPECT_EQ(text_of(*dep->get_user("lena")), "lena");
  EXPECT_EQ(text_of(*dep->get_user("target")), "target's");
}

TEST_F(deposit_test, files_are_0600_and_directories_0700) {
  dep->put_user("alice", make_parcel(1, "a"));
  dep->put_user(std::string(250, 'p'), make_parcel(1, "long"));  // piece directories
  dep->put_connection("c1", make_parcel(1, "c"));
  dep->put_batch({{false, "b1", make_parcel(1, "b")}, {true, "c2", make_parcel(1, "c")}});
  dep->put_user("eve", make_parcel(1, "e"));
  write_file(user_path("eve"), "corrupt");
  ::chmod(user_path("eve").c_str(), 0600);  // written by this test: quarantine keeps modes as they are
  EXPECT_THROW(dep->get_user("eve"), parcel_quarantined);
  std::size_t files = 0, dirs = 0;
  EXPECT_EQ(mode_of(dir), 0700u);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto p = it->path().string();
    if (it->is_directory()) {
      ++dirs;
      EXPECT_EQ(mode_of(p), 0700u) << p;
    } else {
      ++files;
      EXPECT_EQ(mode_of(p), 0600u) << p;
    }
  }
  EXPECT_GE(files, 7u);  // 5 parcels, the quarantined one, its marker
  EXPECT_GE(dirs, 7u);   // users, connections, quarantine, shards, pieces
}

TEST(deposit_creation, tightens_a_deposit_open_to_others) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  const std::string d = base + "/dep";
  for (const auto* sub : {"", "/users", "/connections", "/quarantine"})
    fs::create_directories(d + sub);
  ::chmod(d.c_str(), 0755);
  ::chmod((d + "/users").c_str(), 0777);
  ::chmod((d + "/connections").c_str(), 0750);
  ::chmod((d + "/quarantine").c_str(), 0700);
  auto dep = make_filesystem_deposit(d);
  EXPECT_EQ(mode_of(d), 0700u);
  EXPECT_EQ(mode_of(d + "/users"), 0700u);
  EXPECT_EQ(mode_of(d + "/connections"), 0700u);
  EXPECT_EQ(mode_of(d + "/quarantine"), 0700u);
  // A new deposit below a missing parent: DIR is 0700.
  auto dep2 = make_filesystem_deposit(base + "/a/b/dep");
  EXPECT_EQ(mode_of(base + "/a/b/dep"), 0700u);
  fs::remove_all(base);
}

TEST_F(deposit_test, heals_after_its_directory_is_removed) {
  dep->put_user("alice", make_parcel(1, "before"));
  fs::remove_all(dir);  // rm -rf DIR
  dep->put_user("alice", make_parcel(2, "after"));
  EXPECT_EQ(dep->counters().healed, 1u);
  EXPECT_EQ(text_of(*dep->get_user("alice")), "after");
  for (const auto* sub : {"", "/users", "/connections", "/quarantine"})
    EXPECT_EQ(mode_of(dir + sub), 0700u) << sub;

  // Removed and recreated empty (by an operator): the same.
  fs::remove_all(dir);
  fs::create_directory(dir);
  auto errors = dep->put_batch({{false, "bob", make_parcel(1, "b")}, {true, "c1", make_parcel(1, "c")}});
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(dep->counters().healed, 2u);
  EXPECT_TRUE(dep->get_user("bob"));
  EXPECT_TRUE(dep->get_connection("c1"));

  // Only quarantine/ removed: a bad parcel is still moved there.
  fs::remove_all(dir + "/quarantine");
  write_file(user_path("bob"), "corrupt");
  EXPECT_THROW(dep->get_user("bob"), parcel_quarantined);
  EXPECT_EQ(dep->counters().healed, 3u);
  EXPECT_EQ(files_in(dir + "/quarantine").size(), 1u);

  // The commander generation it gave goes back with the structure: a restarted
  // commander's epochs stay above those of the parcels written since.
  EXPECT_EQ(dep->next_commander_generation(), 1u);
  EXPECT_EQ(dep->next_commander_generation(), 2u);
  fs::remove_all(dir);
  dep->put_user("dora", make_parcel(1, "d"));
  EXPECT_EQ(read_file(dir + "/commander-generation"), "2\n");
  EXPECT_EQ(make_filesystem_deposit(dir)->next_commander_generation(), 3u) << "a restart continues above it";

  // A single put after rm -rf (the one-entry batch path) too.
  fs::remove_all(dir);
  EXPECT_EQ(dep->put_batch({{false, "carl", make_parcel(1, "c")}}), (std::vector<std::string>{""}));
  EXPECT_EQ(dep->counters().healed, 5u);
  EXPECT_EQ(dep->counters().failures, 0u);
  EXPECT_TRUE(temp_files_under(dir).empty());
}

TEST(deposit_healing, cannot_heal_without_the_parent_and_says_so) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  auto dep = make_filesystem_deposit(base + "/parent/dep");
  fs::remove_all(base + "/parent");
  EXPECT_THROW(dep->put_user("alice", make_parcel(1, "x")), deposit_error);
  EXPECT_EQ(dep->counters().healed, 0u);
  EXPECT_EQ(dep->counters().consecutive_failures, 1);
  EXPECT_FALSE(dep->get_user("alice"));  // nothing there: absent, not an error
  fs::create_directories(base + "/parent");
  dep->put_user("alice", make_parcel(1, "x"));  // the parent is back: healed
  EXPECT_EQ(dep->counters().healed, 1u);
  fs::remove_all(base);
}

TEST_F(deposit_test, health_counters_follow_successes_and_failures) {
  const auto& c = dep->counters();
  EXPECT_EQ(c.last_success_unix_ms, 0);
  EXPECT_EQ(c.last_failure_unix_ms, 0);
  const auto t0 = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  dep->put_user("gina", make_parcel(1, "x"));
  EXPECT_GE(c.last_success_unix_ms, t0);
  EXPECT_EQ(c.consecutive_failures, 0);
  // Writes made to fail root-proof: the shard replaced by a file (ENOTDIR).
  auto shard = fs::path(user_path("gina")).parent_path().string();
  fs::rename(shard, shard + ".aside");
  write_file(shard, "not a directory");
  EXPECT_THROW(dep->put_user("gina", make_parcel(2, "y")), deposit_error);
  EXPECT_THROW(dep->put_user("gina", make_parcel(3, "y")), deposit_error);
  EXPECT_THROW(dep->get_user("gina"), deposit_error);
  EXPECT_EQ(c.consecutive_failures, 3);
  EXPECT_GE(c.last_failure_unix_ms, t0);
  EXPECT_EQ(c.failures, 3u);
  fs::remove(shard);
  fs::rename(shard + ".aside", shard);
  EXPECT_TRUE(dep->get_user("gina"));
  EXPECT_EQ(c.consecutive_failures, 0);
  EXPECT_GE(c.last_success_unix_ms, c.last_failure_unix_ms);
}

// ---- a full disk: a 1 MiB tmpfs (root only; skipped elsewhere) ----------------------

namespace {

class full_disk_test : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/deposit_tmpfs.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    mount_point = tmpl;
    std::string cmd = "mount -t tmpfs -o size=1m,mode=0700 tmpfs " + mount_point + " 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      fs::remove(mount_point);
      mount_point.clear();
      GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): the full-disk tests are skipped";
    }
    dir = mount_point + "/deposit";
    dep = make_filesystem_deposit(dir);
  }
  void TearDown() override {
    dep.reset();
    if (!mount_point.empty()) {
      std::system(("umount " + mount_point).c_str());
      fs::remove(mount_point);
    }
  }
  std::string user_path(const std::string& key) const { return filesystem_parcel_path(dir, parcel_kind::user, key); }
  /// Fills the tmpfs up to the last few bytes.
  void fill() {
    std::ofstream f(mount_point + "/filler", std::ios::binary);
    std::string block(4096, 'f');
    while (f.write(block.data(), static_cast<std::streamsize>(block.size())) && f.flush()) {
    }
  }

  std::string mount_point, dir;
  std::unique_ptr<deposit> dep;
};

}  // namespace

TEST_F(full_disk_test, put_on_enospc_keeps_the_previous_parcel_and_no_temp) {
  dep->put_user("alice", make_parcel(1, "old state"));
  try {
    dep->put_user("alice", make_parcel(2, std::string(2 * 1024 * 1024, 'z')));
    FAIL() << "a 2 MiB parcel fitted in a 1 MiB tmpfs";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(temp_files_under(dir).empty());
  EXPECT_EQ(text_of(*dep->get_user("alice")), "old state");
  EXPECT_EQ(dep->counters().failures, 1u);
}

TEST_F(full_disk_test, put_batch_on_enospc_keeps_previous_parcels_and_no_temp) {
  dep->put_user("alice", make_parcel(1, "alice old"));
  dep->put_user("bob", make_parcel(1, "bob old"));
  // One entry too big for the disk: it alone fails, the other lands.
  auto errors = dep->put_batch({{false, "alice", make_parcel(2, std::string(2 * 1024 * 1024, 'a'))},
                                {false, "bob", make_parcel(2, "bob new")}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("No space left on device"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(temp_files_under(dir).empty());
  EXPECT_EQ(text_of(*dep->get_user("alice")), "alice old");
  EXPECT_EQ(text_of(*dep->get_user("bob")), "bob new");
  // The disk full to the brim: every entry fails, nothing is left behind or lost.
  fill();
  errors = dep->put_batch({{false, "alice", make_parcel(3, std::string(64 * 1024, 'a'))},
                           {false, "bob", make_parcel(3, std::string(64 * 1024, 'b'))},
                           {true, "c1", make_parcel(1, std::string(64 * 1024, 'c'))}});
  for (const auto& e : errors)
    EXPECT_NE(e.find("No space left on device"), std::string::npos) << e;
  EXPECT_EQ(dep->counters().consecutive_failures, 3);
  EXPECT_TRUE(temp_files_under(dir).empty());
  EXPECT_EQ(text_of(*dep->get_user("alice")), "alice old");
  EXPECT_EQ(text_of(*dep->get_user("bob")), "bob new");
  EXPECT_FALSE(dep->get_connection("c1"));
  // Space back: writes land again.
  fs::remove(mount_point + "/filler");
  dep->put_user("alice", make_parcel(4, "alice again"));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "alice again");
  EXPECT_EQ(dep->counters().consecutive_failures, 0);
}

// --- fencing: owner epochs (docs/deposit.md "Fencing") ---------------------------------------
// Two deposit objects on one directory are two processes' views of it.

namespace {

parcel epoch_parcel(std::uint64_t epoch, const std::string& text, std::uint64_t generation = 1) {
  auto p = make_parcel(generation, text);
  p.owner_epoch = epoch;
  return p;
}

class fencing_test : public deposit_test {
protected:
  void SetUp() override {
    deposit_test::SetUp();
    other = make_filesystem_deposit(dir);
  }
  void TearDown() override {
    other.reset();
    deposit_test::TearDown();
  }
  std::unique_ptr<deposit> other;  // the second process's view
};

}  // namespace








TEST_F(fencing_test, a_cut_claim_counts_as_none) {
  dep->put_user("ivy", epoch_parcel(3, "s"));
  dep->claim_user("ivy", 4);
  auto claim = (fs::path(user_path("ivy")).parent_path() / ".claim-ivy.parcel").string();
  write_file(claim, "");  // what a crash can leave of a claim (not fsynced)
  EXPECT_EQ(dep->owner_epoch("ivy"), 3u);  // the parcel's epoch still holds
  write_file(claim, "12x\n");
  EXPECT_EQ(dep->owner_epoch("ivy"), 3u);
}


namespace {

// Runs `child` in a fork()ed process (exit code: its result) and `parent` here at once.
template <class Child, class Parent>
int in_two_processes(Child child, Parent parent) {
  int go[2];
  if (::pipe(go) != 0)
    return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    char c;
    ::close(go[1]);
    (void)!::read(go[0], &c, 1);  // both start together
    ::_exit(child());
  }
  ::close(go[0]);
  (void)!::write(go[1], "g", 1);
  ::close(go[1]);
  parent();
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace




TEST_F(fencing_test, the_check_is_made_under_the_shard_lock_another_process_holds) {
  // This test holds the shard's lock as another process writing would; a
  // write of the old epoch that arrives meanwhile waits, then sees the newer
  // parcel the lock holder put in place, and is refused.
  dep->put_user("liz", epoch_parcel(5, "old owner"));
  const auto shard_dir = fs::path(user_path("liz")).parent_path();
  const std::string lock_path = dir + "/users/.fence-" + shard_dir.filename().string() + ".lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  std::atomic<int> outcome{0};  // 1 written, 2 stale, 3 other
  std::thread late([&] {
    try {
      dep->put_user("liz", epoch_parcel(5, "old owner, late", 2));
      outcome = 1;
    } catch (const stale_owner_error&) {
      outcome = 2;
    } catch (const std::exception&) {
      outcome = 3;
    }
  });
  // Wait until it waits for the lock (/proc/locks lists a blocked "->" waiter on its inode).
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const std::string inode = ":" + std::to_string(st.st_ino) + " ";
  auto waits_for_lock = [&] {
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);)
      if (line.find("->") != std::string::npos && line.find(inode) != std::string::npos)
        return true;
    return false;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!waits_for_lock() && outcome == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(outcome.load(), 0) << "the write did not wait for the shard lock";
  // The lock holder's write: a newer owner's parcel, renamed into place.
  auto newer = encode(epoch_parcel(9, "new owner"), "liz");
  const std::string tmp = shard_dir.string() + "/.tmp-lockholder";
  write_file(tmp, std::string(newer.begin(), newer.end()));
  ASSERT_EQ(::rename(tmp.c_str(), user_path("liz").c_str()), 0);
  ::flock(fd, LOCK_UN);
  ::close(fd);
  late.join();
  EXPECT_EQ(outcome.load(), 2) << "1: the old epoch was written past the lock";
  EXPECT_EQ(text_of(*dep->get_user("liz")), "new owner");
}

// ---- backend-agnostic tests (TEST_P: filesystem and postgres) ------------------------------

TEST_P(any_deposit, user_round_trip) {
  auto p = make_parcel(7, "state of alice");
  p.cause = parcel_cause::quit;
  dep->put_user("alice", p);
  auto back = dep->get_user("alice");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 7u);
  EXPECT_EQ(back->writer_node, "n1");
  EXPECT_EQ(back->writer_worker, "default-w1");
  EXPECT_EQ(back->cause, parcel_cause::quit);
  EXPECT_EQ(text_of(*back), "state of alice");
  EXPECT_EQ(dep->counters().writes, 1u);
  EXPECT_EQ(dep->counters().reads, 1u);
  EXPECT_TRUE(stored(true, "alice"));
  // The same bytes as the filesystem backend writes (store::encode).
  EXPECT_EQ(raw(true, "alice"), [&] {
    auto b = encode(p, "alice");
    return std::string(b.begin(), b.end());
  }());
  // Users and connections are separate namespaces.
  EXPECT_FALSE(dep->get_connection("alice"));
}

TEST_P(any_deposit, connection_round_trip) {
  connection_record rec{"c0123456789abcdefghijklm", "alice", {"p1", "p2"}};
  parcel p;
  p.generation = 2;
  p.cause = parcel_cause::login;
  p.payload = pack(rec);
  dep->put_connection(rec.cid, p);
  auto back = dep->get_connection(rec.cid);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 2u);
  EXPECT_EQ(back->cause, parcel_cause::login);
  connection_record r2;
  unpack(back->payload, r2);
  EXPECT_EQ(r2.cid, rec.cid);
  EXPECT_EQ(r2.user, "alice");
  EXPECT_EQ(r2.pages, rec.pages);
  EXPECT_FALSE(dep->get_user(rec.cid));
  dep->remove_connection(rec.cid);
  EXPECT_FALSE(dep->get_connection(rec.cid));
  dep->remove_connection(rec.cid);  // absent is fine
}

TEST_P(any_deposit, overwrite_keeps_the_newest) {
  for (std::uint64_t g = 1; g <= 5; ++g)
    dep->put_user("bob", make_parcel(g, "v" + std::to_string(g)));
  auto back = dep->get_user("bob");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 5u);
  EXPECT_EQ(text_of(*back), "v5");
  EXPECT_EQ(dep->counters().writes, 5u);
  if (is_fs()) {  // no temp file left behind
    for (const auto& f : files_but_claims_in(fs::path(user_path("bob")).parent_path().string()))
      EXPECT_NE(f[0], '.') << f;
  }
}

TEST_P(any_deposit, absent_and_remove) {
  EXPECT_FALSE(dep->get_user("nobody"));
  EXPECT_EQ(dep->counters().reads, 0u);  // nothing was read
  dep->remove_user("nobody");            // absent is fine
  dep->put_user("carol", make_parcel(1, "x"));
  ASSERT_TRUE(dep->get_user("carol"));
  dep->remove_user("carol");
  EXPECT_FALSE(dep->get_user("carol"));
  EXPECT_FALSE(stored(true, "carol"));
  EXPECT_EQ(dep->counters().failures, 0u);
}

TEST_P(any_deposit, platform_keys_are_never_swept_nor_counted) {
  dep->put_user("%global", make_parcel(1, "snapshot"));
  dep->put_user("old", make_parcel(1, "x"));
  age(true, "%global", std::chrono::hours(48));
  age(true, "old", std::chrono::hours(48));
  EXPECT_EQ(dep->count_users(), 1u);
  EXPECT_EQ(dep->sweep(std::chrono::hours(1), std::chrono::hours(1)), 1u);
  EXPECT_TRUE(dep->get_user("%global"));
  EXPECT_FALSE(dep->get_user("old"));
}

TEST_P(any_deposit, key_length_limits) {
  auto p = make_parcel(1, "x");
  EXPECT_THROW(dep->put_user("", p), std::invalid_argument);
  EXPECT_THROW(dep->get_user(""), std::invalid_argument);
  EXPECT_THROW(dep->remove_user(""), std::invalid_argument);
  EXPECT_THROW(dep->put_connection("", p), std::invalid_argument);
  const std::string too_long(256, 'a');
  EXPECT_THROW(dep->put_user(too_long, p), std::invalid_argument);
  EXPECT_THROW(dep->get_user(too_long), std::invalid_argument);
  EXPECT_THROW(dep->remove_connection(too_long), std::invalid_argument);
  EXPECT_EQ(dep->count_users(), 0u);

  // The longest keys work (on files even when escaping triples them: nested pieces), and any byte.
  const std::string plain(255, 'a');
  const std::string upper(255, 'A');
  const std::string dots(255, '.');
  const std::string odd("x\0y\xff/..%", 9);
  for (const auto& k : {plain, upper, dots, odd}) {
    dep->put_user(k, make_parcel(3, k.substr(0, 1)));
    auto back = dep->get_user(k);
    ASSERT_TRUE(back);
    EXPECT_EQ(text_of(*back), k.substr(0, 1));
  }
  EXPECT_EQ(dep->count_users(), 4u);
  std::set<std::string> listed;
  dep->for_each_user([&](const std::string& name) { listed.insert(name); });
  EXPECT_EQ(listed, (std::set<std::string>{plain, upper, dots, odd}));
  for (const auto& k : {plain, upper, dots, odd}) {
    dep->remove_user(k);
    EXPECT_FALSE(dep->get_user(k));
  }
}

TEST_P(any_deposit, corrupted_parcel_is_quarantined) {
  dep->put_user("eve", make_parcel(1, "a fairly long state so that a byte can be flipped"));
  auto data = raw(true, "eve");
  data[data.size() - 5] ^= 0x20;  // inside the payload
  write_raw(true, "eve", data);

  try {
    dep->get_user("eve");
    FAIL() << "a corrupt parcel was not reported as quarantined";
  } catch (const parcel_quarantined& e) {
    EXPECT_EQ(e.key(), "eve");
    EXPECT_EQ(e.reason(), "parcel checksum mismatch");
    EXPECT_TRUE(in_quarantine(e.quarantine_path())) << e.quarantine_path();
  }
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_EQ(dep->counters().reads, 1u);
  EXPECT_FALSE(stored(true, "eve"));
  auto q = quarantined();
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0], data);  // moved, never altered
  if (is_fs()) {
    EXPECT_EQ(files_in(dir + "/quarantine")[0].rfind("eve.parcel.", 0), 0u);
  }
  // He is not started empty: every later read says so too, until a new parcel.
  EXPECT_THROW(dep->get_user("eve"), parcel_quarantined);
  EXPECT_THROW(dep->claim_user("eve", 3), parcel_quarantined);
  EXPECT_EQ(dep->counters().quarantined, 1u);
  dep->put_user("eve", make_parcel(2, "fresh"));
  ASSERT_TRUE(dep->get_user("eve"));
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_EQ(quarantined().size(), 1u);  // never deleted
}

TEST_P(any_deposit, truncated_parcel_is_quarantined) {
  connection_record rec{"c0123456789abcdefghijklm", "frank", {"p1"}};
  parcel p;
  p.payload = pack(rec);
  dep->put_connection(rec.cid, p);
  dep->put_user("frank", make_parcel(1, "state of frank"));
  for (bool user : {false, true}) {
    const std::string key = user ? "frank" : rec.cid;
    auto data = raw(user, key);
    write_raw(user, key, data.substr(0, data.size() / 2));
  }
  EXPECT_THROW(dep->get_connection(rec.cid), parcel_quarantined);
  EXPECT_THROW(dep->get_user("frank"), parcel_quarantined);
  EXPECT_FALSE(dep->get_connection(rec.cid)) << "a connection leaves no marker: found nothing next time";
  EXPECT_THROW(dep->get_user("frank"), parcel_quarantined) << "a user's marker says it again";
  EXPECT_EQ(dep->counters().quarantined, 2u);
  EXPECT_FALSE(stored(false, rec.cid));
  EXPECT_FALSE(stored(true, "frank"));
  EXPECT_EQ(quarantined().size(), 2u);
}

TEST_P(any_deposit, parcel_copied_over_another_users_is_quarantined_and_he_stays_refused) {
  dep->put_user("bob", make_parcel(5, "bob's state"));
  dep->put_user("alice", make_parcel(3, "alice's state"));
  const auto bobs = raw(true, "bob");
  write_raw(true, "alice", bobs);  // an operator's mistake, or an attack

  try {
    dep->get_user("alice");
    FAIL() << "bob's parcel was served to alice";
  } catch (const parcel_quarantined& e) {
    EXPECT_EQ(e.key(), "alice");
    EXPECT_NE(e.reason().find("'bob'"), std::string::npos) << e.reason();
    EXPECT_NE(e.reason().find("'alice'"), std::string::npos) << e.reason();
    if (is_fs()) {
      EXPECT_EQ(read_file(e.quarantine_path()), bobs);  // moved as it was
    }
  }
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_FALSE(stored(true, "alice"));
  ASSERT_EQ(quarantined(), std::vector<std::string>{bobs});
  // Not "absent": she is refused again (the marker), bob is untouched.
  try {
    dep->get_user("alice");
    FAIL() << "the second read of alice found nothing: she would start empty";
  } catch (const parcel_quarantined& e) {
    EXPECT_NE(e.reason().find("'bob'"), std::string::npos) << e.reason();
    EXPECT_TRUE(in_quarantine(e.quarantine_path())) << e.quarantine_path();
  }
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_EQ(text_of(*dep->get_user("bob")), "bob's state");
  EXPECT_EQ(dep->count_users(), 1u) << "the marker is not a user";
  std::set<std::string> listed;
  dep->for_each_user([&](const std::string& name) { listed.insert(name); });
  EXPECT_EQ(listed, std::set<std::string>{"bob"}) << "the marker is not a user";
  // A removal (the operator's way out) or a new parcel lifts it.
  dep->remove_user("alice");
  EXPECT_FALSE(dep->get_user("alice"));
  write_raw(true, "alice", bobs);
  EXPECT_THROW(dep->get_user("alice"), parcel_quarantined);
  dep->put_user("alice", make_parcel(4, "fresh"));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "fresh");
  dep->remove_user("alice");
  EXPECT_FALSE(dep->get_user("alice"));
}

TEST_P(any_deposit, connection_parcel_of_another_connection_is_quarantined) {
  connection_record rec{"cAAAAAAAAAAAAAAAAAAAAAAA", "mallory", {}};
  parcel cp;
  cp.payload = pack(rec);
  dep->put_connection(rec.cid, cp);
  write_raw(false, "cBBBBBBBBBBBBBBBBBBBBBBB", raw(false, rec.cid));
  EXPECT_THROW(dep->get_connection("cBBBBBBBBBBBBBBBBBBBBBBB"), parcel_quarantined);
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_FALSE(dep->get_connection("cBBBBBBBBBBBBBBBBBBBBBBB"));
  EXPECT_TRUE(dep->get_connection(rec.cid));
}

TEST_P(any_deposit, quarantine_user_on_the_callers_word) {
  dep->put_user("olga", make_parcel(2, "a state of another shape"));
  const auto bytes_before = raw(true, "olga");
  auto q = dep->quarantine_user("olga", "payload does not decode as notes_state v3");
  EXPECT_TRUE(in_quarantine(q)) << q;
  EXPECT_EQ(quarantined(), std::vector<std::string>{bytes_before});
  EXPECT_FALSE(stored(true, "olga"));
  try {
    dep->get_user("olga");
    FAIL() << "olga was not refused";
  } catch (const parcel_quarantined& e) {
    EXPECT_NE(e.reason().find("notes_state v3"), std::string::npos) << e.reason();
    EXPECT_EQ(e.quarantine_path(), q);
  }
  EXPECT_EQ(dep->quarantine_user("nobody", "x"), "");
  EXPECT_THROW(dep->get_user("nobody"), parcel_quarantined);  // the marker is left all the same
  EXPECT_EQ(dep->counters().quarantined, 1u);
}

TEST_P(any_deposit, put_records_the_key_as_owner) {
  auto parcel_of = [&](bool user, const std::string& key) {
    auto data = raw(user, key);
    return decode(data.data(), data.size());
  };
  dep->put_user("alice", make_parcel(1, "a"));
  EXPECT_EQ(parcel_of(true, "alice").owner, "alice");
  EXPECT_EQ(dep->get_user("alice")->owner, "alice");
  connection_record rec{"c0123456789abcdefghijklm", "alice", {}};
  parcel cp;
  cp.payload = pack(rec);
  dep->put_connection(rec.cid, cp);
  EXPECT_EQ(parcel_of(false, rec.cid).owner, rec.cid);
  // A parcel naming its owner already is written as is; another owner is refused.
  auto own = make_parcel(2, "b");
  own.owner = "bob";
  own.state_version = 4;
  own.owner_epoch = 9;
  dep->put_user("bob", own);
  auto back = dep->get_user("bob");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->owner, "bob");
  EXPECT_EQ(back->state_version, 4u);
  EXPECT_EQ(back->owner_epoch, 9u);
  EXPECT_THROW(dep->put_user("carol", own), deposit_error);
  EXPECT_FALSE(stored(true, "carol"));
  auto errors = dep->put_batch({{false, "carol", own}, {false, "dave", make_parcel(1, "d")}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("cannot be written under"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(parcel_of(true, "dave").owner, "dave");
}

TEST_P(any_deposit, format_1_parcel_still_reads) {
  wire_v1 w;
  auto payload = pack(std::string("from version 1"));
  w.sum = checksum(payload.data(), payload.size());
  w.payload = msgpack::type::raw_ref(payload.data(), static_cast<std::uint32_t>(payload.size()));
  auto bytes = pack(w);
  dep->put_user("vera", make_parcel(1, "x"));  // makes the shard
  write_raw(true, "vera", std::string(bytes.begin(), bytes.end()));
  auto back = dep->get_user("vera");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 8u);
  EXPECT_EQ(back->owner, "");
  EXPECT_EQ(back->state_version, 0u);
  EXPECT_EQ(text_of(*back), "from version 1");
  EXPECT_EQ(dep->counters().quarantined, 0u);
}

TEST_P(any_deposit, sweep_honours_ages) {
  using namespace std::chrono;
  const auto user_max = hours(10);
  const auto guest_max = hours(1);
  auto put_aged = [&](const std::string& user, seconds a) {
    dep->put_user(user, make_parcel(1, user));
    age(true, user, a);
  };
  put_aged("old_user", hours(11));       // removed
  put_aged("recent_user", hours(2));     // kept: users live 10 h
  put_aged("fresh_user", seconds(0));    // kept
  put_aged(guest_a, hours(2));           // removed: guests live 1 h
  put_aged(guest_b, minutes(30));        // kept
  put_aged(std::string(255, 'O'), hours(12));  // removed (nested pieces on files)
  dep->put_connection("c_old", make_parcel(1, "c"));
  age(false, "c_old", hours(11));     // removed: connections live max(10 h, 1 h)
  dep->put_connection("c_mid", make_parcel(1, "c"));
  age(false, "c_mid", hours(5));      // kept
  std::string shard;
  if (is_fs()) {
    // Leftover temp files: an old one goes, a fresh one (a write in progress) stays.
    shard = fs::path(user_path("fresh_user")).parent_path().string();
    write_file(shard + "/.tmp-424242-1", "leftover");
    age_file(shard + "/.tmp-424242-1", hours(1));
    write_file(shard + "/.tmp-424242-2", "in progress");
  }

  EXPECT_EQ(dep->count_users(), 6u);
  EXPECT_EQ(dep->sweep(user_max, guest_max), 3u);
  EXPECT_EQ(dep->counters().removed, 3u);
  EXPECT_FALSE(dep->get_user("old_user"));
  EXPECT_FALSE(dep->get_user(guest_a));
  EXPECT_FALSE(dep->get_user(std::string(255, 'O')));
  EXPECT_TRUE(dep->get_user("recent_user"));
  EXPECT_TRUE(dep->get_user("fresh_user"));
  EXPECT_TRUE(dep->get_user(guest_b));
  EXPECT_FALSE(dep->get_connection("c_old"));
  EXPECT_TRUE(dep->get_connection("c_mid"));
  EXPECT_EQ(dep->count_users(), 3u);
  EXPECT_EQ(dep->counters().failures, 0u);
  // Nothing left to do; no tombstone left behind.
  EXPECT_EQ(dep->sweep(user_max, guest_max), 0u);
  if (is_fs()) {
    EXPECT_FALSE(fs::exists(shard + "/.tmp-424242-1"));
    EXPECT_TRUE(fs::exists(shard + "/.tmp-424242-2"));
    for (const auto& s : files_in(dir + "/users"))
      for (const auto& f : files_in(dir + "/users/" + s))
        EXPECT_NE(f.rfind(".sweep-", 0), 0u) << f;
  }
}

TEST_P(any_deposit, count_users) {
  EXPECT_EQ(dep->count_users(), 0u);
  for (int i = 0; i < 300; ++i)
    dep->put_user("user" + std::to_string(i), make_parcel(1, "s"));
  dep->put_connection("c1", make_parcel(1, "c"));
  EXPECT_EQ(dep->count_users(), 300u);
  dep->remove_user("user7");
  EXPECT_EQ(dep->count_users(), 299u);
  dep->claim_user("claimed_only", 5);  // a claim without a parcel is not a user
  EXPECT_EQ(dep->count_users(), 299u);
}

TEST_P(any_deposit, concurrent_puts_and_gets_on_distinct_keys) {
  constexpr int threads = 8;
  constexpr int keys = 50;
  constexpr int rounds = 20;
  std::atomic<int> errors{0};
  std::atomic<bool> done{false};
  auto key = [](int k) { return (k % 2 ? "User" : "guest_") + std::to_string(k); };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 1; r <= rounds; ++r) {
        for (int k = t; k < keys; k += threads) {
          auto text = key(k) + "#" + std::to_string(r);
          if (k % 3 == 0) {
            connection_record rec{key(k), "u", {text}};
            parcel p;
            p.generation = static_cast<std::uint64_t>(r);
            p.payload = pack(rec);
            dep->put_connection(key(k), p);
            auto back = dep->get_connection(key(k));
            connection_record got;
            if (back)
              unpack(back->payload, got);
            if (!back || back->generation != static_cast<std::uint64_t>(r) || got.pages != rec.pages)
              ++errors;
          } else {
            dep->put_user(key(k), make_parcel(static_cast<std::uint64_t>(r), text));
            auto back = dep->get_user(key(k));
            if (!back || back->generation != static_cast<std::uint64_t>(r) || text_of(*back) != text)
              ++errors;
          }
        }
      }
    });
  }
  // A background sweep with long ages and counts run meanwhile: they must not disturb anything.
  std::thread sweeper([&] {
    while (!done) {
      dep->sweep(std::chrono::hours(1), std::chrono::hours(1));
      dep->count_users();
    }
  });
  for (auto& th : pool)
    th.join();
  done = true;
  sweeper.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(dep->counters().failures, 0u);
  EXPECT_EQ(dep->counters().quarantined, 0u);
  EXPECT_EQ(dep->counters().removed, 0u);
  EXPECT_EQ(dep->counters().writes, static_cast<std::uint64_t>(keys * rounds));
  int user_keys = 0;
  for (int k = 0; k < keys; ++k)
    if (k % 3 != 0)
      ++user_keys;
  EXPECT_EQ(dep->count_users(), static_cast<std::size_t>(user_keys));
}

TEST_P(any_deposit, lists_every_user_by_name_platform_keys_aside) {
  std::set<std::string> put{"alice", "Bob.Smith", "a@b", std::string(200, 'x'), "guest_AbCdEfGhIjKlMnOpQrStUvWx"};
  for (auto& name : put)
    dep->put_user(name, make_parcel(1, "s"));
  dep->put_user("%global", make_parcel(1, "g"));
  dep->put_connection("c1", make_parcel(1, "c"));
  std::set<std::string> listed;
  dep->for_each_user([&](const std::string& name) { listed.insert(name); });
  EXPECT_EQ(listed, put);
}

TEST_P(any_deposit, lists_more_users_than_a_page) {
  // More than one page of keys (10,000 per page on postgres), written in batches.
  std::vector<deposit::batch_entry> batch;
  for (int i = 0; i < 10500; ++i)
    batch.push_back({false, "u" + std::to_string(i), make_parcel(1, "s")});
  auto errors = dep->put_batch(batch);
  EXPECT_EQ(std::count(errors.begin(), errors.end(), ""), 10500);
  std::set<std::string> listed;
  std::size_t calls = 0;
  dep->for_each_user([&](const std::string& name) {
    listed.insert(name);
    ++calls;
  });
  EXPECT_EQ(calls, 10500u);
  EXPECT_EQ(listed.size(), 10500u);
  EXPECT_EQ(dep->count_users(), 10500u);
}

TEST_P(any_deposit, a_batch_lands_whole_and_durable_for_another_view) {
  // Connections and users mixed, a key twice (the later entry wins), more entries than batch_rows.
  std::vector<deposit::batch_entry> batch;
  for (int i = 0; i < 2500; ++i)
    batch.push_back({i % 5 == 0, "k" + std::to_string(i), make_parcel(1, "first " + std::to_string(i))});
  batch.push_back({false, "k1", make_parcel(2, "second 1")});
  auto errors = dep->put_batch(batch);
  ASSERT_EQ(errors.size(), batch.size());
  EXPECT_EQ(std::count(errors.begin(), errors.end(), ""), static_cast<long>(batch.size()));
  EXPECT_EQ(dep->counters().writes, batch.size());
  auto view = open();  // a restart, or another member
  for (int i = 0; i < 2500; ++i) {
    auto p = i % 5 == 0 ? view->get_connection("k" + std::to_string(i)) : view->get_user("k" + std::to_string(i));
    ASSERT_TRUE(p) << i;
    EXPECT_EQ(text_of(*p), i == 1 ? "second 1" : "first " + std::to_string(i));
  }
  EXPECT_EQ(view->count_users(), 2000u);
}

TEST_P(any_deposit, health_counters_follow_successes) {
  const auto& c = dep->counters();
  EXPECT_EQ(c.last_success_unix_ms, 0);
  EXPECT_EQ(c.last_failure_unix_ms, 0);
  const auto t0 = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  dep->put_user("gina", make_parcel(1, "x"));
  EXPECT_GE(c.last_success_unix_ms, t0);
  EXPECT_EQ(c.consecutive_failures, 0);
  EXPECT_THROW(dep->put_user("gina", [] {
    auto p = make_parcel(2, "y");
    p.owner = "someone else";
    return p;
  }()), deposit_error);
  EXPECT_EQ(c.consecutive_failures, 1);
  EXPECT_GE(c.last_failure_unix_ms, t0);
  EXPECT_TRUE(dep->get_user("gina"));
  EXPECT_EQ(c.consecutive_failures, 0);
}

// --- fencing, on both backends: two deposit objects are two processes' views --------------

class any_fencing : public any_deposit {
protected:
  void SetUp() override {
    any_deposit::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    other = open();
  }
  void TearDown() override {
    other.reset();
    any_deposit::TearDown();
  }
  std::unique_ptr<deposit> other;  // the second process's view
};

TEST_P(any_fencing, an_older_epoch_is_refused_after_a_newer_write) {
  dep->put_user("alice", epoch_parcel(10, "a's state"));
  other->put_user("alice", epoch_parcel(20, "b's state"));
  try {
    dep->put_user("alice", epoch_parcel(10, "a's stale state", 2));
    FAIL() << "the older epoch was written";
  } catch (const stale_owner_error& e) {
    EXPECT_EQ(e.epoch(), 10u);
    EXPECT_EQ(e.current(), 20u);
    EXPECT_TRUE(is_stale_owner(e.what())) << e.what();
  }
  EXPECT_EQ(dep->counters().fenced, 1u);
  EXPECT_EQ(dep->counters().failures, 0u);  // refusing is not failing
  auto back = other->get_user("alice");
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "b's state");
  EXPECT_EQ(back->owner_epoch, 20u);
  EXPECT_EQ(dep->owner_epoch("alice"), 20u);
  if (is_fs()) {
    for (const auto& f : files_in(fs::path(user_path("alice")).parent_path().string()))
      EXPECT_NE(f.rfind(".tmp-", 0), 0u) << "the refused write left " << f;
  }
}

TEST_P(any_fencing, a_newer_claim_fences_the_older_holder_before_the_new_owner_wrote) {
  dep->put_user("alice", epoch_parcel(10, "a's state"));
  auto woken = other->claim_user("alice", 20);  // B wakes him: reads A's state, claims him
  ASSERT_TRUE(woken);
  EXPECT_EQ(text_of(*woken), "a's state");
  EXPECT_EQ(dep->owner_epoch("alice"), 20u);
  EXPECT_THROW(dep->put_user("alice", epoch_parcel(10, "a's stale change", 2)), stale_owner_error);
  EXPECT_EQ(text_of(*other->get_user("alice")), "a's state");  // B's (unwritten) state is what A left
  // A cannot claim him back with its older epoch either.
  EXPECT_THROW(dep->claim_user("alice", 15), stale_owner_error);
  EXPECT_EQ(dep->counters().fenced, 2u);
  other->put_user("alice", epoch_parcel(20, "b's change", 2));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "b's change");
}

TEST_P(any_fencing, an_equal_epoch_is_accepted_and_a_newer_one_takes_over) {
  ASSERT_FALSE(dep->claim_user("carol", 7));  // a new user: nothing to read, claimed all the same
  EXPECT_EQ(other->owner_epoch("carol"), 7u);
  dep->put_user("carol", epoch_parcel(7, "one"));
  dep->put_user("carol", epoch_parcel(7, "two", 2));
  EXPECT_TRUE(dep->claim_user("carol", 7));  // his restart under the same placement
  dep->put_user("carol", epoch_parcel(7, "three", 3));
  other->put_user("carol", epoch_parcel(8, "four", 4));  // a newer placement writes without claiming
  EXPECT_THROW(dep->put_user("carol", epoch_parcel(7, "five", 5)), stale_owner_error);
  EXPECT_EQ(text_of(*other->get_user("carol")), "four");
  EXPECT_EQ(dep->counters().fenced + other->counters().fenced, 1u);
}

TEST_P(any_fencing, epoch_zero_is_the_oldest_and_records_no_claim) {
  const auto claim = (fs::path(user_path("dave")).parent_path() / ".claim-dave.parcel").string();
  dep->put_user("dave", epoch_parcel(0, "legacy"));  // as written before fencing
  EXPECT_EQ(dep->owner_epoch("dave"), 0u);
  if (is_fs()) {
    EXPECT_EQ(read_file(claim), "");  // his first write made his claim file, empty: no claim
  }
  EXPECT_TRUE(dep->claim_user("dave", 0));
  if (is_fs()) {
    EXPECT_EQ(read_file(claim), "");  // epoch 0 claims nothing
  }
  EXPECT_EQ(dep->owner_epoch("dave"), 0u);
  dep->put_user("dave", epoch_parcel(0, "legacy again", 2));  // 0 against 0: accepted
  ASSERT_TRUE(other->claim_user("dave", 1));
  if (is_fs()) {
    EXPECT_EQ(read_file(claim), "00000000000000000001\n");
  }
  EXPECT_THROW(dep->put_user("dave", epoch_parcel(0, "legacy writer", 3)), stale_owner_error);
  EXPECT_THROW(dep->claim_user("dave", 0), stale_owner_error);
  EXPECT_EQ(text_of(*dep->get_user("dave")), "legacy again");
}

TEST_P(any_fencing, a_claim_survives_the_removal_of_the_parcel_and_connections_are_not_fenced) {
  dep->put_user("erin", epoch_parcel(5, "s"));
  other->claim_user("erin", 9);
  other->remove_user("erin");  // dropped by the new owner's node
  EXPECT_EQ(dep->owner_epoch("erin"), 9u);
  EXPECT_THROW(dep->put_user("erin", epoch_parcel(5, "stale", 2)), stale_owner_error);
  EXPECT_FALSE(dep->get_user("erin"));
  // Connection parcels carry no owner to fence: any epoch lands.
  dep->put_connection("c1", epoch_parcel(9, "x"));
  dep->put_connection("c1", epoch_parcel(1, "y"));
  EXPECT_EQ(text_of(*dep->get_connection("c1")), "y");
}

TEST_P(any_fencing, a_batch_refuses_its_stale_entries_and_writes_the_others) {
  other->claim_user("frank", 50);
  std::vector<deposit::batch_entry> batch{
    {false, "frank", epoch_parcel(40, "stale")},
    {false, "gina", epoch_parcel(40, "fine")},
    {true, "c2", epoch_parcel(1, "conn")},
    {false, "frank", epoch_parcel(50, "current")},
  };
  auto errors = dep->put_batch(batch);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_TRUE(is_stale_owner(errors[0])) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "");
  EXPECT_EQ(errors[3], "");
  EXPECT_FALSE(is_stale_owner(""));
  EXPECT_FALSE(is_stale_owner("deposit: cannot write"));
  EXPECT_EQ(text_of(*dep->get_user("frank")), "current");
  EXPECT_EQ(text_of(*dep->get_user("gina")), "fine");
  EXPECT_EQ(dep->counters().fenced, 1u);
  EXPECT_EQ(dep->counters().writes, 3u);
  // The single-entry path (one fsync on files) says it the same way.
  auto one = dep->put_batch({{false, "frank", epoch_parcel(49, "stale again")}});
  EXPECT_TRUE(is_stale_owner(one[0])) << one[0];
  // Many stale entries among many good ones, over several statements.
  std::vector<deposit::batch_entry> big;
  for (int i = 0; i < 2100; ++i) {
    const std::string key = "m" + std::to_string(i);
    if (i % 7 == 0)
      other->claim_user(key, 100);
    big.push_back({false, key, epoch_parcel(90, "v")});
  }
  auto texts = dep->put_batch(big);
  for (int i = 0; i < 2100; ++i) {
    EXPECT_EQ(is_stale_owner(texts[static_cast<std::size_t>(i)]), i % 7 == 0) << i << ": " << texts[static_cast<std::size_t>(i)];
    EXPECT_EQ(dep->get_user("m" + std::to_string(i)).has_value(), i % 7 != 0) << i;
  }
}

TEST_P(any_fencing, a_claim_as_old_as_an_expired_parcel_is_swept) {
  dep->put_user("hugo", epoch_parcel(3, "s"));
  dep->claim_user("hugo", 4);
  EXPECT_EQ(dep->sweep(std::chrono::hours(1), std::chrono::hours(1)), 0u);
  EXPECT_EQ(dep->owner_epoch("hugo"), 4u);  // young: kept
  age_claim("hugo", std::chrono::hours(2));
  age(true, "hugo", std::chrono::hours(2));
  EXPECT_EQ(dep->sweep(std::chrono::hours(1), std::chrono::hours(1)), 1u);  // the parcel counts, the claim not
  EXPECT_EQ(dep->owner_epoch("hugo"), 0u);
  EXPECT_FALSE(dep->get_user("hugo"));
  if (is_fs()) {
    EXPECT_FALSE(fs::exists((fs::path(user_path("hugo")).parent_path() / ".claim-hugo.parcel").string()));
  }
}

TEST_P(any_fencing, commander_generations_only_grow_across_deposit_objects) {
  EXPECT_EQ(dep->next_commander_generation(), 1u);
  EXPECT_EQ(other->next_commander_generation(), 2u);
  EXPECT_EQ(dep->next_commander_generation(), 3u);
  auto reopened = open();  // a restart
  EXPECT_EQ(reopened->next_commander_generation(), 4u);
  if (is_fs()) {
    EXPECT_EQ(read_file(dir + "/commander-generation"), "4\n");
    write_file(dir + "/commander-generation", "garbage");
    EXPECT_THROW(dep->next_commander_generation(), deposit_error);  // never guessed
    EXPECT_EQ(read_file(dir + "/commander-generation"), "garbage");
  } else {
    EXPECT_EQ(admin->one("SELECT generation FROM " + table("commander_generation")), "4");
    admin->exec("DELETE FROM " + table("commander_generation"));
    EXPECT_THROW(dep->next_commander_generation(), deposit_error);  // never guessed
  }
}

TEST_P(any_fencing, two_processes_never_get_the_same_generation) {
  char tmpl[] = "/tmp/deposit_gens.XXXXXX";
  ASSERT_GE(::mkstemp(tmpl), 0);
  const std::string gens = tmpl;
  std::vector<std::uint64_t> mine;
  int rc = in_two_processes(
    [&] {
      auto d = open();
      std::ofstream out(gens);
      for (int i = 0; i < 40; ++i)
        out << d->next_commander_generation() << "\n";
      return 0;
    },
    [&] {
      for (int i = 0; i < 40; ++i)
        mine.push_back(dep->next_commander_generation());
    });
  ASSERT_EQ(rc, 0);
  std::ifstream in(gens);
  std::vector<std::uint64_t> theirs{std::istream_iterator<std::uint64_t>(in), {}};
  fs::remove(gens);
  ASSERT_EQ(theirs.size(), 40u);
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  EXPECT_TRUE(std::is_sorted(theirs.begin(), theirs.end()));
  std::set<std::uint64_t> all(mine.begin(), mine.end());
  all.insert(theirs.begin(), theirs.end());
  EXPECT_EQ(all.size(), 80u);  // none given twice
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), 80u);
}

TEST_P(any_fencing, two_processes_writing_one_user_the_newer_epoch_always_wins) {
  // The child writes at epoch 1 and keeps trying past the parent; the parent
  // claims at 2 then writes. Once the claim is made, no write of epoch 1 lands.
  constexpr int child_writes = 120;
  constexpr int parent_writes = 40;
  std::vector<std::uint64_t> seen;  // generations read back after the claim
  int rc = in_two_processes(
    [&] {
      auto d = open();
      for (int i = 1; i <= child_writes; ++i) {
        try {
          d->put_user("judy", epoch_parcel(1, "old owner", static_cast<std::uint64_t>(i)));
        } catch (const stale_owner_error&) {
        } catch (const std::exception&) {
          return 2;
        }
      }
      return 0;
    },
    [&] {
      while (!dep->get_user("judy").has_value())  // the child has written once
        std::this_thread::yield();
      dep->claim_user("judy", 2);
      for (int i = 0; i < parent_writes; ++i) {
        auto p = dep->get_user("judy");
        ASSERT_TRUE(p);
        seen.push_back(p->owner_epoch);
        dep->put_user("judy", epoch_parcel(2, "new owner", 1000 + static_cast<std::uint64_t>(i)));
      }
    });
  ASSERT_EQ(rc, 0);
  auto final_parcel = dep->get_user("judy");
  ASSERT_TRUE(final_parcel);
  EXPECT_EQ(final_parcel->owner_epoch, 2u);
  EXPECT_EQ(text_of(*final_parcel), "new owner");
  EXPECT_EQ(final_parcel->generation, 1000u + parent_writes - 1);
  for (std::size_t i = 1; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], 2u) << "read " << i;
}

TEST_P(any_fencing, threads_racing_claims_and_writes_leave_the_newest_epoch) {
  // Each thread has its own deposit object (as processes would) and its own
  // epoch; each claims then writes repeatedly. The user ends at the largest epoch.
  constexpr int threads = 4;
  std::vector<std::thread> pool;
  std::atomic<int> unexpected{0};
  std::vector<std::unique_ptr<deposit>> views;
  for (int t = 0; t < threads; ++t)
    views.push_back(open());
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto& d = views[static_cast<std::size_t>(t)];
      const std::uint64_t epoch = 10 + static_cast<std::uint64_t>(t);
      for (int i = 0; i < 25; ++i) {
        try {
          if (i == 0)
            d->claim_user("kate", epoch);
          d->put_user("kate", epoch_parcel(epoch, "from " + std::to_string(epoch), static_cast<std::uint64_t>(i)));
        } catch (const stale_owner_error&) {
        } catch (const std::exception&) {
          ++unexpected;
        }
      }
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(dep->owner_epoch("kate"), 13u);
  auto p = dep->get_user("kate");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->owner_epoch, 13u);
  EXPECT_EQ(text_of(*p), "from 13");
  EXPECT_EQ(p->generation, 24u);  // the newest owner's last write is the one in place
}

TEST_P(any_fencing, two_objects_racing_for_one_user_exactly_one_owner_wins) {
  // Round after round, two views wake the same new user at once (epochs 1 and 2)
  // and write him: whatever the interleaving, the newer owner holds him at the end
  // and the older one can write him no more.
  for (int round = 0; round < 30; ++round) {
    const std::string user = "race" + std::to_string(round);
    std::atomic<int> go{0};
    std::atomic<int> unexpected{0};
    auto contender = [&](deposit& d, std::uint64_t epoch) {
      ++go;
      while (go < 2)
        std::this_thread::yield();
      try {
        d.claim_user(user, epoch);
        d.put_user(user, epoch_parcel(epoch, "owner " + std::to_string(epoch)));
      } catch (const stale_owner_error&) {
      } catch (const std::exception&) {
        ++unexpected;
      }
    };
    std::thread a([&] { contender(*dep, 1); });
    std::thread b([&] { contender(*other, 2); });
    a.join();
    b.join();
    ASSERT_EQ(unexpected.load(), 0);
    EXPECT_EQ(dep->owner_epoch(user), 2u) << user;
    auto p = other->get_user(user);
    ASSERT_TRUE(p) << user;
    EXPECT_EQ(text_of(*p), "owner 2") << user;
    EXPECT_THROW(dep->put_user(user, epoch_parcel(1, "late")), stale_owner_error) << user;
    EXPECT_THROW(dep->claim_user(user, 1), stale_owner_error) << user;
  }
}

TEST_P(any_fencing, two_views_batching_the_same_users_at_once_both_land) {
  // Two members write the same users in batches at once, in opposite orders: every
  // entry lands (no deadlock left unresolved), and each user holds one of the two.
  constexpr int users = 600;
  auto batch_of = [&](const std::string& text, bool reversed) {
    std::vector<deposit::batch_entry> b;
    for (int i = 0; i < users; ++i) {
      const int k = reversed ? users - 1 - i : i;
      b.push_back({false, "same" + std::to_string(k), epoch_parcel(1, text)});
    }
    return b;
  };
  std::atomic<long> failed{0};
  auto writer = [&](deposit& d, const std::string& text, bool reversed) {
    for (int round = 0; round < 4; ++round)
      for (const auto& t : d.put_batch(batch_of(text, reversed)))
        if (!t.empty())
          ++failed;
  };
  std::thread a([&] { writer(*dep, "from a", false); });
  std::thread b([&] { writer(*other, "from b", true); });
  a.join();
  b.join();
  EXPECT_EQ(failed.load(), 0);
  for (int i = 0; i < users; ++i) {
    auto p = dep->get_user("same" + std::to_string(i));
    ASSERT_TRUE(p) << i;
    EXPECT_TRUE(text_of(*p) == "from a" || text_of(*p) == "from b") << text_of(*p);
  }
}

INSTANTIATE_TEST_SUITE_P(backends, any_deposit, ::testing::Values(backend::filesystem, backend::postgres),
                         backend_name);
INSTANTIATE_TEST_SUITE_P(backends, any_fencing, ::testing::Values(backend::filesystem, backend::postgres),
                         backend_name);

// ---- postgres only ----------------------------------------------------------------------

namespace {

class pg_deposit : public any_deposit {};

/// Ends the deposit's server session from outside (as a server restart or a failover would).
void terminate_backend(pg_admin& admin, int pid) {
  ASSERT_NE(pid, 0);
  EXPECT_EQ(admin.one("SELECT pg_terminate_backend(" + std::to_string(pid) + ")"), "t");
  ASSERT_TRUE(eventually([&] {
    return admin.one("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid)) == "0";
  }));
}

}  // namespace

TEST_P(pg_deposit, refuses_a_newer_schema_version_with_a_clear_text) {
  dep.reset();
  admin->exec("INSERT INTO " + table("schema_version") + " (version) VALUES (" +
              std::to_string(postgres_schema_version + 1) + ")");
  try {
    open();
    FAIL() << "a newer schema was accepted";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("database schema version " + std::to_string(postgres_schema_version + 1) +
                                         " is newer than this troupe understands (" +
                                         std::to_string(postgres_schema_version) + "); upgrade troupe"),
              std::string::npos)
      << e.what();
  }
}

TEST_P(pg_deposit, migrating_twice_and_at_once_is_idempotent) {
  dep->put_user("alice", make_parcel(1, "kept"));
  dep.reset();
  EXPECT_EQ(admin->one("SELECT string_agg(version::text, ',' ORDER BY version) FROM " + table("schema_version")), "1,2");
  // A fresh schema, four members starting at once: one migrates, the others find it done.
  schema = unique_schema();
  std::vector<std::thread> starts;
  std::atomic<int> failed{0};
  for (int i = 0; i < 4; ++i)
    starts.emplace_back([&] {
      try {
        open()->put_user("bob", make_parcel(1, "b"));
      } catch (const std::exception& e) {
        ++failed;
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& t : starts)
    t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(admin->one("SELECT string_agg(version::text, ',' ORDER BY version) FROM " + table("schema_version")), "1,2");
  dep = open();  // once more: nothing to do
  EXPECT_EQ(admin->one("SELECT count(*) FROM " + table("schema_version")), "2");
  EXPECT_TRUE(dep->get_user("bob"));
}

// Issue 23 (2): the generated cookie secret is kept in the database, created
// once: members starting at once with different candidates all get the first.
TEST_P(pg_deposit, a_secret_is_created_once_and_every_member_reads_the_same) {
  std::vector<std::string> got(4);
  std::vector<std::thread> starts;
  for (int i = 0; i < 4; ++i)
    starts.emplace_back([&, i] { got[i] = open()->load_or_create_secret("cookie", "candidate-" + std::to_string(i)).value(); });
  for (auto& t : starts)
    t.join();
  for (auto& g : got)
    EXPECT_EQ(g, got.front());
  EXPECT_EQ(got.front().substr(0, 10), "candidate-");
  EXPECT_EQ(dep->load_or_create_secret("cookie", "later").value(), got.front()) << "a later candidate never replaces it";
  EXPECT_EQ(dep->load_or_create_secret("other", std::string("\0\x01\xff", 3)).value(), std::string("\0\x01\xff", 3))
    << "bytes kept as they are";
  EXPECT_EQ(admin->one("SELECT count(*) FROM " + table("secrets")), "2");
}

TEST_F(deposit_test, keeps_no_secrets_itself_the_node_keeps_its_file) {
  EXPECT_FALSE(dep->load_or_create_secret("cookie", "x"));
}

TEST_P(pg_deposit, a_lost_connection_throws_then_reconnects_by_itself) {
  dep->put_user("alice", make_parcel(1, "before"));
  EXPECT_FALSE(postgres_disconnected(*dep));
  const int pid = postgres_backend_pid(*dep);
  terminate_backend(*admin, pid);
  try {
    dep->get_user("alice");
    FAIL() << "a call on a terminated session did not throw";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("postgres: not connected ("), std::string::npos) << e.what();
  }
  EXPECT_TRUE(postgres_disconnected(*dep));
  EXPECT_GE(dep->counters().consecutive_failures, 1);
  // Later calls reconnect by themselves (after the backoff) and work.
  ASSERT_TRUE(eventually([&] {
    try {
      return dep->get_user("alice").has_value();
    } catch (const deposit_error&) {
      return false;
    }
  }));
  EXPECT_FALSE(postgres_disconnected(*dep));
  EXPECT_NE(postgres_backend_pid(*dep), pid);
  EXPECT_EQ(dep->counters().consecutive_failures, 0);
  dep->put_user("alice", make_parcel(2, "after"));
  EXPECT_EQ(text_of(*open()->get_user("alice")), "after");
}

TEST_P(pg_deposit, a_call_inside_the_backoff_window_throws_without_trying) {
  auto o = pg_options();
  o.reconnect_backoff_min = std::chrono::milliseconds(60000);  // nothing retried during this test
  o.reconnect_backoff_max = std::chrono::milliseconds(60000);
  // A name of this test's own: other tests share the server and open sessions meanwhile.
  const std::string app_name = "troupe_backoff_" + std::to_string(::getpid());
  o.url += (o.url.find('?') == std::string::npos ? "?" : "&") + ("application_name=" + app_name);
  const std::string count_sessions =
    "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app_name + "'";
  auto d = make_postgres_deposit(o);
  d->put_user("x", make_parcel(1, "x"));
  EXPECT_EQ(admin->one(count_sessions), "1");
  terminate_backend(*admin, postgres_backend_pid(*d));
  EXPECT_THROW(d->get_user("x"), deposit_error);
  const auto sessions = admin->one(count_sessions);
  try {
    d->get_user("x");
    FAIL() << "no throw inside the backoff window";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("next attempt in"), std::string::npos) << e.what();
  }
  EXPECT_EQ(admin->one(count_sessions), sessions);
  EXPECT_TRUE(postgres_disconnected(*d));
}

TEST_P(pg_deposit, a_batch_cut_by_a_lost_connection_lands_whole_or_not_at_all) {
  // The session is terminated while the batch's transaction runs; every attempt is
  // all or nothing, so the rows are all of one generation: all new or all old.
  constexpr int users = 20000;
  std::vector<deposit::batch_entry> old_batch, new_batch;
  for (int i = 0; i < users; ++i) {
    old_batch.push_back({false, "u" + std::to_string(i), make_parcel(1, std::string(150, 'o'))});
    new_batch.push_back({false, "u" + std::to_string(i), make_parcel(2, std::string(150, 'n'))});
  }
  auto first = dep->put_batch(old_batch);
  ASSERT_EQ(std::count(first.begin(), first.end(), ""), users);
  for (int round = 0; round < 3; ++round) {
    const int pid = postgres_backend_pid(*dep);
    std::vector<std::string> texts;
    std::thread writer([&] { texts = dep->put_batch(round % 2 ? old_batch : new_batch); });
    // Cut it once its transaction is under way.
    bool cut = eventually([&] {
      return admin->one("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                        " AND xact_start IS NOT NULL") == "1";
    });
    if (cut)
      admin->one("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
    writer.join();
    ASSERT_EQ(texts.size(), static_cast<std::size_t>(users));
    const auto ok = std::count(texts.begin(), texts.end(), "");
    EXPECT_TRUE(ok == 0 || ok == users) << ok << " of " << users << " entries say written";
    EXPECT_TRUE(cut) << "the batch's transaction was not seen running";
    // The payloads tell the two batches apart: all rows hold one of them.
    const auto newer = admin->one("SELECT count(*) FROM " + table("users") + " WHERE position(" +
                                  bytea(std::string(20, 'n')) + " IN parcel) > 0");
    EXPECT_TRUE(newer == "0" || newer == std::to_string(users)) << newer << " rows of the new batch: half-applied";
    const std::uint64_t expect = ok == users ? (round % 2 ? 1u : 2u) : (round % 2 ? 2u : 1u);
    EXPECT_EQ(dep->get_user("u0")->generation, expect);
    EXPECT_EQ(dep->get_user("u" + std::to_string(users - 1))->generation, expect);
  }
}

TEST_P(pg_deposit, a_batch_failing_on_every_attempt_applies_nothing_and_says_so_for_each_entry) {
  auto o = pg_options();
  o.statement_timeout = std::chrono::milliseconds(200);
  o.batch_rows = 10;
  o.batch_bytes = 1000;  // and at most ~5 parcels per statement
  auto d = make_postgres_deposit(o);
  // Another session holds the connections table: the batch's users land in its transaction,
  // then its connections wait until the timeout ends the statement, every attempt.
  PGconn* holder = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(holder), CONNECTION_OK);
  PQclear(PQexec(holder, "BEGIN"));
  PQclear(PQexec(holder, ("LOCK TABLE " + table("connections") + " IN ACCESS EXCLUSIVE MODE").c_str()));
  std::vector<deposit::batch_entry> batch;
  for (int i = 0; i < 25; ++i)
    batch.push_back({false, "u" + std::to_string(i), make_parcel(1, "u")});
  batch.push_back({true, "c1", make_parcel(1, "c")});
  auto texts = d->put_batch(batch);
  PQclear(PQexec(holder, "ROLLBACK"));
  PQfinish(holder);
  ASSERT_EQ(texts.size(), batch.size());
  for (const auto& t : texts)
    EXPECT_NE(t.find("statement timeout"), std::string::npos) << t;
  EXPECT_EQ(admin->one("SELECT count(*) FROM " + table("users")), "0") << "half a batch was applied";
  EXPECT_EQ(d->counters().writes, 0u);
  EXPECT_GE(d->counters().failures, 1u);
  // The same batch lands once the table is free.
  auto again = d->put_batch(batch);
  EXPECT_EQ(std::count(again.begin(), again.end(), ""), static_cast<long>(batch.size()));
  EXPECT_EQ(d->count_users(), 25u);
}

TEST_P(pg_deposit, the_password_never_appears_in_errors) {
  // A closed port, and a database that does not exist: both fail; neither text shows the password.
  const std::string secret = "s3cr3t-Pa55";
  auto try_url = [&](const std::string& u) {
    postgres_options o;
    o.url = u;
    o.schema = schema;
    o.connect_timeout = std::chrono::milliseconds(2000);
    try {
      make_postgres_deposit(o);
      ADD_FAILURE() << "connected to " << redact_postgres_url(u);
    } catch (const deposit_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find(secret), std::string::npos) << what;
      EXPECT_NE(what.find("127.0.0.1"), std::string::npos) << what;
      EXPECT_EQ(redact_postgres_url(u).find(secret), std::string::npos);
    }
  };
  try_url("postgresql://troupe:" + secret + "@127.0.0.1:1/troupe_test");
  try_url("host=127.0.0.1 port=1 user=troupe password=" + secret + " dbname=troupe_test");
  // The test server's own host and port, a missing database.
  const auto host_port = url.substr(url.find('@') + 1, url.rfind('/') - url.find('@') - 1);
  try_url("postgresql://postgres:" + secret + "@" + host_port + "/no_such_database");
}

TEST_P(pg_deposit, a_server_that_does_not_answer_is_given_up_after_connect_timeout) {
  // A listening socket that never answers the start-up packet (nobody accepts).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  postgres_options o;
  o.url = "postgresql://troupe@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/troupe_test";
  o.connect_timeout = std::chrono::milliseconds(300);
  try {
    make_postgres_deposit(o);
    ADD_FAILURE() << "connected to a mute server";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("no answer within 300 ms"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("port " + std::to_string(ntohs(addr.sin_port))), std::string::npos)
      << e.what();
  }
  ::close(fd);
}

TEST_P(pg_deposit, a_statement_over_the_timeout_fails_and_the_deposit_goes_on) {
  auto o = pg_options();
  o.statement_timeout = std::chrono::milliseconds(200);
  auto d = make_postgres_deposit(o);
  d->put_user("alice", make_parcel(1, "a"));
  // Another session holds alice's row: her write waits for the lock until the timeout ends it.
  PGconn* holder = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(holder), CONNECTION_OK);
  PQclear(PQexec(holder, "BEGIN"));
  PQclear(PQexec(holder, ("SELECT 1 FROM " + table("users") + " WHERE key = " + bytea("alice") + " FOR UPDATE").c_str()));
  try {
    d->put_user("alice", make_parcel(2, "b"));
    ADD_FAILURE() << "the write did not time out";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("statement timeout"), std::string::npos) << e.what();
  }
  PQclear(PQexec(holder, "ROLLBACK"));
  PQfinish(holder);
  EXPECT_FALSE(postgres_disconnected(*d));
  d->put_user("alice", make_parcel(3, "c"));
  EXPECT_EQ(text_of(*d->get_user("alice")), "c");
}

TEST_P(pg_deposit, epochs_beyond_a_bigint_are_refused) {
  EXPECT_THROW(dep->put_user("alice", epoch_parcel(~std::uint64_t{0}, "x")), deposit_error);
  EXPECT_THROW(dep->claim_user("alice", ~std::uint64_t{0}), deposit_error);
  const std::uint64_t largest = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  dep->put_user("alice", epoch_parcel(largest, "x"));
  EXPECT_EQ(dep->owner_epoch("alice"), largest);
}

TEST_P(pg_deposit, an_empty_url_takes_everything_from_the_pg_environment) {
  // The test server's URL taken apart into PGHOST, PGPORT, PGUSER, PGDATABASE.
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &err);
  ASSERT_NE(parsed, nullptr) << (err ? err : "");
  std::vector<std::pair<std::string, std::string>> env;
  for (auto* o = parsed; o->keyword; ++o) {
    if (!o->val || !*o->val)
      continue;
    const std::string k = o->keyword;
    if (k == "host" || k == "port" || k == "user" || k == "dbname" || k == "password")
      env.emplace_back(k == "dbname" ? "PGDATABASE" : "PG" + std::string(k == "host" ? "HOST" : k == "port" ? "PORT"
                                                                         : k == "user" ? "USER" : "PASSWORD"),
                       o->val);
  }
  PQconninfoFree(parsed);
  for (const auto& [k, v] : env)
    ::setenv(k.c_str(), v.c_str(), 1);
  auto o = pg_options();
  o.url = "";
  std::unique_ptr<deposit> d;
  try {
    d = make_postgres_deposit(o);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  for (const auto& kv : env)
    ::unsetenv(kv.first.c_str());
  ASSERT_TRUE(d);
  d->put_user("alice", make_parcel(1, "from the environment"));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "from the environment");
}

INSTANTIATE_TEST_SUITE_P(backends, pg_deposit, ::testing::Values(backend::postgres), backend_name);

TEST(postgres_url, redaction_hides_every_password) {
  EXPECT_EQ(redact_postgres_url("postgresql://bob:secret@db.example:5432/troupe"),
            "postgresql://bob:***@db.example:5432/troupe");
  EXPECT_EQ(redact_postgres_url("postgres://bob:p%40ss@host/db?sslmode=require"),
            "postgres://bob:***@host/db?sslmode=require");
  EXPECT_EQ(redact_postgres_url("postgresql://bob@host/db"), "postgresql://bob@host/db");
  EXPECT_EQ(redact_postgres_url("postgresql://host/db?user=bob&password=secret&sslmode=require"),
            "postgresql://host/db?user=bob&password=***&sslmode=require");
  EXPECT_EQ(redact_postgres_url("postgresql://host/db?password=secret"), "postgresql://host/db?password=***");
  EXPECT_EQ(redact_postgres_url("host=db user=bob password=secret dbname=troupe"),
            "host=db user=bob password=*** dbname=troupe");
  EXPECT_EQ(redact_postgres_url("host=db password = 'se cret\\' x' dbname=troupe"),
            "host=db password = *** dbname=troupe");
  EXPECT_EQ(redact_postgres_url(""), "");
  EXPECT_EQ(redact_postgres_url("postgresql://"), "postgresql://");
  EXPECT_EQ(redact_postgres_url("postgresql://:pw@host"), "postgresql://:***@host");
}

TEST(postgres_url, a_filesystem_deposit_is_never_disconnected) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  auto d = make_filesystem_deposit(tmpl);
  EXPECT_FALSE(postgres_disconnected(*d));
  EXPECT_EQ(postgres_backend_pid(*d), 0);
  d.reset();
  fs::remove_all(tmpl);
}

}  // namespace deposit_test_file
