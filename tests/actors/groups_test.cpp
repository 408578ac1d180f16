// The actor tree's groups on a real actor system, driven through the serializable
// request/response interface (no front, no mocks): a group degraded by workers
// killed past its restart budget and its recovery; several groups, growth and
// retirement, admission-aware placement (issue 13).
#include "../support/eventually.hpp"
#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/orchestration_log.hpp"
#include "config/recipe.hpp"
#include "counter_app.hpp"
#include "node_system.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

namespace groups_test_file {

using namespace troupe;
using troupe::test::counter_app;
using troupe::test::eventually;
using namespace std::chrono_literals;

namespace {

// Stands in for the commander towards a group: records the admission reports
// and passes the workers on to the real commander.
struct report_log {
  std::mutex mutex;
  std::vector<admission_report> reports;
  std::size_t count(bool admits) {
    std::lock_guard<std::mutex> guard{mutex};
    return static_cast<std::size_t>(std::count_if(reports.begin(), reports.end(), [&](const admission_report& r) {
      return r.admits == admits &&
             (admits || r.reason == static_cast<std::uint8_t>(refusal_reason::degraded));
    }));
  }
};

caf::behavior recording_commander(caf::event_based_actor* self, caf::actor real, std::shared_ptr<report_log> log) {
  return {
    [=](admission_atom, admission_report& r) {
      std::lock_guard<std::mutex> guard{log->mutex};
      log->reports.push_back(r);
    },
    [=](workers_atom, std::string& group, std::string& node, std::vector<worker_handle>& ws) {
      self->send(caf::actor_cast<commander_handle>(real), workers_atom::value, std::move(group), std::move(node),
                 std::move(ws));
    },
  };
}

class supervised_group : public ::testing::Test, protected test::node_system {
protected:
  supervised_group() {
    auto& g = ctx->recipe().groups.front();
    g.user_type = "counter";
    g.workers = 2;
    g.max_restarts = 2;
    g.restart_window_seconds = 60;
    g.recovery_interval_seconds = 3;
    counters = &ctx->metrics.add_group(g.name);
    ctx->apps.add<counter_app>("counter");
    dir = std::filesystem::temp_directory_path() / ("troupe-supervised-" + ctx->cids->mint());
    backend = store::make_filesystem_deposit(dir.string());
    deposit = spawn_deposit(*sys, backend);
    operations = std::make_shared<orchestration_log>((dir / "orchestration.log").string(), 1 << 20, 2);
    census = spawn_census(*sys, ctx, operations);
    ctx->census = census;
    global_store = spawn_global_store(*sys, ctx, deposit);
    commander = spawn_commander(*sys, ctx, deposit, global_store);
    proxy = sys->spawn(recording_commander, caf::actor_cast<caf::actor>(commander), reports);
    group = spawn_group(*sys, ctx, g, caf::actor_cast<commander_for_groups>(proxy), global_store, deposit);
    (*self)->send(commander, workers_atom::value, std::string("default"), ctx->node_name, workers());
  }

  ~supervised_group() override {
    stop_node(group, proxy, census, commander, global_store, deposit);
    std::filesystem::remove_all(dir);
  }

