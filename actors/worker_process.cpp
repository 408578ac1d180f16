#include "actors/worker_process.hpp"

#include "actors/worker_slot.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace troupe {

namespace {

using namespace worker_slots;

slot_actor::behavior_type slot_impl(slot_actor::stateful_pointer<slot_state> self,
                                               worker_spec spec, config::group_settings settings, group_handle group) {
  auto& st = self->state;
  st.self = self;
  st.gauge.emplace(spec.ctx->metrics, actor_kind::worker);
  st.counters = spec.ctx->metrics.group(spec.group);
  st.spec = std::move(spec);
  st.settings = std::move(settings);
  st.group = std::move(group);
  st.heartbeat_every = heartbeat_interval(st.settings);
  st.start_timeout = std::max<steady::duration>(
    min_start_timeout,
    std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(2 * st.settings.stuck_timeout_seconds)));
  auto tick_every = std::min<caf::timespan>(st.heartbeat_every, std::chrono::milliseconds(100));
  self->set_down_handler([=](caf::down_msg& dm) { self->state.on_down(dm); });
  self->set_exit_handler([=](caf::exit_msg& em) {
    if (em.reason)
      self->state.stop(em.reason);
  });
  // Never an orphan: a process still running when the slot ends is killed and
  // reaped; the gate no longer expects its child (nor holds the slot for it).
  self->attach_functor([process = st.process, token = st.token, tokens = st.spec.ctx->worker_tokens,
                        piped = st.piped, pipes = st.spec.ctx->worker_pipes] {
    if (!token->empty())
      tokens->drop(*token);
    if (*piped && pipes)
      pipes->withdraw(*piped);
    if (*process > 0) {
      ::kill(*process, SIGKILL);
      ::waitpid(*process, nullptr, 0);  // at once after SIGKILL
      *process = -1;
    }
  });
  st.start_child();
  self->send(self, tick_atom::value, slot_timer::tick);
  auto hold = st.spec.ctx->hold_timeout();
  auto requests = st.spec.ctx->request_timeout();
  auto tell_budget = node_context::to_duration(st.spec.ctx->limits().request_timeout_seconds +
                                               st.spec.ctx->limits().hold_seconds);
  auto freeze_budget = node_context::to_duration(st.spec.ctx->node().shutdown_freeze_seconds + 1);
  auto drain_budget = node_context::to_duration(st.spec.ctx->node().shutdown_freeze_seconds + 1 +
                                                st.spec.ctx->limits().request_timeout_seconds);
  return {
    [=](attach_atom a, attach_order& order) {
      return self->state.template relay<placement>(true, hold, a, std::move(order));
    },
    // A message for one of its users: not sent again to a replacement (its handler may have run).
    [=](tell_atom a, attach_order& order, user_message& msg) {
      return self->state.template relay<tell_reply>(false, tell_budget, a, std::move(order), std::move(msg));
    },
    [=](release_atom a, std::string& user) { self->state.tell(a, std::move(user)); },
    [=](freeze_atom a, std::string& user) {
      return self->state.template relay<bool>(false, requests, a, std::move(user));
    },
    [=](push_atom a, std::string& user, std::string& path,
        std::string& data) -> caf::result<std::uint32_t, std::uint32_t> {
      if (self->state.phase != slot_phase::open)  // no child up: no user lives in it
        return caf::make_result(std::uint32_t{0}, std::uint32_t{1});
      return self->state.template relay<std::uint32_t, std::uint32_t>(false, requests, a, std::move(user),
                                                                       std::move(path), std::move(data));
    },
    [=](quit_atom a) -> caf::result<std::uint64_t, std::vector<std::string>> {
      if (self->state.phase != slot_phase::open)  // no child up: no user lives in it
        return caf::make_result(std::uint64_t{0}, std::vector<std::string>{});
      return self->state.template relay<std::uint64_t, std::vector<std::string>>(false, freeze_budget, a);
    },
    [=](drain_atom a) {
      self->state.draining = true;
      return self->state.template relay<std::uint64_t, std::uint64_t>(false, drain_budget, a);
    },
    [=](drop_atom a, std::string& user) {
      return self->state.template relay<bool>(false, requests, a, std::move(user));
    },
    [=](probe_atom a, std::uint64_t query, bool detail) -> caf::result<actor_probe> {
      auto& st = self->state;
      if (st.phase != slot_phase::open) {
        actor_probe p;
        p.query = query;
        p.mailbox = self->mailbox().size();
        p.restarts = st.restarts;
        return p;
      }
      return st.template relay<actor_probe>(false, requests, a, query, detail);
    },
    [=](scan_atom a) -> caf::result<std::vector<std::string>, std::vector<std::uint64_t>> {
      if (self->state.phase != slot_phase::open)
        return caf::make_result(std::vector<std::string>{}, std::vector<std::uint64_t>{});
      return self->state.template relay<std::vector<std::string>, std::vector<std::uint64_t>>(false, requests, a);
    },
    [=](fence_atom a) { self->state.tell(a); },
    [=](tick_atom, slot_timer which) {
      auto& st = self->state;
      if (which == slot_timer::restart) {
        if (st.restart_due && !st.stopping && st.pid <= 0 && st.phase != slot_phase::parked) {
          st.restart_due = false;
          st.start_child();
        }
        return;
      }
      self->state.on_tick();
      self->delayed_send(self, tick_every, tick_atom::value, slot_timer::tick);
    },
    // A slot hosts no users (its child's users time themselves in the child): nothing to keep.
    [=](timer_atom, std::uint64_t, std::uint8_t, std::uint64_t, std::int64_t) {},
    [=](restart_atom a, std::string& user, store::bytes& last_good) {
      self->state.tell(a, std::move(user), std::move(last_good));
    },
    // A child's users rest with their own worker, in the child: never here.
    [=](rest_atom, const std::string&, resting_user_ptr&) {},
    [=](tune_atom a, group_tuning& t) {
      self->state.tuning = t;
      self->state.tell(a, t);
    },
    [=](degraded_atom a, bool on, std::uint32_t retry_after) {
      self->state.degraded = std::make_pair(on, retry_after);
      self->state.tell(a, on, retry_after);
    },
    [=](heartbeat_atom) { return self->state.vitals; },
    [=](hello_atom) { return self->state.hello(); },
    [=](ready_atom, std::uint64_t gen, worker_handle& w) { self->state.on_ready(gen, std::move(w)); },
    [=](admission_atom a, admission_report& report) {
      if (!self->state.child || report.worker != self->state.child.address())
        return;  // from a child given up on
      report.worker = self->address();
      if (self->state.phase == slot_phase::open)
        self->state.show(report.admits ? worker_state::open : worker_state::closed);
      self->send(self->state.group, a, std::move(report));
    },
    [=](replace_atom, const caf::actor_addr& from, std::uint64_t rss) {
      auto& st = self->state;
      if (!st.child || from != st.child.address() || st.pid <= 0)
        return;
      spdlog::warn("worker {}: {} MB resident past restart_occupancy_max_percent, its users frozen: replacing its process",
                   st.spec.name, rss >> 20);
      st.replacing = true;
      st.kill_child("replaced for its memory occupancy");
    },
  };
}

}  // namespace

caf::timespan heartbeat_interval(const config::group_settings& settings) {
  auto quarter = std::chrono::duration<double>(settings.stuck_timeout_seconds / 4);
  return std::min<caf::timespan>(std::chrono::seconds(1),
                                 std::max<caf::timespan>(std::chrono::milliseconds(10),
                                                         std::chrono::duration_cast<caf::timespan>(quarter)));
}

worker_handle spawn_worker_process(caf::local_actor& group, worker_spec spec, const config::group_settings& settings) {
  auto g = caf::actor_cast<group_handle>(&group);
  auto slot = group.spawn<caf::linked>(slot_impl, std::move(spec), settings, std::move(g));
  return caf::actor_cast<worker_handle>(slot);
}

}  // namespace troupe
