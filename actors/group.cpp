#include "actors/group.hpp"

#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/errors.hpp"
#include "actors/worker_process.hpp"
#include "config/group_settings.hpp"
#include "registry/restart_intensity.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <set>
#include <optional>
#include <unordered_map>

namespace troupe {

namespace {

using steady = std::chrono::steady_clock;

// The group's whole interface: its public one and its own timer (private:
// no other actor can send it). Degradation number N's recovery is due
// (recovery_interval_seconds).
using group_actor = group_handle::extend<caf::reacts_to<tick_atom, std::uint64_t>>;

struct group_state {
  static const char* name;
  std::optional<actor_gauge> gauge;
  node_context_ptr ctx;
  config::group_settings settings;
  std::optional<group_tuning> tuning;  // the last settings applied while the node runs
  commander_for_groups commander;
  global_store_handle global_store;
  deposit_handle deposit;
  std::vector<worker_handle> workers;  // by slot; a slot not restarted keeps its last (dead) worker's handle
  std::uint32_t replaced = 0;  // workers replaced after a crash
  // Each slot's worker state for troupe_workers (nullopt: no worker: it
  // stopped, or went down while the group is degraded).
  std::vector<std::optional<worker_state>> slot_states;
  std::vector<bool> awaiting_restart;  // went down while degraded: started again at the recovery
  std::vector<std::optional<admission_report>> closed_reports;  // a worker's last "not admitting", if it is so
  std::set<caf::actor_addr> expected_exits;  // workers retired, process slots stopped to be replaced: no failure
  std::optional<registry::restart_intensity> intensity;
  group_counters* counters = nullptr;  // nullptr in tests that made none
  std::uint64_t degradations = 0;      // numbers the recovery timers: a stale one is ignored
  steady::time_point degraded_at{};

  template <class Self>
  void note(Self self) {
    if (!ctx->census)
      return;
    census_note n;
    n.kind = static_cast<std::uint8_t>(actor_kind::group);
    n.name = settings.name;
    n.parent = "node";
    n.info = settings.user_type;
    n.state = static_cast<std::uint8_t>(intensity->why());  // 0 serving, else a registry::degradation
    n.restarts = replaced;
    self->send(ctx->census, note_atom::value, std::move(n));
  }

  // troupe_workers{group,state}: the slots counted by state.
  void publish_states() {
    if (!counters || settings.process_isolation())  // a worker process's slot counts itself (it knows starting/parked)
      return;
    std::array<std::int64_t, static_cast<std::size_t>(worker_state::count_)> n{};
    for (auto& s : slot_states)
      if (s)
        ++n[static_cast<std::size_t>(*s)];
    for (std::size_t k = 0; k < n.size(); ++k)
      counters->workers[k].store(n[k], std::memory_order_relaxed);
  }

  void set_slot_state(std::size_t slot, std::optional<worker_state> s) {
    if (slot >= slot_states.size())
      return;
    slot_states[slot] = s;
    publish_states();
  }

  bool live(std::size_t slot) const {
    return slot_states[slot] && *slot_states[slot] != worker_state::parked;
  }

  // The workers running (not drained, not retired, not parked): what worker_max_number bounds.
  std::size_t started() const {
    std::size_t n = 0;
    for (std::size_t slot = 0; slot < workers.size(); ++slot)
      n += workers[slot] && live(slot);
    return n;
  }

  template <class Self>
  void log(Self self, const std::string& what, nlohmann::json numbers, const std::string& detail) {
    if (!ctx->census)
      return;
    self->send(caf::actor_cast<census_handle>(ctx->census), log_atom::value,
               orchestration_entry{"node", "", what, "group:" + settings.name, "ok", numbers.dump(), detail});
  }

  template <class Self>
  void tell_commander_workers(Self self) {
    self->send(commander, workers_atom::value, settings.name, ctx->node_name,
               workers);
  }

