#include "store/postgres_deposit.hpp"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace troupe::store {

namespace {

constexpr Oid bytea_oid = 17;
constexpr Oid int8_oid = 20;
constexpr Oid text_oid = 25;
constexpr Oid bytea_array_oid = 1001;
constexpr Oid int8_array_oid = 1016;
/// Keys per page of for_each_user and sweep (each page is one short statement).
constexpr std::int64_t scan_page_rows = 10000;
/// put_batch: attempts of its transaction in all (the first and two retries).
constexpr int batch_attempts = 3;
/// The first key of pg_advisory_xact_lock(int, int) for migrations ("trup").
constexpr int migration_lock_class = 0x74727570;

void put_be32(std::string& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i)
    out += static_cast<char>((v >> (i * 8)) & 0xff);
}

void put_be64(std::string& out, std::uint64_t v) {
  for (int i = 7; i >= 0; --i)
    out += static_cast<char>((v >> (i * 8)) & 0xff);
}

std::uint64_t get_be64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}


/// A key or a reason as a printable, valid UTF-8 text (non-ASCII and control bytes as \xhh).
std::string printable(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

/// A SQL identifier, double-quoted.
std::string quote_identifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

/// Replaces every "{s}" in `sql` by the quoted schema.
std::string with_schema(std::string sql, const std::string& quoted) {
  for (std::size_t pos = 0; (pos = sql.find("{s}", pos)) != std::string::npos; pos += quoted.size())
    sql.replace(pos, 3, quoted);
  return sql;
}

using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

/// Binary parameters of one statement.
class params {
public:
  params& bytes(std::string_view v) {
    values_.emplace_back(v);
    return *this;
  }
  params& int8(std::int64_t v) {
    std::string s;
    put_be64(s, static_cast<std::uint64_t>(v));
    values_.push_back(std::move(s));
    return *this;
  }
  /// A one-dimensional array in PostgreSQL's binary array format.
  template <class Items, class Put>
  params& array(Oid element, const Items& items, Put put) {
    std::string s;
    put_be32(s, items.empty() ? 0 : 1);  // dimensions
    put_be32(s, 0);                      // no NULLs
    put_be32(s, element);
    if (!items.empty()) {
      put_be32(s, static_cast<std::uint32_t>(items.size()));
      put_be32(s, 1);  // lower bound
      for (const auto& item : items)
        put(s, item);
    }
    values_.push_back(std::move(s));
    return *this;
  }
  params& bytea_array(const std::vector<std::string_view>& items) {
    return array(bytea_oid, items, [](std::string& s, std::string_view v) {
      put_be32(s, static_cast<std::uint32_t>(v.size()));
      s.append(v.data(), v.size());
    });
  }
  params& int8_array(const std::vector<std::int64_t>& items) {
    return array(int8_oid, items, [](std::string& s, std::int64_t v) {
      put_be32(s, 8);
      put_be64(s, static_cast<std::uint64_t>(v));
    });
  }

  std::vector<const char*> pointers() const {
    std::vector<const char*> out;
    for (const auto& v : values_)
      out.push_back(v.data());
    return out;
  }
  std::vector<int> lengths() const {
    std::vector<int> out;
    for (const auto& v : values_)
      out.push_back(static_cast<int>(v.size()));
    return out;
  }
  int size() const { return static_cast<int>(values_.size()); }

private:
  std::vector<std::string> values_;
};

/// One prepared statement: its name, text ({s}: the schema) and parameter types.
struct statement {
  const char* name;
  const char* sql;
  std::vector<Oid> types;
};

// Every statement's results are binary (bytea raw, bigint 8 bytes, text raw).
const std::vector<statement>& statements() {
  static const std::vector<statement> all = {
    {"put_user",
     "INSERT INTO {s}.users AS u (key, parcel, owner_epoch, written_at) VALUES ($1, $2, $3, now()) "
     "ON CONFLICT (key) DO UPDATE SET parcel = EXCLUDED.parcel, owner_epoch = EXCLUDED.owner_epoch, "
     "quarantine_reason = NULL, quarantine_id = NULL, written_at = now() "
     "WHERE greatest(u.claim_epoch, u.owner_epoch) <= EXCLUDED.owner_epoch RETURNING 1",
     {bytea_oid, bytea_oid, int8_oid}},
    {"get_user",
     "SELECT parcel, quarantine_reason, quarantine_id, greatest(claim_epoch, owner_epoch) FROM {s}.users "
     "WHERE key = $1",
     {bytea_oid}},
    {"remove_user",
     "WITH gone AS (DELETE FROM {s}.users WHERE key = $1 AND claim_epoch = 0 RETURNING 1) "
     "UPDATE {s}.users SET parcel = NULL, owner_epoch = 0, quarantine_reason = NULL, quarantine_id = NULL "
     "WHERE key = $1 AND claim_epoch <> 0",
     {bytea_oid}},
    {"owner_epoch", "SELECT greatest(claim_epoch, owner_epoch) FROM {s}.users WHERE key = $1", {bytea_oid}},
    // A claim only grows; claimed_at is when it last grew (sweep ages claims by it).
    {"claim_user",
     "INSERT INTO {s}.users AS u (key, claim_epoch, claimed_at) VALUES ($1, $2, now()) "
     "ON CONFLICT (key) DO UPDATE SET claim_epoch = EXCLUDED.claim_epoch, "
     "claimed_at = CASE WHEN u.claim_epoch < EXCLUDED.claim_epoch THEN now() ELSE u.claimed_at END "
     "WHERE greatest(u.claim_epoch, u.owner_epoch) <= EXCLUDED.claim_epoch "
     "RETURNING u.parcel, u.quarantine_reason, u.quarantine_id",
     {bytea_oid, int8_oid}},
    // Moves his parcel to quarantine if it is still `bad` (not rewritten meanwhile), leaving the marker.
    {"quarantine_user_if",
     "WITH bad AS (SELECT key, parcel FROM {s}.users WHERE key = $1 AND parcel = $2 FOR UPDATE), "
     "q AS (INSERT INTO {s}.quarantine (key, kind, reason, bytes) SELECT key, 'user', $3, parcel FROM bad "
     "RETURNING id) "
     "UPDATE {s}.users u SET parcel = NULL, owner_epoch = 0, quarantine_reason = $3, quarantine_id = q.id "
     "FROM q WHERE u.key = $1 RETURNING q.id",
     {bytea_oid, bytea_oid, text_oid}},
    {"quarantine_user_any",
     "WITH bad AS (SELECT key, parcel FROM {s}.users WHERE key = $1 AND parcel IS NOT NULL FOR UPDATE), "
     "q AS (INSERT INTO {s}.quarantine (key, kind, reason, bytes) SELECT key, 'user', $2, parcel FROM bad "
     "RETURNING id) "
     "UPDATE {s}.users u SET parcel = NULL, owner_epoch = 0, quarantine_reason = $2, quarantine_id = q.id "
     "FROM q WHERE u.key = $1 RETURNING q.id",
     {bytea_oid, text_oid}},
    // The marker of a user without a parcel (applied only while he has none).
    {"mark_user",
     "INSERT INTO {s}.users AS u (key, quarantine_reason) VALUES ($1, $2) "
     "ON CONFLICT (key) DO UPDATE SET quarantine_reason = EXCLUDED.quarantine_reason, quarantine_id = NULL "
     "WHERE u.parcel IS NULL RETURNING 1",
     {bytea_oid, text_oid}},
    {"generation",
     "UPDATE {s}.commander_generation SET generation = generation + 1 WHERE id = 1 RETURNING generation",
     {}},
    // A platform secret: created once (the first writer's value stands), then read.
    {"create_secret", "INSERT INTO {s}.secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
     {text_oid, bytea_oid}},
    {"get_secret", "SELECT value FROM {s}.secrets WHERE name = $1", {text_oid}},
    {"put_connection",
     "INSERT INTO {s}.connections AS c (key, parcel, written_at) VALUES ($1, $2, now()) "
     "ON CONFLICT (key) DO UPDATE SET parcel = EXCLUDED.parcel, written_at = now()",
     {bytea_oid, bytea_oid}},
    {"get_connection", "SELECT parcel FROM {s}.connections WHERE key = $1", {bytea_oid}},
    {"remove_connection", "DELETE FROM {s}.connections WHERE key = $1", {bytea_oid}},
    {"quarantine_connection_if",
     "WITH bad AS (DELETE FROM {s}.connections WHERE key = $1 AND parcel = $2 RETURNING key, parcel) "
     "INSERT INTO {s}.quarantine (key, kind, reason, bytes) SELECT key, 'connection', $3, parcel FROM bad "
     "RETURNING id",
     {bytea_oid, bytea_oid, text_oid}},
    {"batch_users",
     "INSERT INTO {s}.users AS u (key, parcel, owner_epoch, written_at) "
     "SELECT k, p, e, now() FROM unnest($1::bytea[], $2::bytea[], $3::bigint[]) AS t(k, p, e) "
     "ON CONFLICT (key) DO UPDATE SET parcel = EXCLUDED.parcel, owner_epoch = EXCLUDED.owner_epoch, "
     "quarantine_reason = NULL, quarantine_id = NULL, written_at = now() "
     "WHERE greatest(u.claim_epoch, u.owner_epoch) <= EXCLUDED.owner_epoch RETURNING u.key",
     {bytea_array_oid, bytea_array_oid, int8_array_oid}},
    {"batch_epochs",
     "SELECT key, greatest(claim_epoch, owner_epoch) FROM {s}.users WHERE key = ANY($1::bytea[])",
     {bytea_array_oid}},
    {"batch_connections",
     "INSERT INTO {s}.connections AS c (key, parcel, written_at) "
     "SELECT k, p, now() FROM unnest($1::bytea[], $2::bytea[]) AS t(k, p) "
     "ON CONFLICT (key) DO UPDATE SET parcel = EXCLUDED.parcel, written_at = now()",
     {bytea_array_oid, bytea_array_oid}},
    {"count_users", "SELECT count(*) FROM {s}.users WHERE parcel IS NOT NULL AND get_byte(key, 0) <> 37", {}},
    {"list_users",
     "SELECT key FROM {s}.users WHERE key > $1 AND parcel IS NOT NULL AND get_byte(key, 0) <> 37 "
     "ORDER BY key LIMIT $2",
     {bytea_oid, int8_oid}},
    // Sweep, one page of keys (key > $1 and key <= $2) at a time; $3 user, $4 guest max age (seconds).
    {"users_page_end", "SELECT key FROM (SELECT key FROM {s}.users WHERE key > $1 ORDER BY key "
                       "LIMIT $2) AS page ORDER BY key DESC LIMIT 1",
     {bytea_oid, int8_oid}},
    {"sweep_parcels",
     "UPDATE {s}.users SET parcel = NULL, owner_epoch = 0 WHERE key > $1 AND key <= $2 AND parcel IS NOT NULL "
     "AND get_byte(key, 0) <> 37 AND written_at < now() - (CASE WHEN substring(key FROM 1 FOR 6) = "
     "'guest_'::bytea THEN $4 ELSE $3 END)::float8 * interval '1 second' RETURNING 1",
     {bytea_oid, bytea_oid, int8_oid, int8_oid}},
    {"sweep_claims",
     "UPDATE {s}.users SET claim_epoch = 0 WHERE key > $1 AND key <= $2 AND claim_epoch <> 0 "
     "AND claimed_at < now() - (CASE WHEN substring(key FROM 1 FOR 6) = "
     "'guest_'::bytea THEN $4 ELSE $3 END)::float8 * interval '1 second'",
     {bytea_oid, bytea_oid, int8_oid, int8_oid}},
    {"sweep_empty",
     "DELETE FROM {s}.users WHERE key > $1 AND key <= $2 AND parcel IS NULL AND claim_epoch = 0 "
     "AND quarantine_reason IS NULL",
     {bytea_oid, bytea_oid}},
    {"connections_page_end", "SELECT key FROM (SELECT key FROM {s}.connections WHERE key > $1 "
                             "ORDER BY key LIMIT $2) AS page ORDER BY key DESC LIMIT 1",
     {bytea_oid, int8_oid}},
    {"sweep_connections",
     "DELETE FROM {s}.connections WHERE key > $1 AND key <= $2 AND written_at < now() - $3::float8 * "
     "interval '1 second'",
     {bytea_oid, bytea_oid, int8_oid}},
  };
  return all;
}

/// The migrations, in order: migrations()[i] brings version i to i + 1.
const std::vector<const char*>& migrations() {
  static const std::vector<const char*> all = {
    // 1: the first schema.
    "CREATE TABLE {s}.users ("
    "  key bytea PRIMARY KEY,"
    "  parcel bytea,"                                 // NULL: no parcel (a claim or a marker only)
    "  owner_epoch bigint NOT NULL DEFAULT 0,"        // the parcel's (0 without one)
    "  claim_epoch bigint NOT NULL DEFAULT 0,"        // 0: no claim
    "  quarantine_reason text,"                       // the marker: NULL = none
    "  quarantine_id bigint,"
    "  written_at timestamptz NOT NULL DEFAULT now(),"  // the parcel's last write
    "  claimed_at timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE {s}.connections ("
    "  key bytea PRIMARY KEY,"
    "  parcel bytea NOT NULL,"
    "  written_at timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE {s}.quarantine ("
    "  id bigserial PRIMARY KEY,"
    "  key bytea NOT NULL,"
    "  kind text NOT NULL,"
    "  reason text NOT NULL,"
    "  bytes bytea,"
    "  at timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE {s}.commander_generation ("
    "  id integer PRIMARY KEY CHECK (id = 1),"
    "  generation bigint NOT NULL);"
    "INSERT INTO {s}.commander_generation (id, generation) VALUES (1, 0);",
    // 2: the platform's secrets (the generated cookie secret), shared by every member on the database.
    "CREATE TABLE {s}.secrets ("
    "  name text PRIMARY KEY,"
    "  value bytea NOT NULL,"
    "  created_at timestamptz NOT NULL DEFAULT now());",
  };
  return all;
}

/// Why a stored parcel cannot be served ("" when it can); `out` is the parcel.
std::string verify(std::string_view key, std::string_view data, parcel& out) {
  try {
    out = decode(data.data(), data.size());
  } catch (const codec_error& e) {
    return e.what();
  }
  if (!out.owner.empty() && out.owner != key)
    return "written for '" + out.owner + "', found under '" + std::string(key) + "'";
  return {};
}

class postgres_deposit final : public deposit {
public:
  explicit postgres_deposit(const postgres_options& options)
      : options_(options),
        backoff_(options.reconnect_backoff_min) {
    if (options_.schema.empty() || options_.schema.size() > 63 || options_.schema.find('\0') != std::string::npos)
      throw deposit_error("postgres: the schema name must be 1 to 63 bytes");
    if (options_.batch_rows == 0)
      options_.batch_rows = 1;
    schema_ = quote_identifier(options_.schema);
    find_password();
    conn_ = open_session();
    try {
      migrate();
      prepare_all();
    } catch (const std::exception&) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw;
    }
    connected_.store(true);
    spdlog::info("deposit: on PostgreSQL {} (schema {}), schema version {}", describe(conn_), options_.schema,
                 postgres_schema_version);
  }

  ~postgres_deposit() override {
    if (conn_)
      PQfinish(conn_);
  }

  bool disconnected() const noexcept { return !connected_.load(std::memory_order_relaxed); }

  int backend_pid() {
    std::lock_guard lock(mutex_);
    return conn_ && PQstatus(conn_) == CONNECTION_OK ? PQbackendPID(conn_) : 0;
  }

  // --- users -------------------------------------------------------------------

  void put_user(const std::string& user, const parcel& p) override {
    check_key(user);
    call([&] {
      check_owner(user, p);
      const auto epoch = db_epoch(p.owner_epoch);
      const bytes data = encode(p, user);
      auto r = run("put_user", params().bytes(user).bytes({data.data(), data.size()}).int8(epoch));
      if (PQntuples(r.get()) == 0) {
        counters_.fenced.fetch_add(1, std::memory_order_relaxed);
        throw stale_owner_error(user, p.owner_epoch, current_epoch(user));
      }
      counters_.writes.fetch_add(1, std::memory_order_relaxed);
    });
  }

  std::optional<parcel> get_user(const std::string& user) override {
    check_key(user);
    return call([&] { return read_user(user); });
  }

  void remove_user(const std::string& user) override {
    check_key(user);
    call([&] { run("remove_user", params().bytes(user)); });
  }

  std::string quarantine_user(const std::string& user, const std::string& reason) override {
    check_key(user);
    return call([&]() -> std::string {
      const std::string stored = printable(reason);
      for (int attempt = 0; attempt < 3; ++attempt) {
        auto r = run("quarantine_user_any", params().bytes(user).bytes(stored));
        if (PQntuples(r.get()) > 0) {
          auto ref = quarantine_ref(r.get());
          counters_.quarantined.fetch_add(1, std::memory_order_relaxed);
          spdlog::error("deposit: the parcel of '{}' is quarantined on the caller's word ({}) as {}", printable(user),
                        stored, ref);
          return ref;
        }
        // No parcel: the marker all the same (only while he still has none).
        if (PQntuples(run("mark_user", params().bytes(user).bytes(stored)).get()) > 0)
          return {};
      }
      throw deposit_error("postgres: the parcel of " + printable(user) + " keeps changing while being quarantined");
    });
  }

  // --- fencing -----------------------------------------------------------------

  std::uint64_t owner_epoch(const std::string& user) override {
    check_key(user);
    return call([&] { return current_epoch(user); });
  }

  std::optional<parcel> claim_user(const std::string& user, std::uint64_t epoch) override {
    check_key(user);
    return call([&]() -> std::optional<parcel> {
      if (epoch == 0) {  // claims nothing: a read, refused when anyone claimed or wrote above 0
        auto r = run("get_user", params().bytes(user));
        if (PQntuples(r.get()) > 0) {
          const auto current = get_be64(PQgetvalue(r.get(), 0, 3));
          if (current > 0) {
            counters_.fenced.fetch_add(1, std::memory_order_relaxed);
            throw stale_owner_error(user, 0, current);
          }
        }
        return served_user(user, r.get());
      }
      // His parcel is read (and a bad one quarantined, a marker refused) before anything is
      // claimed, as on files; then the claim, which returns the parcel in place at that moment.
      auto before = run("get_user", params().bytes(user));
      auto served = served_user(user, before.get());
      auto r = run("claim_user", params().bytes(user).int8(db_epoch(epoch)));
      if (PQntuples(r.get()) == 0) {
        counters_.fenced.fetch_add(1, std::memory_order_relaxed);
        throw stale_owner_error(user, epoch, current_epoch(user));
      }
      if (same_parcel(before.get(), r.get()))
        return served;
      return served_user(user, r.get());  // rewritten in between: what is there now
    });
  }

  std::uint64_t next_commander_generation() override {
    return call([&] {
      auto r = run("generation", params());
      if (PQntuples(r.get()) == 0)
        throw deposit_error("postgres: " + options_.schema +
                            ".commander_generation has no row; refusing to guess a generation (an operator "
                            "restores it: docs/deposit.md \"Fencing\")");
      return get_be64(PQgetvalue(r.get(), 0, 0));
    });
  }

  std::optional<std::string> load_or_create_secret(const std::string& name, const std::string& candidate) override {
    return call([&] {
      // Under the schema's lock (the migrations' advisory lock): members starting
      // at once agree on the one value, whoever inserts it.
      exec("BEGIN");
      try {
        lock_schema();
        run("create_secret", params().bytes(name).bytes(candidate));
        auto r = run("get_secret", params().bytes(name));
        if (PQntuples(r.get()) != 1)
          throw deposit_error("postgres: secret " + name + " could not be created");
        std::string value(PQgetvalue(r.get(), 0, 0), static_cast<std::size_t>(PQgetlength(r.get(), 0, 0)));
        exec("COMMIT");
        return std::optional<std::string>(std::move(value));
      } catch (const std::exception&) {
        rollback();
        throw;
      }
    });
  }

  // --- connections ---------------------------------------------------------------

  void put_connection(const std::string& cid, const parcel& p) override {
    check_key(cid);
    call([&] {
      check_owner(cid, p);
      const bytes data = encode(p, cid);
      run("put_connection", params().bytes(cid).bytes({data.data(), data.size()}));
      counters_.writes.fetch_add(1, std::memory_order_relaxed);
    });
  }

  std::optional<parcel> get_connection(const std::string& cid) override {
    check_key(cid);
    return call([&]() -> std::optional<parcel> {
      auto r = run("get_connection", params().bytes(cid));
      if (PQntuples(r.get()) == 0)
        return std::nullopt;
      std::string_view data(PQgetvalue(r.get(), 0, 0), static_cast<std::size_t>(PQgetlength(r.get(), 0, 0)));
      counters_.reads.fetch_add(1, std::memory_order_relaxed);
      parcel p;
      const std::string reason = verify(cid, data, p);
      if (reason.empty())
        return p;
      auto q = run("quarantine_connection_if", params().bytes(cid).bytes(data).bytes(printable(reason)));
      if (PQntuples(q.get()) == 0)  // rewritten or removed meanwhile: what was read cannot be trusted all the same
        throw parcel_quarantined(cid, reason, "");
      auto ref = quarantine_ref(q.get());
      counters_.quarantined.fetch_add(1, std::memory_order_relaxed);
      spdlog::error("deposit: the parcel of connection '{}' cannot be trusted ({}); quarantined as {}",
                    printable(cid), printable(reason), ref);
      throw parcel_quarantined(cid, reason, ref);
    });
  }

  void remove_connection(const std::string& cid) override {
    check_key(cid);
    call([&] { run("remove_connection", params().bytes(cid)); });
  }

  // --- group commit ----------------------------------------------------------------

  std::vector<std::string> put_batch(const std::vector<batch_entry>& batch) override {
    std::vector<std::string> errors(batch.size());
    // Entries refused before any I/O (a bad key, another owner) keep their text; the others go.
    std::vector<bytes> encoded(batch.size());
    std::vector<std::int64_t> epochs(batch.size(), 0);
    std::vector<std::size_t> todo;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& e = batch[i];
      try {
        check_key(e.key);
        if (!e.contents.owner.empty() && e.contents.owner != e.key)
          throw deposit_error("deposit: a parcel of '" + e.contents.owner + "' cannot be written under '" + e.key +
                              "'");
        if (!e.connection)
          epochs[i] = db_epoch(e.contents.owner_epoch);
        encoded[i] = encode(e.contents, e.key);
        todo.push_back(i);
      } catch (const std::exception& x) {
        errors[i] = x.what();
        note_failure();
      }
    }
    if (todo.empty())
      return errors;

    // Statements: runs of entries of one kind, each key at most once per statement
    // (ON CONFLICT cannot touch a row twice), at most batch_rows rows and batch_bytes
    // bytes (a single larger parcel goes alone); in batch order.
    struct chunk {
      bool connection;
      std::vector<std::size_t> entries;
    };
    std::vector<chunk> chunks;
    std::unordered_set<std::string_view> keys_in_chunk;
    std::size_t chunk_bytes = 0;
    for (std::size_t i : todo) {
      const bool conn = batch[i].connection;
      if (chunks.empty() || chunks.back().connection != conn || chunks.back().entries.size() >= options_.batch_rows ||
          (chunk_bytes + encoded[i].size() > options_.batch_bytes && !chunks.back().entries.empty()) ||
          keys_in_chunk.count(batch[i].key)) {
        chunks.push_back({conn, {}});
        keys_in_chunk.clear();
        chunk_bytes = 0;
      }
      chunks.back().entries.push_back(i);
      keys_in_chunk.insert(batch[i].key);
      chunk_bytes += encoded[i].size();
    }
    // Rows in key order: concurrent batches over the same users lock them in one
    // order (no deadlock between two members' batches).
    for (auto& c : chunks)
      std::sort(c.entries.begin(), c.entries.end(),
                [&](std::size_t a, std::size_t b) { return batch[a].key < batch[b].key; });

    std::lock_guard lock(mutex_);
    std::string last_error;
    for (int attempt = 0; attempt < batch_attempts; ++attempt) {
      if (attempt > 0)
        wait_before_retry(attempt);
      std::vector<std::string> outcome(batch.size());  // this attempt's texts (stale entries)
      std::size_t written = 0, fenced = 0;
      try {
        connect_if_needed();
        exec("BEGIN");
        for (const auto& c : chunks) {
          std::vector<std::string_view> keys, parcels;
          for (std::size_t i : c.entries) {
            keys.emplace_back(batch[i].key);
            parcels.emplace_back(encoded[i].data(), encoded[i].size());
          }
          if (c.connection) {
            run("batch_connections", params().bytea_array(keys).bytea_array(parcels));
            written += c.entries.size();
            continue;
          }
          std::vector<std::int64_t> chunk_epochs;
          for (std::size_t i : c.entries)
            chunk_epochs.push_back(epochs[i]);
          auto r = run("batch_users", params().bytea_array(keys).bytea_array(parcels).int8_array(chunk_epochs));
          std::unordered_set<std::string> landed;
          for (int row = 0; row < PQntuples(r.get()); ++row)
            landed.emplace(PQgetvalue(r.get(), row, 0), static_cast<std::size_t>(PQgetlength(r.get(), row, 0)));
          written += landed.size();
          if (landed.size() == c.entries.size())
            continue;
          // Refused as stale: say against which epoch (read in the same transaction).
          std::vector<std::string_view> stale_keys;
          for (std::size_t i : c.entries)
            if (!landed.count(batch[i].key))
              stale_keys.emplace_back(batch[i].key);
          auto current = run("batch_epochs", params().bytea_array(stale_keys));
          std::unordered_map<std::string, std::uint64_t> epoch_of;
          for (int row = 0; row < PQntuples(current.get()); ++row)
            epoch_of[std::string(PQgetvalue(current.get(), row, 0),
                                 static_cast<std::size_t>(PQgetlength(current.get(), row, 0)))] =
              get_be64(PQgetvalue(current.get(), row, 1));
          for (std::size_t i : c.entries) {
            if (landed.count(batch[i].key))
              continue;
            ++fenced;
            outcome[i] = stale_owner_error(batch[i].key, batch[i].contents.owner_epoch, epoch_of[batch[i].key]).what();
          }
        }
        exec("COMMIT");
      } catch (const std::exception& x) {
        last_error = x.what();
        rollback();
        spdlog::warn("deposit: a batch of {} parcels failed (attempt {} of {}), nothing of it applied: {}",
                     todo.size(), attempt + 1, batch_attempts, last_error);
        continue;
      }
      for (std::size_t i : todo)
        errors[i] = std::move(outcome[i]);
      counters_.writes.fetch_add(written, std::memory_order_relaxed);
      counters_.fenced.fetch_add(fenced, std::memory_order_relaxed);
      note_success();
      return errors;
    }
    for (std::size_t i : todo)
      errors[i] = last_error;
    note_failure();
    return errors;
  }

  // --- scans ---------------------------------------------------------------------

  std::size_t sweep(std::chrono::seconds user_max_age, std::chrono::seconds guest_max_age) override {
    const std::int64_t user_s = user_max_age.count();
    const std::int64_t guest_s = guest_max_age.count();
    const std::int64_t conn_s = std::max(user_s, guest_s);
    std::size_t removed = 0;
    try {
      // Page by page of keys, the mutex released in between: other calls go on meanwhile.
      for (std::string after;;) {
        std::optional<std::string> end;
        call([&] {
          auto page = run("users_page_end", params().bytes(after).int8(scan_page_rows));
          if (PQntuples(page.get()) == 0)
            return;
          end.emplace(PQgetvalue(page.get(), 0, 0), static_cast<std::size_t>(PQgetlength(page.get(), 0, 0)));
          auto r = run("sweep_parcels", params().bytes(after).bytes(*end).int8(user_s).int8(guest_s));
          removed += static_cast<std::size_t>(PQntuples(r.get()));
          run("sweep_claims", params().bytes(after).bytes(*end).int8(user_s).int8(guest_s));
          run("sweep_empty", params().bytes(after).bytes(*end));
        });
        if (!end)
          break;
        after = std::move(*end);
      }
      for (std::string after;;) {
        std::optional<std::string> end;
        call([&] {
          auto page = run("connections_page_end", params().bytes(after).int8(scan_page_rows));
          if (PQntuples(page.get()) == 0)
            return;
          end.emplace(PQgetvalue(page.get(), 0, 0), static_cast<std::size_t>(PQgetlength(page.get(), 0, 0)));
          run("sweep_connections", params().bytes(after).bytes(*end).int8(conn_s));
        });
        if (!end)
          break;
        after = std::move(*end);
      }
    } catch (const std::exception& e) {  // never throws: counted (by call) and logged, tried again next time
      spdlog::warn("deposit: the sweep stopped early: {}", e.what());
    }
    counters_.removed.fetch_add(removed, std::memory_order_relaxed);
    return removed;
  }

  std::size_t count_users() override {
    return call([&] {
      auto r = run("count_users", params());
      return static_cast<std::size_t>(get_be64(PQgetvalue(r.get(), 0, 0)));
    });
  }

  void for_each_user(const std::function<void(const std::string&)>& fn) override {
    std::string after;
    while (true) {
      std::vector<std::string> page;
      call([&] {
        auto r = run("list_users", params().bytes(after).int8(scan_page_rows));
        for (int row = 0; row < PQntuples(r.get()); ++row)
          page.emplace_back(PQgetvalue(r.get(), row, 0), static_cast<std::size_t>(PQgetlength(r.get(), row, 0)));
      });
      for (const auto& key : page)  // without the mutex: fn may use the deposit
        fn(key);
      if (page.size() < static_cast<std::size_t>(scan_page_rows))
        return;
      after = page.back();
    }
  }

