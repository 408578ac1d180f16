#include "actors/worker.hpp"

#include "actors/budgets.hpp"
#include "actors/errors.hpp"
#include "actors/rate_limited_log.hpp"
#include "actors/census.hpp"
#include "actors/deposit.hpp"
#include "actors/group.hpp"
#include "registry/ids.hpp"
#include "registry/proc_stats.hpp"
#include "registry/short_name.hpp"
#include "registry/timer_queue.hpp"
#include "registry/worker_admission.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace troupe {

namespace {

// Freezes a worker has in flight at once (freeze_all): a deposit batch's worth.
constexpr std::size_t freeze_window = 1024;

using steady = std::chrono::steady_clock;

// The admission beat: 100 ms samples feed the CPU filter (the issue's
// figure); memory alone needs no more than a reading a second.
constexpr auto cpu_beat = std::chrono::milliseconds(100);
constexpr auto memory_beat = std::chrono::seconds(1);

// The group's admission keys as one worker applies them.
registry::worker_admission_settings admission_settings_of(const config::group_settings& g) {
  registry::worker_admission_settings s;
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

std::uint8_t refusal_reason_of(registry::admission_block b) {
  return static_cast<std::uint8_t>(b == registry::admission_block::memory ? refusal_reason::memory
                                                                          : refusal_reason::cpu);
}

struct worker_state {
  static const char* name;

  worker_handle::stateful_pointer<worker_state> self = nullptr;
  std::optional<actor_gauge> gauge;
  worker_spec spec;
  const config::group_settings* settings = nullptr;
  const app_types::factory* factory = nullptr;
  const router* routes = nullptr;
  const message_router* messages = nullptr;  // the messages his type accepts (README "Messages between users")
  // By name; shared with the functor that takes them down when the worker stops.
  // (Names are short_names: a guest's fits inline, so these per-user entries allocate no string; S5.)
  using user_map = std::unordered_map<registry::short_name, user_handle, registry::short_name_hash>;
  std::shared_ptr<user_map> users = std::make_shared<user_map>();
  std::unordered_map<caf::actor_id, registry::short_name> names;      // child id → name
  std::unordered_map<std::string, std::deque<steady::time_point>> crashes;
  std::unordered_map<caf::actor_id, caf::typed_response_promise<bool>> dropping;  // answered at their down
  // Attaches and messages whose user was found dead before his down message
  // came (he crashed, or rested): redone at it.
  std::unordered_map<caf::actor_id, std::vector<std::function<void()>>> after_down;
  // Users resting here (group.rest_idle_seconds): what each left, by name.
  // Still placed here: the next attach or message starts him from it.
  std::unordered_map<registry::short_name, resting_user, registry::short_name_hash> resting;
  bool rest_sweep_armed = false;
  // The last good state a failing user left (an encoded parcel): what his
  // restart starts from; kept until he is started again (or written at quit).
  std::unordered_map<std::string, store::bytes> restart_from;
  // The owner epoch of each hosted user's placement: a crashed user is
  // restarted under the same placement, so with the same epoch.
  std::unordered_map<registry::short_name, std::uint64_t, registry::short_name_hash> epochs;
  bool draining = false;
  // Its group's degradation, shared with its users (each checks it per request).
  std::shared_ptr<group_gate> gate;
  rate_limited_log restart_log;  // a crash storm restarts thousands a second: one line a second
  std::uint32_t restarts = 0;  // user restarts on this worker
  actor_meter meter;

  // Admission (docs/SUPERVISION.md "Admission"): its users count their
  // handlers' cost in their user_busy, its beat samples the sums.
  std::optional<registry::worker_admission> admission;
  std::shared_ptr<std::atomic<std::uint64_t>> busy_total;        // null: CPU admission off
  std::unordered_map<caf::actor_id, std::shared_ptr<user_busy>> busy;  // by user actor
  std::uint64_t busy_at_last_beat = 0;
  steady::time_point last_beat{}, last_memory_reading{};
  registry::offload_ledger offload_ledger;
  std::unordered_set<std::string> offloading;  // offload freezes in flight
  rate_limited_log offload_log;
  bool replacing = false;  // its users are frozen (or freezing) for its replacement
  // Its users' timers (user_supervisor's timer_atom), one delayed message for
  // the earliest: `armed` is its due time. Timers of users gone are dropped
  // when due, or all at once when many users went down (compact_timers).
  registry::timer_queue timers;
  std::optional<steady::time_point> armed;
  std::size_t downs_since_compaction = 0;
  steady::time_point last_report{};
  std::uint32_t reported_retry_after = 0;

  void add_timer(std::uint64_t id, std::uint8_t which, std::uint64_t arg, std::int64_t delay_ms) {
    auto due = steady::now() + std::chrono::milliseconds(std::max<std::int64_t>(0, delay_ms));
    timers.push({due, id, arg, which});
    if (!armed || due < *armed)
      arm(due);
  }

  void arm(steady::time_point due) {
    armed = due;
    auto delay = std::chrono::duration_cast<std::chrono::microseconds>(due - steady::now());
    auto at = static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch()).count());
    self->delayed_send(self, std::max(delay, std::chrono::microseconds(0)), timer_atom::value, at);
  }