  // The commander's view of each slot's worker: none admits while degraded
  // (dead ones included: nobody is placed on them); after the recovery each
  // admits again unless it said it does not (CPU, memory) meanwhile.
  template <class Self>
  void report_admission(Self self, bool admits, std::uint32_t retry_after) {
    for (std::size_t slot = 0; slot < workers.size(); ++slot) {
      if (!workers[slot])
        continue;
      if (!admits)
        self->send(commander, admission_atom::value,
                   admission_report{workers[slot].address(), false,
                                    static_cast<std::uint8_t>(refusal_reason::degraded), retry_after});
      else if (closed_reports[slot] && live(slot))
        self->send(commander, admission_atom::value, *closed_reports[slot]);
      else
        self->send(commander, admission_atom::value, admission_report{workers[slot].address(), true, 0, 0});
    }
  }

  // Starts a worker in a new slot (the group's start; a group that grows):
  // every per-slot record grows with it. Answers the slot.
  template <class Self>
  std::size_t add_worker_slot(Self self) {
    auto slot = workers.size();
    workers.push_back(start_worker(*self, slot));
    slot_states.emplace_back(worker_state::open);
    awaiting_restart.push_back(false);
    closed_reports.emplace_back();
    if (slot >= intensity->slots())
      intensity->add_slot();
    publish_states();
    return slot;
  }

  template <class Self>
  void replace(Self self, std::size_t slot) {
    if (settings.process_isolation() && workers[slot]) {  // its slot actor waits parked: it goes, and its exit is no failure
      expected_exits.insert(workers[slot].address());
      self->send_exit(workers[slot], caf::exit_reason::user_shutdown);
    }
    workers[slot] = start_worker(*self, slot);
    slot_states[slot] = worker_state::open;
    awaiting_restart[slot] = false;
    closed_reports[slot].reset();
    ++replaced;
    if (counters)
      counters->worker_restarts.fetch_add(1, std::memory_order_relaxed);
    publish_states();
  }

  /// The one entry point for a worker that is gone: `slot`'s worker died (an
  /// abnormal exit; a worker process that died or was found stuck) or, with
  /// `parked`, exited with permanent_failure_exitcode. It counts the group's
  /// restart intensity and replaces the worker, or parks its slot, or makes
  /// the group degraded (no restart until the recovery). `why` is for the log.
  /// `in_place`: a worker process's slot restarts its child itself when
  /// this answers true (it stays the slot's worker); false: the slot parks
  /// (for good, or until the recovery replaces it).
  template <class Self>
  bool on_worker_gone(Self self, std::size_t slot, const std::string& why, bool parked, bool in_place = false) {
    if (slot >= workers.size())
      return false;
    auto now = steady::now();
    slot_states[slot].reset();
    auto before = intensity->why();
    if (parked) {
      spdlog::error("group {}: worker {} failed for good ({}); its slot is parked", settings.name, slot + 1, why);
      log(self, "worker_parked", {{"slot", slot + 1}}, why);
      slot_states[slot] = worker_state::parked;
      awaiting_restart[slot] = false;
      intensity->park(slot, now);
    } else if (intensity->record(now)) {
      spdlog::error("group {}: worker {} went down ({}); replacing it", settings.name, slot + 1, why);
      log(self, "worker_restart", {{"slot", slot + 1}}, why);
      if (in_place) {
        slot_states[slot] = worker_state::starting;
        ++replaced;
        if (counters)
          counters->worker_restarts.fetch_add(1, std::memory_order_relaxed);
        note(self);
        return true;
      }
      replace(self, slot);
      note(self);
      tell_commander_workers(self);
      return true;
    } else {
      awaiting_restart[slot] = true;
      if (before != registry::degradation::none)
        spdlog::warn("group {}: worker {} went down ({}) while the group is degraded; not restarted", settings.name,
                     slot + 1, why);
    }
    publish_states();
    if (intensity->why() != before)
      degrade(self, now);
    else
      note(self);
    if (in_place && !parked && intensity->degraded())  // its slot waits parked: refusing as degraded, replaced at the recovery
      self->send(workers[slot], degraded_atom::value, true, intensity->retry_after(now));
    return false;
  }

