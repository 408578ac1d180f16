// pg_deposit_bench: put_batch throughput of the PostgreSQL deposit against the
// filesystem deposit, in one run on this machine (issue 12: "soft-quit users/s").
//
//   pg_deposit_bench --url postgresql://USER@127.0.0.1:PORT/DB [--users 20000]
//                    [--bytes 200] [--call 1024] [--batch-rows 1000] [--dir /tmp/...]
//
// --url defaults to $TROUPE_TEST_PG_URL (scripts/pg_server.sh start DIR prints one).
// Each backend writes --users user parcels of about --bytes bytes each, in
// put_batch calls of --call entries (the deposit actor's batches hold up to
// 1024), twice: first into an empty store (inserts), then again (overwrites,
// a soft quit of users stored before). One line per backend and round; then
// the latency of 2,000 wakes (claim_user) of those users.
#include "store/deposit.hpp"
#include "store/postgres_deposit.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace troupe::store;

namespace {

struct settings {
  std::string url;
  std::string dir;
  std::size_t users = 20000;
  std::size_t bytes = 200;
  std::size_t call = 1024;
  std::size_t batch_rows = 1000;
};

/// Writes every user in calls of s.call entries; returns users/s (every entry must land).
double write_all(deposit& d, const settings& s, std::uint64_t generation) {
  std::vector<deposit::batch_entry> all;
  all.reserve(s.users);
  for (std::size_t i = 0; i < s.users; ++i) {
    parcel p;
    p.generation = generation;
    p.writer_node = "bench";
    p.writer_worker = "default-w1";
    p.cause = parcel_cause::quit;
    p.owner_epoch = (generation << 32) | 1;
    // A payload such that the encoded parcel is about s.bytes bytes.
    p.payload = pack(std::string(s.bytes > 55 ? s.bytes - 55 : 1, static_cast<char>('a' + i % 26)));
    all.push_back({false, "user" + std::to_string(i), std::move(p)});
  }
  if (generation == 1)
    std::printf("one parcel encodes to %zu bytes\n", encode(all[0].contents, all[0].key).size());
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t at = 0; at < all.size(); at += s.call) {
    std::vector<deposit::batch_entry> call(all.begin() + static_cast<std::ptrdiff_t>(at),
                                           all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), at + s.call)));
    for (const auto& text : d.put_batch(call))
      if (!text.empty()) {
        std::cerr << "pg_deposit_bench: an entry failed: " << text << "\n";
        std::exit(1);
      }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(s.users) / seconds;
}

/// A wake: claim_user (read + claim in one step) of `wakes` stored users at a newer
/// epoch each time; prints p50/p99 in microseconds.
void wake_latency(deposit& d, const char* backend, std::size_t users, std::size_t wakes, std::uint64_t round) {
  std::vector<double> us;
  us.reserve(wakes);
  for (std::size_t i = 0; i < wakes; ++i) {
    const std::string key = "user" + std::to_string((i * 7919) % users);
    const auto t0 = std::chrono::steady_clock::now();
    auto p = d.claim_user(key, (round << 32) | (i + 1));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!p) {
      std::cerr << "pg_deposit_bench: " << key << " was not found\n";
      std::exit(1);
    }
  }
  std::sort(us.begin(), us.end());
  std::printf("%-10s %-10s p50 %7.0f us  p99 %7.0f us  (%zu claim_user calls)\n", backend, "wake", us[us.size() / 2],
              us[us.size() * 99 / 100], wakes);
}

void report(const char* backend, const char* round, double rate, const settings& s) {
  std::printf("%-10s %-10s %9.0f users/s  (%zu users, ~%zu B, put_batch calls of %zu)\n", backend, round, rate,
              s.users, s.bytes, s.call);
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  if (const char* u = std::getenv("TROUPE_TEST_PG_URL"))
    s.url = u;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--url")
      s.url = v;
    else if (a == "--dir")
      s.dir = v;
    else if (a == "--users")
      s.users = std::stoul(v);
    else if (a == "--bytes")
      s.bytes = std::stoul(v);
    else if (a == "--call")
      s.call = std::stoul(v);
    else if (a == "--batch-rows")
      s.batch_rows = std::stoul(v);
    else {
      std::cerr << "pg_deposit_bench: unknown option " << a << "\n";
      return 2;
    }
  }
  if (s.url.empty()) {
    std::cerr << "pg_deposit_bench: no --url (nor TROUPE_TEST_PG_URL); scripts/pg_server.sh start DIR prints one\n";
    return 2;
  }
  if (s.call == 0)
    s.call = 1;

  // Filesystem.
  std::string dir = s.dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/pg_deposit_bench.XXXXXX";
    if (!::mkdtemp(tmpl))
      return 1;
    dir = tmpl;
  }
  {
    auto fs_dep = make_filesystem_deposit(dir);
    report("filesystem", "insert", write_all(*fs_dep, s, 1), s);
    report("filesystem", "overwrite", write_all(*fs_dep, s, 2), s);
    wake_latency(*fs_dep, "filesystem", s.users, 2000, 3);
  }
  std::filesystem::remove_all(dir);

  // PostgreSQL, in a schema of its own, dropped at the end.
  postgres_options o;
  o.url = s.url;
  o.schema = "bench_" + std::to_string(::getpid());
  o.batch_rows = s.batch_rows;
  o.statement_timeout = std::chrono::milliseconds(60000);
  try {
    auto pg = make_postgres_deposit(o);
    report("postgres", "insert", write_all(*pg, s, 1), s);
    report("postgres", "overwrite", write_all(*pg, s, 2), s);
    wake_latency(*pg, "postgres", s.users, 2000, 3);
  } catch (const std::exception& e) {
    std::cerr << "pg_deposit_bench: " << e.what() << "\n";
    return 1;
  }
  PGconn* admin = PQconnectdb(s.url.c_str());
  PQclear(PQexec(admin, "SET client_min_messages = warning"));
  PGresult* r = PQexec(admin, ("DROP SCHEMA " + o.schema + " CASCADE").c_str());
  if (PQresultStatus(r) != PGRES_COMMAND_OK)
    std::cerr << "pg_deposit_bench: could not drop schema " << o.schema << ": " << PQerrorMessage(admin);
  PQclear(r);
  PQfinish(admin);
  return 0;
}