  // A wake-up armed for `at` came (a later one may still be pending: it finds nothing, or what came since).
  void on_timers(std::int64_t at) {
    if (armed && std::chrono::duration_cast<std::chrono::nanoseconds>(armed->time_since_epoch()).count() == at)
      armed.reset();
    timers.pop_due(steady::now(), [this](const registry::timer_queue::entry& e) { forward_tick(e.id, e.which, e.arg); });
    if (auto next = timers.next_due(); next && (!armed || *next < *armed))
      arm(*next);
  }

  // A timer of user actor `id` is due: he gets it if he still lives.
  void forward_tick(std::uint64_t id, std::uint8_t which, std::uint64_t arg) {
    auto n = names.find(id);
    if (n == names.end())
      return;  // he is gone: his timer goes with him
    if (auto u = users->find(n->second); u != users->end() && u->second.id() == id)
      self->send(u->second, tick_atom::value, which, arg);
  }

  // Many users went down (a crash storm, a mass freeze): their timers go now,
  // not when due (an idle check may be minutes ahead). Amortized O(1) per down.
  void compact_timers() {
    if (++downs_since_compaction < 1024 || downs_since_compaction < timers.size() / 2)
      return;
    downs_since_compaction = 0;
    timers.compact([this](std::uint64_t id) { return names.count(id) > 0; });
  }

  // Starts the beat, and with it admission; a worker without machine figures admits always.
  void start_admission() {
    auto total = spec.mem_total_bytes ? spec.mem_total_bytes : registry::mem_total_bytes().value_or(0);
    try {
      admission.emplace(admission_settings_of(*settings), total);
    } catch (const std::invalid_argument& e) {  // the recipe's validation makes this unreachable
      spdlog::error("worker {}: admission off: {}", spec.name, e.what());
      return;
    }
    if (admission->cpu_on())
      busy_total = std::make_shared<std::atomic<std::uint64_t>>(0);
    last_beat = last_memory_reading = steady::now();
    if (admission->sample(std::nullopt, registry::rss_bytes(), last_beat))  // born over budget: say so now
      report();
    schedule_beat();
  }

  std::chrono::milliseconds beat_interval() const {
    return admission->cpu_on() ? std::chrono::duration_cast<std::chrono::milliseconds>(cpu_beat)
                               : std::chrono::duration_cast<std::chrono::milliseconds>(memory_beat);
  }

  void schedule_beat() { self->delayed_send(caf::actor_cast<worker_handle>(self), beat_interval(), admission_atom::value); }

  void beat() {
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
    if (now - last_memory_reading >= memory_beat) {
      rss = registry::rss_bytes();
      last_memory_reading = now;
    }
    if (admission->sample(cpu, rss, now))
      report();
    else if (!admission->admits() && now - last_report >= memory_beat &&
             admission->retry_after(until_first_idle_freeze()) != reported_retry_after)
      report(false);  // still closed: its Retry-After moved (once a second at most)
    if (admission->wants_offload())
      offload();
    else
      offload_ledger.clear();
    if (admission->wants_replacement() && !replacing)
      replace();
    schedule_beat();
  }

  // Tells the group (which tells the commander) what it admits now; logged
  // when it is a change (hysteresis keeps those rare).
  void report(bool changed = true) {
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
      self->send(caf::actor_cast<group_handle>(spec.parent), admission_atom::value, std::move(r));
  }

  // How long until the least recently active hosted user reaches his idle
  // freeze (the next freeze, so the next memory freed); nullopt: nobody hosted.
  std::optional<registry::worker_admission::seconds> until_first_idle_freeze() const {
    std::optional<std::int64_t> oldest;
    for (auto& [name, h] : *users)
      if (auto b = busy.find(h.id()); b != busy.end()) {
        auto at = b->second->last_active_ns.load(std::memory_order_relaxed);
        if (!oldest || at < *oldest)
          oldest = at;
      }
    if (!oldest)
      return std::nullopt;
    auto idle_for = std::chrono::duration<double>(steady::now().time_since_epoch() - std::chrono::nanoseconds(*oldest));
    return registry::worker_admission::seconds(settings->user_idle_freeze_minutes * 60 - idle_for.count());
  }