  // The slot of the worker at `addr`.
  std::optional<std::size_t> slot_of(const caf::strong_actor_ptr& addr) const {
    for (std::size_t slot = 0; slot < workers.size(); ++slot)
      if (addr && workers[slot].address() == addr->address())
        return slot;
    return std::nullopt;
  }

  // The group is degraded now (or for a new reason): its workers refuse
  // every request, the commander places nobody on them, health says so, and
  // the recovery is due after recovery_interval_seconds.
  template <class Self>
  void degrade(Self self, steady::time_point now) {
    auto why = intensity->why();
    auto retry = intensity->retry_after(now);
    if (degraded_at == steady::time_point{})
      degraded_at = now;
    auto restarts = intensity->restarts_in_window(now);
    if (counters) {
      auto wall_now = unix_now_ms();
      counters->degraded_reason.store(static_cast<std::uint8_t>(why), std::memory_order_relaxed);
      counters->degraded_since_unix_ms.store(
        wall_now - std::chrono::duration_cast<std::chrono::milliseconds>(now - degraded_at).count(),
        std::memory_order_relaxed);
      auto at = intensity->recovery_at();
      counters->recovery_unix_ms.store(
        at ? wall_now + std::chrono::duration_cast<std::chrono::milliseconds>(*at - now).count() : 0,
        std::memory_order_relaxed);
      counters->degraded.store(1, std::memory_order_release);
    }
    if (why == registry::degradation::all_parked)
      spdlog::error("group {}: degraded: every worker slot is parked (permanent failure); it does not recover",
                    settings.name);
    else
      spdlog::error("group {}: degraded: {} worker restarts within {} s (max_restarts {}); {}", settings.name,
                    restarts, settings.restart_window_seconds, settings.max_restarts,
                    retry ? "it tries again in " + std::to_string(retry) + " s" : std::string("no recovery"));
    for (std::size_t slot = 0; slot < workers.size(); ++slot)
      if (live(slot))
        self->send(workers[slot], degraded_atom::value, true, retry);
    report_admission(self, false, retry);
    note(self);
    log(self, "degraded",
        {{"restarts", restarts},
         {"window_seconds", settings.restart_window_seconds},
         {"max_restarts", settings.max_restarts},
         {"parked", intensity->parked_count()},
         {"retry_after", retry}},
        registry::to_string(why));
    if (auto at = intensity->recovery_at())
      self->delayed_send(self, std::max<steady::duration>(*at - now, std::chrono::milliseconds(1)), tick_atom::value,
                         ++degradations);
  }

  // recovery_interval_seconds after it was degraded: it forgets its restarts,
  // starts the workers missing from its slots and serves again.
  template <class Self>
  void recover(Self self, std::uint64_t degradation) {
    auto now = steady::now();
    if (degradation != degradations || !intensity->recover(now))
      return;
    auto lasted = std::chrono::duration<double>(now - degraded_at).count();
    degraded_at = {};
    if (counters) {
      counters->degraded.store(0, std::memory_order_release);
      counters->degraded_reason.store(0, std::memory_order_relaxed);
      counters->degraded_since_unix_ms.store(0, std::memory_order_relaxed);
      counters->recovery_unix_ms.store(0, std::memory_order_relaxed);
    }
    std::size_t started = 0;
    for (std::size_t slot = 0; slot < workers.size(); ++slot) {
      if (awaiting_restart[slot] && !intensity->parked(slot)) {
        replace(self, slot);
        ++started;
      } else if (live(slot)) {
        self->send(workers[slot], degraded_atom::value, false, std::uint32_t{0});
      }
    }
    spdlog::warn("group {}: recovered after {:.1f} s ({} worker(s) started again)", settings.name, lasted, started);
    if (started)
      tell_commander_workers(self);
    report_admission(self, true, 0);
    note(self);
    log(self, "recovered", {{"degraded_seconds", lasted}, {"started", started}}, "");
  }