private:
  // --- the connection ---------------------------------------------------------------

  /// Runs f() holding the mutex on a working connection; counts the outcome
  /// like the filesystem backend (a refusal as stale is neither).
  template <class F>
  auto call(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    try {
      connect_if_needed();
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        note_success();
      } else {
        auto result = f();
        note_success();
        return result;
      }
    } catch (const stale_owner_error&) {
      throw;
    } catch (const parcel_quarantined&) {
      note_success();  // the database answered; what it held was bad (counted as quarantined)
      throw;
    } catch (const std::exception&) {
      note_failure();
      throw;
    }
  }

  /// The password of the url (or PGPASSWORD), scrubbed from every error text.
  void find_password() {
    if (const char* env = std::getenv("PGPASSWORD"); env && *env)
      passwords_.emplace_back(env);
    if (options_.url.empty())
      return;
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(options_.url.c_str(), &err);
    if (err)
      PQfreemem(err);
    if (!opts)
      return;
    for (auto* o = opts; o->keyword; ++o)
      if (std::strcmp(o->keyword, "password") == 0 && o->val && *o->val)
        passwords_.emplace_back(o->val);
    PQconninfoFree(opts);
  }

  std::string scrub(std::string text) const {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    for (const auto& pw : passwords_)
      for (std::size_t pos; (pos = text.find(pw)) != std::string::npos;)
        text.replace(pos, pw.size(), "***");
    for (auto& c : text)
      if (c == '\n')
        c = ' ';
    return text;
  }

  /// "host H port P database D user U" of a connection (attempted or made).
  static std::string describe(PGconn* c) {
    auto s = [](const char* v) { return std::string(v && *v ? v : "(default)"); };
    return "host " + s(PQhost(c)) + " port " + s(PQport(c)) + " database " + s(PQdb(c)) + " user " + s(PQuser(c));
  }

  /// A new session within connect_timeout (asynchronous connect: the timeout
  /// is kept to the millisecond), its statement_timeout set. Throws deposit_error.
  PGconn* open_session() {
    const std::string tcp_timeout = std::to_string(options_.statement_timeout.count() + options_.connect_timeout.count());
    // Defaults first: the url's own settings (later) win.
    const char* keys[] = {"fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
                          "keepalives_count", "tcp_user_timeout", "dbname", nullptr};
    const char* vals[] = {"troupe", "1", "10", "3", "3", tcp_timeout.c_str(),
                          options_.url.empty() ? nullptr : options_.url.c_str(), nullptr};
    PGconn* c = PQconnectStartParams(keys, vals, 1);
    if (!c)
      throw deposit_error("postgres: cannot connect: out of memory");
    PQsetNoticeProcessor(
      c, [](void*, const char* message) { spdlog::debug("deposit: PostgreSQL says: {}", message); }, nullptr);
    auto fail = [&](const std::string& why) -> PGconn* {
      std::string text = scrub("postgres: cannot connect to " + describe(c) + ": " + why);
      PQfinish(c);
      throw deposit_error(text);
    };
    if (PQstatus(c) == CONNECTION_BAD)
      return fail(PQerrorMessage(c));
    const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
    PostgresPollingStatusType state = PGRES_POLLING_WRITING;
    while (state != PGRES_POLLING_OK) {
      if (state == PGRES_POLLING_FAILED)
        return fail(PQerrorMessage(c));
      const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0)
        return fail("no answer within " + std::to_string(options_.connect_timeout.count()) + " ms");
      struct pollfd pfd {};
      pfd.fd = PQsocket(c);
      pfd.events = state == PGRES_POLLING_READING ? POLLIN : POLLOUT;
      int n = ::poll(&pfd, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return fail(std::strerror(errno));
      if (n == 0)
        continue;  // the deadline check above ends it
      state = PQconnectPoll(c);
    }
    // Notices ("schema ... already exists, skipping") are not errors: not printed.
    const std::string set = "SET client_min_messages = warning; SET statement_timeout = " +
                            std::to_string(options_.statement_timeout.count());
    result_ptr r(PQexec(c, set.c_str()), &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
      return fail(PQerrorMessage(c));
    return c;
  }

  /// Creates the schema and applies the missing migrations, in one
  /// transaction under an advisory lock; refuses a newer schema.
  void migrate() {
    exec("BEGIN");
    try {
      lock_schema();
      exec(with_schema("CREATE SCHEMA IF NOT EXISTS {s}", schema_).c_str());
      exec(with_schema("CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer PRIMARY KEY, "
                       "applied_at timestamptz NOT NULL DEFAULT now())",
                       schema_)
             .c_str());
      auto r = exec(with_schema("SELECT coalesce(max(version), 0)::text FROM {s}.schema_version", schema_).c_str());
      const int found = std::stoi(PQgetvalue(r.get(), 0, 0));
      if (found > postgres_schema_version)
        throw deposit_error("postgres: database schema version " + std::to_string(found) +
                            " is newer than this troupe understands (" + std::to_string(postgres_schema_version) +
                            "); upgrade troupe");
      for (int v = found; v < postgres_schema_version; ++v) {
        exec(with_schema(migrations()[static_cast<std::size_t>(v)], schema_).c_str());
        exec(with_schema("INSERT INTO {s}.schema_version (version) VALUES (" + std::to_string(v + 1) + ")", schema_)
               .c_str());
        spdlog::info("deposit: PostgreSQL schema {} migrated to version {}", options_.schema, v + 1);
      }
      exec("COMMIT");
    } catch (const std::exception&) {
      rollback();
      throw;
    }
  }

  /// The schema's transaction-scoped advisory lock (migrations, secrets).
  void lock_schema() {
    const std::string lock = "SELECT pg_advisory_xact_lock(" + std::to_string(migration_lock_class) + ", hashtext(" +
                             literal(options_.schema) + "))";
    exec(lock.c_str());
  }

  std::string literal(const std::string& text) const {
    std::string out = "'";
    for (char c : text) {
      if (c == '\'')
        out += '\'';
      out += c;
    }
    return out + "'";
  }

  void prepare_all() {
    for (const auto& s : statements()) {
      const std::string sql = with_schema(s.sql, schema_);
      result_ptr r(PQprepare(conn_, s.name, sql.c_str(), static_cast<int>(s.types.size()), s.types.data()),
                   &PQclear);
      if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
        failed(std::string("preparing ") + s.name);
    }
  }

  /// Makes sure there is a session: reconnects when there is none and the
  /// backoff allows it, else throws "not connected" at once.
  void connect_if_needed() {
    if (conn_ && PQstatus(conn_) == CONNECTION_OK)
      return;
    if (conn_)
      drop("the connection went bad");
    const auto now = std::chrono::steady_clock::now();
    if (now < next_attempt_) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt_ - now).count();
      throw deposit_unavailable("postgres: not connected (" + last_error_ + "); next attempt in " + std::to_string(wait) +
                          " ms");
    }
    try {
      conn_ = open_session();
      prepare_all();
    } catch (const std::exception& e) {
      if (conn_) {
        PQfinish(conn_);
        conn_ = nullptr;
      }
      schedule_retry(e.what());
      throw deposit_unavailable("postgres: not connected (" + std::string(e.what()) + ")");
    }
    backoff_ = options_.reconnect_backoff_min;
    connected_.store(true);
    spdlog::info("deposit: reconnected to PostgreSQL {}", describe(conn_));
  }

  void schedule_retry(const std::string& why) {
    last_error_ = why;
    next_attempt_ = std::chrono::steady_clock::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.reconnect_backoff_max);
  }

  /// Closes a broken session; the next call reconnects after the backoff.
  void drop(const std::string& why) {
    if (conn_) {
      PQfinish(conn_);
      conn_ = nullptr;
    }
    const bool was = connected_.exchange(false);
    schedule_retry(why);
    if (was)
      spdlog::error("deposit: lost the PostgreSQL connection ({}); reconnecting with backoff", why);
  }

  /// Throws for the failed statement: "not connected" (and drops the session)
  /// when the connection is gone, else the server's message.
  [[noreturn]] void failed(const std::string& what) {
    std::string msg = scrub(PQerrorMessage(conn_));
    if (PQstatus(conn_) == CONNECTION_BAD) {
      drop(msg);
      throw deposit_unavailable("postgres: not connected (" + msg + ")");
    }
    throw deposit_error("postgres: " + what + " failed: " + msg);
  }

  result_ptr run(const char* name, const params& p) {
    auto values = p.pointers();
    auto lengths = p.lengths();
    std::vector<int> formats(values.size(), 1);
    result_ptr r(PQexecPrepared(conn_, name, p.size(), values.data(), lengths.data(), formats.data(), 1), &PQclear);
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      failed(name);
    return r;
  }

  /// A statement without parameters (text results).
  result_ptr exec(const char* sql) {
    result_ptr r(PQexec(conn_, sql), &PQclear);
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      failed(std::string(sql).substr(0, 40));
    return r;
  }

  /// Ends a failed transaction, if the session still stands.
  void rollback() noexcept {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK)
      return;
    if (PQtransactionStatus(conn_) == PQTRANS_IDLE)
      return;
    result_ptr r(PQexec(conn_, "ROLLBACK"), &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK && PQstatus(conn_) == CONNECTION_BAD)
      drop(scrub(PQerrorMessage(conn_)));
  }

  /// Before a batch's retry:
  /// Its own backoff (doubling from reconnect_backoff_min, at most a second); then
  /// a reconnect may be tried at once, whatever the connection's backoff says.
  void wait_before_retry(int attempt) {
    auto pause = std::min<std::chrono::milliseconds>(options_.reconnect_backoff_min * (1 << (attempt - 1)),
                                                     std::chrono::seconds(1));
    std::this_thread::sleep_for(pause);
    next_attempt_ = std::min(next_attempt_, std::chrono::steady_clock::now());
  }

  // --- helpers ----------------------------------------------------------------------

  static std::int64_t db_epoch(std::uint64_t epoch) {
    if (epoch > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw deposit_error("postgres: owner epoch " + std::to_string(epoch) +
                          " is beyond what the PostgreSQL deposit stores (2^63-1)");
    return static_cast<std::int64_t>(epoch);
  }

  std::uint64_t current_epoch(const std::string& user) {
    auto r = run("owner_epoch", params().bytes(user));
    return PQntuples(r.get()) == 0 ? 0 : get_be64(PQgetvalue(r.get(), 0, 0));
  }

  std::string quarantine_ref(PGresult* r) const {
    return "postgres:" + options_.schema + ".quarantine id " + std::to_string(get_be64(PQgetvalue(r, 0, 0)));
  }

  void check_owner(const std::string& key, const parcel& p) {
    if (!p.owner.empty() && p.owner != key)
      throw deposit_error("deposit: a parcel of '" + p.owner + "' cannot be written under '" + key + "'");
  }

  /// Whether two rows (parcel, quarantine_reason, ...) hold the same parcel and no marker.
  static bool same_parcel(PGresult* a, PGresult* b) {
    const bool a_none = PQntuples(a) == 0 || PQgetisnull(a, 0, 0);
    const bool b_none = PQntuples(b) == 0 || PQgetisnull(b, 0, 0);
    if (a_none || b_none)
      return a_none && b_none && (PQntuples(b) == 0 || PQgetisnull(b, 0, 1));
    return PQgetisnull(b, 0, 1) && PQgetlength(a, 0, 0) == PQgetlength(b, 0, 0) &&
           std::memcmp(PQgetvalue(a, 0, 0), PQgetvalue(b, 0, 0), static_cast<std::size_t>(PQgetlength(a, 0, 0))) == 0;
  }

  /// get_user's read (under the mutex).
  std::optional<parcel> read_user(const std::string& user) {
    return served_user(user, run("get_user", params().bytes(user)).get());
  }

  /// What a row (parcel, quarantine_reason, quarantine_id, ...) of `user` serves:
  /// nothing, his parcel, or parcel_quarantined (a marker, or a parcel failing
  /// verification, which is then moved to quarantine).
  std::optional<parcel> served_user(const std::string& user, PGresult* r) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      result_ptr again(nullptr, &PQclear);
      if (attempt > 0) {  // the bad parcel was rewritten meanwhile: read what is there now
        again = run("get_user", params().bytes(user));
        r = again.get();
      }
      if (PQntuples(r) == 0)
        return std::nullopt;
      if (!PQgetisnull(r, 0, 1)) {
        std::string ref;
        if (!PQgetisnull(r, 0, 2))
          ref = "postgres:" + options_.schema + ".quarantine id " + std::to_string(get_be64(PQgetvalue(r, 0, 2)));
        throw parcel_quarantined(user, "quarantined earlier: " + std::string(PQgetvalue(r, 0, 1)), ref);
      }
      if (PQgetisnull(r, 0, 0))
        return std::nullopt;
      std::string_view data(PQgetvalue(r, 0, 0), static_cast<std::size_t>(PQgetlength(r, 0, 0)));
      counters_.reads.fetch_add(1, std::memory_order_relaxed);
      parcel p;
      const std::string reason = verify(user, data, p);
      if (reason.empty())
        return p;
      auto q = run("quarantine_user_if", params().bytes(user).bytes(data).bytes(printable(reason)));
      if (PQntuples(q.get()) == 0)
        continue;
      auto ref = quarantine_ref(q.get());
      counters_.quarantined.fetch_add(1, std::memory_order_relaxed);
      spdlog::error("deposit: the parcel of '{}' cannot be trusted ({}); quarantined as {}", printable(user),
                    printable(reason), ref);
      throw parcel_quarantined(user, reason, ref);
    }
    throw deposit_error("postgres: the parcel of " + printable(user) + " keeps changing while being quarantined");
  }

  void note_failure() {
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    counters_.consecutive_failures.fetch_add(1, std::memory_order_relaxed);
    counters_.last_failure_unix_ms.store(now_unix_ms(), std::memory_order_relaxed);
  }
  void note_success() {
    counters_.consecutive_failures.store(0, std::memory_order_relaxed);
    counters_.last_success_unix_ms.store(now_unix_ms(), std::memory_order_relaxed);
  }

  postgres_options options_;
  std::string schema_;  ///< quoted
  std::vector<std::string> passwords_;
  std::mutex mutex_;  ///< guards everything below (one connection)
  PGconn* conn_ = nullptr;
  std::atomic<bool> connected_{false};
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_;
  std::string last_error_;
};

