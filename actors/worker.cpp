// The worker actor: the glue between CAF and worker_core (actors/worker_core.hpp),
// which decides. Here: the behaviour, the core's effects (spawning, stopping
// and freezing user actors, the census), attach and tell, its users' timers
// and its resting users. The soft quit, drain, drop and fence are in
// worker_operators.cpp, its admission beat in worker_admission.cpp.
#include "actors/worker.hpp"

#include "actors/worker_pipes.hpp"

#include "actors/group.hpp"
#include "actors/worker_actor_state.hpp"
#include "config/group_settings.hpp"
#include "registry/ids.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace troupe {

const char* worker_actor_state::name = "troupe.worker";

namespace {

using steady = std::chrono::steady_clock;

// The group's settings are read live (an operator may change them): the
// core is given them again before each decision that uses them.
worker_policy policy_of(const config::group_settings& g) {
  worker_policy p;
  p.max_user_restarts = g.max_user_restarts;
  p.restart_window_seconds = g.restart_window_seconds;
  return p;
}

}  // namespace

worker_actor_state::~worker_actor_state() {
  if (!resting.empty() && spec.ctx) {  // what they left goes with the worker, as a live user's state would
    spec.ctx->metrics.users_resting.fetch_sub(static_cast<std::int64_t>(resting.size()), std::memory_order_relaxed);
    if (spec.ctx->census)
      for (auto& [name, left] : resting)
        caf::anon_send(spec.ctx->census, drop_atom::value, std::string(name.view()));
  }
}

double worker_actor_state::idle_freeze_minutes() const {
  return tuning ? tuning->user_idle_freeze_minutes : settings->user_idle_freeze_minutes;
}

double worker_actor_state::guest_idle_seconds() const {
  return tuning ? tuning->guest_idle_seconds : settings->guest_idle_seconds;
}

int worker_actor_state::max_users() const { return tuning ? tuning->worker_max_users : settings->worker_max_users; }

// -- the core's effects ------------------------------------------------------------------------

std::uint64_t worker_actor_state::spawn_user(const std::string& user, user_launch how) {
  resting_user_ptr resumed;
  if (how.resume)
    if (auto r = resting.find(user); r != resting.end()) {  // what he left when he rested is all he is
      resumed = std::make_shared<resting_user>(std::move(r->second));
      resting.erase(r);
      spec.ctx->metrics.users_resting.fetch_sub(1, std::memory_order_relaxed);
      spec.ctx->metrics.user_resumes.fetch_add(1, std::memory_order_relaxed);
    }
  user_spec us;
  us.user = user;
  us.worker = spec.name;
  us.parcel = std::move(how.parcel);
  us.wake = how.wake;
  us.group = spec.group;
  us.commander = spec.commander;
  us.global_store = spec.global_store;
  us.supervisor = caf::actor_cast<user_supervisor>(self);
  us.deposit = spec.deposit;
  us.factory = factory;
  us.routes = routes;
  us.messages = messages;
  us.ctx = spec.ctx;
  us.tuning = tuning;
  us.owner_epoch = how.owner_epoch;
  us.gate = gate;
  us.resumed = std::move(resumed);
  us.channels = std::exchange(next_start_channels, {});
  us.restarts = how.restarts;
  std::shared_ptr<user_busy> b;
  if (admission) {
    b = std::make_shared<user_busy>();
    b->last_active_ns.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch()).count(),
      std::memory_order_relaxed);
    b->worker_busy_ns = busy_total;
    us.busy = b;
  }
  auto h = troupe::spawn_user(*self, std::move(us));
  if (b)
    busy[h.id()] = std::move(b);
  (*actors)[h.id()] = h;
  return h.id();
}

void worker_actor_state::stop_user(std::uint64_t id) {
  if (auto h = handle(id))
    self->send_exit(h, make_error(errc::dropped));
}

void worker_actor_state::freeze_user(std::uint64_t run, const std::string& user, std::uint64_t id,
                                     freeze_purpose why, clock::time_point deadline) {
  auto cause = why == freeze_purpose::quit ? store::parcel_cause::quit : store::parcel_cause::freeze;
  auto [out, first] = freezes_out.try_emplace(run);
  if (first) {  // the run's one timer (again after its deadline, for what its answers start then)
    auto left = std::max(std::chrono::milliseconds(1),
                         std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()));
    self->delayed_send(self, left, freeze_deadline_atom::value, run);
  }
  out->second.emplace(id, user);
  // No timeout of its own: freeze_deadline bounds it (see freezes_out).
  self->request(handle(id), caf::infinite, freeze_atom::value, static_cast<std::uint8_t>(cause))
    .then(
      [this, run, id](bool) {
        if (freeze_answered(run, id))
          core->user_frozen(run);
      },
      [this, run, user, id](caf::error& err) {
        if (!freeze_answered(run, id))
          return;
        bool stale = is(err, errc::stale_owner);
        if (!stale)
          spdlog::error("worker {}: user {} could not be frozen: {}", spec.name, registry::redact(user),
                        self->system().render(err));
        core->user_not_frozen(run, user, id, stale);
      });
}

