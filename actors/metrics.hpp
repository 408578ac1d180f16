#pragma once
/// \file
/// The node's counters: plain atomics bumped where things happen and read by
/// /_troupe/metrics. One instance per node (owned by its node_context), never global.

#include "registry/rate_history.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::store {
struct deposit_counters;
}

namespace troupe {

/// Kinds of actor in the tree, as in the metric label troupe_actors{kind}.
enum class actor_kind : std::uint8_t { user, connection, page, worker, group, commander, count_ };

const char* to_string(actor_kind kind) noexcept;

/// A Prometheus histogram of durations in seconds, with fixed buckets.
struct seconds_histogram {
  static constexpr std::array<double, 13> bounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                 0.1,    0.25,  0.5,    1,     2.5,  5};
  std::array<std::atomic<std::uint64_t>, bounds.size()> buckets{};  // not cumulative
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> sum_ns{0};

  void observe(double seconds) noexcept;
  void write(std::string& out, const std::string& name) const;
};

/// Request latencies in the fine buckets of registry::latency_bounds_us (10 µs
/// to 10 s): p50/p99 for the console and the history, and a Prometheus histogram.
struct latency_histogram {
  std::array<std::atomic<std::uint64_t>, registry::latency_buckets> buckets{};  // not cumulative
  std::atomic<std::uint64_t> sum_us{0};

  void observe(std::chrono::steady_clock::duration d) noexcept;
  /// The counts now (each bucket read on its own: near, not exactly, one instant).
  registry::latency_counts counts() const noexcept;
  /// `name`_bucket{labels,le=...}, _sum and _count, in seconds.
  void write(std::string& out, const std::string& name, const std::string& labels) const;
};

/// One route of one user actor type (a pattern, not a path: the set is the
/// types' route tables, finite, made at start): troupe_route_*{type,method,route}.
struct route_counters {
  route_counters(std::string t, std::string m, std::string p)
    : type(std::move(t)), method(std::move(m)), pattern(std::move(p)) {}
  const std::string type, method, pattern;
  bool guarded = false;                    ///< it has a guard (troupe_guard_rejections_total)
  std::atomic<std::uint64_t> requests{0};  ///< answered, whatever the status
  std::atomic<std::uint64_t> guard_rejections{0};  ///< refused by its guards (also counted in requests)
  std::atomic<std::uint64_t> errors{0};    ///< answered 5xx
  latency_histogram latency;               ///< as the front measured them (read to written)
};

/// The key a route is found by (router::name_routes makes it, the front looks it up).
inline std::string route_key(std::string_view type, std::string_view method, std::string_view pattern) {
  std::string k;
  k.reserve(type.size() + method.size() + pattern.size() + 2);
  k.append(type).append(" ").append(method).append(" ").append(pattern);
  return k;
}

/// Counters and gauges of one node.
/// A worker's state as troupe_workers{group,state} counts it.
enum class worker_state : std::uint8_t {
  starting,  ///< a process worker started and not yet registered
  open,      ///< admits newcomers
  closed,    ///< admits none now (CPU or memory admission; its users are served)
  draining,  ///< an operator's drain: freezing its users, then it stops
  parked,    ///< a process worker that exited with permanent_failure_exitcode: not restarted
  count_
};
const char* to_string(worker_state s) noexcept;

/// One group's counters (troupe_workers, troupe_worker_restarts_total,
/// troupe_group_degraded); written by its group actor, read by /metrics.
struct group_counters {
  explicit group_counters(std::string group) : name(std::move(group)) {}
  const std::string name;
  std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(worker_state::count_)> workers{};
  std::atomic<std::uint64_t> worker_restarts{0};
  std::atomic<std::int64_t> degraded{0};  ///< 1 while the group is degraded
  /// While degraded (for /_troupe/health; written before `degraded` is set):
  /// why (a registry::degradation), since when and until when (unix ms; 0: no recovery coming).
  std::atomic<std::uint8_t> degraded_reason{0};
  std::atomic<std::int64_t> degraded_since_unix_ms{0};
  std::atomic<std::int64_t> recovery_unix_ms{0};
};