  // Closed and too hot: the least busy active user since the last beat
  // freezes (the commander hears 'frozen' as usual, and his next request
  // lands on a worker that admits). Never the last user.
  void offload() {
    std::vector<std::pair<std::string_view, std::uint64_t>> figures;
    figures.reserve(users->size());
    for (auto& [name, h] : *users)
      if (auto b = busy.find(h.id()); b != busy.end() && !offloading.count(name.str()))
        figures.emplace_back(name, b->second->busy_ns.load(std::memory_order_relaxed));
    auto pick = offload_ledger.beat(figures);
    if (!pick || draining)
      return;
    auto h = users->find(*pick)->second;
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
  // group to replace its process. A failed freeze keeps it in service.
  void replace() {
    replacing = true;
    draining = true;
    note();
    auto rss = admission->rss_bytes().value_or(0);
    spdlog::warn("worker {}: {} MB resident, past its occupancy limit ({} MB): its users freeze and it asks to be "
                 "replaced", spec.name, rss >> 20, admission->replacement_bytes() >> 20);
    freeze_all(store::parcel_cause::freeze, freeze_all_budget(),
               [this, rss](std::uint64_t frozen, std::vector<std::string> not_frozen) {
                 if (!not_frozen.empty()) {
                   spdlog::error("worker {}: {} user(s) could not be frozen; it stays in service", spec.name,
                                 not_frozen.size());
                   replacing = false;
                   draining = false;
                   note();
                   return;
                 }
                 spdlog::info("worker {}: {} user(s) frozen; replacement asked", spec.name, frozen);
                 if (spec.parent)
                   self->send(caf::actor_cast<group_handle>(spec.parent), replace_atom::value, self->address(), rss);
               });
  }

  ~worker_state() {
    if (!resting.empty() && spec.ctx) {  // what they left goes with the worker, as a live user's state would
      spec.ctx->metrics.users_resting.fetch_sub(static_cast<std::int64_t>(resting.size()), std::memory_order_relaxed);
      if (spec.ctx->census)
        for (auto& [name, left] : resting)
          caf::anon_send(spec.ctx->census, drop_atom::value, std::string(name.view()));
    }
  }

  // -- resting users ------------------------------------------------------------------

  // A user of ours rests: his actor (the sender) left his state and stops.
  void on_rest(const std::string& user, resting_user_ptr& left) {
    auto u = users->find(user);
    if (!left || u == users->end() || caf::actor_cast<caf::strong_actor_ptr>(u->second) != self->current_sender())
      return;  // not ours any more (dropped, released, fenced): nothing of his is kept
    users->erase(u);
    resting.insert_or_assign(user, std::move(*left));
    spec.ctx->metrics.users_resting.fetch_add(1, std::memory_order_relaxed);
    arm_rest_sweep();
  }

  bool hosts(const std::string& user) const { return users->count(user) || resting.count(user); }

  std::uint64_t epoch_of(const std::string& user) const {
    auto e = epochs.find(user);
    return e == epochs.end() ? 0 : e->second;
  }

  // His actor, started again from what he left if he rests; invalid when he is not hosted here.
  user_handle live(const std::string& user) {
    if (auto u = users->find(user); u != users->end())
      return u->second;
    if (resting.count(user))
      return start(user, {}, false, epoch_of(user));
    return {};
  }

  void arm_rest_sweep() {
    if (rest_sweep_armed || resting.empty())
      return;
    rest_sweep_armed = true;
    self->delayed_send(caf::actor_cast<worker_handle>(self), std::chrono::seconds(1), rest_atom::value);
  }

  // A resting user whose idle freeze is due is started again: his own idle
  // check freezes him at once (so his freeze is the same as anybody's). At
  // most rest_sweep_batch a sweep: a crowd that went idle together freezes
  // over a few seconds instead of coming back to life at once.
  void sweep_resting() {
    static constexpr std::size_t rest_sweep_batch = 1024;
    rest_sweep_armed = false;
    auto now = registry::wall_clock::now();
    auto idle_after = std::chrono::duration<double>(settings->user_idle_freeze_minutes * 60);
    auto guest_idle_after = std::min(idle_after, std::chrono::duration<double>(settings->guest_idle_seconds));
    std::vector<std::string> due;
    for (auto& [name, left] : resting) {
      bool empty_guest = left.parcel.empty() && !left.dirty && registry::is_guest(name.view());
      if (now - std::max(left.clocks.last_activity(), left.started) >= (empty_guest ? guest_idle_after : idle_after))
        due.emplace_back(name.view());
      if (due.size() == rest_sweep_batch)
        break;
    }
    for (auto& name : due)
      live(name);
    arm_rest_sweep();
  }

  user_handle start(const std::string& user, store::bytes parcel, bool wake, std::uint64_t owner_epoch,
                    std::vector<channel_binding> channels = {}) {
    resting_user_ptr resumed;
    if (auto r = resting.find(user); r != resting.end()) {  // what he left when he rested is all he is
      resumed = std::make_shared<resting_user>(std::move(r->second));
      resting.erase(r);
      spec.ctx->metrics.users_resting.fetch_sub(1, std::memory_order_relaxed);
      spec.ctx->metrics.user_resumes.fetch_add(1, std::memory_order_relaxed);
    }
    if (auto r = restart_from.find(user); r != restart_from.end()) {
      if (!r->second.empty()) {  // his last good state wins over his parcel, which is as old or older
        parcel = std::move(r->second);
        wake = false;
      }
      restart_from.erase(r);
    }
    user_spec us;
    us.user = user;
    us.worker = spec.name;
    us.parcel = std::move(parcel);
    us.wake = wake;
    us.group = spec.group;
    us.commander = spec.commander;
    us.global_store = spec.global_store;
    us.supervisor = caf::actor_cast<user_supervisor>(self);
    us.deposit = spec.deposit;
    us.factory = factory;
    us.routes = routes;
    us.messages = messages;
    us.ctx = spec.ctx;
    us.owner_epoch = owner_epoch;
    us.gate = gate;
    us.resumed = std::move(resumed);
    us.channels = std::move(channels);
    epochs[user] = owner_epoch;
    if (auto c = crashes.find(user); c != crashes.end())
      us.restarts = static_cast<std::uint32_t>(c->second.size());
    std::shared_ptr<user_busy> b;
    if (admission) {
      b = std::make_shared<user_busy>();
      b->last_active_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
                                .count(),
                              std::memory_order_relaxed);
      b->worker_busy_ns = busy_total;
      us.busy = b;
    }
    auto h = spawn_user(*self, std::move(us));
    if (b)
      busy[h.id()] = std::move(b);
    names[h.id()] = user;
    (*users)[user] = h;
    return h;
  }

