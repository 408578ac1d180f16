#pragma once
// The deposit tests' fixtures and helpers (deposit_test.cpp, any_deposit_test.cpp,
// deposit_fencing_test.cpp, pg_deposit_test.cpp): a filesystem deposit in a
// temporary directory, the backend-agnostic fixture (filesystem and PostgreSQL:
// tests/support/deposit_backend.hpp), the fencing fixture, raw parcel bytes.
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

namespace deposit_fixtures {

using namespace troupe::store;
using troupe::test::eventually;
namespace fs = std::filesystem;

inline parcel make_parcel(std::uint64_t generation, const std::string& text) {
  parcel p;
  p.generation = generation;
  p.writer_node = "n1";
  p.writer_worker = "default-w1";
  p.cause = parcel_cause::freeze;
  p.payload = pack(text);
  return p;
}

inline std::string text_of(const parcel& p) {
  std::string s;
  unpack(p.payload, s);
  return s;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

/// Sets the mtime of `path` to `age` ago.
inline void age_file(const std::string& path, std::chrono::seconds age) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age.count();
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    out.push_back(e.path().filename().string());
  return out;
}

/// files_in without the users' claim files (fencing: a user's first write makes his).
inline std::vector<std::string> files_but_claims_in(const std::string& dir) {
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

inline void PrintTo(backend b, std::ostream* os) {
  *os << (b == backend::filesystem ? "filesystem" : "postgres");
}

inline std::string pg_url() {
  const char* u = std::getenv("TROUPE_TEST_PG_URL");
  return u ? u : "";
}

inline bool pg_required() {
  const char* r = std::getenv("TROUPE_TEST_PG_REQUIRED");
  return r && std::string(r) == "1";
}

inline std::string hex_of(std::string_view s) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

inline std::string unhex(std::string_view h) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(v(h[i]) * 16 + v(h[i + 1]));
  return out;
}

/// A bytea literal of `s`.
inline std::string bytea(std::string_view s) {
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

inline std::string unique_schema() {
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

inline std::string backend_name(const ::testing::TestParamInfo<backend>& info) {
  return info.param == backend::filesystem ? "filesystem" : "postgres";
}

/// The mode bits (permissions) of `path`, not following a symlink.
inline unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return 0xffff;
  return st.st_mode & 07777;
}

/// Files whose name starts with ".tmp-" anywhere under `dir`.
inline std::vector<std::string> temp_files_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(".tmp-", 0) == 0)
      out.push_back(it->path().string());
  return out;
}

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

inline parcel epoch_parcel(std::uint64_t epoch, const std::string& text, std::uint64_t generation = 1) {
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

// Runs `child` in a fork()ed process (exit code: its result) and `parent` here at once.
template <class Child, class Parent>
inline int in_two_processes(Child child, Parent parent) {
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

class pg_deposit : public any_deposit {};

/// Ends the deposit's server session from outside (as a server restart or a failover would).
inline void terminate_backend(pg_admin& admin, int pid) {
  ASSERT_NE(pid, 0);
  EXPECT_EQ(admin.one("SELECT pg_terminate_backend(" + std::to_string(pid) + ")"), "t");
  ASSERT_TRUE(eventually([&] {
    return admin.one("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid)) == "0";
  }));
}

}  // namespace deposit_fixtures
