// The actor-tree fixture (tree_test.cpp, deferred_test.cpp): a node's actors on a
// real actor system (deposit, global store, commander, one group of two workers
// serving counter_app), driven through the serializable request/response
// interface: no front, no mocks.
#pragma once

#include "../support/eventually.hpp"
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/global_store.hpp"
#include "actors/group.hpp"
#include "config/recipe.hpp"
#include "counter_app.hpp"
#include "node_system.hpp"
#include "store/deposit.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace troupe::test {

using namespace std::chrono_literals;

class tree : public ::testing::Test, protected node_system {
protected:
  /// Makes the deposit's backend in a directory (default: a filesystem deposit).
  using backend_factory = std::function<std::shared_ptr<store::deposit>(const std::string& dir)>;

  explicit tree(const backend_factory& make_backend = {}) {
    ctx->recipe().groups.front().user_type = "counter";
    ctx->recipe().groups.front().workers = 2;
    ctx->recipe().limits.user_queue_length = 2;
    ctx->apps.add<counter_app>("counter");
    dir = std::filesystem::temp_directory_path() / ("troupe-tree-" + ctx->cids->mint());
    backend = make_backend ? make_backend(dir.string()) : store::make_filesystem_deposit(dir.string());
    deposit = spawn_deposit(*sys, backend);
    global_store = spawn_global_store(*sys, ctx, deposit);
    commander = spawn_commander(*sys, ctx, deposit, global_store);
    group = spawn_group(*sys, ctx, ctx->recipe().groups.front(), commander, global_store, deposit);
    (*self)->request(group, 5s, workers_atom::value).receive(
      [&](std::vector<worker_handle>& ws) {
        caf::send_as(group, commander, workers_atom::value, std::string("default"), ctx->node_name, std::move(ws));
      },
      [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  }

  ~tree() override {
    stop_node(group, commander, global_store, deposit);
    std::filesystem::remove_all(dir);
  }

  placement resolve(const std::string& cid) {
    placement out;
    (*self)->request(commander, 5s, resolve_atom::value, cid, false).receive(
      [&](placement& p) { out = std::move(p); }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return out;
  }

  http_response call(const user_handle& target, const std::string& cid, const std::string& method,
                     const std::string& path, const std::string& body = "") {
    http_response out;
    out.status = 0;
    http_request req{method, path, "", body, cid, "", {}, 0, {}, {}, {}, 0, {}};
    (*self)
      ->request(target, 5s, http_atom::value, std::move(req))
      .receive([&](http_response& r) { out = std::move(r); },
               [&](caf::error& e) { out.body = sys->render(e); });
    return out;
  }

  // Resolves and calls, like the front: once more when the target moved or died.
  http_response serve(const std::string& cid, const std::string& method, const std::string& path,
                      const std::string& body = "") {
    auto r = call(resolve(cid).actor, cid, method, path, body);
    if (r.status == 0 || r.route == route_note::not_here)
      r = call(resolve(cid).actor, cid, method, path, body);
    return r;
  }

  // Serves a login or logout: the connection's id rotates, `cid` becomes the new one.
  http_response serve_moving(std::string& cid, const std::string& path, const std::string& body = "") {
    auto r = serve(cid, "POST", path, body);
    if (!r.set_cid.empty())
      cid = r.set_cid;
    return r;
  }

  static std::int64_t n_of(const http_response& r) { return nlohmann::json::parse(r.body).at("n"); }

  std::filesystem::path dir;
  std::shared_ptr<store::deposit> backend;
  deposit_handle deposit;
  global_store_handle global_store;
  commander_handle commander;
  group_handle group;
};

}  // namespace troupe::test
