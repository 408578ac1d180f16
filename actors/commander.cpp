#include "actors/commander.hpp"

#include "actors/errors.hpp"
#include "registry/ids.hpp"
#include "registry/placement_index.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <optional>

namespace troupe {

namespace {

struct commander_state {
  static const char* name;
  std::optional<actor_gauge> gauge;
  node_context_ptr ctx;
  std::string group;                       // the group new users are placed in (the first)
  std::vector<worker_handle> workers;       // its workers, by slot
  std::optional<registry::placement_index> index;

  // Places `user` (unless he is placed) and asks his worker to give him `cid`.
  caf::delegated<placement> attach(commander_handle::stateful_pointer<commander_state> self,
                                   const std::string& user, const std::string& cid, store::bytes parcel) {
    auto slot = index->place(user);
    return self->delegate(workers[slot], attach_atom::value, attach_order{user, cid, std::move(parcel)});
  }

  // A guest whose connection leaves him is forgotten here and by his worker
  // (he retires by himself once his reply is out).
  void release_guest(commander_handle::stateful_pointer<commander_state> self, const std::string& user) {
    if (!registry::is_guest(user))
      return;
    if (auto slot = index->worker_of(user)) {
      self->send(workers[*slot], release_atom::value, user);
      index->remove(user);
    }
  }
};

const char* commander_state::name = "troupe.commander";

commander_handle::behavior_type commander_impl(commander_handle::stateful_pointer<commander_state> self,
                                              node_context_ptr ctx) {
  auto& st = self->state;
  st.gauge.emplace(ctx->metrics, actor_kind::commander);
  st.ctx = std::move(ctx);
  st.group = st.ctx->recipe.groups.front().name;
  auto unavailable = [] { return make_error(errc::unavailable, "no workers registered yet"); };
  return {
    [=](resolve_atom, const std::string& cid) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.index)
        return unavailable();
      if (!registry::valid_cid(cid))
        return make_error(errc::bad_request, "malformed connection id");
      const std::string* user = st.index->user_of(cid);
      std::string guest;
      if (!user) {
        guest = registry::guest_name(cid);
        st.index->bind(cid, guest);
        user = &guest;
      }
      return st.attach(self, *user, cid, {});
    },
    [=](login_atom, login_request& req) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.index)
        return unavailable();
      if (!registry::valid_user_name(req.to_user))
        return make_error(errc::bad_request, "invalid user name");
      st.index->bind(req.cid, req.to_user);
      st.release_guest(self, req.from_user);
      bool live = st.index->worker_of(req.to_user).has_value();
      if (live && !req.parcel.empty()) {
        spdlog::info("login of connection {} into {}: he is live, his resident state wins; "
                     "the guest's store ({} bytes) is dropped",
                     registry::redact(req.cid), req.to_user, req.parcel.size());
        req.parcel.clear();
      }
      return st.attach(self, req.to_user, req.cid, std::move(req.parcel));
    },
    [=](logout_atom, const std::string& cid, const std::string& from_user) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.index)
        return unavailable();
      auto fresh = registry::guest_name(cid);
      st.release_guest(self, from_user);
      st.index->bind(cid, fresh);
      return st.attach(self, fresh, cid, {});
    },
    [=](workers_atom, const std::string& group, std::vector<worker_handle>& workers) {
      auto& st = self->state;
      if (group != st.group || workers.empty())
        return;
      if (!st.index || st.index->loads().size() != workers.size())
        st.index.emplace(workers.size());
      st.workers = std::move(workers);
    },
  };
}

}  // namespace

commander_handle spawn_commander(caf::actor_system& sys, node_context_ptr ctx) {
  return sys.spawn(commander_impl, std::move(ctx));
}

}  // namespace troupe
