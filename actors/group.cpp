#include "actors/group.hpp"

#include "actors/commander.hpp"
#include "actors/errors.hpp"
#include "actors/worker_process.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <optional>

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
    worker_spec spec{settings.name + "-w" + std::to_string(slot + 1), settings.name, commander, deposit, ctx};
    if (settings.process_isolation())
      return spawn_worker_process(self, std::move(spec), settings);
    return spawn_worker(self, std::move(spec));
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
      if (!em.reason)
        return;
      spdlog::error("group {}: worker {} went down ({}); replacing it", st.settings.name, slot + 1,
                    self->system().render(em.reason));
      st.workers[slot] = st.start_worker(*self, slot);
      ++st.replaced;
      st.note(self);
      self->send(caf::actor_cast<commander_handle>(st.commander), workers_atom::value, st.settings.name,
                 st.ctx->node_name, st.workers);
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
      self->send(caf::actor_cast<commander_handle>(self->state.commander), admission_atom::value, std::move(report));
    },
    [=](grow_atom) -> caf::result<worker_handle> {
      return make_error(errc::refused, "group " + self->state.settings.name + " does not grow yet");  // issue 13: A
    },
    [=](retire_atom, const worker_handle&) {
      // issue 13: A
    },
    [=](restart_atom, const std::string& worker, std::int32_t exit_code) {
      // A worker process's exit: the permanent failure code parks its slot.
      auto& st = self->state;
      bool permanent = st.settings.permanent_failure_exitcode != 0 && exit_code == st.settings.permanent_failure_exitcode;
      if (permanent)
        spdlog::error("group {}: worker {} exited with the permanent failure code {}; its slot is parked",
                      st.settings.name, worker, exit_code);
      return !permanent;
    },
  };
}

}  // namespace

group_handle spawn_group(caf::actor_system& sys, node_context_ptr ctx, config::group_settings settings,
                        caf::actor commander, caf::actor deposit) {
  return sys.spawn(group_impl, std::move(ctx), std::move(settings), std::move(commander), std::move(deposit));
}

}  // namespace troupe
