#include "actors/metrics.hpp"
#include "actors/app.hpp"  // tell_outcome (troupe_messages_refused_total)

#include "actors/errors.hpp"
#include "store/deposit.hpp"

#include <algorithm>
#include <map>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace troupe {

const char* to_string(actor_kind kind) noexcept {
  switch (kind) {
    case actor_kind::user: return "user";
    case actor_kind::connection: return "connection";
    case actor_kind::page: return "page";
    case actor_kind::worker: return "worker";
    case actor_kind::group: return "group";
    case actor_kind::commander: return "commander";
    case actor_kind::count_: break;
  }
  return "unknown";
}

const char* to_string(worker_state s) noexcept {
  switch (s) {
    case worker_state::starting: return "starting";
    case worker_state::open: return "open";
    case worker_state::closed: return "closed";
    case worker_state::draining: return "draining";
    case worker_state::parked: return "parked";
    case worker_state::count_: break;
  }
  return "unknown";
}

void seconds_histogram::observe(double seconds) noexcept {
  for (std::size_t i = 0; i < bounds.size(); ++i)
    if (seconds <= bounds[i]) {
      buckets[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  count.fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<std::uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

void seconds_histogram::write(std::string& out, const std::string& name) const {
  std::uint64_t cumulative = 0;
  char le[32];
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += buckets[i].load(std::memory_order_relaxed);
    std::snprintf(le, sizeof(le), "%g", bounds[i]);
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  auto n = count.load(std::memory_order_relaxed);
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(n) + "\n";
  std::snprintf(le, sizeof(le), "%.9f", static_cast<double>(sum_ns.load(std::memory_order_relaxed)) / 1e9);
  out += name + "_sum " + le + "\n";
  out += name + "_count " + std::to_string(n) + "\n";
}

void latency_histogram::observe(std::chrono::steady_clock::duration d) noexcept {
  auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(
    0, std::chrono::duration_cast<std::chrono::microseconds>(d).count()));
  buckets[registry::latency_bucket(us)].fetch_add(1, std::memory_order_relaxed);
  sum_us.fetch_add(us, std::memory_order_relaxed);
}

registry::latency_counts latency_histogram::counts() const noexcept {
  registry::latency_counts c{};
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = buckets[i].load(std::memory_order_relaxed);
  return c;
}

void latency_histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  std::uint64_t cumulative = 0;
  auto sep = labels.empty() ? std::string() : labels + ",";
  char le[32];
  for (std::size_t i = 0; i < registry::latency_bounds_us.size(); ++i) {
    cumulative += buckets[i].load(std::memory_order_relaxed);
    std::snprintf(le, sizeof(le), "%g", static_cast<double>(registry::latency_bounds_us[i]) / 1e6);
    out += name + "_bucket{" + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += buckets.back().load(std::memory_order_relaxed);
  out += name + "_bucket{" + sep + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  auto braces = labels.empty() ? std::string() : "{" + labels + "}";
  std::snprintf(le, sizeof(le), "%.6f", static_cast<double>(sum_us.load(std::memory_order_relaxed)) / 1e6);
  out += name + "_sum" + braces + " " + le + "\n";
  out += name + "_count" + braces + " " + std::to_string(cumulative) + "\n";
}

void node_metrics::add_route(const std::string& type, const std::string& method, const std::string& pattern,
                             bool guarded) {
  auto key = route_key(type, method, pattern);
  if (routes_by_key.count(key))
    return;
  auto& r = *routes.emplace_back(std::make_unique<route_counters>(type, method, pattern));
  r.guarded = guarded;
  routes_by_key.emplace(std::move(key), &r);
}

void node_metrics::count_answer(unsigned status, std::chrono::steady_clock::duration latency,
                                const std::string& key) noexcept {
  count_request(status);
  request_latency.observe(latency);
  if (key.empty())
    return;
  if (auto* r = route(key)) {
    r->requests.fetch_add(1, std::memory_order_relaxed);
    if (status >= 500)
      r->errors.fetch_add(1, std::memory_order_relaxed);
    r->latency.observe(latency);
  }
}

registry::rate_counters node_metrics::rate_counters() const noexcept {
  registry::rate_counters c;
  for (std::size_t code = 100; code < http_requests.size(); ++code) {
    auto n = http_requests[code].load(std::memory_order_relaxed);
    c.requests += n;
    if (code >= 500)
      c.errors += n;
  }
  c.wakes = user_wakes.load(std::memory_order_relaxed);
  c.freezes = user_freezes.load(std::memory_order_relaxed);
  c.latency = request_latency.counts();
  return c;
}

void node_metrics::sample_history(std::int64_t unix_ms) {
  auto now = rate_counters();
  std::lock_guard<std::mutex> lock(history_mutex);
  history.record(unix_ms, now);
}

nlohmann::json node_metrics::routes_json() const {
  auto out = nlohmann::json::array();
  for (auto& r : routes) {
    auto c = r->latency.counts();
    std::uint64_t n = 0;
    for (auto x : c)
      n += x;
    auto opt = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    out.push_back({{"type", r->type},
                   {"method", r->method},
                   {"route", r->pattern},
                   {"requests", r->requests.load(std::memory_order_relaxed)},
                   {"errors", r->errors.load(std::memory_order_relaxed)},
                   {"p50_ms", opt(registry::latency_quantile_ms(c, 0.50))},
                   {"p99_ms", opt(registry::latency_quantile_ms(c, 0.99))},
                   {"mean_ms", n ? nlohmann::json(static_cast<double>(r->latency.sum_us.load()) / 1000.0 /
                                                  static_cast<double>(n))
                                 : nlohmann::json(nullptr)}});
  }
  return out;
}

std::string node_metrics::history_json() const {
  nlohmann::json j;
  {
    std::lock_guard<std::mutex> lock(history_mutex);
    j = history.to_json();
  }
  j["routes"] = routes_json();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string node_metrics::prometheus_text() const {
  std::string out;
  out.reserve(2048);
  auto line = [&out](const std::string& name, const std::string& labels, auto value) {
    out += name;
    if (!labels.empty())
      out += "{" + labels + "}";
    out += " " + std::to_string(value) + "\n";
  };
  out += "# HELP troupe_http_requests_total HTTP requests answered, by status code.\n"
         "# TYPE troupe_http_requests_total counter\n";
  for (std::size_t code = 100; code < http_requests.size(); ++code)
    if (auto n = http_requests[code].load(std::memory_order_relaxed))
      line("troupe_http_requests_total", "code=\"" + std::to_string(code) + "\"", n);
  out += "# HELP troupe_actors Live actors of this node, by kind.\n# TYPE troupe_actors gauge\n";
  for (std::size_t k = 0; k < actors.size(); ++k)
    line("troupe_actors", std::string("kind=\"") + to_string(static_cast<actor_kind>(k)) + "\"",
         actors[k].load(std::memory_order_relaxed));
  out += "# HELP troupe_users Users known to this node, by state (resting: idle, their state kept by their worker, no actor).\n# TYPE troupe_users gauge\n";
  line("troupe_users", "state=\"active\"",
       actors[static_cast<std::size_t>(actor_kind::user)].load(std::memory_order_relaxed));
  line("troupe_users", "state=\"frozen\"", std::max<std::int64_t>(0, users_frozen.load(std::memory_order_relaxed)));
  line("troupe_users", "state=\"resting\"", users_resting.load(std::memory_order_relaxed));  // no actor: not in "active"
  out += "# HELP troupe_user_restarts_total User actors restarted by their worker after a crash.\n"
         "# TYPE troupe_user_restarts_total counter\n";
  line("troupe_user_restarts_total", "", user_restarts.load(std::memory_order_relaxed));
  out += "# HELP troupe_handler_failures_total Application handlers that threw (answered 502).\n"
         "# TYPE troupe_handler_failures_total counter\n";
  line("troupe_handler_failures_total", "", handler_failures.load(std::memory_order_relaxed));
  out += "# HELP troupe_http_inflight Requests handed to actors and not answered yet.\n"
         "# TYPE troupe_http_inflight gauge\n";
  line("troupe_http_inflight", "", inflight.load(std::memory_order_relaxed));
  auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
    line(name, "", value);
  };
  counter("troupe_user_freezes_total", "Users frozen to the deposit.", user_freezes.load(std::memory_order_relaxed));
  counter("troupe_user_wakes_total", "Users woken from their parcel.", user_wakes.load(std::memory_order_relaxed));
  counter("troupe_user_rests_total", "User actors stopped to rest, their state left in their worker's memory.",
          user_rests.load(std::memory_order_relaxed));
  counter("troupe_user_resumes_total", "Resting users started again from the state they left.",
          user_resumes.load(std::memory_order_relaxed));
  counter("troupe_users_expired_total", "Frozen users forgotten after their expiry.",
          users_expired.load(std::memory_order_relaxed));
  out += "# HELP troupe_cluster_members Cluster members as this member sees them, by state (self_fenced: 1 while this member is fenced).\n"
         "# TYPE troupe_cluster_members gauge\n";
  line("troupe_cluster_members", "state=\"up\"", cluster_members_up.load(std::memory_order_relaxed));
  line("troupe_cluster_members", "state=\"down\"", cluster_members_down.load(std::memory_order_relaxed));
  line("troupe_cluster_members", "state=\"self_fenced\"", cluster_fenced.load(std::memory_order_relaxed));
  counter("troupe_node_failovers_total", "Cluster members declared down whose users the commander placed elsewhere.",
          node_failovers.load(std::memory_order_relaxed));
  counter("troupe_worker_gate_refusals_total",
          "Connections to the worker gate refused before the middleman saw them (no or a wrong token, garbage, too "
          "slow, too many waiting).",
          worker_gate_refusals.load(std::memory_order_relaxed));
  counter("troupe_cluster_gate_refusals_total",
          "Connections to the cluster port refused before the middleman saw them (no cluster key, garbage, too slow, "
          "too many waiting).",
          cluster_gate_refusals.load(std::memory_order_relaxed));
  counter("troupe_requests_expired_total", "Requests dropped from a user's queue past their deadline, never run.",
          requests_expired.load(std::memory_order_relaxed));
  out += "# HELP troupe_deferred_pending Deferred answers (promises) open on this node.\n"
         "# TYPE troupe_deferred_pending gauge\n";
  line("troupe_deferred_pending", "", deferred.pending.load(std::memory_order_relaxed));
  out += "# HELP troupe_deferred_answers_total Deferred answers by outcome: resolved, timed_out (504), interrupted "
         "(their user left: 503), late (resolved after that: dropped), refused (too many open: 503).\n"
         "# TYPE troupe_deferred_answers_total counter\n";
  line("troupe_deferred_answers_total", "outcome=\"resolved\"", deferred.resolved.load(std::memory_order_relaxed));
  line("troupe_deferred_answers_total", "outcome=\"timed_out\"", deferred.timed_out.load(std::memory_order_relaxed));
  line("troupe_deferred_answers_total", "outcome=\"interrupted\"",
       deferred.interrupted.load(std::memory_order_relaxed));
  line("troupe_deferred_answers_total", "outcome=\"late\"", deferred.late.load(std::memory_order_relaxed));
  line("troupe_deferred_answers_total", "outcome=\"refused\"", deferred.refused.load(std::memory_order_relaxed));
  counter("troupe_upload_bytes_total", "Streamed request body bytes their user actors took.",
          uploads.bytes.load(std::memory_order_relaxed));
  out += "# HELP troupe_uploads_total Streamed request bodies by outcome: completed, aborted.\n"
         "# TYPE troupe_uploads_total counter\n";
  line("troupe_uploads_total", "outcome=\"completed\"", uploads.completed.load(std::memory_order_relaxed));
  line("troupe_uploads_total", "outcome=\"aborted\"", uploads.aborted.load(std::memory_order_relaxed));
  out += "# HELP troupe_stream_open Streaming responses (SSE, NDJSON) open on this node's front.\n"
         "# TYPE troupe_stream_open gauge\n";
  line("troupe_stream_open", "", stream.open.load(std::memory_order_relaxed));
  out += "# HELP troupe_stream_queued_bytes Bytes queued for streaming clients (written by actors, not yet by the socket).\n"
         "# TYPE troupe_stream_queued_bytes gauge\n";
  line("troupe_stream_queued_bytes", "", stream.queued_bytes.load(std::memory_order_relaxed));
  counter("troupe_stream_events_total", "Events streamed actors handed to this node's streams.",
          stream.events.load(std::memory_order_relaxed));
  counter("troupe_stream_slow_total", "Slow notices: a streaming actor ran out of credit (its client reads slower).",
          stream.slow.load(std::memory_order_relaxed));
  counter("troupe_stream_disconnects_total", "Streaming clients that went away mid-stream (their actor is told).",
          stream.disconnects.load(std::memory_order_relaxed));
  counter("troupe_stream_refusals_total", "Streams refused (503): limits.max_streams or limits.max_streams_per_user.",
          stream.refusals.load(std::memory_order_relaxed));
  counter("troupe_changes_rolled_back_total", "Changes the deposit refused (durability reply): state put back, 503.",
          changes_rolled_back.load(std::memory_order_relaxed));
  counter("troupe_users_refused_total", "Users whose stored state does not load: parcel quarantined, user refused.",
          users_refused.load(std::memory_order_relaxed));
  counter("troupe_users_fenced_total",
          "User actors that left without writing: the deposit refused their owner epoch (a newer placement holds them).",
          users_fenced.load(std::memory_order_relaxed));
  // Counted by the deposit itself (every refused write and claim, whoever sent it).
  counter("troupe_fenced_writes_total",
          "User parcel writes and claims the deposit refused: their owner epoch is older than the user's current one.",
          deposit ? deposit->fenced.load() : 0);
  counter("troupe_live_user_refusals_total", "Newcomers refused because limits.max_live_users users are live.",
          live_user_refusals.load(std::memory_order_relaxed));
  counter("troupe_login_carries_dropped_total",
          "Logins routed to a group of another user_type: the guest's store was dropped, not carried.",
          login_carries_dropped.load(std::memory_order_relaxed));
  out += "# HELP troupe_login_guest_store_dropped_total Logins into a user who has a store already (live, or frozen "
         "in the deposit): his store wins, the guest's is dropped.\n"
         "# TYPE troupe_login_guest_store_dropped_total counter\n";
  line("troupe_login_guest_store_dropped_total", "reason=\"live\"",
       login_guest_store_dropped_live.load(std::memory_order_relaxed));
  line("troupe_login_guest_store_dropped_total", "reason=\"frozen\"",
       login_guest_store_dropped_frozen.load(std::memory_order_relaxed));
  counter("troupe_guests_retired_total", "Guests who never had a state, retired without writing a parcel.",
          guests_retired.load(std::memory_order_relaxed));
  out += "# HELP troupe_channel_sockets Open page channel sockets (/_troupe/ws).\n"
         "# TYPE troupe_channel_sockets gauge\n";
  line("troupe_channel_sockets", "", channel.sockets.load(std::memory_order_relaxed));
  counter("troupe_channel_frames_in_total", "Frames read from page channels.", channel.frames_in.load());
  counter("troupe_channel_frames_out_total", "Frames written on page channels (replies and pushes).",
          channel.frames_out.load());
  counter("troupe_channel_bad_frames_total", "Channel frames answered 400 (not JSON, not an envelope).",
          channel.bad_frames.load());
  counter("troupe_channel_pushes_delivered_total", "Pages a push reached (their socket queued the frame).",
          channel_pushes_delivered.load());
  counter("troupe_channel_pushes_not_delivered_total",
          "Pages (or users) a push did not reach: no open channel, gone, another connection's, refused.",
          channel_pushes_not_delivered.load());
  counter("troupe_pages_reclaimed_total",
          "Pages of idle connections forgotten to make room for a new page at limits.max_pages_per_user.",
          pages_reclaimed.load());
  counter("troupe_channel_overflow_closes_total", "Sockets closed 1013 because their outgoing queue was full.",
          channel.overflow_closes.load());
  counter("troupe_channel_overflow_drops_total", "Queued frames dropped for newer ones (channel.overflow = drop_oldest).",
          channel.overflow_drops.load());
  counter("troupe_channel_sockets_refused_total",
          "Channel sockets closed at once (no valid cookie, past max_sockets, max_sockets_per_connection or "
          "max_sockets_per_user).",
          channel.sockets_refused.load());
  counter("troupe_shard_stalls_total",
          "Handlers that ran on an io thread of the front past limits.shard_stall_ms (its sockets waited).",
          shard_stalls.load());
  out += "# HELP troupe_app_sockets Open app WebSockets (route_table::websocket).\n"
         "# TYPE troupe_app_sockets gauge\n";
  line("troupe_app_sockets", "", app_sockets.open.load(std::memory_order_relaxed));
  out += "# HELP troupe_app_socket_messages_total Messages of app WebSockets, read (in) and written (out).\n"
         "# TYPE troupe_app_socket_messages_total counter\n";
  line("troupe_app_socket_messages_total", "direction=\"in\"", app_sockets.messages_in.load());
  line("troupe_app_socket_messages_total", "direction=\"out\"", app_sockets.messages_out.load());
  counter("troupe_app_socket_upgrades_refused_total",
          "App WebSocket upgrades answered with an HTTP status (guard, no subprotocol, open handler, limits).",
          app_sockets.upgrades_refused.load());
  if (deposit) {
    counter("troupe_deposit_reads_total", "Parcels read from the deposit.", deposit->reads.load());
    counter("troupe_deposit_writes_total", "Parcels written durably to the deposit.", deposit->writes.load());
    counter("troupe_deposit_checkpoints_total",
            "User parcels written durably by a live user (durability interval or reply), not by a freeze.",
            deposit->checkpoints.load());
    counter("troupe_deposit_failures_total", "Deposit writes, reads or removes that failed.", deposit->failures.load());
    counter("troupe_deposit_quarantined_total",
            "Parcels moved to quarantine (failed verification, another owner's, not a regular file).",
            deposit->quarantined.load());
    counter("troupe_deposit_heals_total", "Times the deposit recreated its removed directory structure.",
            deposit->healed.load());
    out += "# HELP troupe_deposit_consecutive_failures Deposit operations failed since the last success.\n"
           "# TYPE troupe_deposit_consecutive_failures gauge\n";
    line("troupe_deposit_consecutive_failures", "", deposit->consecutive_failures.load());
    out += "# HELP troupe_deposit_reads_waiting Reads of waking users waiting for an unreachable deposit.\n"
           "# TYPE troupe_deposit_reads_waiting gauge\n";
    line("troupe_deposit_reads_waiting", "", deposit->reads_waiting.load());
  }
  out += "# HELP troupe_connections_bound Connections the commander knows the user of (at its last sweep).\n"
         "# TYPE troupe_connections_bound gauge\n";
  line("troupe_connections_bound", "", connections_bound.load(std::memory_order_relaxed));
  out += "# HELP troupe_global_keys Keys in the global store.\n# TYPE troupe_global_keys gauge\n";
  line("troupe_global_keys", "", global_keys.load(std::memory_order_relaxed));
  out += "# HELP troupe_global_leases_active Leases held now.\n# TYPE troupe_global_leases_active gauge\n";
  line("troupe_global_leases_active", "", global_leases_active.load(std::memory_order_relaxed));
  counter("troupe_global_leases_granted_total", "Leases granted.", global_leases_granted.load(std::memory_order_relaxed));
  out += "# HELP troupe_global_leases_reclaimed_total Leases taken back without a commit or abort.\n"
         "# TYPE troupe_global_leases_reclaimed_total counter\n";
  line("troupe_global_leases_reclaimed_total", "reason=\"holder_down\"",
       global_reclaimed_holder_down.load(std::memory_order_relaxed));
  line("troupe_global_leases_reclaimed_total", "reason=\"ttl\"", global_reclaimed_ttl.load(std::memory_order_relaxed));
  out += "# HELP troupe_global_lease_wait_seconds Time from asking for a lease to its grant.\n"
         "# TYPE troupe_global_lease_wait_seconds histogram\n";
  global_lease_wait_seconds.write(out, "troupe_global_lease_wait_seconds");
  out += "# HELP troupe_forwarded_requests_total Requests forwarded to a user actor on another node, by outcome.\n"
         "# TYPE troupe_forwarded_requests_total counter\n";
  line("troupe_forwarded_requests_total", "outcome=\"answered\"", forwarded.answered.load(std::memory_order_relaxed));
  line("troupe_forwarded_requests_total", "outcome=\"target_down\"",
       forwarded.target_down.load(std::memory_order_relaxed));
  line("troupe_forwarded_requests_total", "outcome=\"timeout\"", forwarded.timed_out.load(std::memory_order_relaxed));
  line("troupe_forwarded_requests_total", "outcome=\"refused\"", forwarded.refused.load(std::memory_order_relaxed));
  line("troupe_forwarded_requests_total", "outcome=\"error\"", forwarded.failed.load(std::memory_order_relaxed));
  out += "# HELP troupe_worker_pipe_requests_total Requests sent to worker processes on their pipes, by outcome.\n"
         "# TYPE troupe_worker_pipe_requests_total counter\n";
  line("troupe_worker_pipe_requests_total", "outcome=\"answered\"", piped.answered.load(std::memory_order_relaxed));
  line("troupe_worker_pipe_requests_total", "outcome=\"released\"", piped.released.load(std::memory_order_relaxed));
  line("troupe_worker_pipe_requests_total", "outcome=\"refused\"", piped.refused.load(std::memory_order_relaxed));
  out += "# HELP troupe_worker_pipe_writes_total Writes of requests on the worker processes' pipes (a write carries every request ready).\n"
         "# TYPE troupe_worker_pipe_writes_total counter\n";
  line("troupe_worker_pipe_writes_total", "", piped.writes.load(std::memory_order_relaxed));
  out += "# HELP troupe_worker_pipe_pending Requests on the worker processes' pipes awaiting their answer.\n"
         "# TYPE troupe_worker_pipe_pending gauge\n";
  line("troupe_worker_pipe_pending", "", piped.pending.load(std::memory_order_relaxed));
  out += "# HELP troupe_forwarded_pending Forwarded requests awaiting their remote answer.\n"
         "# TYPE troupe_forwarded_pending gauge\n";
  line("troupe_forwarded_pending", "", forwarded.pending.load(std::memory_order_relaxed));
  static_assert(std::tuple_size_v<decltype(admission_rejections)> == refusal_reasons);
  out += "# HELP troupe_admission_rejections_total Requests refused by admission: newcomers (cpu, memory, users, "
         "machine_memory; new guests: low_space, commander_memory), users of a degraded group, quarantined users.\n"
         "# TYPE troupe_admission_rejections_total counter\n";
  for (std::size_t r = 0; r < admission_rejections.size(); ++r)
    line("troupe_admission_rejections_total",
         std::string("reason=\"") + to_string(static_cast<refusal_reason>(r)) + "\"",
         admission_rejections[r].load(std::memory_order_relaxed));
  out += "# HELP troupe_messages_sent_total Messages between users sent from this node (tell).\n"
         "# TYPE troupe_messages_sent_total counter\n";
  line("troupe_messages_sent_total", "", messages.sent.load(std::memory_order_relaxed));
  out += "# HELP troupe_messages_delivered_total Messages sent from this node that the recipient's handler took.\n"
         "# TYPE troupe_messages_delivered_total counter\n";
  line("troupe_messages_delivered_total", "", messages.delivered.load(std::memory_order_relaxed));
  out += "# HELP troupe_messages_refused_total Messages sent from this node that were refused, by reason.\n"
         "# TYPE troupe_messages_refused_total counter\n";
  for (std::size_t r = 1; r < messages.refused.size(); ++r)
    line("troupe_messages_refused_total",
         std::string("reason=\"") + to_string(static_cast<tell_outcome::result>(r)) + "\"",
         messages.refused[r].load(std::memory_order_relaxed));
  out += "# HELP troupe_workers Workers of each group, by state.\n# TYPE troupe_workers gauge\n";
  for (auto& g : groups)
    for (std::size_t k = 0; k < g->workers.size(); ++k)
      line("troupe_workers",
           "group=\"" + g->name + "\",state=\"" + to_string(static_cast<worker_state>(k)) + "\"",
           g->workers[k].load(std::memory_order_relaxed));
  out += "# HELP troupe_worker_restarts_total Workers of each group replaced after they died or were stuck.\n"
         "# TYPE troupe_worker_restarts_total counter\n";
  for (auto& g : groups)
    line("troupe_worker_restarts_total", "group=\"" + g->name + "\"", g->worker_restarts.load(std::memory_order_relaxed));
  out += "# HELP troupe_group_degraded 1 while the group is degraded (past max_restarts within restart_window_seconds).\n"
         "# TYPE troupe_group_degraded gauge\n";
  for (auto& g : groups)
    line("troupe_group_degraded", "group=\"" + g->name + "\"", g->degraded.load(std::memory_order_relaxed));
  out += "# HELP troupe_user_wake_seconds Time from a user actor's start to his installed parcel.\n"
         "# TYPE troupe_user_wake_seconds histogram\n";
  user_wake_seconds.write(out, "troupe_user_wake_seconds");
  out += "# HELP troupe_http_request_seconds Time from a request read to its answer written, every request.\n"
         "# TYPE troupe_http_request_seconds histogram\n";
  request_latency.write(out, "troupe_http_request_seconds", "");
  // One series per route of the node's user types: a finite set, made at start.
  auto route_labels = [](const route_counters& r) {
    return "type=\"" + r.type + "\",method=\"" + r.method + "\",route=\"" + r.pattern + "\"";
  };
  {
    // By type and route pattern (the methods of one pattern summed): the guarded routes only.
    std::map<std::pair<std::string, std::string>, std::uint64_t> refused;
    for (auto& r : routes)
      if (r->guarded)
        refused[{r->type, r->pattern}] += r->guard_rejections.load(std::memory_order_relaxed);
    if (!refused.empty())
      out += "# HELP troupe_guard_rejections_total Requests a route's guards refused on the front, before any "
             "actor (docs/http.md \"Guards\").\n# TYPE troupe_guard_rejections_total counter\n";
    for (auto& [at, n] : refused)
      line("troupe_guard_rejections_total", "type=\"" + at.first + "\",route=\"" + at.second + "\"", n);
  }
  out += "# HELP troupe_route_requests_total Requests a user actor answered, by route pattern.\n"
         "# TYPE troupe_route_requests_total counter\n";
  for (auto& r : routes)
    line("troupe_route_requests_total", route_labels(*r), r->requests.load(std::memory_order_relaxed));
  out += "# HELP troupe_route_errors_total Requests a user actor answered 5xx, by route pattern.\n"
         "# TYPE troupe_route_errors_total counter\n";
  for (auto& r : routes)
    line("troupe_route_errors_total", route_labels(*r), r->errors.load(std::memory_order_relaxed));
  out += "# HELP troupe_route_request_seconds Latency of the requests a user actor answered, by route pattern.\n"
         "# TYPE troupe_route_request_seconds histogram\n";
  for (auto& r : routes)
    r->latency.write(out, "troupe_route_request_seconds", route_labels(*r));
  out += "# HELP troupe_tls_reloads_total TLS certificate reloads (POST /_troupe/tls/reload, SIGHUP), by result.\n"
         "# TYPE troupe_tls_reloads_total counter\n";
  line("troupe_tls_reloads_total", "result=\"ok\"", tls.reloads_ok.load(std::memory_order_relaxed));
  line("troupe_tls_reloads_total", "result=\"refused\"", tls.reloads_refused.load(std::memory_order_relaxed));
  counter("troupe_tls_handshake_failures_total", "TLS handshakes that failed or passed limits.tls_handshake_timeout_seconds.",
          tls.handshake_failures.load(std::memory_order_relaxed));
  out += "# HELP troupe_tls_certificate_expiry_seconds Expiry (unix seconds) of the certificate served to new connections; 0: TLS off.\n"
         "# TYPE troupe_tls_certificate_expiry_seconds gauge\n";
  line("troupe_tls_certificate_expiry_seconds", "", tls.not_after_unix.load(std::memory_order_relaxed));
  return out;
}

}  // namespace troupe
