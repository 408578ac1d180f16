#include "actors/health.hpp"

#include "actors/node_context.hpp"
#include "config/node_settings.hpp"
#include "registry/restart_intensity.hpp"
#include "store/deposit.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>

namespace troupe {

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

health_answer assess_health(const health_signals& s, double restart_rate_limit, const node_metrics* metrics) {
  nlohmann::json reasons = nlohmann::json::array();
  bool cannot_persist = false;
  nlohmann::json degraded_groups = nlohmann::json::array();
  if (metrics) {
    auto now_ms = unix_now_ms();
    for (auto& g : metrics->groups) {
      if (g->degraded.load(std::memory_order_acquire) == 0)
        continue;
      auto why = registry::to_string(
        static_cast<registry::degradation>(g->degraded_reason.load(std::memory_order_relaxed)));
      auto recovery_ms = g->recovery_unix_ms.load(std::memory_order_relaxed);
      std::uint32_t retry = 0;  // none: no recovery is coming
      if (recovery_ms > 0)
        retry = static_cast<std::uint32_t>(std::max<std::int64_t>(1, (recovery_ms - now_ms + 999) / 1000));
      degraded_groups.push_back({{"group", g->name},
                                 {"reason", why},
                                 {"since", g->degraded_since_unix_ms.load(std::memory_order_relaxed) / 1000.0},
                                 {"retry_after", retry}});
      reasons.push_back({{"reason", "group_degraded"},
                         {"text", "group " + g->name + " is degraded (" + why + "): its requests are refused"},
                         {"group", g->name}});
    }
  }
  if (auto failures = s.deposit_consecutive_failures.load(std::memory_order_relaxed)) {
    cannot_persist = true;
    reasons.push_back({{"reason", "deposit_failing"},
                       {"text", "deposit writes are failing: state cannot be made durable"},
                       {"consecutive_failures", failures},
                       {"last_failure_unix_ms", s.deposit_last_failure_unix_ms.load(std::memory_order_relaxed)},
                       {"last_success_unix_ms", s.deposit_last_success_unix_ms.load(std::memory_order_relaxed)}});
  }
  if (auto q = s.quarantined_last_minute.load(std::memory_order_relaxed))
    reasons.push_back({{"reason", "quarantine_growing"},
                       {"text", "deposit parcels were quarantined within the last minute"},
                       {"quarantined_last_minute", q}});
  auto restarts = s.restarts_last_minute.load(std::memory_order_relaxed);
  auto window = std::max<std::uint32_t>(1, s.window_seconds.load(std::memory_order_relaxed));
  double rate = static_cast<double>(restarts) / window;
  if (rate > restart_rate_limit)
    reasons.push_back({{"reason", "restart_storm"},
                       {"text", "user actors are crashing and restarting faster than node.health_max_restart_rate"},
                       {"restarts_last_minute", restarts},
                       {"restarts_per_second", rate}});
  if (reasons.empty())
    return {200, R"({"status":"ok"})"};
  nlohmann::json body{{"status", "degraded"}, {"reasons", std::move(reasons)}};
  bool group_down = !degraded_groups.empty();
  if (group_down)
    body["degraded_groups"] = std::move(degraded_groups);
  return {static_cast<std::uint16_t>(cannot_persist || group_down ? 503 : 200), body.dump()};
}

namespace {

struct sample {
  std::uint64_t restarts;
  std::uint64_t quarantined;
};

struct health_state {
  static const char* name;
  std::shared_ptr<node_context> ctx;
  deposit_prober deposit;
  std::deque<sample> window;  // one sample a second, the oldest first (61 at most: a minute of growth)
  // On the actor's clock (CAF's, which a deterministic test moves), like its tick.
  caf::actor_clock::time_point last_probe{};

  sample now() const {
    auto& m = ctx->metrics;
    return {m.user_restarts.load(std::memory_order_relaxed),
            m.deposit ? m.deposit->quarantined.load(std::memory_order_relaxed) : 0};
  }

  void tick(caf::event_based_actor* self) {
    window.push_back(now());
    while (window.size() > 61)
      window.pop_front();
    auto& h = ctx->health;
    h.restarts_last_minute.store(window.back().restarts - window.front().restarts, std::memory_order_relaxed);
    h.quarantined_last_minute.store(window.back().quarantined - window.front().quarantined,
                                    std::memory_order_relaxed);
    h.window_seconds.store(static_cast<std::uint32_t>(window.size() - 1), std::memory_order_relaxed);
    // Writes are what health is about: with none lately (an idle node), a probe
    // write finds out whether the deposit still takes them.
    auto period = std::chrono::duration<double>(ctx->node().health_probe_seconds);
    auto at = self->clock().now();
    if (at - last_probe >= period) {
      last_probe = at;
      auto fresh_ms = static_cast<std::int64_t>(ctx->node().health_probe_seconds * 1000);
      self->send(deposit, probe_write_atom::value, fresh_ms);
    }
  }
};

const char* health_state::name = "troupe.health";

caf::behavior health_impl(caf::stateful_actor<health_state>* self, std::shared_ptr<node_context> ctx,
                          deposit_prober deposit) {
  self->state.ctx = std::move(ctx);
  self->state.deposit = std::move(deposit);
  self->state.window.push_back(self->state.now());
  self->state.last_probe = self->clock().now();
  self->send(self, tick_atom::value);
  return {
    [=](tick_atom) {
      self->state.tick(self);
      self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
    },
  };
}

}  // namespace

caf::actor spawn_health(caf::actor_system& sys, std::shared_ptr<node_context> ctx, deposit_prober deposit) {
  return sys.spawn(health_impl, std::move(ctx), std::move(deposit));
}

}  // namespace troupe
