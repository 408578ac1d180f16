#pragma once
/// \file
/// The deposit on PostgreSQL (issue 12): one database that members on several
/// hosts share, and that enforces who owns a user (fencing in the database).
/// Same contract as the filesystem deposit (store/deposit.hpp); what differs:
///
/// * Tables, in the schema `options.schema` (created if missing):
///
///       schema_version(version, applied_at)    one row per applied migration
///       users(key bytea PK, parcel bytea, owner_epoch, claim_epoch,
///             quarantine_reason, quarantine_id, written_at, claimed_at)
///       connections(key bytea PK, parcel bytea, written_at)
///       quarantine(id, key, kind, reason, bytes, at)    moved parcels, never deleted
///       commander_generation(id = 1, generation)
///       secrets(name text PK, value bytea, created_at)   the generated cookie secret (v2)
///
///   A users row holds his parcel (NULL: none), his claim and his quarantine
///   marker, so a claim-only or marker-only row is not a user (count_users,
///   for_each_user, sweep skip it). `parcel` holds exactly the bytes the
///   filesystem backend writes (store::encode) and is verified on every read.
/// * Migrations run at start in one transaction under a transaction-scoped
///   advisory lock (several nodes starting at once are safe); a database whose
///   version is newer than this binary knows is refused (deposit_error).
/// * Fencing: put_user is ONE `INSERT ... ON CONFLICT DO UPDATE ... WHERE
///   greatest(claim_epoch, owner_epoch) <= new epoch`; claim_user likewise.
///   Owner epochs are stored as bigint: an epoch above 2^63-1 is refused (deposit_error).
/// * quarantine_path() of parcel_quarantined and quarantine_user's result:
///   "postgres:<schema>.quarantine id <n>".
/// * put_batch is atomic: one transaction of multi-row statements
///   (at most `batch_rows` rows and `batch_bytes` bytes each); a failed
///   transaction is retried (3 attempts in all, with backoff) and, failing
///   still, every entry gets the error text.
///   Stale entries are refused inside it (is_stale_owner texts), the others land.
/// * Connection loss (or a server that cannot be reached): the call throws
///   deposit_error("postgres: not connected (...)"); the connection is dropped
///   and later calls reconnect by themselves, with a backoff that doubles from
///   reconnect_backoff_min to reconnect_backoff_max (a call inside the backoff
///   window throws at once without trying). postgres_disconnected() tells it.
/// * Thread safety: one connection, guarded by a mutex: calls from several
///   threads are safe and are served one at a time (the deposit actor makes
///   them from one thread anyway). for_each_user calls `fn` without the mutex
///   held (pages of keys), so `fn` may use the deposit.
/// * load_or_create_secret: one row of `secrets`, inserted once under the
///   schema's advisory lock (the first member's candidate stands), read by all.
/// * Every statement runs under `SET statement_timeout` (nothing hangs forever).

#include "store/deposit.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace troupe::store {

/// How to reach the database and how to behave when it is away.
struct postgres_options {
  std::string url;                ///< libpq URI/conninfo "postgresql://..."; "" = all from PG* env vars
  std::string schema = "troupe";  ///< SQL schema holding the tables (tests use one per test)
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds statement_timeout{5000};
  std::chrono::milliseconds reconnect_backoff_min{100};
  std::chrono::milliseconds reconnect_backoff_max{5000};
  std::size_t batch_rows = 1000;  ///< rows per multi-row statement in put_batch
  /// Bytes of parcels per multi-row statement in put_batch (a statement's
  /// parameters must stay far below PostgreSQL's 1 GB): large parcels go in
  /// smaller statements, all still in the batch's one transaction.
  std::size_t batch_bytes = 64u << 20;
};

/// The schema version this binary creates and understands.
constexpr int postgres_schema_version = 2;

/// Connects (throws deposit_error naming host/port/db — never the password —
/// when it cannot within connect_timeout), creates/migrates the schema,
/// refuses a newer schema version ("database schema version N is newer than
/// this troupe understands (M); upgrade troupe").
std::unique_ptr<deposit> make_postgres_deposit(const postgres_options& options);

/// `url` with any password replaced by "***" (URI user info, a `password=`
/// URI query parameter or conninfo keyword): for logs and errors.
std::string redact_postgres_url(const std::string& url);

/// True while a PostgreSQL deposit has no working connection (health:
/// degraded); false for any other deposit. Lock-free (an atomic flag).
bool postgres_disconnected(const deposit& d);

/// The server process id of a PostgreSQL deposit's connection (0: none, or
/// not a PostgreSQL deposit). For tests and operators (pg_stat_activity).
int postgres_backend_pid(deposit& d);

}  // namespace troupe::store