  worker_handle start_worker(caf::local_actor& self, std::size_t slot) {
    worker_spec spec{settings.name + "-w" + std::to_string(slot + 1), settings.name, commander, global_store, deposit,
                     ctx};
    auto w = settings.process_isolation() ? spawn_worker_process(self, std::move(spec), settings)
                                          : spawn_worker(self, std::move(spec));
    if (tuning)  // settings applied since the start: a new worker has them from its first message
      caf::anon_send(w, tune_atom::value, *tuning);
    return w;
  }

  // Settings applied while the node runs (docs/config.md "Profiles"): every worker, and each one started later.
  void tune(const group_tuning& t) {
    if (tuning && t.generation <= tuning->generation)
      return;
    tuning = t;
    settings.user_idle_freeze_minutes = t.user_idle_freeze_minutes;
    settings.guest_idle_seconds = t.guest_idle_seconds;
    for (auto& w : workers)
      if (w)
        caf::anon_send(w, tune_atom::value, t);
  }
};

const char* group_state::name = "troupe.group";

group_actor::behavior_type group_impl(group_actor::stateful_pointer<group_state> self, node_context_ptr ctx,
                                      config::group_settings settings, commander_for_groups commander,
                                      global_store_handle global_store, deposit_handle deposit) {
  auto& st = self->state;
  st.gauge.emplace(ctx->metrics, actor_kind::group);
  st.ctx = std::move(ctx);
  st.settings = std::move(settings);
  st.commander = std::move(commander);
  st.global_store = std::move(global_store);
  st.deposit = std::move(deposit);
  st.counters = st.ctx->metrics.group(st.settings.name);
  st.intensity.emplace(st.settings.max_restarts, st.settings.restart_window_seconds,
                       st.settings.recovery_interval_seconds, static_cast<std::size_t>(st.settings.workers));
  st.note(self);
  for (int i = 0; i < st.settings.workers; ++i) {
    auto slot = st.add_worker_slot(self);
    st.log(self, "worker_start", {{"slot", slot + 1}, {"started", slot + 1}}, "the group's start");
  }
  // A worker that went down abnormally is replaced in its slot (its users went
  // with it and are spawned again on their next request) within the group's
  // restart intensity (on_worker_gone); one that stopped normally (drained)
  // leaves its slot empty; any other exit (shutdown) takes the group and,
  // through the links, everything below it.
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& st = self->state;
    if (st.expected_exits.erase(em.source))
      return;
    for (std::size_t slot = 0; slot < st.workers.size(); ++slot) {
      if (st.workers[slot].address() != em.source)
        continue;
      if (!em.reason)
        return st.set_slot_state(slot, std::nullopt);
      st.on_worker_gone(self, slot, self->system().render(em.reason), false);
      return;
    }
    if (em.reason)
      self->quit(em.reason);
  });
  return {
    [=](workers_atom) { return self->state.workers; },
    [=](fence_atom) {
      for (auto& w : self->state.workers)
        if (w)
          self->send(w, fence_atom::value);
    },
    [=](tune_atom, group_tuning& t) { self->state.tune(t); },
    [=](admission_atom, admission_report& report) {
      auto& st = self->state;
      for (std::size_t slot = 0; slot < st.workers.size(); ++slot)
        if (st.workers[slot].address() == report.worker && st.live(slot)) {
          st.set_slot_state(slot, report.admits ? worker_state::open : worker_state::closed);
          st.closed_reports[slot] = report.admits ? std::nullopt : std::optional<admission_report>{report};
        }
      if (st.intensity->degraded())
        return;  // the commander places nobody here until the recovery reports them admitting again
      self->send(st.commander, admission_atom::value, std::move(report));
    },
    [=](tick_atom, std::uint64_t degradation) { self->state.recover(self, degradation); },
    // One more worker (an arrival no worker admits), in the first free
    // position, registered with the commander before the answer (it places
    // the waiting arrivals on it when the answer comes).
    [=](grow_atom) -> caf::result<worker_handle> {
      auto& st = self->state;
      auto most = static_cast<std::size_t>(st.settings.max_workers());
      if (st.started() >= most)
        return make_error(errc::refused, "group " + st.settings.name + " is at worker_max_number (" +
                                           std::to_string(most) + ")");
      if (st.intensity->degraded())
        return make_error(errc::refused, "group " + st.settings.name + " is degraded");
      auto slot = static_cast<std::size_t>(std::find(st.workers.begin(), st.workers.end(), worker_handle{}) -
                                           st.workers.begin());
      if (slot == st.workers.size()) {
        st.add_worker_slot(self);
      } else {
        st.workers[slot] = st.start_worker(*self, slot);
        st.closed_reports[slot].reset();
        st.set_slot_state(slot, worker_state::open);
      }
      spdlog::info("group {}: worker {} started for arrivals no worker admits ({} of at most {})", st.settings.name,
                   slot + 1, st.started(), most);
      st.log(self, "worker_start", {{"slot", slot + 1}, {"started", st.started()}, {"most", most}},
             "arrivals no worker admits");
      st.tell_commander_workers(self);
      return st.workers[slot];
    },
    // A worker the commander no longer places anybody on (no users, the
    // group quiet): it drains (nothing to freeze) and stops, which is no
    // restart; its position is free for the next growth.
    [=](retire_atom, const worker_handle& worker) {
      auto& st = self->state;
      auto i = std::find(st.workers.begin(), st.workers.end(), worker);
      if (!worker || i == st.workers.end())
        return;
      auto slot = static_cast<std::size_t>(i - st.workers.begin());
      *i = worker_handle{};
      st.set_slot_state(slot, std::nullopt);
      st.closed_reports[slot].reset();
      st.expected_exits.insert(worker.address());
      st.log(self, "worker_stop", {{"slot", slot + 1}}, "retired: no users, the group quiet");
      self->request(worker, st.ctx->request_timeout(), drain_atom::value)
        .then([](std::uint64_t, std::uint64_t) {},
              [self, name = st.settings.name](caf::error& err) {
                spdlog::warn("group {}: a retired worker did not drain: {}", name, self->system().render(err));
              });
    },
    [=](replace_atom, const caf::actor_addr&, std::uint64_t rss) {
      // A thread worker past its occupancy: nothing to replace (its memory is the node's); it stays drained.
      spdlog::warn("group {}: a worker asks to be replaced ({} MB resident)", self->state.settings.name, rss >> 20);
    },
    [=](restart_atom, const std::string& worker, std::int32_t exit_code) -> bool {
      // A worker process ended: its slot restarts it only if the group's restart intensity allows.
      auto& st = self->state;
      auto slot = st.slot_of(self->current_sender());
      if (!slot)
        return false;
      bool permanent = st.settings.permanent_failure_exitcode != 0 && exit_code == st.settings.permanent_failure_exitcode;
      auto why = worker + "'s process ended with exit code " + std::to_string(exit_code);
      return st.on_worker_gone(self, *slot, why, permanent, true);
    },
  };
}

}  // namespace

group_handle spawn_group(caf::actor_system& sys, node_context_ptr ctx, config::group_settings settings,
                        commander_for_groups commander, global_store_handle global_store, deposit_handle deposit) {
  return sys.spawn(group_impl, std::move(ctx), std::move(settings), std::move(commander), std::move(global_store),
                   std::move(deposit));
}

}  // namespace troupe