  // Gives `order.cid` to the user (started if need be) and answers his
  // placement. A user found dead here (he crashed and his down message has not
  // arrived yet) is started afresh once.
  void attach(attach_order order, caf::typed_response_promise<placement> promise, bool first_try) {
    if (auto retry = gate->retry_after()) {  // its group is degraded: nobody is served (his actor refuses too)
      count_refusal(refusal_reason::degraded);
      promise.deliver(make_refusal(errc::group_degraded, gate->text(*retry), *retry));
      return;
    }
    bool hosted = hosts(order.user);
    if (!hosted && draining) {  // the commander places him elsewhere on his next request
      promise.deliver(make_error(errc::unavailable, "worker " + spec.name + " is being drained"));
      return;
    }
    if (!hosted)
      if (auto retry = quarantined(order.user, steady::now())) {
        count_refusal(refusal_reason::quarantined);
        promise.deliver(make_refusal(errc::user_quarantined,
                                     "user " + order.user + " is quarantined: his actor crashed " +
                                       std::to_string(settings->max_user_restarts) + " times within " +
                                       fmt::format("{}", settings->restart_window_seconds) + " s",
                                     *retry));
        return;
      }
    user_handle h = hosted ? live(order.user)
                           : start(order.user, order.parcel, order.wake, order.owner_epoch, order.channels);
    self->request(h, spec.ctx->hold_timeout(), adopt_atom::value, order.cid)
      .then([promise, cid = order.cid](placement& p) mutable {
              p.cid = cid;
              promise.deliver(std::move(p));
            },
            [this, h, order, promise, first_try](caf::error& err) mutable {
              if (first_try && err == caf::sec::request_receiver_down) {
                if (names.count(h.id())) {
                  // His down message is still on its way: what he died of
                  // (a crash that quarantines him?), or whether he rests, is known only then.
                  after_down[h.id()].push_back([this, order = std::move(order), promise]() mutable {
                    attach(std::move(order), std::move(promise), false);
                  });
                  return;
                }
                if (auto j = users->find(order.user); j != users->end() && j->second == h)
                  users->erase(j);
                return attach(std::move(order), std::move(promise), false);
              }
              promise.deliver(std::move(err));
            });
  }

  // A message for one of his users (README "Messages between users"): a user
  // not live here is started as for attach (woken from his parcel: `order`
  // has no connection), then the message is handed to him.
  void tell(attach_order order, user_message msg, caf::typed_response_promise<tell_reply> promise, bool first_try) {
    using R = tell_outcome::result;
    if (auto retry = gate->retry_after()) {
      count_refusal(refusal_reason::degraded);
      promise.deliver(tell_reply::of(R::unavailable, gate->text(*retry)));
      return;
    }
    bool hosted = hosts(order.user);
    if (!hosted && draining) {  // the commander places him elsewhere
      promise.deliver(tell_reply{tell_reply::not_here, "worker " + spec.name + " is being drained"});
      return;
    }
    if (!hosted)
      if (auto retry = quarantined(order.user, steady::now())) {
        count_refusal(refusal_reason::quarantined);
        promise.deliver(tell_reply::of(R::unavailable, "the recipient is quarantined (his actor crashed too often)"));
        return;
      }
    user_handle h = hosted ? live(order.user)
                           : start(order.user, order.parcel, order.wake, order.owner_epoch, order.channels);
    self->request(h, spec.ctx->request_timeout(), tell_atom::value, msg)
      .then([promise](tell_reply& r) mutable { promise.deliver(std::move(r)); },
            [this, h, order, msg, promise, first_try](caf::error& err) mutable {
              // Found dead: handed again once, when his down message is here
              // (he crashed, or rested: then he starts from what he left).
              if (first_try && err == caf::sec::request_receiver_down) {
                if (names.count(h.id())) {
                  after_down[h.id()].push_back([this, order = std::move(order), msg = std::move(msg), promise]() mutable {
                    tell(std::move(order), std::move(msg), std::move(promise), false);
                  });
                  return;
                }
                if (auto j = users->find(order.user); j != users->end() && j->second == h)
                  users->erase(j);
                return tell(std::move(order), std::move(msg), std::move(promise), false);
              }
              promise.deliver(tell_reply::of(R::unavailable, "the recipient did not take the message ("
                                                               + self->system().render(err) + ")"));
            });
  }

