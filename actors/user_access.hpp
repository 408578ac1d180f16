#pragma once
/// \file
/// Internal: the platform's access to the private side of a user actor type
/// (not installed; user actor types never see it).

#include "actors/app.hpp"

namespace troupe {

namespace detail {
/// The platform's access to the private side of a user actor type.
struct user_access {
  static void bind(user_actor_base& app, user_host* host) { app.host_ = host; }
  static user_host* host(user_actor_base& app) { return app.host_; }
  static store::bytes save(const user_actor_base& app) { return app.save_state(); }
  static void load(user_actor_base& app, const store::bytes& data, std::uint32_t version) {
    app.load_state(data, version);
  }
  static void reset(user_actor_base& app) { app.reset_state(); }
  static std::uint32_t version(const user_actor_base& app) { return app.stored_version(); }
  static nlohmann::json project(const user_actor_base& app) { return app.project_state(); }
};
}  // namespace detail

}  // namespace troupe
