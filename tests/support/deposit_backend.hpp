// The deposit backend an integration test runs its nodes on: a test parameter
// ("filesystem" or "postgres"), so one test body checks both (issue 12).
//
// The postgres parameter needs a server: TROUPE_TEST_PG_URL (scripts/test.sh
// starts a throwaway one with scripts/pg_server.sh). Without it the test is
// skipped — or fails, when TROUPE_TEST_PG_REQUIRED=1 (the test command sets it,
// so a missing server is never a silent pass). Each test gets its own schema,
// dropped at its end, so tests run in parallel on one server.
#pragma once

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace troupe::test {

/// The server's URL, or "" when none is configured.
inline std::string test_pg_url() {
  const char* u = std::getenv("TROUPE_TEST_PG_URL");
  return u ? u : "";
}

inline bool test_pg_required() {
  const char* r = std::getenv("TROUPE_TEST_PG_REQUIRED");
  return r && std::string(r) == "1";
}

/// Runs `sql` with psql against `url`; returns its output (unaligned, tuples
/// only), or nullopt when psql failed — its output then goes to `failure` when
/// given, else to stderr.
inline std::optional<std::string> psql(const std::string& url, const std::string& sql, std::string* failure = nullptr) {
  auto [rc, out] = run_command("psql -X -A -t -q -v ON_ERROR_STOP=1 '" + url + "' 2>&1 <<'TROUPE_SQL'\n" + sql +
                                 "\nTROUPE_SQL");
  if (rc != 0) {
    if (failure)
      *failure = out;
    else
      std::cerr << "psql failed (" << rc << "): " << out << "\n";
    return std::nullopt;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

/// Whether the PostgreSQL deposit in `schema` holds a user parcel of `user`.
inline bool pg_has_user_parcel(const std::string& url, const std::string& schema, const std::string& user) {
  std::string quoted;
  for (char c : user)
    quoted += c == '\'' ? std::string("''") : std::string(1, c);
  auto n = psql(url, "SELECT count(*) FROM " + schema + ".users WHERE key = convert_to('" + quoted + "', 'UTF8') AND parcel IS NOT NULL;");
  return n && *n == "1";
}

/// Names a test's backend parameter.
inline std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

/// A database of its own on the test server, for a test that takes it away
/// (an outage) without disturbing the tests running beside it; dropped at the end.
class scratch_database {
public:
  /// Creates it; ok() false (and why()) when there is no server or creation failed.
  scratch_database() {
    server_ = test_pg_url();
    if (server_.empty()) {
      why_ = "no PostgreSQL server: set TROUPE_TEST_PG_URL (scripts/pg_server.sh start DIR)";
      return;
    }
    std::random_device rd;
    name_ = "outage_" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000000);
    auto slash = server_.rfind('/');
    url_ = server_.substr(0, slash + 1) + name_;
    if (!psql(server_, "CREATE DATABASE " + name_ + ";"))
      why_ = "CREATE DATABASE " + name_ + " failed";
  }
  ~scratch_database() {
    if (ok())
      psql(server_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE);");
  }
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  const std::string& url() const { return url_; }

  /// The database goes away: no new connection is accepted and the open ones are cut.
  bool cut() {
    return psql(server_, "ALTER DATABASE " + name_ + " ALLOW_CONNECTIONS false;\n"
                         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '" + name_ + "';")
      .has_value();
  }
  /// It is back.
  bool restore() { return psql(server_, "ALTER DATABASE " + name_ + " ALLOW_CONNECTIONS true;").has_value(); }

private:
  std::string server_, name_, url_, why_;
};

/// Skips (or fails, with TROUPE_TEST_PG_REQUIRED=1) a test whose scratch_database is not there.
#define TROUPE_NEED_SCRATCH_DATABASE(db)                                  \
  do {                                                                    \
    if (!(db).ok()) {                                                     \
      if (::troupe::test::test_pg_required())                             \
        FAIL() << (db).why();                                             \
      GTEST_SKIP() << (db).why();                                         \
    }                                                                     \
  } while (false)

/// The flags that put a node on `url`'s PostgreSQL deposit.
inline std::vector<std::string> postgres_args(const std::string& url, const std::string& schema = "troupe") {
  return {"--set", "deposit.backend=postgres", "--set", "deposit.url=" + url, "--set", "deposit.schema=" + schema};
}

/// node_test whose nodes run on the parameter's backend.
class backend_node_test : public node_test, public ::testing::WithParamInterface<std::string> {
protected:
  void SetUp() override {
    if (!on_postgres())
      return;
    pg_url = test_pg_url();
    if (pg_url.empty()) {
      if (test_pg_required())
        FAIL() << "TROUPE_TEST_PG_REQUIRED=1 but TROUPE_TEST_PG_URL is not set (scripts/pg_server.sh start DIR)";
      GTEST_SKIP() << "no PostgreSQL server: set TROUPE_TEST_PG_URL (scripts/pg_server.sh start DIR)";
    }
    std::random_device rd;
    schema = "itest_" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000000);
  }
  void TearDown() override {
    node_test::TearDown();
    node_.reset();
    previous_.clear();
    if (!schema.empty())
      psql(pg_url, "DROP SCHEMA IF EXISTS " + schema + " CASCADE;");
  }

  bool on_postgres() const { return GetParam() == "postgres"; }

  /// The flags that put a node on this test's backend.
  std::vector<std::string> backend_args() const {
    if (!on_postgres())
      return {};
    return postgres_args(pg_url, schema);
  }

  node_process& start(std::vector<std::string> args = {}) {
    auto b = backend_args();
    args.insert(args.end(), b.begin(), b.end());
    return node_test::start(std::move(args));
  }
  node_process& start_on(const std::string& dir, std::vector<std::string> args = {}) {
    auto b = backend_args();
    args.insert(args.end(), b.begin(), b.end());
    return node_test::start_on(dir, std::move(args));
  }

  std::string pg_url;
  std::string schema;  ///< "" on filesystem
};

/// Instantiates a TEST_P suite over both backends.
#define TROUPE_ON_EVERY_DEPOSIT_BACKEND(suite)                                                            \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::Values(std::string("filesystem"), std::string("postgres")), \
                           ::troupe::test::backend_param_name)

}  // namespace troupe::test

