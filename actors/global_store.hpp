#pragma once
/// \file
/// The global store: a small key-value store shared by every user, with
/// leases (exclusive, fenced by tokens) for read-modify-write. It is an actor
/// of its own next to the commander — its own mailbox, so lease traffic never
/// waits behind placements, logins and wakes — and its logic is
/// registry::lease_table. It is persisted as one parcel of the deposit
/// (global_snapshot_key), written after every change (commander.durability
/// "reply") or at the soft quit ("freeze"), and read back by a new store.

#include "actors/deposit.hpp"
#include "actors/messages.hpp"
#include "actors/node_context.hpp"

#include <caf/node_id.hpp>
#include <caf/typed_actor.hpp>

#include <map>
#include <string>

namespace troupe::detail {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, global_op& x) {
  return f(caf::meta::type_name("troupe.global_op"), x.what, x.key, x.has_value, x.value, x.ttl_ms, x.wait_ms,
           x.token);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, global_reply& x) {
  return f(caf::meta::type_name("troupe.global_reply"), x.refusal, x.found, x.value, x.token);
}

}  // namespace troupe::detail

namespace troupe {

/// The global store's values, as persisted in the deposit (one parcel).
using global_snapshot = std::map<std::string, std::string>;

/// The deposit key of the global store's snapshot (not a valid user name).
inline const std::string global_snapshot_key = "%global";

/// The global store's typed interface.
using global_store_handle = caf::typed_actor<
  /// Get, set, erase, lease, commit, abort (the sender of a lease is its
  /// holder, monitored: a holder that goes down loses its leases).
  caf::replies_to<global_atom, detail::global_op>::with<detail::global_reply>,
  /// The store as JSON: keys, sizes, leases (for /_troupe/global).
  caf::replies_to<global_atom>::with<std::string>,
  /// From its commander: the commander's generation. Fencing tokens share the
  /// owner epochs' scheme, so the tokens granted from now on are above every
  /// token an earlier commander's store could have granted; no lease is
  /// granted before the first one is known (it waits, for at most the hold budget).
  caf::reacts_to<generation_atom, std::uint64_t>,
  /// From its commander at the soft quit: writes the whole store after every
  /// change so far; answers true once it is durable, the deposit's error if not.
  caf::replies_to<flush_atom>::with<bool>,
  /// From its commander: a cluster member was declared down; the leases its
  /// actors held are released, nothing applied.
  caf::reacts_to<node_down_atom, caf::node_id>>;

/// How a global store starts.
struct global_store_start {
  /// Its values: the snapshot the node read before starting (a lone node, a cluster's first commander).
  global_snapshot values;
  /// A takeover: read the snapshot from the deposit instead (retried until it
  /// answers); requests wait meanwhile, each for at most the hold budget.
  bool load_from_deposit = false;
};

/// Spawns a global store writing to and reading from `deposit`. Its commander
/// links to it (they stop together); requests come straight from users and the bridge.
global_store_handle spawn_global_store(caf::actor_system& sys, node_context_ptr ctx, deposit_handle deposit,
                                       global_store_start start = {});

}  // namespace troupe
