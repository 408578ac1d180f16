#include "actors/connection.hpp"

#include "registry/clocks.hpp"

#include <caf/all.hpp>

#include <optional>
#include <set>

namespace troupe {

namespace {

struct connection_state {
  static const char* name;
  std::optional<actor_gauge> gauge;
  std::string cid;
  registry::clocks clocks;
  std::set<std::string> pages_seen;
};

const char* connection_state::name = "troupe.connection";

connection_handle::behavior_type connection_impl(connection_handle::stateful_pointer<connection_state> self,
                                                node_context_ptr ctx, std::string cid) {
  self->state.gauge.emplace(ctx->metrics, actor_kind::connection);
  self->state.cid = std::move(cid);
  return {
    [=](stamp_atom, const std::string& page, std::int64_t unix_ms) {
      auto& st = self->state;
      st.clocks.stamp_rpc(registry::wall_clock::time_point{std::chrono::milliseconds(unix_ms)});
      st.pages_seen.insert(page);
    },
  };
}

}  // namespace

connection_handle spawn_connection(caf::local_actor& user, node_context_ptr ctx, std::string cid) {
  return user.spawn<caf::linked>(connection_impl, std::move(ctx), std::move(cid));
}

}  // namespace troupe
