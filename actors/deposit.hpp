#pragma once
/// \file
/// The deposit actor: the one owner of the node's deposit backend. It runs
/// detached (its own thread), so the file I/O of freezing and waking never
/// blocks the scheduler threads every other actor shares.

#include "actors/health.hpp"
#include "actors/messages.hpp"
#include "actors/node_context.hpp"
#include "store/deposit.hpp"

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <vector>

namespace troupe::store {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, parcel& x) {
  return f(caf::meta::type_name("troupe.parcel"), x.generation, x.writer_node, x.writer_worker, x.cause, x.owner,
           x.state_version, x.owner_epoch, x.payload);
}

}  // namespace troupe::store

namespace troupe {

using put_atom = caf::atom_constant<caf::atom("put")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using remove_atom = caf::atom_constant<caf::atom("remove")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using quarantine_atom = caf::atom_constant<caf::atom("quarantine")>;
using retry_atom = caf::atom_constant<caf::atom("dretry")>;
using claim_atom = caf::atom_constant<caf::atom("claim")>;
using generation_atom = caf::atom_constant<caf::atom("cmdgen")>;
using reread_atom = caf::atom_constant<caf::atom("dreread")>;
using deferred_atom = caf::atom_constant<caf::atom("ddeferred")>;

using store::parcel_kind;

/// The deposit actor's typed interface. Writes are group-committed: the puts
/// that queue up while one batch is written go to disk together, with one
/// filesystem flush, and each is answered once durable. Reads and removes see
/// every write answered before them. Failures are errc::deposit_failed
/// with the backend's text.
///
/// Quarantine (store::parcel_quarantined): a USER parcel that fails
/// verification, names another owner or is not a regular file is moved to
/// quarantine by the backend and the get is answered errc::bad_state (context:
/// the reason and the quarantine path), never as absent: the user must be
/// refused (503), not started empty. Every later get of him answers bad_state
/// too (the backend's marker) until a put or a remove of his parcel. A
/// CONNECTION parcel in that case is answered as absent (logged): the
/// connection becomes a guest again, nobody's state is lost.
///
/// Fencing (docs/deposit.md "Fencing"): a USER put whose owner_epoch is older
/// than the user's current epoch (his claim, or his parcel's epoch) is
/// answered errc::stale_owner — never retried, never parked in the soft
/// quit's fallback — counted (troupe_fenced_writes_total) and logged at most
/// once a second. A claim refused the same way is answered stale_owner too.
using deposit_handle = caf::typed_actor<
  /// Writes a parcel durably; answers its size in bytes once it is on disk.
  /// An empty p.owner is recorded as the key.
  caf::replies_to<put_atom, parcel_kind, std::string, store::parcel>::with<std::uint64_t>,
  /// Reads a parcel: none or one; errc::bad_state for a quarantined user parcel.
  caf::replies_to<get_atom, parcel_kind, std::string>::with<std::vector<store::parcel>>,
  /// Wakes a user's placement (user, owner epoch): reads his parcel like get
  /// and claims him for the epoch in the same step (store::deposit::claim_user);
  /// errc::stale_owner when a newer epoch holds him (nothing read, nothing claimed).
  caf::replies_to<claim_atom, std::string, std::uint64_t>::with<std::vector<store::parcel>>,
  /// A new commander generation (store::deposit::next_commander_generation).
  caf::replies_to<generation_atom>::with<std::uint64_t>,
  /// Removes a parcel (absent is fine); a user's removal also lifts his quarantine.
  caf::replies_to<remove_atom, parcel_kind, std::string>::with<bool>,
  /// Quarantines a user's parcel on the caller's word (user, reason: e.g. his
  /// payload does not decode as his state); answers the quarantine path ("" if
  /// there was no parcel). Later gets of him answer bad_state.
  caf::replies_to<quarantine_atom, std::string, std::string>::with<std::string>,
  /// Forgets users idle past the given hours (users, guests); answers how many.
  caf::replies_to<sweep_atom, double, double>::with<std::uint64_t>,
  /// Internal: writes the staged batch number N (group commit); a batch
  /// written meanwhile (full, or before a read) makes it a no-op.
  caf::reacts_to<flush_atom, std::uint64_t>,
  /// The soft quit begins (retry_ms, fallback_dir): from now on a put the
  /// backend refuses is retried until retry_ms have passed, then written to a
  /// filesystem deposit at fallback_dir (created on first use) and answered as
  /// written; only a put the fallback refuses too is answered deposit_failed.
  caf::replies_to<quit_atom, std::int64_t, std::string>::with<bool>,
  /// The soft quit ends: what still waits for a retry goes to the fallback now;
  /// answers (parcels written to the fallback, its directory or "" when unused,
  /// the parcels written nowhere: user names, "connection <cid>", "the global store").
  caf::replies_to<quit_atom>::with<std::uint64_t, std::string, std::vector<std::string>>,
  /// From the health actor (fresh_ms): unless a write succeeded within
  /// fresh_ms, writes a tiny platform parcel to learn whether writes work.
  caf::reacts_to<probe_write_atom, std::int64_t>,
  /// Internal: retries the puts refused during the soft quit.
  caf::reacts_to<retry_atom>,
  /// Internal: retries the reads held while the backend is unreachable.
  caf::reacts_to<reread_atom>,
  /// Internal: a slice of the backend's deferred work (store::deposit::do_deferred).
  caf::reacts_to<deferred_atom>>;

/// Spawns the deposit actor (detached; a top-level actor the node stops).
/// `health` (may be null) receives the outcome of every write. A get or claim
/// that finds the backend unreachable (store::deposit_unavailable) is retried
/// for up to `read_hold` (0: not at all), then answered deposit_failed.
deposit_handle spawn_deposit(caf::actor_system& sys, std::shared_ptr<store::deposit> backend,
                             health_signals* health = nullptr, caf::timespan read_hold = caf::timespan{0});

}  // namespace troupe