bool worker_actor_state::freeze_answered(std::uint64_t run, std::uint64_t id) {
  auto out = freezes_out.find(run);
  return out != freezes_out.end() && out->second.erase(id) == 1;
}

void worker_actor_state::freeze_deadline(std::uint64_t run) {
  auto out = freezes_out.find(run);
  if (out == freezes_out.end() || out->second.empty())
    return;
  auto late = std::move(out->second);
  freezes_out.erase(out);
  spdlog::error("worker {}: {} user(s) did not freeze before the deadline (e.g. {})", spec.name, late.size(),
                registry::redact(late.begin()->second));
  for (auto& [id, user] : late)
    core->user_not_frozen(run, user, id, false);
}

void worker_actor_state::freeze_done(std::uint64_t run, freeze_purpose why, std::uint64_t,
                                     const std::vector<std::string>& failed) {
  freezes_out.erase(run);
  if (why == freeze_purpose::replace && !failed.empty())
    spdlog::error("worker {}: {} user(s) could not be frozen; it stays in service", spec.name, failed.size());
}

void worker_actor_state::drop_done(std::uint64_t id) {
  if (auto d = dropping.find(id); d != dropping.end()) {
    d->second.deliver(true);
    dropping.erase(d);
  }
}

void worker_actor_state::redo_after_down(std::uint64_t id) {
  if (auto w = after_down.find(id); w != after_down.end()) {
    auto waiting = std::move(w->second);
    after_down.erase(w);
    for (auto& redo : waiting)
      redo();
  }
}

void worker_actor_state::show(worker_phase, std::uint32_t) { note(); }

void worker_actor_state::stop_worker(std::uint64_t frozen) {
  spdlog::info("worker {}: drained ({} user(s) frozen); it stops", spec.name, frozen);
  self->quit();
}

void worker_actor_state::ask_replacement(std::uint64_t frozen, std::uint64_t rss_bytes) {
  spdlog::info("worker {}: {} user(s) frozen; replacement asked", spec.name, frozen);
  if (spec.parent)
    self->send(spec.parent, replace_atom::value, self->address(), rss_bytes);
}

// -- its users ---------------------------------------------------------------------------------

user_handle worker_actor_state::handle(std::uint64_t id) const {
  if (auto a = actors->find(id); a != actors->end())
    return a->second;
  if (auto f = fenced.find(id); f != fenced.end())
    return f->second;
  return {};
}

