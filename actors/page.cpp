#include "actors/page.hpp"

#include "registry/clocks.hpp"

#include <caf/all.hpp>

#include <optional>

namespace troupe {

namespace {

struct page_state {
  static const char* name;
  std::optional<actor_gauge> gauge;
  std::string page;
  connection_handle connection;
  registry::clocks clocks;
};

const char* page_state::name = "troupe.page";

page_handle::behavior_type page_impl(page_handle::stateful_pointer<page_state> self, node_context_ptr ctx,
                                    connection_handle conn, std::string page) {
  auto& st = self->state;
  st.gauge.emplace(ctx->metrics, actor_kind::page);
  st.connection = std::move(conn);
  st.page = std::move(page);
  return {
    [=](stamp_atom, std::int64_t unix_ms) {
      auto& st = self->state;
      st.clocks.stamp_rpc(registry::wall_clock::time_point{std::chrono::milliseconds(unix_ms)});
      self->send(st.connection, stamp_atom::value, st.page, unix_ms);  // the stamp climbs
    },
  };
}

}  // namespace

page_handle spawn_page(caf::local_actor& user, node_context_ptr ctx, connection_handle conn, std::string page) {
  return user.spawn<caf::linked>(page_impl, std::move(ctx), std::move(conn), std::move(page));
}

}  // namespace troupe
