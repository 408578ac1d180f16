#pragma once
/// \file
/// Internal to the worker actor (actors/worker*.cpp): its actor's state. The
/// decisions (phase, hosting, restarts, quarantine, drops, freeze runs) are
/// worker_core's; this is the glue that carries them out, split by concern:
///   worker.cpp            the behaviour, the core's effects, attach and tell, timers, resting users
///   worker_operators.cpp  the soft quit, drain, drop, fence
///   worker_admission.cpp  its admission beat: samples, reports, offload, replacement

#include "actors/census.hpp"
#include "actors/errors.hpp"
#include "actors/rate_limited_log.hpp"
#include "actors/worker.hpp"
#include "actors/worker_core.hpp"
#include "registry/short_name.hpp"
#include "registry/timer_queue.hpp"
#include "registry/worker_admission.hpp"

#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace troupe {

/// A freeze run's deadline came (the worker's own timer).
using freeze_deadline_atom = caf::atom_constant<caf::atom("frzdeadln")>;

/// The worker's whole interface: its public one and its own timers (private:
/// no other actor can send them).
using worker_actor = worker_handle::extend<
  /// Its resting users' sweep (once a second while any rests): one whose idle
  /// freeze is due is started again, and freezes.
  caf::reacts_to<rest_atom>,
  /// Its users' earliest timer (armed for this due time, steady ns) may be due.
  caf::reacts_to<timer_atom, std::int64_t>,
  /// Its admission beat (every 100 ms with CPU admission on, else every
  /// second): it samples its users' CPU and its memory and tells its group at
  /// every change (docs/SUPERVISION.md "Admission").
  caf::reacts_to<admission_atom>,
  /// Freeze run N's deadline: its freezes still out are answered failed.
  caf::reacts_to<freeze_deadline_atom, std::uint64_t>>;

struct worker_actor_state : worker_effects {
  using steady = std::chrono::steady_clock;
  static const char* name;

  worker_actor::stateful_pointer<worker_actor_state> self = nullptr;
  std::optional<actor_gauge> gauge;
  worker_spec spec;
  const config::group_settings* settings = nullptr;
  /// Its group's keys applied since the start (docs/config.md "Profiles"), over `settings`.
  std::optional<group_tuning> tuning;
  double idle_freeze_minutes() const;
  double guest_idle_seconds() const;
  int max_users() const;  // worker_max_users, as the last group_tuning says
  bool full_for(const std::string& user, caf::typed_response_promise<placement>& promise);
  void count_users();
  const app_types::factory* factory = nullptr;
  const router* routes = nullptr;
  const message_router* messages = nullptr;  // the messages his type accepts (README "Messages between users")
  std::optional<worker_core> core;           // its phase, its users' lifecycles, its freeze runs
  // Its user actors by id until their down message; shared with the functor
  // that takes them down when the worker stops.
  using actor_map = std::unordered_map<caf::actor_id, user_handle>;
  std::shared_ptr<actor_map> actors = std::make_shared<actor_map>();
  std::unordered_map<caf::actor_id, caf::typed_response_promise<bool>> dropping;  // answered at their down
  // Attaches and messages whose user was found dead before his down message
  // came (he crashed, or rested): redone at it.
  std::unordered_map<caf::actor_id, std::vector<std::function<void()>>> after_down;
  // Users resting here (group.rest_idle_seconds): what each left, by name
  // (the core knows who rests; the next attach or message starts him from it).
  std::unordered_map<registry::short_name, resting_user, registry::short_name_hash> resting;
  bool rest_sweep_armed = false;
  // The channels of the attach or tell of a newcomer: the user spawned for it
  // (worker_core::host → spawn_user, synchronously) binds them again.
  std::vector<channel_binding> next_start_channels;
  // Users freezing and leaving after a fence, until their down message: not
  // taken down with the worker (their freeze writes what nobody claimed since).
  actor_map fenced;
  // Its group's degradation, shared with its users (each checks it per request).
  std::shared_ptr<group_gate> gate;
  rate_limited_log restart_log;  // a crash storm restarts thousands a second: one line a second
  actor_meter meter;