void worker_actor_state::count_refusal(refusal_reason why) {
  spec.ctx->metrics.admission_rejections[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
}

// Asks the core to host `order.user`, starting him if need be (attach and tell).
hosting_answer worker_actor_state::host(const attach_order& order) {
  core->set_policy(policy_of(*settings));
  bool newcomer = !core->hosts(order.user);
  if (newcomer)  // he binds his pages' channels again (a resumed user has none)
    next_start_channels = order.channels;
  auto a = core->host(order.user, gate->retry_after(),
                      user_launch{newcomer ? order.parcel : store::bytes{}, order.wake, false, order.owner_epoch, 0},
                      steady::now());
  next_start_channels.clear();
  return a;
}

// Gives `order.cid` to the user (started if need be) and answers his
// placement. A user found dead here (he crashed and his down message has not
// arrived yet) is placed again once, when it has.
void worker_actor_state::attach(attach_order order, caf::typed_response_promise<placement> promise, bool first_try) {
  if (full_for(order.user, promise))
    return;
  auto a = host(order);
  if (a.verdict == hosting::hosted)
    count_users();
  switch (a.verdict) {
    case hosting::refuse_degraded:
      count_refusal(refusal_reason::degraded);
      promise.deliver(make_refusal(errc::group_degraded, gate->text(a.retry_after), a.retry_after));
      return;
    case hosting::refuse_draining:
      promise.deliver(make_error(errc::unavailable, "worker " + spec.name + " is being drained"));
      return;
    case hosting::refuse_quarantined:
      count_refusal(refusal_reason::quarantined);
      promise.deliver(make_refusal(errc::user_quarantined,
                                   "user " + order.user + " is quarantined: his actor crashed " +
                                     std::to_string(settings->max_user_restarts) + " times within " +
                                     fmt::format("{}", settings->restart_window_seconds) + " s",
                                   a.retry_after));
      return;
    case hosting::hosted: break;
  }
  self->request(handle(a.user_id), spec.ctx->hold_timeout(), adopt_atom::value, order.cid)
    .then([promise, cid = order.cid](placement& p) mutable {
            p.cid = cid;
            promise.deliver(std::move(p));
          },
          [this, id = a.user_id, order, promise, first_try](caf::error& err) mutable {
            if (first_try && err == caf::sec::request_receiver_down) {
              // What he died of (a crash that quarantines him?), or whether he rests, decides.
              if (core->dead(order.user, id) == found_dead::await_down) {
                after_down[id].push_back([this, order = std::move(order), promise]() mutable {
                  attach(std::move(order), std::move(promise), false);
                });
                return;
              }
              return attach(std::move(order), std::move(promise), false);
            }
            promise.deliver(std::move(err));
          });
}

// A message for one of his users (README "Messages between users"): a user
// not live here is started as for attach (woken from his parcel: `order`
// has no connection), then the message is handed to him.
void worker_actor_state::tell(attach_order order, user_message msg, caf::typed_response_promise<tell_reply> promise,
                              bool first_try) {
  using R = tell_outcome::result;
  auto a = host(order);
  switch (a.verdict) {
    case hosting::refuse_degraded:
      count_refusal(refusal_reason::degraded);
      promise.deliver(tell_reply::of(R::unavailable, gate->text(a.retry_after)));
      return;
    case hosting::refuse_draining:  // the commander places him elsewhere
      promise.deliver(tell_reply{tell_reply::not_here, "worker " + spec.name + " is being drained"});
      return;
    case hosting::refuse_quarantined:
      count_refusal(refusal_reason::quarantined);
      promise.deliver(
        tell_reply::of(R::unavailable, "the recipient is quarantined (his actor crashed too often)"));
      return;
    case hosting::hosted: break;
  }
  self->request(handle(a.user_id), spec.ctx->request_timeout(), tell_atom::value, msg)
    .then([promise](tell_reply& r) mutable { promise.deliver(std::move(r)); },
          [this, id = a.user_id, order, msg, promise, first_try](caf::error& err) mutable {
            // Found dead: handed again once, when his down message is here
            // (he crashed, or rested: then he starts from what he left).
            if (first_try && err == caf::sec::request_receiver_down) {
              if (core->dead(order.user, id) == found_dead::await_down) {
                after_down[id].push_back([this, order = std::move(order), msg = std::move(msg), promise]() mutable {
                  tell(std::move(order), std::move(msg), std::move(promise), false);
                });
                return;
              }
              return tell(std::move(order), std::move(msg), std::move(promise), false);
            }
            promise.deliver(tell_reply::of(R::unavailable, "the recipient did not take the message (" +
                                                             self->system().render(err) + ")"));
          });
}

// His down message: the core judges it (restart, quarantine, a drop's
// answer, what waited for it), the actor logs and counts.
void worker_actor_state::on_down(caf::down_msg& dm) {
  auto id = dm.source.id();
  auto user = core->user_of(id);
  if (user.empty())
    return;
  actors->erase(id);
  fenced.erase(id);
  busy.erase(id);
  core->set_policy(policy_of(*settings));
  bool normal = !dm.reason || dm.reason == caf::exit_reason::user_shutdown || is(dm.reason, errc::wake_failed);
  auto now = steady::now();
  auto verdict = core->down(id, normal ? user_end::normal : user_end::crash, now);
  if (verdict == down_verdict::restarted || verdict == down_verdict::quarantined ||
      verdict == down_verdict::superseded)
    spec.ctx->metrics.user_restarts.fetch_add(1, std::memory_order_relaxed);
  if (verdict == down_verdict::quarantined)
    spdlog::error("worker {}: user {} crashed {} times within {} s ({}); quarantined for {} s, not restarted",
                  spec.name, registry::redact(user), core->crashes(user), settings->restart_window_seconds,
                  self->system().render(dm.reason), core->quarantined(user, now).value_or(0));
  else if (verdict == down_verdict::restarted)
    restart_log("worker {}: user {} went down ({}); restarting him", spec.name, registry::redact(user),
                self->system().render(dm.reason));
  compact_timers();
}

// -- resting users --------------------------------------------------------------------------

// A user of ours rests: his actor (the sender) left his state and stops.
void worker_actor_state::on_rest(const std::string& user, resting_user_ptr& left) {
  auto sender = self->current_sender();
  if (!left || !sender || !core->rested(user, sender->id()))
    return;  // not ours any more (dropped, released, fenced): nothing of his is kept
  resting.insert_or_assign(user, std::move(*left));
  spec.ctx->metrics.users_resting.fetch_add(1, std::memory_order_relaxed);
  arm_rest_sweep();
}

void worker_actor_state::forget_resting(const std::string& user) {
  if (resting.erase(user))
    spec.ctx->metrics.users_resting.fetch_sub(1, std::memory_order_relaxed);
}

void worker_actor_state::arm_rest_sweep() {
  if (rest_sweep_armed || resting.empty())
    return;
  rest_sweep_armed = true;
  self->delayed_send(self, std::chrono::seconds(1), rest_atom::value);
}

// A resting user whose idle freeze is due is started again: his own idle
// check freezes him at once (so his freeze is the same as anybody's). At
// most rest_sweep_batch a sweep: a crowd that went idle together freezes
// over a few seconds instead of coming back to life at once.
void worker_actor_state::sweep_resting() {
  static constexpr std::size_t rest_sweep_batch = 1024;
  rest_sweep_armed = false;
  auto now = registry::wall_clock::now();
  auto idle_after = std::chrono::duration<double>(idle_freeze_minutes() * 60);
  auto guest_idle_after = std::min(idle_after, std::chrono::duration<double>(guest_idle_seconds()));
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

// -- its users' timers ---------------------------------------------------------------------------

void worker_actor_state::add_timer(std::uint64_t id, std::uint8_t which, std::uint64_t arg, std::int64_t delay_ms) {
  auto due = steady::now() + std::chrono::milliseconds(std::max<std::int64_t>(0, delay_ms));
  timers.push({due, id, arg, which});
  if (!armed || due < *armed)
    arm(due);
}

void worker_actor_state::arm(steady::time_point due) {
  armed = due;
  auto delay = std::chrono::duration_cast<std::chrono::microseconds>(due - steady::now());
  auto at = static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch()).count());
  self->delayed_send(self, std::max(delay, std::chrono::microseconds(0)), timer_atom::value, at);
}