struct node_metrics {
  std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(actor_kind::count_)> actors{};
  std::array<std::atomic<std::uint64_t>, 600> http_requests{};  ///< by status code
  std::atomic<std::uint64_t> user_restarts{0};
  std::atomic<std::uint64_t> handler_failures{0};
  std::atomic<std::uint64_t> requests_expired{0};    ///< dropped from a user's queue past their deadline (never run)
  std::atomic<std::uint64_t> changes_rolled_back{0}; ///< changes refused by the deposit, the state put back
  std::atomic<std::uint64_t> users_refused{0};       ///< users whose stored state does not load (quarantined)
  std::atomic<std::uint64_t> users_fenced{0};        ///< user actors that left because the deposit fenced their epoch
  std::atomic<std::uint64_t> live_user_refusals{0};  ///< newcomers refused at limits.max_live_users
  std::atomic<std::uint64_t> login_carries_dropped{0};  ///< guests' stores a login could not carry (another user_type)
  /// Guests' stores a login dropped because the user has one already (README
  /// "Login"): troupe_login_guest_store_dropped_total{reason="live"|"frozen"}.
  std::atomic<std::uint64_t> login_guest_store_dropped_live{0};
  std::atomic<std::uint64_t> login_guest_store_dropped_frozen{0};
  std::atomic<std::uint64_t> guests_retired{0};      ///< guests with no state retired without a parcel
  std::atomic<std::int64_t> inflight{0};
  std::atomic<std::uint64_t> user_freezes{0};
  std::atomic<std::uint64_t> user_wakes{0};
  std::atomic<std::uint64_t> user_rests{0};    ///< user actors stopped to rest (group.rest_idle_seconds)
  std::atomic<std::uint64_t> user_resumes{0};  ///< resting users started again from what they left
  std::atomic<std::int64_t> users_resting{0};  ///< users resting now: their state in their worker, no actor
  std::atomic<std::int64_t> users_frozen{0};   ///< parcels in the deposit (counted at start, then kept)
  std::atomic<std::uint64_t> users_expired{0};
  /// troupe_cluster_members{state}: members up and down as this member sees
  /// them, and whether this member is fenced (1) — 0 everywhere on a lone node.
  std::atomic<std::int64_t> cluster_members_up{0};
  std::atomic<std::int64_t> cluster_members_down{0};
  std::atomic<std::int64_t> cluster_fenced{0};
  /// Cluster members declared down whose users this node's commander handed elsewhere.
  std::atomic<std::uint64_t> node_failovers{0};
  /// Connections the gates refused before CAF saw them (gate/listener.hpp):
  /// the worker gate's (troupe_worker_gate_refusals_total) and the cluster port's.
  std::atomic<std::uint64_t> worker_gate_refusals{0};
  std::atomic<std::uint64_t> cluster_gate_refusals{0};
  seconds_histogram user_wake_seconds;
  std::atomic<std::int64_t> global_keys{0};
  std::atomic<std::int64_t> connections_bound{0};  ///< the commander's connection → user bindings, at its last sweep
  std::atomic<std::int64_t> global_leases_active{0};
  std::atomic<std::uint64_t> global_leases_granted{0};
  std::atomic<std::uint64_t> global_reclaimed_holder_down{0};
  std::atomic<std::uint64_t> global_reclaimed_ttl{0};
  seconds_histogram global_lease_wait_seconds;
  /// Requests forwarded to a user actor on another node (transport/forwarder.hpp), by how they ended.
  struct forwarded_counters {
    std::atomic<std::uint64_t> answered{0};     ///< the remote actor's answer was delivered
    std::atomic<std::uint64_t> target_down{0};  ///< failed at once (target or node down): the front re-resolves
    std::atomic<std::uint64_t> timed_out{0};    ///< the deadline passed first: 504
    std::atomic<std::uint64_t> refused{0};      ///< past limits.max_forwarded_requests: 503
    std::atomic<std::uint64_t> failed{0};       ///< any other error of the remote request: 502
    std::atomic<std::int64_t> pending{0};       ///< in flight now
  } forwarded;
  /// Requests on the worker processes' pipes (transport/worker_pipe.hpp), by how they ended.
  struct piped_counters {
    std::atomic<std::uint64_t> answered{0};  ///< the process's answer was delivered
    std::atomic<std::uint64_t> released{0};  ///< undelivered: the actor died with it, or the pipe ended
    std::atomic<std::uint64_t> refused{0};   ///< past limits.max_forwarded_requests: 503
    std::atomic<std::uint64_t> writes{0};    ///< writes on the node's ends (each carries every request ready)
    std::atomic<std::int64_t> pending{0};    ///< in flight now
  } piped;
  /// The page channels on /_troupe/ws (docs/channels.md): troupe_channel_*.
  struct channel_counters {
    std::atomic<std::int64_t> sockets{0};             ///< open channel sockets now
    std::atomic<std::uint64_t> frames_in{0};          ///< frames read from clients
    std::atomic<std::uint64_t> frames_out{0};         ///< frames written to clients (replies and pushes)
    std::atomic<std::uint64_t> bad_frames{0};         ///< frames answered 400 (not JSON, not an envelope)
    std::atomic<std::uint64_t> overflow_closes{0};    ///< sockets closed 1013: outgoing queue full (overflow = close)
    std::atomic<std::uint64_t> overflow_drops{0};     ///< queued frames dropped (overflow = drop_oldest)
    std::atomic<std::uint64_t> sockets_refused{0};    ///< sockets closed at once: no valid cookie, past a max_sockets* limit
  } channel;
  /// Handlers that ran on an io thread past limits.shard_stall_ms (transport/inline_unit.hpp).
  std::atomic<std::uint64_t> shard_stalls{0};
  /// App WebSockets (route_table::websocket; docs/http.md): troupe_app_socket*.
  struct app_socket_counters {
    std::atomic<std::int64_t> open{0};             ///< open now
    std::atomic<std::uint64_t> messages_in{0};     ///< messages read from clients
    std::atomic<std::uint64_t> messages_out{0};    ///< messages written to clients
    std::atomic<std::uint64_t> upgrades_refused{0};  ///< upgrades answered with an HTTP status, not 101
  } app_sockets;
  std::atomic<std::uint64_t> channel_pushes_delivered{0};      ///< pages a push reached (their socket queued it)
  std::atomic<std::uint64_t> channel_pushes_not_delivered{0};  ///< pages (or users) a push did not reach
  /// Pages of idle connections forgotten to make room for a new page at limits.max_pages_per_user.
  std::atomic<std::uint64_t> pages_reclaimed{0};
  /// The front's TLS (issue 14, docs/tls.md); all 0 while TLS is off.
  struct tls_counters {
    std::atomic<std::uint64_t> reloads_ok{0};          ///< troupe_tls_reloads_total{result="ok"}
    std::atomic<std::uint64_t> reloads_refused{0};     ///< a bad pair kept out, the old one served
    std::atomic<std::uint64_t> handshake_failures{0};  ///< handshakes that failed or passed their deadline
    std::atomic<std::int64_t> not_after_unix{0};       ///< expiry of the certificate served now
  } tls;
  /// The deposit's own counters (reads, writes, failures, quarantined); set at start.
  const store::deposit_counters* deposit = nullptr;
  /// Streaming responses (docs/streaming.md): troupe_stream_*.
  struct stream_counters {
    std::atomic<std::int64_t> open{0};          ///< streams whose socket this node's front holds
    std::atomic<std::int64_t> queued_bytes{0};  ///< bytes in this node's stream queues (in flight included)
    std::atomic<std::uint64_t> events{0};       ///< events this node's streams took from their writers
    std::atomic<std::uint64_t> slow{0};         ///< writers on this node told their client is slow (credit ran out)
    std::atomic<std::uint64_t> disconnects{0};  ///< clients that went away mid-stream (the writer is told)
    std::atomic<std::uint64_t> refusals{0};     ///< streams refused: limits.max_streams, max_streams_per_user
  } stream;
  /// Deferred answers (user_actor_base::defer, docs/http.md): troupe_deferred_pending and
  /// troupe_deferred_answers_total{outcome}.
  struct deferred_counters {
    std::atomic<std::int64_t> pending{0};       ///< promises open on this node
    std::atomic<std::uint64_t> resolved{0};     ///< answered by the actor
    std::atomic<std::uint64_t> timed_out{0};    ///< past their deadline: the client got 504
    std::atomic<std::uint64_t> interrupted{0};  ///< their user left first (freeze, soft quit, restart): 503
    std::atomic<std::uint64_t> late{0};         ///< resolve() on a promise no longer open: dropped
    std::atomic<std::uint64_t> refused{0};      ///< defer() past limits.user_queue_length open promises: 503
  } deferred;
  /// Streamed request bodies (route_table::upload): troupe_upload_bytes_total, troupe_uploads_total{outcome}.
  struct upload_counters {
    std::atomic<std::uint64_t> bytes{0};      ///< body bytes their actors took
    std::atomic<std::uint64_t> completed{0};  ///< bodies read whole
    std::atomic<std::uint64_t> aborted{0};    ///< bodies that broke (client gone, too big, malformed, user leaving)
  } uploads;
  /// Messages between users (README "Messages between users"), counted on the
  /// sender's node: troupe_messages_sent_total, _delivered_total, and
  /// troupe_messages_refused_total{reason} by tell_outcome::result (index 0 unused).
  struct {
    std::atomic<std::uint64_t> sent{0};
    std::atomic<std::uint64_t> delivered{0};
    std::array<std::atomic<std::uint64_t>, 7> refused{};
  } messages;
  /// troupe_admission_rejections_total{reason}, by troupe::refusal_reason.
  std::array<std::atomic<std::uint64_t>, 8> admission_rejections{};  // refusal_reasons (checked in metrics.cpp)
  /// Every answered HTTP request's latency, as the front measured it.
  latency_histogram request_latency;
  /// The routes of the node's user types, made at start (add_route), never removed.
  std::vector<std::unique_ptr<route_counters>> routes;
  std::unordered_map<std::string, route_counters*> routes_by_key;
  /// Rates over time (GET /_troupe/history, the console): one sample a second,
  /// taken by the census. Guarded by history_mutex.
  mutable std::mutex history_mutex;
  registry::rate_history history;