  std::vector<worker_handle> workers() {
    std::vector<worker_handle> out;
    (*self)->request(group, 5s, workers_atom::value).receive(
      [&](std::vector<worker_handle>& ws) { out = std::move(ws); },
      [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return out;
  }

  // The placement of `cid`, or the error the commander (or his worker) answered.
  caf::expected<placement> resolve(const std::string& cid) {
    caf::expected<placement> out{make_error(errc::unavailable)};
    (*self)->request(commander, 5s, resolve_atom::value, cid, false).receive(
      [&](placement& p) { out = std::move(p); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  http_response call(const user_handle& target, const std::string& cid, const std::string& method,
                     const std::string& path) {
    http_response out;
    out.status = 0;
    http_request req{method, path, "", "", cid, "", {}, 0, {}, {}, {}, 0, {}};
    (*self)
      ->request(target, 5s, http_atom::value, std::move(req))
      .receive([&](http_response& r) { out = std::move(r); }, [&](caf::error& e) { out.body = sys->render(e); });
    return out;
  }

  std::int64_t workers_in(worker_state s) { return counters->workers[static_cast<std::size_t>(s)].load(); }

  // The census's group row of this group ("" when none).
  std::string group_state() {
    census_query q;
    q.kind = "group";
    q.probe = false;
    std::string state;
    (*self)->request(census, 5s, census_atom::value, q).receive(
      [&](std::string& doc) {
        auto j = nlohmann::json::parse(doc);
        for (auto& g : j.at("groups"))
          if (g.at("name") == "default")
            state = g.at("state").get<std::string>() + "/" + (g.at("reason").is_null() ? "" : g.at("reason").get<std::string>());
      },
      [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return state;
  }

  // The orchestration log's lines with `what` about group:default.
  std::size_t logged(const std::string& what) {
    std::size_t n = 0;
    (*self)->request(census, 5s, log_atom::value, std::uint32_t{100}).receive(
      [&](std::string& doc) {
        auto j = nlohmann::json::parse(doc);
        for (auto& l : j.at("lines"))
          if (l.value("what", "") == what && l.value("on", "") == "group:default" && l.value("who", "") == "node")
            ++n;
      },
      [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return n;
  }

  group_counters* counters = nullptr;
  std::filesystem::path dir;
  std::shared_ptr<store::deposit> backend;
  deposit_handle deposit;
  commander_handle commander;
  global_store_handle global_store;
  std::shared_ptr<report_log> reports = std::make_shared<report_log>();
  std::shared_ptr<orchestration_log> operations;
  census_handle census;
  caf::actor proxy;
  group_handle group;
};

}  // namespace

TEST_F(supervised_group, workers_killed_past_max_restarts_degrade_the_group_until_its_recovery) {
  EXPECT_EQ(workers_in(worker_state::open), 2);
  // A user on the second worker: he outlives the first worker's deaths.
  std::string cid;
  user_handle his_actor;
  for (int i = 0; i < 16 && cid.empty(); ++i) {
    auto c = ctx->cids->mint();
    auto p = resolve(c);
    ASSERT_TRUE(p) << sys->render(p.error());
    if (p->worker == "default-w2") {
      cid = c;
      his_actor = p->actor;
    }
  }
  ASSERT_FALSE(cid.empty()) << "nobody was placed on default-w2";
  ASSERT_EQ(call(his_actor, cid, "POST", "/n").status, 200);

  // max_restarts = 2: the first two deaths of worker 1 are replaced, the third degrades the group.
  for (int death = 1; death <= 3; ++death) {
    auto before = workers().at(0);
    (*self)->send_exit(before, make_error(errc::handler_failed));
    if (death < 3) {
      ASSERT_TRUE(eventually([&] { return workers().at(0) != before; })) << "death " << death;
    }
  }
  ASSERT_TRUE(eventually([&] { return counters->degraded.load() == 1; }));
  EXPECT_EQ(counters->worker_restarts.load(), 2u);
  EXPECT_EQ(workers_in(worker_state::open), 1);  // the dead one is not restarted while degraded

  // His requests are refused, through his actor (the front's route cache) and through placement.
  auto r = call(his_actor, cid, "GET", "/n");
  EXPECT_EQ(r.status, 503);
  EXPECT_GE(r.retry_after, 1u);
  EXPECT_LE(r.retry_after, 3u);  // the seconds left until the recovery
  EXPECT_NE(r.body.find("group default is degraded"), std::string::npos) << r.body;
  auto refused = resolve(cid);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::group_degraded)) << sys->render(refused.error());
  auto refusal = refusal_of(refused.error());
  ASSERT_TRUE(refusal);
  EXPECT_GE(refusal->retry_after, 1u);
  EXPECT_LE(refusal->retry_after, 3u);
  EXPECT_GE(ctx->metrics.admission_rejections[static_cast<std::size_t>(refusal_reason::degraded)].load(), 2u);
  // The commander was told that neither worker admits anybody.
  EXPECT_TRUE(eventually([&] { return reports->count(false) >= 2; }));
  // The health verdict names the group.
  auto h = assess_health(ctx->health, 1e9, &ctx->metrics);
  EXPECT_EQ(h.status, 503);
  auto body = nlohmann::json::parse(h.body);
  ASSERT_TRUE(body.contains("degraded_groups")) << h.body;
  EXPECT_EQ(body["degraded_groups"][0]["group"], "default");
  EXPECT_EQ(body["degraded_groups"][0]["reason"], "restart_intensity");
  EXPECT_GE(body["degraded_groups"][0]["retry_after"].get<int>(), 1);
  // The census shows it, the orchestration log records it.
  EXPECT_TRUE(eventually([&] { return group_state() == "degraded/restart_intensity"; })) << group_state();
  EXPECT_TRUE(eventually([&] { return logged("degraded") == 1; }));

  // After recovery_interval_seconds: the missing worker is started, everybody is served again.
  ASSERT_TRUE(eventually([&] { return counters->degraded.load() == 0; }));
  EXPECT_TRUE(eventually([&] { return workers_in(worker_state::open) == 2; }));
  EXPECT_TRUE(eventually([&] { return reports->count(true) >= 2; }));
  auto again = call(his_actor, cid, "GET", "/n");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(nlohmann::json::parse(again.body).at("n"), 1);
  EXPECT_EQ(assess_health(ctx->health, 1e9, &ctx->metrics).status, 200);
  EXPECT_TRUE(eventually([&] { return group_state() == "serving/"; })) << group_state();
  EXPECT_TRUE(eventually([&] { return logged("recovered") == 1; }));
  // A newcomer is placed again (on either worker: the restarted one is registered with the commander).
  auto fresh = resolve(ctx->cids->mint());
  EXPECT_TRUE(fresh) << sys->render(fresh.error());
}

// -- several groups, growth and retirement, admission-aware placement (issue 13) ---------------

namespace {

// Three groups of one node: "main" (the default; grows from 1 to 2 workers,
// retires fast), "staff" (the hook's), "other" (another user_type).
class groups_tree : public ::testing::Test, protected test::node_system {
protected:
  groups_tree() {
    auto& main = ctx->recipe().groups.front();
    main.name = "main";
    main.user_type = "counter";
    main.workers = 1;
    main.worker_max_number = 2;
    main.worker_min_life_seconds = 0;
    main.cpu_retirement_quiet_seconds = 0.2;
    main.guest_idle_seconds = 0.3;
    main.durability = "interval";  // adoptions wait for a wake (the relocation answers them too)
    auto staff = main;
    staff.name = "staff";
    staff.durability = "freeze";
    staff.worker_max_number = 1;
    auto other = staff;
    other.name = "other";
    other.user_type = "counter2";
    ctx->recipe().groups.push_back(staff);
    ctx->recipe().groups.push_back(other);
    ctx->recipe().commander.default_group = "main";
    for (auto& g : ctx->recipe().groups)
      ctx->metrics.add_group(g.name);
    ctx->apps.add<counter_app>("counter");
    ctx->apps.add<counter_app>("counter2");
    dir = std::filesystem::temp_directory_path() / ("troupe-groups-" + ctx->cids->mint());
    deposit = spawn_deposit(*sys, store::make_filesystem_deposit(dir.string()));
    global_store = spawn_global_store(*sys, ctx, deposit);
    commander = spawn_commander(*sys, ctx, deposit, global_store);
    for (auto& g : ctx->recipe().groups) {
      auto h = spawn_group(*sys, ctx, g, commander, global_store, deposit);
      groups[g.name] = h;
      (*self)->request(h, 5s, workers_atom::value).receive(
        [&](std::vector<worker_handle>& ws) {
          caf::send_as(h, commander, workers_atom::value, g.name, ctx->node_name, std::move(ws));
        },
        [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    }
  }

  ~groups_tree() override {
    for (auto& [name, g] : groups)
      caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
    groups.clear();
    stop_node(commander, global_store, deposit);
    std::filesystem::remove_all(dir);
  }

  caf::expected<placement> resolve(const std::string& cid) {
    caf::expected<placement> out{caf::error{}};
    (*self)->request(commander, 5s, resolve_atom::value, cid, false).receive(
      [&](placement& p) { out = std::move(p); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  std::string worker_of(const std::string& cid) {
    auto p = resolve(cid);
    return p ? p->worker : "refused: " + sys->render(p.error());
  }

  http_response call(const std::string& cid, const std::string& method, const std::string& path,
                     const std::string& body = "") {
    http_response out;
    out.status = 0;
    for (int attempt = 0; attempt < 2 && (out.status == 0 || out.route == route_note::not_here); ++attempt) {
      auto p = resolve(cid);
      if (!p) {
        out.body = sys->render(p.error());
        return out;
      }
      http_request req{method, path, "", body, cid, "", {}, 0, {}, {}, {}, 0, {}};
      (*self)
        ->request(caf::actor_cast<user_handle>(p->actor), 5s, http_atom::value, std::move(req))
        .receive([&](http_response& r) { out = std::move(r); },
                 [&](caf::error& e) { out.status = 0; out.body = sys->render(e); });
    }
    return out;
  }

  // A login: the connection's id rotates (`cid` becomes the new one).
  void login(std::string& cid, const std::string& user) {
    auto r = call(cid, "POST", "/login", nlohmann::json{{"user", user}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_FALSE(r.set_cid.empty());
    cid = r.set_cid;
  }

  std::vector<worker_handle> workers_of(const std::string& group) {
    std::vector<worker_handle> out;
    (*self)->request(groups[group], 5s, workers_atom::value).receive(
      [&](std::vector<worker_handle>& ws) { out = std::move(ws); }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return out;
  }

  static std::int64_t n_of(const http_response& r) { return nlohmann::json::parse(r.body).at("n"); }

  static std::size_t started(const std::vector<worker_handle>& ws) {
    return static_cast<std::size_t>(std::count_if(ws.begin(), ws.end(), [](auto& w) { return bool(w); }));
  }

  void report(const worker_handle& w, bool admits, refusal_reason why, std::uint32_t retry_after) {
    (*self)->send(commander, admission_atom::value,
                  admission_report{w.address(), admits, static_cast<std::uint8_t>(why), retry_after});
  }

  std::filesystem::path dir;
  deposit_handle deposit;
  global_store_handle global_store;
  commander_handle commander;
  std::map<std::string, group_handle> groups;
};

}  // namespace

TEST_F(groups_tree, a_newcomer_is_born_in_the_default_group_and_the_hook_routes_a_login) {
  auto guest = ctx->cids->mint();
  EXPECT_EQ(worker_of(guest), "main-w1");
  auto staff = ctx->cids->mint();
  ASSERT_EQ(call(staff, "POST", "/n").status, 200);
  login(staff, "staff_ann");
  EXPECT_EQ(worker_of(staff), "staff-w1");
  EXPECT_EQ(n_of(call(staff, "GET", "/n")), 1) << "same user_type: the guest's store is carried";
  auto bob = ctx->cids->mint();
  login(bob, "bob");
  EXPECT_EQ(worker_of(bob), "main-w1") << "the hook says nothing of bob: the default group";
  // Another user_type cannot load the guest's store: dropped and counted.
  auto joe = ctx->cids->mint();
  ASSERT_EQ(call(joe, "POST", "/n").status, 200);
  login(joe, "x_joe");
  EXPECT_EQ(worker_of(joe), "other-w1");
  EXPECT_EQ(n_of(call(joe, "GET", "/n")), 0);
  EXPECT_EQ(ctx->metrics.login_carries_dropped.load(), 1u);
}

TEST_F(groups_tree, a_frozen_user_wakes_in_the_group_his_parcel_names) {
  auto cid = ctx->cids->mint();
  login(cid, "staff_ann");
  ASSERT_EQ(n_of(call(cid, "POST", "/n")), 1);
  bool frozen = false;
  (*self)->request(commander, 5s, freeze_atom::value, std::string("staff_ann")).receive(
    [&](bool ok) { frozen = ok; }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  ASSERT_TRUE(frozen);
  // The commander forgot where he lived: his next request places him in the
  // default group first; his parcel sends him back to "staff" with his state.
  auto r = call(cid, "GET", "/n");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(n_of(r), 1);
  EXPECT_EQ(worker_of(cid), "staff-w1");
}

TEST_F(groups_tree, a_group_grows_when_no_worker_admits_refuses_at_its_maximum_and_retires_when_idle) {
  auto w = workers_of("main");
  ASSERT_EQ(started(w), 1u);
  auto c1 = ctx->cids->mint();
  ASSERT_EQ(call(c1, "POST", "/n").status, 200);
  EXPECT_EQ(worker_of(c1), "main-w1");
  report(w[0], false, refusal_reason::cpu, 3);
  // An arrival no worker admits: the group grows, he waits for the new worker.
  auto c2 = ctx->cids->mint();
  EXPECT_EQ(worker_of(c2), "main-w2");
  w = workers_of("main");
  ASSERT_EQ(started(w), 2u);
  EXPECT_EQ(worker_of(c1), "main-w1") << "a live user is served where he is, closed or not";
  EXPECT_EQ(n_of(call(c1, "GET", "/n")), 1);
  // Both closed at worker_max_number: refused, Retry-After the soonest reopening.
  report(w[1], false, refusal_reason::memory, 5);
  auto refused = resolve(ctx->cids->mint());
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::admission_refused)) << sys->render(refused.error());
  auto why = refusal_of(refused.error());
  ASSERT_TRUE(why);
  EXPECT_EQ(why->retry_after, 3u);
  EXPECT_EQ(why->text, "main: every worker is closed (cpu)");
  EXPECT_EQ(ctx->metrics.admission_rejections[static_cast<std::size_t>(refusal_reason::cpu)].load(), 1u);
  EXPECT_EQ(started(workers_of("main")), 2u) << "no growth past worker_max_number";
  // Every worker degraded: group_degraded, with their Retry-After.
  report(w[0], false, refusal_reason::degraded, 9);
  report(w[1], false, refusal_reason::degraded, 4);
  refused = resolve(ctx->cids->mint());
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::group_degraded)) << sys->render(refused.error());
  ASSERT_TRUE(refusal_of(refused.error()));
  EXPECT_EQ(refusal_of(refused.error())->retry_after, 4u);
  EXPECT_EQ(ctx->metrics.admission_rejections[static_cast<std::size_t>(refusal_reason::degraded)].load(), 1u);
  // Reopened, the guests retire once idle; the worker beyond `workers` goes, not as a restart.
  report(w[0], true, refusal_reason::cpu, 0);
  report(w[1], true, refusal_reason::cpu, 0);
  ASSERT_TRUE(eventually([&] { return started(workers_of("main")) == 1; }))
    << "the idle worker beyond the minimum was not retired";
  w = workers_of("main");
  EXPECT_TRUE(w[0]) << "the first worker stays (the group's minimum)";
  auto* counters = ctx->metrics.group("main");
  ASSERT_NE(counters, nullptr);
  EXPECT_EQ(counters->workers[static_cast<std::size_t>(worker_state::open)].load(), 1);
  EXPECT_EQ(counters->workers[static_cast<std::size_t>(worker_state::closed)].load(), 0);
  // The next arrival that no worker admits grows it again, in the free position.
  report(w[0], false, refusal_reason::cpu, 2);
  EXPECT_EQ(worker_of(ctx->cids->mint()), "main-w2");
  EXPECT_EQ(started(workers_of("main")), 2u);
}

TEST_F(groups_tree, a_drained_worker_frees_its_place_under_worker_max_number) {
  auto w = workers_of("main");
  report(w[0], false, refusal_reason::cpu, 1);
  EXPECT_EQ(worker_of(ctx->cids->mint()), "main-w2");
  std::uint64_t frozen = 99, failed = 99;
  (*self)->request(commander, 5s, drain_atom::value, std::string("main-w1")).receive(
    [&](std::uint64_t f, std::uint64_t x) { frozen = f; failed = x; }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  EXPECT_EQ(failed, 0u);
  w = workers_of("main");
  report(w[1], false, refusal_reason::cpu, 1);
  // Two positions taken, one of them drained: the group may start one more.
  EXPECT_EQ(worker_of(ctx->cids->mint()), "main-w3");
}

}  // namespace groups_test_file