// A wake-up armed for `at` came (a later one may still be pending: it finds nothing, or what came since).
void worker_actor_state::on_timers(std::int64_t at) {
  if (armed && std::chrono::duration_cast<std::chrono::nanoseconds>(armed->time_since_epoch()).count() == at)
    armed.reset();
  timers.pop_due(steady::now(), [this](const registry::timer_queue::entry& e) { forward_tick(e.id, e.which, e.arg); });
  if (auto next = timers.next_due(); next && (!armed || *next < *armed))
    arm(*next);
}

// A timer of user actor `id` is due: he gets it if he still lives.
void worker_actor_state::forward_tick(std::uint64_t id, std::uint8_t which, std::uint64_t arg) {
  if (core->current(id))  // else he is gone: his timer goes with him
    self->send(handle(id), tick_atom::value, which, arg);
}

// Many users went down (a crash storm, a mass freeze): their timers go now,
// not when due (an idle check may be minutes ahead). Amortized O(1) per down.
void worker_actor_state::compact_timers() {
  if (++downs_since_compaction < 1024 || downs_since_compaction < timers.size() / 2)
    return;
  downs_since_compaction = 0;
  timers.compact([this](std::uint64_t id) { return core->knows(id); });
}

// -- the census ----------------------------------------------------------------------------------

void worker_actor_state::note() {
  if (!spec.ctx->census)
    return;
  census_note n;
  n.kind = static_cast<std::uint8_t>(actor_kind::worker);
  n.name = spec.name;
  n.parent = spec.group;
  n.state = core->takes_newcomers() ? 0 : 1;
  n.restarts = core->restarts();
  self->send(spec.ctx->census, note_atom::value, std::move(n));
}

