#pragma once
/// \file
/// The forwarder: the front's one actor for user actors on OTHER nodes of a
/// cluster (docs/CLUSTER.md "Forwarding"). The local fast path hands a user
/// actor a local_reply, which cannot cross a node; for a remote user the
/// front hands the slot to this node's forwarder instead, which makes the
/// request/response call `(http_atom, http_request) -> http_response` and
/// delivers the answer into the slot.
///
/// CAF never fails a request in flight when the node serving it dies (it
/// waits out the request's timeout), and a dead proxy drops new messages
/// silently. So the forwarder keeps every request in flight in a pending map
/// keyed by the target's node, monitors each target actor once, and on the
/// target's down message — or on `(node_down_atom, node)` from the cluster
/// membership — releases the slots of every request to that target (or node)
/// at once, undelivered: the front re-resolves each of them once (its
/// on_dropped path). The request's deadline is only a backstop.

#include "actors/messages.hpp"
#include "actors/node_context.hpp"
#include "actors/user.hpp"

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/node_id.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace troupe {

/// The forwarder's typed interface.
using forwarder_handle = caf::typed_actor<
  /// Serve the slot's request by the user actor `target` (on another node).
  caf::reacts_to<http_atom, user_handle, local_reply>,
  /// The cluster membership declared `node` down: fail every request to it now.
  caf::reacts_to<node_down_atom, caf::node_id>,
  /// The answer to request `ref`, whose handler deferred it (its first answer
  /// was interim: http_response::deferred_ms); see deferred_answer_handle.
  caf::reacts_to<http_atom, std::uint64_t, http_response>>;

/// The forwarder's bookkeeping, without an actor system (the forwarder actor
/// drives it; tests drive it directly): the requests in flight by id, by target
/// and by node, which targets are watched (monitored), and which nodes were
/// declared down a moment ago. Failing releases the slots undelivered.
class forward_table {
public:
  using clock = std::chrono::steady_clock;

  /// A target actor: ids are unique on their node only.
  struct target_ref {
    caf::node_id node;
    caf::actor_id id = 0;
  };

  /// What add() decided.
  enum class admission : std::uint8_t {
    accepted,   ///< pending under `id`
    full,       ///< max_pending requests are in flight already: answer 503
    node_down,  ///< the target's node was declared down lately: release the slot (re-resolve)
  };

  struct added {
    admission outcome = admission::accepted;
    std::uint64_t id = 0;      ///< the request's id (accepted only)
    bool watch = false;        ///< the target is not watched yet: monitor it now
  };

  /// What failing a target or a node took out of the table.
  struct failed {
    std::vector<local_reply> released;       ///< their slots: dropping them (undelivered) fails the requests
    std::vector<caf::actor_addr> unwatched;  ///< targets no longer watched (demonitor them)
  };

  /// `max_pending`: limits.max_forwarded_requests; `down_memory`: how long
  /// a node declared down is refused at once; `max_idle_watches`: watched
  /// targets with nothing in flight kept beyond this many are let go.
  forward_table(std::uint64_t max_pending, clock::duration down_memory, std::size_t max_idle_watches);

  /// Takes `slot` for `target` (whose address `addr` is kept for demonitoring).
  /// It is moved from only when accepted: else the caller answers it (full) or drops it (node_down).
  added add(const target_ref& target, const caf::actor_addr& addr, local_reply& slot, clock::time_point now);

  /// The answer to request `id` came: its slot, if it is still pending.
  std::optional<local_reply> take(std::uint64_t id);
  /// The slot of request `id`, left pending (its answer was deferred); null when it is not.
  reply_slot* find(std::uint64_t id);

  /// The target is down (it exited, or its proxy died): releases its requests, stops watching it.
  failed fail_target(const target_ref& target);

  /// The node is gone: releases every request to it, stops watching its targets.
  /// `declared` (by the membership): also refuse new requests to it for down_memory.
  failed fail_node(const caf::node_id& node, bool declared, clock::time_point now);

  /// Watched targets with nothing in flight, let go once more than max_idle_watches
  /// of them are kept (demonitor them); called after take().
  std::vector<caf::actor_addr> sweep_idle_watches();

  std::size_t pending() const noexcept { return by_id_.size(); }
  std::size_t watched() const noexcept { return watched_; }
  std::size_t pending_to(const caf::node_id& node) const;
  bool watching(const target_ref& target) const;

private:
  struct watch {
    caf::actor_addr addr;
    std::unordered_set<std::uint64_t> ids;  // requests in flight to this target
  };
  struct record {
    local_reply slot;
    caf::node_id node;
    caf::actor_id target = 0;
  };
  using targets = std::unordered_map<caf::actor_id, watch>;

  void release(const std::unordered_set<std::uint64_t>& ids, failed& out);

  std::uint64_t max_pending_;
  clock::duration down_memory_;
  std::size_t max_idle_watches_;
  std::uint64_t next_id_ = 0;
  std::size_t watched_ = 0;
  std::size_t idle_watches_ = 0;
  std::unordered_map<std::uint64_t, record> by_id_;
  std::unordered_map<caf::node_id, targets> by_node_;
  std::unordered_map<caf::node_id, clock::time_point> down_until_;  // declared down: refused until then
};

/// Called with the node of every `(node_down_atom, node)`, on the forwarder's
/// thread (the front's route cache forgets the node's actors with it).
using node_down_hook = std::function<void(const caf::node_id&)>;

/// Spawns this node's forwarder: limits.max_forwarded_requests from `ctx`'s
/// recipe, request_timeout_seconds for requests without a deadline, and
/// hold_seconds as the time a node declared down is refused at once (and the
/// Retry-After of the 503 past the limit). Counts into ctx->metrics.forwarded.
forwarder_handle spawn_forwarder(caf::actor_system& sys, node_context_ptr ctx, node_down_hook on_node_down = {});

}  // namespace troupe