/// [begin, end) of the value of every `password` keyword of a conninfo
/// string (keyword = value, the value maybe single-quoted).
std::vector<std::pair<std::size_t, std::size_t>> conninfo_passwords(const std::string& s) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t i = 0;
  auto space = [&] {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
  };
  while (true) {
    space();
    if (i >= s.size())
      break;
    std::size_t k = i;
    while (i < s.size() && s[i] != '=' && !std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    std::string key = s.substr(k, i - k);
    space();
    if (i >= s.size() || s[i] != '=')
      break;
    ++i;
    space();
    std::size_t v = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (i < s.size() && s[i] != '\'') {
        if (s[i] == '\\' && i + 1 < s.size())
          ++i;
        ++i;
      }
      if (i < s.size())
        ++i;
    } else {
      while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) {
        if (s[i] == '\\' && i + 1 < s.size())
          ++i;
        ++i;
      }
    }
    if (key == "password")
      out.emplace_back(v, i);
  }
  return out;
}

}  // namespace

std::string redact_postgres_url(const std::string& url) {
  std::string out = url;
  for (std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (out.compare(0, scheme.size(), scheme) != 0)
      continue;
    // The authority ends at the first '/', '?' or '#'; its user info at its last '@'.
    const std::size_t start = scheme.size();
    std::size_t end = out.find_first_of("/?#", start);
    if (end == std::string::npos)
      end = out.size();
    const std::size_t at = out.rfind('@', end == 0 ? 0 : end - 1);
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at)
        out.replace(colon + 1, at - colon - 1, "***");
    }
    // A password=... query parameter.
    std::size_t q = out.find('?');
    while (q != std::string::npos) {
      const std::size_t name = q + 1;
      std::size_t next = out.find_first_of("&#", name);
      if (out.compare(name, 9, "password=") == 0) {
        const std::size_t value_end = next == std::string::npos ? out.size() : next;
        out.replace(name + 9, value_end - name - 9, "***");
        next = out.find_first_of("&#", name);
      }
      q = next != std::string::npos && out[next] == '&' ? next : std::string::npos;
    }
    return out;
  }
  auto ranges = conninfo_passwords(out);
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it)
    out.replace(it->first, it->second - it->first, "***");
  return out;
}

std::unique_ptr<deposit> make_postgres_deposit(const postgres_options& options) {
  return std::make_unique<postgres_deposit>(options);
}

bool postgres_disconnected(const deposit& d) {
  auto* pg = dynamic_cast<const postgres_deposit*>(&d);
  return pg && pg->disconnected();
}

int postgres_backend_pid(deposit& d) {
  auto* pg = dynamic_cast<postgres_deposit*>(&d);
  return pg ? pg->backend_pid() : 0;
}

}  // namespace troupe::store