  /// Makes the counters of one route (at start only: not thread-safe).
  void add_route(const std::string& type, const std::string& method, const std::string& pattern,
                 bool guarded = false);
  /// The counters of the route `key` (route_key), or nullptr (thread-safe once started).
  route_counters* route(const std::string& key) const noexcept {
    auto i = routes_by_key.find(key);
    return i == routes_by_key.end() ? nullptr : i->second;
  }
  /// Counts one answered request: its status, its latency, and its route's figures when it had one.
  void count_answer(unsigned status, std::chrono::steady_clock::duration latency, const std::string& route_key) noexcept;
  /// The cumulative counters the history is made of.
  registry::rate_counters rate_counters() const noexcept;
  /// Reads the counters into the history (the census, once a second).
  void sample_history(std::int64_t unix_ms);
  /// GET /_troupe/history: the samples and each route's figures.
  std::string history_json() const;
  /// Each route's figures now: type, method, route, requests, errors, p50_ms, p99_ms, mean_ms.
  nlohmann::json routes_json() const;

  /// One entry per recipe group, made before any actor starts (add_group), never removed.
  std::vector<std::unique_ptr<group_counters>> groups;

  /// Makes the counters of group `name` (at start only: not thread-safe).
  group_counters& add_group(const std::string& name) { return *groups.emplace_back(std::make_unique<group_counters>(name)); }
  /// The counters of group `name`, or nullptr.
  group_counters* group(const std::string& name) const noexcept {
    for (auto& g : groups)
      if (g->name == name)
        return g.get();
    return nullptr;
  }

