// The worker's admission (docs/SUPERVISION.md "Admission", "Capacity guards"): it samples
// its users' CPU and its memory, tells its group at every change, sheds a
// user when too hot (offload) and asks to be replaced past its occupancy
// limit. The verdicts are registry::worker_admission's; the phase change of
// a replacement is worker_core's.
#include "actors/group.hpp"
#include "actors/worker_actor_state.hpp"
#include "config/group_settings.hpp"
#include "config/recipe.hpp"
#include "registry/ids.hpp"
#include "registry/proc_stats.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace troupe {

namespace {

// The admission beat: 100 ms samples feed the CPU filter (the issue's
// figure); memory alone needs no more than a reading a second.
constexpr auto cpu_beat = std::chrono::milliseconds(100);
constexpr auto memory_beat = std::chrono::seconds(1);

// The group's admission keys as one worker applies them (and the node's
// machine memory alarm, which closes every worker).
registry::worker_admission_settings admission_settings_of(const config::group_settings& g, int max_users,
                                                          double machine_memory_alarm_percent) {
  registry::worker_admission_settings s;
  s.max_users = max_users;
  s.machine_memory_alarm_percent = machine_memory_alarm_percent;
  if (g.cpu_admission_close_percent > 0) {
    registry::cpu_admission_settings c;
    c.close_percent = g.cpu_admission_close_percent;
    c.reopen_percent = g.cpu_admission_reopen_percent;
    if (g.cpu_offload_percent > 0)
      c.offload_percent = g.cpu_offload_percent;
    c.heating = registry::cpu_temperature::seconds(g.cpu_heating_seconds);
    c.cooling = registry::cpu_temperature::seconds(g.cpu_cooling_seconds);
    c.admission_interval = registry::cpu_temperature::seconds(g.worker_admission_interval_seconds);
    s.cpu = c;
  }
  s.own_process = g.process_isolation();
  s.memory_max_percent = g.memory_max_percent;
  s.worker_memory_admission_percent = g.worker_memory_admission_percent;
  s.restart_occupancy_max_percent = g.restart_occupancy_max_percent;
  s.max_workers = g.max_workers();
  return s;
}

}  // namespace

std::uint8_t refusal_reason_of(registry::admission_block b) {
  switch (b) {
    case registry::admission_block::memory: return static_cast<std::uint8_t>(refusal_reason::memory);
    case registry::admission_block::machine_memory: return static_cast<std::uint8_t>(refusal_reason::machine_memory);
    case registry::admission_block::users: return static_cast<std::uint8_t>(refusal_reason::users);
    default: return static_cast<std::uint8_t>(refusal_reason::cpu);
  }
}

// Starts the beat, and with it admission; a worker without machine figures admits always.
void worker_actor_state::start_admission() {
  auto total = spec.mem_total_bytes ? spec.mem_total_bytes : registry::mem_total_bytes().value_or(0);
  try {
    admission.emplace(admission_settings_of(*settings, max_users(),
                                            spec.ctx->recipe().limits.machine_memory_alarm_percent),
                      total);
  } catch (const std::invalid_argument& e) {  // the recipe's validation makes this unreachable
    spdlog::error("worker {}: admission off: {}", spec.name, e.what());
    return;
  }
  if (admission->cpu_on())
    busy_total = std::make_shared<std::atomic<std::uint64_t>>(0);
  last_beat = last_memory_reading = steady::now();
  bool closed = false;  // born over budget or on a machine past its alarm: say so now
  if (auto machine = registry::machine_memory_used_percent())
    closed = admission->sample_machine(*machine);
  if (admission->sample(std::nullopt, registry::rss_bytes(), last_beat) || closed)
    report();
  schedule_beat();
}

std::chrono::milliseconds worker_actor_state::beat_interval() const {
  return admission->cpu_on() ? std::chrono::duration_cast<std::chrono::milliseconds>(cpu_beat)
                             : std::chrono::duration_cast<std::chrono::milliseconds>(memory_beat);
}

void worker_actor_state::schedule_beat() {
  self->delayed_send(self, beat_interval(), admission_atom::value);
}

void worker_actor_state::beat() {
  if (!admission)
    return;
  auto now = steady::now();
  std::optional<double> cpu;
  if (busy_total) {
    auto total = busy_total->load(std::memory_order_relaxed);
    auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_beat).count();
    if (elapsed > 0)
      cpu = 100.0 * static_cast<double>(total - busy_at_last_beat) / static_cast<double>(elapsed);
    busy_at_last_beat = total;
  }
  last_beat = now;
  std::optional<std::uint64_t> rss;
  bool changed = admission->count_users(core->live_count());
  if (now - last_memory_reading >= memory_beat) {
    rss = registry::rss_bytes();
    if (auto machine = registry::machine_memory_used_percent())
      changed = admission->sample_machine(*machine) || changed;
    last_memory_reading = now;
  }
  if (admission->sample(cpu, rss, now) || changed)
    report();
  else if (!admission->admits() && now - last_report >= memory_beat &&
           admission->retry_after(until_first_idle_freeze()) != reported_retry_after)
    report(false);  // still closed: its Retry-After moved (once a second at most)
  if (admission->wants_offload())
    offload();
  else
    offload_ledger.clear();
  if (admission->wants_replacement() && core->phase() == worker_phase::serving)
    replace();
  schedule_beat();
}

