// The PostgreSQL deposit alone: schema versions, secrets, lost connections and
// backoff, batches cut mid-way, passwords kept out of errors, timeouts.
#include "deposit_fixtures.hpp"

namespace pg_deposit_test_file {

using namespace deposit_fixtures;

// ---- postgres only ----------------------------------------------------------------------

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

}  // namespace pg_deposit_test_file