  void count_request(unsigned status) noexcept {
    if (status < http_requests.size())
      http_requests[status].fetch_add(1, std::memory_order_relaxed);
  }

  /// Prometheus text exposition of everything above.
  std::string prometheus_text() const;
};

/// Holds one count of `kind` in `metrics` for as long as it lives: a member of
/// an actor's state, so the gauge follows the actor's life exactly.
class actor_gauge {
public:
  actor_gauge(node_metrics& metrics, actor_kind kind) : slot_(&metrics.actors[static_cast<std::size_t>(kind)]) {
    slot_->fetch_add(1, std::memory_order_relaxed);
  }
  ~actor_gauge() { slot_->fetch_sub(1, std::memory_order_relaxed); }
  actor_gauge(const actor_gauge&) = delete;
  actor_gauge& operator=(const actor_gauge&) = delete;

private:
  std::atomic<std::int64_t>* slot_;
};

/// Messages an actor handled and the time it spent on them: plain counters
/// of its state (only the actor touches them; the census reads them by probe).
struct actor_meter {
  std::uint64_t handled = 0;
  std::uint64_t service_ns = 0;

  /// Counts one message and times it for as long as it lives.
  class scope {
  public:
    explicit scope(actor_meter& m) : meter_(m), t0_(std::chrono::steady_clock::now()) {}
    ~scope() {
      ++meter_.handled;
      meter_.service_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

  private:
    actor_meter& meter_;
    std::chrono::steady_clock::time_point t0_;
  };
};

}  // namespace troupe
