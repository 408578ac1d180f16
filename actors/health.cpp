#include "actors/health.hpp"

#include "actors/node_context.hpp"
#include "config/node_settings.hpp"
#include "config/recipe.hpp"
#include "registry/proc_stats.hpp"
#include "registry/restart_intensity.hpp"
#include "store/deposit.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <deque>

#include <sys/statvfs.h>

namespace troupe {

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

void judge_capacity(health_signals& s, const capacity_limits& limits) {
  auto judge = [](std::atomic<bool>& flag, double figure, bool past, bool back) {
    if (figure < 0)
      return flag.store(false, std::memory_order_relaxed);
    if (past)
      flag.store(true, std::memory_order_relaxed);
    else if (back)
      flag.store(false, std::memory_order_relaxed);
  };
  auto machine = s.machine_memory_used_percent.load(std::memory_order_relaxed);
  judge(s.machine_memory_alarm, machine, machine > limits.machine_memory_alarm_percent,
        machine < limits.machine_memory_alarm_percent - 5);
  auto node = s.node_memory_percent.load(std::memory_order_relaxed);
  judge(s.commander_memory_high, node, node > limits.commander_memory_max_percent,
        node < limits.commander_memory_max_percent - 5);
  auto free = s.deposit_free_percent.load(std::memory_order_relaxed);
  judge(s.deposit_low_space, limits.low_space_percent > 0 ? free : -1, free < limits.low_space_percent,
        free > limits.low_space_percent + 1);
}

health_answer assess_health(const health_signals& s, double restart_rate_limit, const node_metrics* metrics,
                            const serving_signal* serving) {
  nlohmann::json reasons = nlohmann::json::array();
  bool cannot_persist = false;
  if (serving && !serving->may_serve()) {
    cannot_persist = true;  // it answers nobody: out of the balancer's pool
    reasons.push_back({{"reason", "not_serving"},
                       {"text", "this cluster member serves nobody: it is cut off from its majority (fenced) or has "
                                "not joined its cluster yet"}});
  }
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
  auto percent = [](const std::atomic<double>& a) { return std::round(a.load(std::memory_order_relaxed) * 10) / 10; };
  if (s.machine_memory_alarm.load(std::memory_order_relaxed))
    reasons.push_back({{"reason", "machine_memory_alarm"},
                       {"text", "the machine's memory in use is past limits.machine_memory_alarm_percent: workers "
                                "admit no newcomer and no group grows"},
                       {"machine_memory_used_percent", percent(s.machine_memory_used_percent)}});
  if (s.commander_memory_high.load(std::memory_order_relaxed))
    reasons.push_back({{"reason", "commander_memory"},
                       {"text", "the node process holds more than limits.commander_memory_max_percent of the "
                                "machine's memory: no new guest is placed here"},
                       {"node_memory_percent", percent(s.node_memory_percent)}});
  if (s.deposit_low_space.load(std::memory_order_relaxed))
    reasons.push_back({{"reason", "deposit_low_space"},
                       {"text", "the deposit's disk has less free space than deposit.low_space_percent: no new "
                                "guest is placed, so that the users here can still freeze"},
                       {"deposit_free_percent", percent(s.deposit_free_percent)}});
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

  // The capacity figures and their flags (ctx->health), once a second.
  void sample_capacity();

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
    sample_capacity();
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

void health_state::sample_capacity() {
  auto& h = ctx->health;
  auto& r = ctx->recipe();
  h.machine_memory_used_percent.store(registry::machine_memory_used_percent().value_or(-1), std::memory_order_relaxed);
  auto total = registry::mem_total_bytes();
  auto rss = registry::rss_bytes();
  h.node_memory_percent.store(total && rss && *total > 0 ? 100.0 * static_cast<double>(*rss) / static_cast<double>(*total)
                                                          : -1,
                              std::memory_order_relaxed);
  double free = -1;
  struct statvfs fs {};
  if (r.deposit.backend == "filesystem" && ::statvfs(r.deposit.path.c_str(), &fs) == 0 && fs.f_blocks > 0)
    free = 100.0 * static_cast<double>(fs.f_bavail) / static_cast<double>(fs.f_blocks);
  h.deposit_free_percent.store(free, std::memory_order_relaxed);
  judge_capacity(h, {r.limits.machine_memory_alarm_percent, r.limits.commander_memory_max_percent,
                     r.deposit.low_space_percent});
}

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