// worker_max_users, checked at arrival: its report that it is full may not
// have reached the commander yet. Refuses a newcomer (503 + Retry-After).
bool worker_actor_state::full_for(const std::string& user, caf::typed_response_promise<placement>& promise) {
  if (!admission || admission->room_for_one_more() || core->hosts(user))
    return false;
  count_refusal(refusal_reason::users);
  promise.deliver(make_refusal(errc::admission_refused,
                               "worker " + spec.name + " hosts worker_max_users (" + std::to_string(max_users()) +
                                 ") users",
                               admission->retry_after(until_first_idle_freeze())));
  return true;
}

// After an arrival: full now? Then the group (and the commander) hear it at once.
void worker_actor_state::count_users() {
  if (admission && admission->count_users(core->live_count()))
    report();
}

// Tells the group (which tells the commander) what it admits now; logged
// when it is a change (hysteresis keeps those rare).
void worker_actor_state::report(bool changed) {
  admission_report r;
  r.worker = self->address();
  r.admits = admission->admits();
  if (!r.admits) {
    r.reason = refusal_reason_of(admission->reason());
    r.retry_after = admission->retry_after(until_first_idle_freeze());
  }
  last_report = steady::now();
  reported_retry_after = r.retry_after;
  if (changed)
    spdlog::info("worker {}: {} (cpu {:.0f} %, resident {} MB{})", spec.name,
                 r.admits ? "admits newcomers again" : "closed to newcomers", admission->cpu_temperature(),
                 admission->rss_bytes().value_or(0) >> 20,
                 r.admits ? std::string() : ", retry after " + std::to_string(r.retry_after) + " s");
  if (spec.parent)
    self->send(spec.parent, admission_atom::value, std::move(r));
}

// How long until the least recently active hosted user reaches his idle
// freeze (the next freeze, so the next memory freed); nullopt: nobody hosted.
std::optional<registry::worker_admission::seconds> worker_actor_state::until_first_idle_freeze() const {
  std::optional<std::int64_t> oldest;
  core->for_each_live([&](const registry::short_name&, std::uint64_t id) {
    if (auto b = busy.find(id); b != busy.end()) {
      auto at = b->second->last_active_ns.load(std::memory_order_relaxed);
      if (!oldest || at < *oldest)
        oldest = at;
    }
  });
  if (!oldest)
    return std::nullopt;
  auto idle_for = std::chrono::duration<double>(steady::now().time_since_epoch() - std::chrono::nanoseconds(*oldest));
  return registry::worker_admission::seconds(idle_freeze_minutes() * 60 - idle_for.count());
}

// Closed and too hot: the least busy active user since the last beat
// freezes (the commander hears 'frozen' as usual, and his next request
// lands on a worker that admits). Never the last user.
void worker_actor_state::offload() {
  std::vector<std::pair<std::string_view, std::uint64_t>> figures;
  figures.reserve(core->live_count());
  core->for_each_live([&](const registry::short_name& name, std::uint64_t id) {
    if (auto b = busy.find(id); b != busy.end() && !offloading.count(name.str()))
      figures.emplace_back(name, b->second->busy_ns.load(std::memory_order_relaxed));
  });
  auto pick = offload_ledger.beat(figures);
  if (!pick || !core->takes_newcomers())
    return;
  auto h = handle(core->live_id(*pick));
  offloading.insert(*pick);
  offload_log("worker {}: offload: user {} freezes (cpu {:.0f} %)", spec.name, registry::redact(*pick),
              admission->cpu_temperature());
  self->request(h, spec.ctx->hold_timeout(), freeze_atom::value, static_cast<std::uint8_t>(store::parcel_cause::freeze))
    .then([this, user = *pick](bool) { offloading.erase(user); },
          [this, user = *pick](caf::error& err) {
            offloading.erase(user);
            offload_log("worker {}: offload: user {} could not be frozen: {}", spec.name, registry::redact(user),
                        self->system().render(err));
          });
}

// Past restart_occupancy_max_percent of its share (isolation "process"):
// it takes no newcomer, freezes every user (as a drain does), then asks its
// group to replace its process (ask_replacement). A failed freeze keeps it in service.
void worker_actor_state::replace() {
  auto rss = admission->rss_bytes().value_or(0);
  spdlog::warn("worker {}: {} MB resident, past its occupancy limit ({} MB): its users freeze and it asks to be "
               "replaced",
               spec.name, rss >> 20, admission->replacement_bytes() >> 20);
  auto deadline = steady::now();
  deadline += freeze_all_budget();
  core->replace(rss, deadline);
}

}  // namespace troupe