  void count_refusal(refusal_reason why) {
    spec.ctx->metrics.admission_rejections[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  }

  // Drops `history`'s crashes older than restart_window_seconds.
  void forget_old_crashes(std::deque<steady::time_point>& history, steady::time_point now) const {
    auto window = std::chrono::duration<double>(settings->restart_window_seconds);
    while (!history.empty() && now - history.front() > window)
      history.pop_front();
  }

  // A user whose actor crashed max_user_restarts times within the window is
  // quarantined: the seconds until his oldest crash leaves it (at least 1);
  // nullopt when he may be started (his crashes past the window are forgotten).
  std::optional<std::uint32_t> quarantined(const std::string& user, steady::time_point now) {
    auto c = crashes.find(user);
    if (c == crashes.end())
      return std::nullopt;
    forget_old_crashes(c->second, now);
    if (c->second.empty()) {
      crashes.erase(c);
      return std::nullopt;
    }
    if (static_cast<int>(c->second.size()) < settings->max_user_restarts)
      return std::nullopt;
    double left = settings->restart_window_seconds - std::chrono::duration<double>(now - c->second.front()).count();
    return static_cast<std::uint32_t>(std::clamp(std::ceil(left), 1.0, 4e9));
  }

  // A crashed user is restarted at once (from the last good state he left,
  // else his last durable parcel), unless his actor crashed
  // max_user_restarts times within restart_window_seconds: then he is
  // quarantined alone (not restarted; attach refuses him until his oldest
  // crash leaves the window, then he starts from that last good state).
  void on_down(caf::down_msg& dm) {
    auto n = names.find(dm.source.id());
    if (n == names.end())
      return;
    judge_down(dm, std::move(n));
    compact_timers();
    // Attaches that found him dead before this message: placed again now that
    // his crash is counted (a quarantined user is refused, not restarted).
    if (auto w = after_down.find(dm.source.id()); w != after_down.end()) {
      auto waiting = std::move(w->second);
      after_down.erase(w);
      for (auto& redo : waiting)
        redo();
    }
  }

  void judge_down(caf::down_msg& dm, std::unordered_map<caf::actor_id, registry::short_name>::iterator n) {
    auto user = n->second.str();
    names.erase(n);
    busy.erase(dm.source.id());
    if (auto d = dropping.find(dm.source.id()); d != dropping.end()) {
      d->second.deliver(true);
      dropping.erase(d);
      restart_from.erase(user);
      if (!hosts(user))
        epochs.erase(user);
      return;
    }
    auto u = users->find(user);
    bool current = u != users->end() && u->second.address() == dm.source;
    if (current)
      users->erase(u);
    if (!dm.reason || dm.reason == caf::exit_reason::user_shutdown || is(dm.reason, errc::wake_failed)) {
      if (!hosts(user))  // his placement ended (a resting user's goes on); the next one brings its own epoch
        epochs.erase(user);
      return;  // left normally, shut down, or could not wake (his next request retries)
    }
    auto now = steady::now();
    auto& history = crashes[user];
    forget_old_crashes(history, now);
    history.push_back(now);
    ++restarts;
    note();
    spec.ctx->metrics.user_restarts.fetch_add(1, std::memory_order_relaxed);
    if (!current)
      return;  // a request found him dead first and started him again
    if (static_cast<int>(history.size()) >= settings->max_user_restarts) {
      spdlog::error("worker {}: user {} crashed {} times within {} s ({}); quarantined for {} s, not restarted",
                    spec.name, registry::redact(user), history.size(), settings->restart_window_seconds,
                    self->system().render(dm.reason), quarantined(user, now).value_or(0));
      return;
    }
    restart_log("worker {}: user {} went down ({}); restarting him", spec.name, registry::redact(user),
                self->system().render(dm.reason));
    // From the last good state he left, else his last durable parcel; under the same placement's epoch.
    auto epoch = epochs.find(user);
    start(user, {}, true, epoch == epochs.end() ? 0 : epoch->second);
  }

  // A drain's or a replacement's budget for freezing every user (actors/budgets.hpp).
  caf::duration freeze_all_budget() const {
    return spec.ctx ? worker_freeze_all_budget(spec.ctx->recipe) : worker_freeze_all_budget(config::recipe{});
  }

  // Freezes every user hosted now (cause quit or freeze), all within
  // `timeout` (a named budget, actors/budgets.hpp: a user not frozen within it
  // counts as failed); calls done(frozen, names of those not
  // frozen; a user fenced meanwhile is neither) once all answered. At most
  // freeze_window freezes are in flight:
  // CAF 0.17 keeps an actor's pending requests in a flat map searched
  // linearly, so 100,000 requests at once cost quadratic time in this worker
  // (and as many timeouts in the clock), while the deposit gets its full
  // batches from a window as well. `stop_failed`: a user whose freeze failed
  // is stopped too (a fenced node must not keep his stale state).
  template <class Done>
  void freeze_all(store::parcel_cause cause, caf::duration timeout, Done done, bool stop_failed = false) {
    struct run {
      std::vector<std::pair<std::string, user_handle>> todo;
      std::size_t next = 0, in_flight = 0;
      std::uint64_t frozen = 0;
      std::vector<std::string> failed;
      steady::time_point deadline;
      Done done;
      store::parcel_cause cause;
      bool stop_failed;
    };
    auto deadline = steady::now();
    deadline += timeout;  // a finite budget (its callers': actors/budgets.hpp, the soft quit's)
    auto r = std::make_shared<run>(run{{users->begin(), users->end()}, 0, 0, 0, {}, deadline, std::move(done),
                                       cause, stop_failed});
    for (auto& [name, left] : resting)  // started again when their turn comes (the window bounds them too)
      r->todo.emplace_back(std::string(name.view()), user_handle{});
    freeze_more(r);
  }

  template <class Run>
  void freeze_more(const std::shared_ptr<Run>& r) {
    while (r->in_flight < freeze_window && r->next < r->todo.size()) {
      auto [name, h] = r->todo[r->next++];
      if (!h && !(h = live(name))) {  // he rested and left since (froze, retired): nothing of his is here
        ++r->frozen;
        continue;
      }
      ++r->in_flight;
      caf::duration left{std::max(std::chrono::milliseconds(1),
                                  std::chrono::duration_cast<std::chrono::milliseconds>(r->deadline - steady::now()))};
      self->request(h, left, freeze_atom::value, static_cast<std::uint8_t>(r->cause))
        .then(
          [this, r](bool) {
            ++r->frozen;
            --r->in_flight;
            freeze_more(r);
          },
          [this, r, user = name, h = h](caf::error& err) {
            if (is(err, errc::stale_owner)) {
              // Fenced: a newer placement holds him, his state is not this
              // worker's to save (the deposit counted and logged it) and he left.
            } else {
              spdlog::error("worker {}: user {} could not be frozen: {}", spec.name, registry::redact(user),
                            self->system().render(err));
              r->failed.push_back(registry::redact(user));
              if (r->stop_failed)
                self->send_exit(h, make_error(errc::dropped));
            }
            --r->in_flight;
            freeze_more(r);
          });
    }
    if (r->in_flight == 0 && r->next == r->todo.size()) {
      r->next = r->todo.size() + 1;  // done once
      r->done(r->frozen, std::move(r->failed));
    }
  }

  // Soft quit: every user freezes (cause quit); answers how many did and who
  // did not. A user who does not answer in time (a freeze waiting behind a
  // long deferred answer) counts as not saved: the node's exit code says so.
  // The last good states of users left down are written too.
  caf::result<std::uint64_t, std::vector<std::string>> quit() {
    auto promise = self->make_response_promise<std::uint64_t, std::vector<std::string>>();
    auto budget = spec.ctx->recipe.node.shutdown_freeze_seconds * 0.9;
    auto saved = std::make_shared<std::uint64_t>(0);
    auto not_saved = std::make_shared<std::vector<std::string>>();
    auto pending = std::make_shared<int>(2);
    auto one_done = [promise, pending, saved, not_saved]() mutable {
      if (--*pending == 0)
        promise.deliver(*saved, std::move(*not_saved));
    };
    save_restart_states(saved, not_saved, one_done);
    freeze_all(store::parcel_cause::quit, node_context::to_duration(budget),
               [one_done, saved, not_saved](std::uint64_t frozen, std::vector<std::string> failed) mutable {
                 *saved += frozen;
                 not_saved->insert(not_saved->end(), failed.begin(), failed.end());
                 one_done();
               });
    return promise;
  }

  // A user left down (quarantined) still has his last good state
  // here, and only here: the soft quit writes it, as his freeze would have.
  template <class Done>
  void save_restart_states(std::shared_ptr<std::uint64_t> saved, std::shared_ptr<std::vector<std::string>> not_saved,
                           Done done) {
    auto deposit = caf::actor_cast<deposit_handle>(spec.deposit);
    std::vector<std::pair<std::string, store::parcel>> left;
    for (auto& [user, encoded] : restart_from)
      if (!encoded.empty() && !users->count(user)) {
        try {
          left.emplace_back(user, store::decode(encoded));
        } catch (const std::exception& e) {
          spdlog::error("worker {}: the last good state of user {} does not decode: {}", spec.name,
                        registry::redact(user), e.what());
        }
      }
    if (left.empty() || !deposit)
      return done();
    auto pending = std::make_shared<std::size_t>(left.size());
    for (auto& [user, parcel] : left) {
      parcel.cause = store::parcel_cause::quit;
      self->request(deposit, spec.ctx->request_timeout(), put_atom::value, parcel_kind::user, user, std::move(parcel))
        .then(
          [saved, pending, done](std::uint64_t) mutable {
            ++*saved;
            if (--*pending == 0)
              done();
          },
          [this, pending, done, not_saved, user = user](caf::error& err) mutable {
            spdlog::error("worker {}: the last good state of user {} could not be written: {}", spec.name,
                          registry::redact(user), self->system().render(err));
            not_saved->push_back(registry::redact(user));
            if (--*pending == 0)
              done();
          });
    }
  }

  // An operator drains this worker: it takes no new user, freezes all of its
  // users, and stops once all are durable (the group does not replace a
  // worker that stopped normally). A failed freeze keeps it in service.
  caf::result<std::uint64_t, std::uint64_t> drain() {
    auto promise = self->make_response_promise<std::uint64_t, std::uint64_t>();
    draining = true;
    note();
    freeze_all(store::parcel_cause::freeze, freeze_all_budget(),
               [this, promise](std::uint64_t frozen, std::vector<std::string> not_frozen) mutable {
      auto failed = static_cast<std::uint64_t>(not_frozen.size());
      promise.deliver(frozen, failed);
      if (failed == 0) {  // every user is durable (their exits may still be on the way)
        spdlog::info("worker {}: drained ({} user(s) frozen); it stops", spec.name, frozen);
        self->quit();
        return;
      }
      draining = false;
      note();
    });
    return promise;
  }

  // An operator drops a user: his actor stops at once, without freezing; the
  // answer comes once he is gone (his down message), so nothing of his runs after it.
  caf::result<bool> drop(const std::string& user) {
    if (auto r = resting.find(user); r != resting.end()) {  // no actor: gone at once
      resting.erase(r);
      spec.ctx->metrics.users_resting.fetch_sub(1, std::memory_order_relaxed);
      restart_from.erase(user);
      epochs.erase(user);
      if (spec.ctx->census)
        self->send(spec.ctx->census, drop_atom::value, user);
      return true;
    }
    auto i = users->find(user);
    if (i == users->end())
      return make_error(errc::no_such_user, user);
    auto promise = self->make_response_promise<bool>();
    dropping.emplace(i->second.id(), promise);
    self->send_exit(i->second, make_error(errc::dropped));
    users->erase(i);
    return promise;
  }

  void note() {
    if (!spec.ctx->census)
      return;
    census_note n;
    n.kind = static_cast<std::uint8_t>(actor_kind::worker);
    n.name = spec.name;
    n.parent = spec.group;
    n.state = draining ? 1 : 0;
    n.restarts = restarts;
    self->send(spec.ctx->census, note_atom::value, std::move(n));
  }

  actor_probe probe(std::uint64_t query, bool detail) {
    auto p = probe_answer(query, self->mailbox().size(), meter, restarts);
    if (detail) {
      nlohmann::json d{{"hosted", users->size() + resting.size()}, {"resting", resting.size()}, {"draining", draining}};
      if (admission) {
        d["admits"] = admission->admits();
        d["reason"] = admission->admits() ? nlohmann::json() : nlohmann::json(to_string(static_cast<refusal_reason>(
                                                                 refusal_reason_of(admission->reason()))));
        d["retry_after"] = admission->admits() ? 0 : admission->retry_after(until_first_idle_freeze());
        d["cpu_temperature"] = admission->cpu_temperature();
        d["rss_bytes"] = admission->rss_bytes() ? nlohmann::json(*admission->rss_bytes()) : nlohmann::json();
      }
      p.detail = d.dump();
    }
    return p;
  }
};

const char* worker_state::name = "troupe.worker";

worker_handle::behavior_type worker_impl(worker_handle::stateful_pointer<worker_state> self, worker_spec spec) {
  auto& st = self->state;
  st.self = self;
  st.gauge.emplace(spec.ctx->metrics, actor_kind::worker);
  st.settings = spec.ctx->recipe.group(spec.group);
  st.factory = st.settings ? spec.ctx->apps.find(st.settings->user_type) : nullptr;
  st.routes = st.settings ? spec.ctx->apps.routes(st.settings->user_type) : nullptr;
  st.messages = st.settings ? spec.ctx->apps.messages(st.settings->user_type) : nullptr;
  st.spec = std::move(spec);
  if (!st.factory) {
    self->quit(make_error(errc::unavailable, "no user type for group " + st.spec.group));
    return worker_handle::behavior_type::make_empty_behavior();
  }
  self->set_down_handler([=](caf::down_msg& dm) { self->state.on_down(dm); });
  {
    auto& g = *st.settings;
    auto restarts = "its workers went down more than " + std::to_string(g.max_restarts) + " times within " +
                    fmt::format("{}", g.restart_window_seconds) + " s";
    st.gate = std::make_shared<group_gate>(
      st.spec.group, restarts,
      g.recovery_interval_seconds > 0 ? std::string("every worker failed for good (permanent failure)")
                                      : restarts + "; it stays so until the node restarts");
  }
  st.note();
  st.start_admission();
  // Users die with their worker, whatever stops it.
  self->attach_functor([users = st.users] {
    for (auto& [name, h] : *users)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  });
  return {
    [=](attach_atom, attach_order& order) -> caf::result<placement> {
      actor_meter::scope metered{self->state.meter};
      auto promise = self->make_response_promise<placement>();
      self->state.attach(std::move(order), promise, true);
      return promise;
    },
    [=](tell_atom, attach_order& order, user_message& msg) -> caf::result<tell_reply> {
      actor_meter::scope metered{self->state.meter};
      auto promise = self->make_response_promise<tell_reply>();
      self->state.tell(std::move(order), std::move(msg), promise, true);
      return promise;
    },
    [=](release_atom, const std::string& user) {
      // The user retires by himself; forget him so the name can be placed afresh.
      auto& st = self->state;
      st.users->erase(user);
      if (st.resting.erase(user))
        st.spec.ctx->metrics.users_resting.fetch_sub(1, std::memory_order_relaxed);
    },
    [=](freeze_atom, const std::string& user) -> caf::result<bool> {
      auto h = self->state.live(user);  // a resting user is started again to freeze as anybody does
      if (!h)
        return make_error(errc::no_such_user, user);
      return self->delegate(h, freeze_atom::value, static_cast<std::uint8_t>(store::parcel_cause::freeze));
    },
    [=](push_atom, const std::string& user, std::string& path,
        std::string& data) -> caf::result<std::uint32_t, std::uint32_t> {
      auto& st = self->state;
      if (auto r = st.resting.find(user); r != st.resting.end())  // none of his pages has a channel: never woken for it
        return {std::uint32_t{0}, static_cast<std::uint32_t>(std::max<std::size_t>(1, r->second.connections.page_count()))};
      auto i = st.users->find(user);
      if (i == st.users->end())
        return {std::uint32_t{0}, std::uint32_t{1}};
      return self->delegate(i->second, push_atom::value, std::move(path), std::move(data));
    },
    [=](quit_atom) { return self->state.quit(); },
    [=](drain_atom) { return self->state.drain(); },
    [=](drop_atom, const std::string& user) { return self->state.drop(user); },
    [=](probe_atom, std::uint64_t query, bool detail) { return self->state.probe(query, detail); },
    [=](scan_atom) {
      auto& st = self->state;
      std::vector<std::string> hosted;
      std::vector<std::uint64_t> epochs;
      hosted.reserve(st.users->size() + st.resting.size());
      epochs.reserve(st.users->size() + st.resting.size());
      auto add = [&](const registry::short_name& name) {
        hosted.emplace_back(name.view());
        auto e = st.epochs.find(name);
        epochs.push_back(e == st.epochs.end() ? 0 : e->second);
      };
      for (auto& [name, h] : *st.users)
        add(name);
      for (auto& [name, left] : st.resting)
        add(name);
      return caf::make_result(std::move(hosted), std::move(epochs));
    },
    [=](fence_atom) {
      auto& st = self->state;
      std::vector<std::string> resting;
      for (auto& [name, left] : st.resting)
        resting.emplace_back(name.view());
      for (auto& name : resting)  // started now: the worker forgets everybody below
        st.live(name);
      if (st.users->empty())
        return;
      spdlog::warn("worker {}: fenced: {} user(s) freeze and leave; the deposit refuses those placed again elsewhere",
                   st.spec.name, st.users->size());
      st.freeze_all(store::parcel_cause::freeze,
                    node_context::to_duration(st.spec.ctx->recipe.node.shutdown_freeze_seconds * 0.9),
                    [](std::uint64_t, std::vector<std::string>) {}, true);
      st.users->clear();
      st.restart_from.clear();
    },
    [=](tick_atom, std::uint64_t id, std::uint8_t which, std::uint64_t arg) {
      self->state.forward_tick(id, which, arg);
    },
    [=](timer_atom, std::uint64_t id, std::uint8_t which, std::uint64_t arg, std::int64_t delay_ms) {
      self->state.add_timer(id, which, arg, delay_ms);
    },
    [=](timer_atom, std::int64_t at) { self->state.on_timers(at); },
    [=](restart_atom, std::string& user, store::bytes& last_good) {
      self->state.restart_from[std::move(user)] = std::move(last_good);
    },
    [=](rest_atom, const std::string& user, resting_user_ptr& left) { self->state.on_rest(user, left); },
    [=](rest_atom) { self->state.sweep_resting(); },
    [=](degraded_atom, bool degraded, std::uint32_t retry_after) {
      // Its users check the gate per request; attach checks it for newcomers.
      auto& st = self->state;
      if (degraded)
        st.gate->degrade(retry_after);
      else
        st.gate->recover();
    },
    [=](admission_atom) { self->state.beat(); },
    [=](heartbeat_atom) {
      auto& m = self->state.spec.ctx->metrics;
      worker_vitals v;
      v.users = self->state.users->size() + self->state.resting.size();
      v.user_restarts = m.user_restarts.load(std::memory_order_relaxed);
      v.user_freezes = m.user_freezes.load(std::memory_order_relaxed);
      v.user_wakes = m.user_wakes.load(std::memory_order_relaxed);
      v.handler_failures = m.handler_failures.load(std::memory_order_relaxed);
      return v;
    },
  };
}

}  // namespace

worker_handle spawn_worker(caf::local_actor& group, worker_spec spec) {
  if (!spec.parent)
    spec.parent = caf::actor_cast<caf::actor>(group.address());
  return group.spawn<caf::linked>(worker_impl, std::move(spec));
}

worker_handle spawn_worker(caf::actor_system& sys, worker_spec spec) {
  return sys.spawn(worker_impl, std::move(spec));
}

}  // namespace troupe
