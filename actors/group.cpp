#include "actors/group.hpp"

#include "actors/commander.hpp"
#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace troupe {

namespace {

struct group_state {
  static const char* name;
  std::optional<actor_gauge> gauge;
  node_context_ptr ctx;
  config::group_settings settings;
  caf::actor commander;
  caf::actor deposit;
  std::vector<worker_handle> workers;
  std::uint32_t replaced = 0;  // workers replaced after a crash

  void note(group_handle::stateful_pointer<group_state> self) {
    if (!ctx->census)
      return;
    census_note n;
    n.kind = static_cast<std::uint8_t>(actor_kind::group);
    n.name = settings.name;
    n.parent = "node";
    n.info = settings.user_type;
    n.restarts = replaced;
    self->send(ctx->census, note_atom::value, std::move(n));
  }

  worker_handle start_worker(caf::local_actor& self, std::size_t slot) {
    auto w = spawn_worker(self, worker_spec{settings.name + "-w" + std::to_string(slot + 1), settings.name,
                                            commander, deposit, ctx});
    set_state(w.address(), worker_state::open);
    return w;
  }

  // troupe_workers{group,state}: each worker counted in the state it is in now (nullopt: gone).
  std::unordered_map<caf::actor_addr, worker_state> states;
  void set_state(const caf::actor_addr& worker, std::optional<worker_state> now) {
    auto* counters = ctx->metrics.group(settings.name);
    auto i = states.find(worker);
    if (i != states.end()) {
      if (counters)
        counters->workers[static_cast<std::size_t>(i->second)].fetch_sub(1, std::memory_order_relaxed);
      if (!now)
        states.erase(i);
    }
    if (!now)
      return;
    states[worker] = *now;
    if (counters)
      counters->workers[static_cast<std::size_t>(*now)].fetch_add(1, std::memory_order_relaxed);
  }

  std::size_t started() const { return states.size(); }  // the workers running (not drained, not retired)

  void tell_commander(group_handle::stateful_pointer<group_state> self) {
    self->send(caf::actor_cast<commander_handle>(commander), workers_atom::value, settings.name, ctx->node_name,
               workers);
  }
};

const char* group_state::name = "troupe.group";

group_handle::behavior_type group_impl(group_handle::stateful_pointer<group_state> self, node_context_ptr ctx,
                                      config::group_settings settings, caf::actor commander,
                                      caf::actor deposit) {
  auto& st = self->state;
  st.gauge.emplace(ctx->metrics, actor_kind::group);
  st.ctx = std::move(ctx);
  st.settings = std::move(settings);
  st.commander = std::move(commander);
  st.deposit = std::move(deposit);
  st.note(self);
  for (int i = 0; i < st.settings.workers; ++i)
    st.workers.push_back(st.start_worker(*self, static_cast<std::size_t>(i)));
  // A worker that went down abnormally is replaced in its slot (its users went
  // with it and are spawned again on their next request); any other exit
  // (shutdown) takes the group and, through the links, everything below it.
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& st = self->state;
    for (std::size_t slot = 0; slot < st.workers.size(); ++slot) {
      if (st.workers[slot].address() != em.source)
        continue;
      if (!em.reason) {  // drained: it stopped for good
        st.set_state(em.source, std::nullopt);
        return;
      }
      spdlog::error("group {}: worker {} went down ({}); replacing it", st.settings.name, slot + 1,
                    self->system().render(em.reason));
      st.set_state(em.source, std::nullopt);
      st.workers[slot] = st.start_worker(*self, slot);
      ++st.replaced;
      st.note(self);
      st.tell_commander(self);
      return;
    }
    if (em.reason)
      self->quit(em.reason);
  });
  return {
    [=](workers_atom) { return self->state.workers; },
    [=](fence_atom) {
      for (auto& w : self->state.workers)
        self->send(w, fence_atom::value);
    },
    [=](admission_atom, admission_report& report) {
      auto& st = self->state;
      if (st.states.count(report.worker))
        st.set_state(report.worker, report.admits ? worker_state::open : worker_state::closed);
      self->send(caf::actor_cast<commander_handle>(st.commander), admission_atom::value, std::move(report));
    },
    // One more worker (an arrival no worker admits), in the first free
    // position, registered with the commander before the answer (it places
    // the waiting arrivals on it when the answer comes).
    [=](grow_atom) -> caf::result<worker_handle> {
      auto& st = self->state;
      auto most = static_cast<std::size_t>(st.settings.max_workers());
      if (st.started() >= most)
        return make_error(errc::refused, "group " + st.settings.name + " is at worker_max_number (" +
                                           std::to_string(most) + ")");
      auto slot = static_cast<std::size_t>(std::find(st.workers.begin(), st.workers.end(), worker_handle{}) -
                                           st.workers.begin());
      if (slot == st.workers.size())
        st.workers.emplace_back();
      st.workers[slot] = st.start_worker(*self, slot);
      spdlog::info("group {}: worker {} started for arrivals no worker admits ({} of at most {})", st.settings.name,
                   slot + 1, st.started(), most);
      st.tell_commander(self);
      return st.workers[slot];
    },
    // A worker the commander no longer places anybody on (no users, the
    // group quiet): it drains (nothing to freeze) and stops normally, which
    // is no restart; its position is free for the next growth.
    [=](retire_atom, const worker_handle& worker) {
      auto& st = self->state;
      auto i = std::find(st.workers.begin(), st.workers.end(), worker);
      if (!worker || i == st.workers.end())
        return;
      *i = worker_handle{};
      st.set_state(worker.address(), std::nullopt);
      self->request(worker, st.ctx->request_timeout(), drain_atom::value)
        .then([](std::uint64_t, std::uint64_t) {},
              [self, name = st.settings.name](caf::error& err) {
                spdlog::warn("group {}: a retired worker did not drain: {}", name, self->system().render(err));
              });
    },
  };
}

}  // namespace

group_handle spawn_group(caf::actor_system& sys, node_context_ptr ctx, config::group_settings settings,
                        caf::actor commander, caf::actor deposit) {
  return sys.spawn(group_impl, std::move(ctx), std::move(settings), std::move(commander), std::move(deposit));
}

}  // namespace troupe