  // Admission (docs/SUPERVISION.md "Admission"): its users count their
  // handlers' cost in their user_busy, its beat samples the sums.
  std::optional<registry::worker_admission> admission;
  std::shared_ptr<std::atomic<std::uint64_t>> busy_total;              // null: CPU admission off
  std::unordered_map<caf::actor_id, std::shared_ptr<user_busy>> busy;  // by user actor
  std::uint64_t busy_at_last_beat = 0;
  steady::time_point last_beat{}, last_memory_reading{};
  registry::offload_ledger offload_ledger;
  std::unordered_set<std::string> offloading;  // offload freezes in flight
  rate_limited_log offload_log;
  steady::time_point last_report{};
  std::uint32_t reported_retry_after = 0;

  // Its users' timers (user_supervisor's timer_atom), one delayed message for
  // the earliest: `armed` is its due time. Timers of users gone are dropped
  // when due, or all at once when many users went down (compact_timers).
  registry::timer_queue timers;
  std::optional<steady::time_point> armed;
  std::size_t downs_since_compaction = 0;

  // The freezes of each run still out (run → user actor id → name). Their
  // requests carry no timeout of their own: a soft quit of 100,000 users
  // would put 100,000 entries through CAF's clock thread, a lock and a wake-up
  // each. One delayed message per run answers, at its deadline, those still out.
  std::unordered_map<std::uint64_t, std::unordered_map<std::uint64_t, std::string>> freezes_out;

  ~worker_actor_state() override;

  // -- worker_effects (worker.cpp) ----------------------------------------------------------
  std::uint64_t spawn_user(const std::string& user, user_launch how) override;
  void stop_user(std::uint64_t id) override;
  void freeze_user(std::uint64_t run, const std::string& user, std::uint64_t id, freeze_purpose why,
                   clock::time_point deadline) override;
  void freeze_done(std::uint64_t run, freeze_purpose why, std::uint64_t frozen,
                   const std::vector<std::string>& failed) override;
  void drop_done(std::uint64_t id) override;
  void redo_after_down(std::uint64_t id) override;
  void show(worker_phase p, std::uint32_t restarts) override;
  void stop_worker(std::uint64_t frozen) override;
  void ask_replacement(std::uint64_t frozen, std::uint64_t rss_bytes) override;

  // -- its users (worker.cpp) ------------------------------------------------------------------
  /// User actor `id`'s handle while he lives (invalid once his down came).
  user_handle handle(std::uint64_t id) const;
  /// His actor, started again from what he left if he rests; invalid when he is not hosted here.
  user_handle live(const std::string& user) { return handle(core->live(user)); }
  hosting_answer host(const attach_order& order);
  void attach(attach_order order, caf::typed_response_promise<placement> promise, bool first_try);
  void tell(attach_order order, user_message msg, caf::typed_response_promise<tell_reply> promise, bool first_try);
  void count_refusal(refusal_reason why);
  void on_down(caf::down_msg& dm);
  void on_rest(const std::string& user, resting_user_ptr& left);
  void forget_resting(const std::string& user);
  void arm_rest_sweep();
  void sweep_resting();
  /// Freeze `id` of run `run` answered (true) or already given up at its deadline (false).
  bool freeze_answered(std::uint64_t run, std::uint64_t id);
  void freeze_deadline(std::uint64_t run);
  void add_timer(std::uint64_t id, std::uint8_t which, std::uint64_t arg, std::int64_t delay_ms);
  void arm(steady::time_point due);
  void on_timers(std::int64_t at);
  void forward_tick(std::uint64_t id, std::uint8_t which, std::uint64_t arg);
  void compact_timers();
  void note();
  actor_probe probe(std::uint64_t query, bool detail);

  // -- operators (worker_operators.cpp) --------------------------------------------------------------------
  caf::duration freeze_all_budget() const;
  caf::result<std::uint64_t, std::vector<std::string>> quit();
  void save_restart_states(std::shared_ptr<std::uint64_t> saved, std::shared_ptr<std::vector<std::string>> not_saved,
                           std::function<void()> done);
  caf::result<std::uint64_t, std::uint64_t> drain();
  caf::result<bool> drop(const std::string& user);
  void fence();

  // -- admission (worker_admission.cpp) ----------------------------------------------------------
  void start_admission();
  std::chrono::milliseconds beat_interval() const;
  void schedule_beat();
  void beat();
  void report(bool changed = true);
  std::optional<registry::worker_admission::seconds> until_first_idle_freeze() const;
  void offload();
  void replace();
};

/// Why admission refuses, as the refusals and the probe name it.
std::uint8_t refusal_reason_of(registry::admission_block b);

}  // namespace troupe