actor_probe worker_actor_state::probe(std::uint64_t query, bool detail) {
  auto p = probe_answer(query, self->mailbox().size(), meter, core->restarts());
  if (detail) {
    nlohmann::json d{{"hosted", core->live_count() + core->resting_count()},
                     {"resting", core->resting_count()},
                     {"draining", !core->takes_newcomers()}};
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

namespace {

worker_actor::behavior_type worker_impl(worker_actor::stateful_pointer<worker_actor_state> self, worker_spec spec) {
  auto& st = self->state;
  st.self = self;
  st.gauge.emplace(spec.ctx->metrics, actor_kind::worker);
  st.settings = spec.ctx->group(spec.group);
  st.factory = st.settings ? spec.ctx->apps.find(st.settings->user_type) : nullptr;
  st.routes = st.settings ? spec.ctx->apps.routes(st.settings->user_type) : nullptr;
  st.messages = st.settings ? spec.ctx->apps.messages(st.settings->user_type) : nullptr;
  st.spec = std::move(spec);
  if (!st.factory) {
    self->quit(make_error(errc::unavailable, "no user type for group " + st.spec.group));
    return worker_actor::behavior_type::make_empty_behavior();
  }
  st.core.emplace(policy_of(*st.settings), st);
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
  self->attach_functor([actors = st.actors] {
    for (auto& [id, h] : *actors)
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
      if (self->state.core->released(user))
        self->state.forget_resting(user);
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
      auto h = st.handle(st.core->live_id(user));
      if (!h)
        return {std::uint32_t{0}, std::uint32_t{1}};
      return self->delegate(h, push_atom::value, std::move(path), std::move(data));
    },
    [=](quit_atom) { return self->state.quit(); },
    [=](drain_atom) { return self->state.drain(); },
    [=](drop_atom, const std::string& user) { return self->state.drop(user); },
    [=](probe_atom, std::uint64_t query, bool detail) { return self->state.probe(query, detail); },
    [=](scan_atom) {
      auto& core = *self->state.core;
      std::vector<std::string> hosted;
      std::vector<std::uint64_t> epochs;
      hosted.reserve(core.live_count() + core.resting_count());
      epochs.reserve(core.live_count() + core.resting_count());
      core.for_each_hosted([&](const registry::short_name& name, std::uint64_t epoch) {
        hosted.emplace_back(name.view());
        epochs.push_back(epoch);
      });
      return caf::make_result(std::move(hosted), std::move(epochs));
    },
    [=](fence_atom) { self->state.fence(); },
    [=](timer_atom, std::uint64_t id, std::uint8_t which, std::uint64_t arg, std::int64_t delay_ms) {
      self->state.add_timer(id, which, arg, delay_ms);
    },
    [=](timer_atom, std::int64_t at) { self->state.on_timers(at); },
    [=](freeze_deadline_atom, std::uint64_t run) { self->state.freeze_deadline(run); },
    [=](restart_atom, std::string& user, store::bytes& last_good) {
      self->state.core->last_good_state(std::move(user), std::move(last_good));
    },
    [=](rest_atom, const std::string& user, resting_user_ptr& left) { self->state.on_rest(user, left); },
    [=](rest_atom) { self->state.sweep_resting(); },
    [=](degraded_atom, bool degraded, std::uint32_t retry_after) {
      // Its users check the gate per request; attach checks it for newcomers.
      if (degraded)
        self->state.gate->degrade(retry_after);
      else
        self->state.gate->recover();
    },
    [=](admission_atom) { self->state.beat(); },
    [=](tune_atom, group_tuning& t) {
      auto& st = self->state;
      if (st.tuning && t.generation <= st.tuning->generation)
        return;
      st.tuning = t;  // resting users: the next sweep judges them by it
      if (st.admission && st.admission->set_max_users(t.worker_max_users))
        st.report();
      auto idle = node_context::timer_millis(t.user_idle_freeze_minutes * 60).count();
      auto guest = node_context::timer_millis(t.guest_idle_seconds).count();
      for (auto& [id, user] : *st.actors)
        self->send(user, tune_atom::value, std::int64_t{idle}, std::int64_t{guest});
    },
    [=](heartbeat_atom) {
      auto& m = self->state.spec.ctx->metrics;
      worker_vitals v;
      v.users = self->state.core->live_count() + self->state.core->resting_count();
      v.user_restarts = m.user_restarts.load(std::memory_order_relaxed);
      v.user_freezes = m.user_freezes.load(std::memory_order_relaxed);
      v.user_wakes = m.user_wakes.load(std::memory_order_relaxed);
      v.handler_failures = m.handler_failures.load(std::memory_order_relaxed);
      if (auto pipes = self->state.spec.ctx->pipe_service.lock())
        v.handler_running_ms = static_cast<std::uint64_t>(pipes->handler_running().count());
      return v;
    },
  };
}

}  // namespace

worker_handle spawn_worker(caf::local_actor& group, worker_spec spec) {
  if (!spec.parent)
    spec.parent = caf::actor_cast<group_for_workers>(group.address());
  return group.spawn<caf::linked>(worker_impl, std::move(spec));
}

worker_handle spawn_worker(caf::actor_system& sys, worker_spec spec) {
  return sys.spawn(worker_impl, std::move(spec));
}

}  // namespace troupe
