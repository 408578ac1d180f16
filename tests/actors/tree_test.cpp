// The actor tree on a real actor system, driven through the serializable
// request/response interface (no front, no mocks): placement, stickiness,
// login/logout, crash and restart, the per-user queue bound.
#include "../support/eventually.hpp"
#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/orchestration_log.hpp"
#include "config/recipe.hpp"
#include "tree_fixture.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace tree_test_file {

using namespace troupe;
using troupe::test::counter_app;
using troupe::test::tree;
using troupe::test::tally;
using troupe::test::eventually;
using namespace std::chrono_literals;

TEST_F(tree, a_stranger_becomes_his_guest_and_stays_on_one_actor) {
  auto cid = ctx->cids->mint();
  auto first = resolve(cid);
  EXPECT_EQ(first.user, registry::guest_name(cid));
  EXPECT_EQ(first.node, "test-node");
  EXPECT_TRUE(first.worker == "default-w1" || first.worker == "default-w2") << first.worker;
  auto again = resolve(cid);
  EXPECT_EQ(again.actor, first.actor);
  for (int i = 1; i <= 5; ++i)
    EXPECT_EQ(n_of(call(first.actor, cid, "POST", "/n")), i);
  EXPECT_EQ(ctx->metrics.actors[static_cast<int>(actor_kind::user)].load(), 1);
}

TEST_F(tree, users_are_spread_over_workers_and_isolated) {
  auto a = ctx->cids->mint(), b = ctx->cids->mint();
  auto pa = resolve(a), pb = resolve(b);
  EXPECT_NE(pa.worker, pb.worker);  // least loaded placement
  EXPECT_EQ(n_of(call(pa.actor, a, "POST", "/n")), 1);
  EXPECT_EQ(n_of(call(pa.actor, a, "POST", "/n")), 2);
  EXPECT_EQ(n_of(call(pb.actor, b, "POST", "/n")), 1);
}

TEST_F(tree, an_actor_refuses_a_connection_that_is_not_his) {
  auto a = ctx->cids->mint(), stranger = ctx->cids->mint();
  auto pa = resolve(a);
  auto r = call(pa.actor, stranger, "GET", "/n");
  EXPECT_EQ(r.route, route_note::not_here);
}

TEST_F(tree, unknown_routes_and_methods) {
  auto a = ctx->cids->mint();
  auto pa = resolve(a);
  EXPECT_EQ(call(pa.actor, a, "GET", "/nothing").status, 404);
  EXPECT_EQ(call(pa.actor, a, "DELETE", "/n").status, 405);
  EXPECT_EQ(call(pa.actor, a, "POST", "/teapot").status, 418);  // http_error: no restart
  EXPECT_EQ(ctx->metrics.user_restarts.load(), 0u);
}

// A handler's headers reach the reply checked and in order; one that could split
// the response or set the platform's cookie makes the answer a 500, and the actor
// lives on with what the handler changed (a bad answer is not a crash).
TEST_F(tree, a_handlers_headers_reach_the_reply_and_an_invalid_one_is_a_500) {
  auto a = ctx->cids->mint();
  auto pa = resolve(a);
  auto r = call(pa.actor, a, "POST", "/headers");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/vnd.tally+json");
  std::vector<std::pair<std::string, std::string>> got;
  for (auto& h : r.headers)
    got.emplace_back(h.name, h.value);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{{"Cache-Control", "no-store"},
                                                                    {"X-Twice", "1"},
                                                                    {"X-Twice", "2"},
                                                                    {"Set-Cookie", "theme=dark; Path=/"}}));
  for (auto path : {"/split", "/steal"}) {
    auto bad = call(pa.actor, a, "POST", path);
    EXPECT_EQ(bad.status, 500) << path;
    EXPECT_TRUE(bad.headers.empty()) << path;
    EXPECT_EQ(bad.body.find("stolen"), std::string::npos) << bad.body;
  }
  EXPECT_EQ(n_of(call(pa.actor, a, "POST", "/n")), 3) << "/headers and /split counted; no restart lost them";
  EXPECT_EQ(ctx->metrics.user_restarts.load(), 0u);
}

// Guards are judged in the user actor too: a request that reaches him past the
// front (one it could not judge) is refused there, his handler not run.
TEST_F(tree, a_guarded_route_is_judged_by_the_actor_too) {
  auto a = ctx->cids->mint();
  auto pa = resolve(a);
  auto r = call(pa.actor, a, "POST", "/staff/n");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(n_of(call(pa.actor, a, "POST", "/n")), 1) << "the refused handler changed nothing";
  auto staff = ctx->cids->mint();
  ASSERT_EQ(serve_moving(staff, "/login", R"({"user":"staff_ann"})").status, 200);
  EXPECT_EQ(n_of(serve(staff, "POST", "/staff/n")), 1);
}

TEST_F(tree, login_carries_the_guest_store_to_a_user_who_is_not_live) {
  auto cid = ctx->cids->mint();
  for (int i = 0; i < 3; ++i)
    serve(cid, "POST", "/n");
  auto old_cid = cid;
  auto r = serve_moving(cid, "/login", R"({"user":"dora"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.route, route_note::changed);
  EXPECT_NE(cid, old_cid);
  EXPECT_TRUE(ctx->cids->verify(cid)) << cid;
  auto who = nlohmann::json::parse(r.body);
  EXPECT_EQ(who.at("user"), "dora");
  EXPECT_EQ(who.at("connection"), cid);
  auto after = serve(cid, "GET", "/n");
  EXPECT_EQ(nlohmann::json::parse(after.body).at("user"), "dora");
  EXPECT_EQ(n_of(after), 3);
}

TEST_F(tree, login_into_a_live_user_keeps_his_resident_state) {
  auto first = ctx->cids->mint(), second = ctx->cids->mint();
  serve_moving(first, "/login", R"({"user":"erin"})");
  for (int i = 0; i < 5; ++i)
    serve(first, "POST", "/n");
  serve(second, "POST", "/n");
  serve(second, "POST", "/n");
  serve_moving(second, "/login", R"({"user":"erin"})");
  EXPECT_EQ(n_of(serve(second, "GET", "/n")), 5);
  EXPECT_EQ(n_of(serve(first, "GET", "/n")), 5);
}

TEST_F(tree, logout_gives_the_connection_a_fresh_guest) {
  auto cid = ctx->cids->mint();
  serve_moving(cid, "/login", R"({"user":"finn"})");
  serve(cid, "POST", "/n");
  auto finns = cid;
  auto r = serve_moving(cid, "/logout");
  EXPECT_NE(cid, finns);
  EXPECT_EQ(nlohmann::json::parse(r.body).at("user"), registry::guest_name(cid));
  EXPECT_EQ(n_of(serve(cid, "GET", "/n")), 0);
  // finn's old id is dead: a stranger's guest, never finn
  EXPECT_EQ(nlohmann::json::parse(serve(finns, "GET", "/n").body).at("user"), registry::guest_name(finns));
  // and finn kept his own store
  serve_moving(cid, "/login", R"({"user":"finn"})");
  EXPECT_EQ(n_of(serve(cid, "GET", "/n")), 1);
}

TEST_F(tree, login_kills_the_old_id_and_its_guest_state) {
  auto cid = ctx->cids->mint();
  serve(cid, "POST", "/n");
  serve(cid, "POST", "/n");
  auto old_cid = cid;
  ASSERT_EQ(serve_moving(cid, "/login", R"({"user":"jude"})").status, 200);
  ASSERT_NE(cid, old_cid);
  EXPECT_EQ(n_of(serve(cid, "GET", "/n")), 2);  // carried to jude
  auto stale = serve(old_cid, "GET", "/n");
  auto who = nlohmann::json::parse(stale.body);
  EXPECT_EQ(who.at("user"), registry::guest_name(old_cid));  // a stranger now: never jude
  EXPECT_EQ(who.at("n"), 0);                                 // and with nothing
}

TEST_F(tree, the_commander_refuses_ids_it_did_not_mint) {
  auto other = registry::cid_signer::with_random_secret().mint();
  ASSERT_TRUE(registry::valid_cid(other));
  caf::error err;
  (*self)->request(commander, 5s, resolve_atom::value, other, true)
    .receive([&](placement& p) { ADD_FAILURE() << "placed as " << p.user; }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(is(err, errc::bad_request)) << sys->render(err);
}

TEST_F(tree, invalid_login_names_are_bad_requests) {
  auto cid = ctx->cids->mint();
  EXPECT_EQ(serve(cid, "POST", "/login", R"({"user":"guest_x"})").status, 400);
  EXPECT_EQ(serve(cid, "POST", "/login", R"({"user":""})").status, 400);
  EXPECT_EQ(serve(cid, "POST", "/login", R"({"user":"a b"})").status, 400);
}

TEST_F(tree, a_crashing_handler_answers_502_and_only_that_user_restarts_from_his_last_good_state) {
  auto a = ctx->cids->mint(), b = ctx->cids->mint();
  serve(a, "POST", "/n");
  serve(b, "POST", "/n");
  serve(b, "POST", "/n");
  auto before = resolve(a).actor;
  auto r = serve(a, "POST", "/boom");
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.body.find("boom"), std::string::npos);  // the real text goes to the log only
  EXPECT_EQ(n_of(serve(a, "GET", "/n")), 1);           // restarted from his last good state, not empty
  EXPECT_NE(resolve(a).actor, before);
  EXPECT_EQ(serve(a, "POST", "/half").status, 502);
  EXPECT_EQ(n_of(serve(a, "GET", "/n")), 1);           // what the failing handler half-changed is gone
  EXPECT_EQ(n_of(serve(b, "GET", "/n")), 2);
  EXPECT_EQ(ctx->metrics.user_restarts.load(), 2u);
  EXPECT_EQ(ctx->metrics.handler_failures.load(), 2u);
}

namespace {

// Records what the local fast path delivers, and requests dropped undelivered.
struct recorder {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int> statuses;
  int dropped = 0;

  bool wait_for(std::size_t n) {
    std::unique_lock<std::mutex> guard{mutex};
    return changed.wait_for(guard, 5s, [&] { return statuses.size() + dropped >= n; });
  }
};

class recording_slot : public reply_slot {
public:
  recording_slot(recorder& rec, http_request req) : rec_(rec), req_(std::move(req)) {}
  const http_request& request() const override { return req_; }
  void deliver(http_response&& r) override {
    std::lock_guard<std::mutex> guard{rec_.mutex};
    rec_.statuses.push_back(r.status);
    delivered_ = true;
    rec_.changed.notify_all();
  }
  ~recording_slot() override {
    if (delivered_)
      return;
    std::lock_guard<std::mutex> guard{rec_.mutex};
    ++rec_.dropped;
    rec_.changed.notify_all();
  }

private:
  recorder& rec_;
  http_request req_;
  bool delivered_ = false;
};

void send_local(const user_handle& target, recorder& rec, const std::string& cid, const std::string& path) {
  http_request req{"POST", path, "", "", cid, "", {}, 0, {}, {}, {}, 0, {}};
  caf::anon_send(target, http_atom::value,
                 local_reply{std::make_shared<recording_slot>(rec, std::move(req))});
}

}  // namespace

TEST_F(tree, a_busy_user_queues_a_bounded_number_of_requests) {
  auto cid = ctx->cids->mint();
  auto target = resolve(cid).actor;
  ASSERT_EQ(call(target, cid, "GET", "/n").status, 200);  // awake: his (absent) parcel was looked up
  recorder rec;
  // The first request defers its answer (300 ms); two wait (user_queue_length = 2); two are refused.
  for (int i = 0; i < 5; ++i)
    send_local(target, rec, cid, i == 0 ? "/wait" : "/n");
  ASSERT_TRUE(rec.wait_for(5));
  std::lock_guard<std::mutex> guard{rec.mutex};
  EXPECT_EQ(std::count(rec.statuses.begin(), rec.statuses.end(), 200), 3);
  EXPECT_EQ(std::count(rec.statuses.begin(), rec.statuses.end(), 503), 2);
  EXPECT_EQ(rec.dropped, 0);
}

TEST_F(tree, requests_behind_a_crash_are_dropped_so_the_front_can_resend_them) {
  auto cid = ctx->cids->mint();
  auto target = resolve(cid).actor;
  ASSERT_EQ(call(target, cid, "GET", "/n").status, 200);
  recorder rec;
  send_local(target, rec, cid, "/wait");  // busy for 300 ms
  send_local(target, rec, cid, "/boom");  // waits, then crashes the actor
  send_local(target, rec, cid, "/n");     // waits behind the crash: never served by this actor
  ASSERT_TRUE(rec.wait_for(3));
  std::lock_guard<std::mutex> guard{rec.mutex};
  EXPECT_EQ(rec.statuses, (std::vector<int>{200, 502}));
  EXPECT_EQ(rec.dropped, 1);
}

TEST_F(tree, an_ordered_freeze_writes_his_parcels_and_the_next_request_wakes_him) {
  auto cid = ctx->cids->mint();
  serve_moving(cid, "/login", R"({"user":"gwen"})");
  for (int i = 0; i < 4; ++i)
    serve(cid, "POST", "/n");
  bool frozen = false;
  (*self)->request(commander, 5s, freeze_atom::value, std::string("gwen"))
    .receive([&](bool ok) { frozen = ok; }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  ASSERT_TRUE(frozen);
  EXPECT_EQ(backend->counters().writes.load(), 2u);  // his store and his connection
  ASSERT_TRUE(backend->get_user("gwen"));
  EXPECT_EQ(ctx->metrics.user_freezes.load(), 1u);
  auto reads_before = backend->counters().reads.load();
  EXPECT_EQ(n_of(serve(cid, "GET", "/n")), 4);  // woken from his parcel
  EXPECT_EQ(backend->counters().reads.load() - reads_before, 1u);
  EXPECT_EQ(ctx->metrics.user_wakes.load(), 1u);
}

TEST_F(tree, freezing_somebody_not_hosted_is_no_such_user) {
  caf::error err;
  (*self)->request(commander, 5s, freeze_atom::value, std::string("nobody"))
    .receive([&](bool) {}, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(is(err, errc::no_such_user)) << sys->render(err);
}

TEST_F(tree, a_connection_unknown_to_the_commander_is_found_from_its_parcel) {
  // What a restarted node sees: no binding in memory, a connection parcel on disk.
  auto cid = ctx->cids->mint();
  store::connection_record rec{cid, "hana", {}};
  store::parcel p;
  p.payload = store::pack(rec);
  backend->put_connection(cid, p);
  tally t{7};
  store::parcel up;
  up.payload = store::pack(t);
  backend->put_user("hana", up);
  auto where = resolve(cid);
  EXPECT_EQ(where.user, "hana");
  EXPECT_EQ(n_of(call(where.actor, cid, "GET", "/n")), 7);
}

TEST_F(tree, a_wake_that_fails_answers_503_keeps_the_parcel_and_the_next_request_retries) {
  auto cid = ctx->cids->mint();
  store::connection_record rec{cid, "ivy", {}};
  store::parcel cp;
  cp.payload = store::pack(rec);
  backend->put_connection(cid, cp);
  // His parcel cannot be read (a file where its shard directory should be: ENOTDIR):
  // an I/O error, not "absent". (A directory in place of the parcel itself is
  // quarantined since issue 10: see tests/store/deposit_test.cpp.)
  auto path = std::filesystem::path(store::filesystem_parcel_path(dir.string(), store::parcel_kind::user, "ivy"))
                .parent_path();
  std::filesystem::create_directories(path.parent_path());
  { std::ofstream(path) << "not a directory"; }
  auto where = resolve(cid);
  auto r = call(where.actor, cid, "GET", "/n");
  // Queued before the read failed: 503 from him. Arrived after he stopped: dropped
  // (status 0 here; the front then re-resolves once and answers 503). Never served.
  if (r.status != 0) {
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_GT(r.retry_after, 0u);
  }
  EXPECT_TRUE(std::filesystem::exists(path));  // nothing was removed or overwritten
  std::filesystem::remove(path);
  tally t{9};
  store::parcel up;
  up.payload = store::pack(t);
  backend->put_user("ivy", up);
  EXPECT_EQ(n_of(serve(cid, "GET", "/n")), 9);  // the next request wakes him
}

// Issue 10: the deposit actor tells a quarantined user parcel (errc::bad_state, so
// that he is refused, not started empty) from an absent one; a quarantined
// connection parcel is answered as absent (a new guest); quarantine_atom quarantines
// on the caller's word.
TEST_F(tree, the_deposit_answers_bad_state_for_a_quarantined_user_parcel) {
  auto get = [&](parcel_kind kind, const std::string& key) {
    std::optional<std::size_t> found;
    caf::error err;
    (*self)->request(deposit, 5s, get_atom::value, kind, key)
      .receive([&](std::vector<store::parcel>& v) { found = v.size(); }, [&](caf::error& e) { err = e; });
    return std::make_pair(found, err);
  };
  EXPECT_EQ(get(parcel_kind::user, "nobody").first, 0u);
  store::parcel up;
  up.payload = store::pack(tally{3});
  backend->put_user("bob", up);
  backend->put_user("jill", up);
  auto bob = store::filesystem_parcel_path(dir.string(), parcel_kind::user, "bob");
  auto jill = store::filesystem_parcel_path(dir.string(), parcel_kind::user, "jill");
  std::filesystem::copy_file(bob, jill, std::filesystem::copy_options::overwrite_existing);
  for (int i = 0; i < 2; ++i) {  // the first read quarantines, the second finds the marker
    auto [found, err] = get(parcel_kind::user, "jill");
    EXPECT_FALSE(found);
    EXPECT_TRUE(is(err, errc::bad_state)) << sys->render(err);
    EXPECT_NE(sys->render(err).find("'bob'"), std::string::npos) << sys->render(err);
  }
  EXPECT_EQ(get(parcel_kind::user, "bob").first, 1u);

  store::parcel cp;
  cp.payload = store::pack(store::connection_record{"cAAAAAAAAAAAAAAAAAAAAAAA", "bob", {}});
  backend->put_connection("cAAAAAAAAAAAAAAAAAAAAAAA", cp);
  auto ca = store::filesystem_parcel_path(dir.string(), parcel_kind::connection, "cAAAAAAAAAAAAAAAAAAAAAAA");
  auto cb = store::filesystem_parcel_path(dir.string(), parcel_kind::connection, "cBBBBBBBBBBBBBBBBBBBBBBB");
  std::filesystem::create_directories(std::filesystem::path(cb).parent_path());
  std::filesystem::copy_file(ca, cb);
  auto [cfound, cerr] = get(parcel_kind::connection, "cBBBBBBBBBBBBBBBBBBBBBBB");
  EXPECT_EQ(cfound, 0u) << sys->render(cerr);
  EXPECT_EQ(backend->counters().quarantined.load(), 2u);

  std::string qpath;
  (*self)->request(deposit, 5s, quarantine_atom::value, std::string("bob"), std::string("does not decode as v2"))
    .receive([&](std::string& q) { qpath = q; }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  EXPECT_TRUE(std::filesystem::exists(qpath)) << qpath;
  auto [bfound, berr] = get(parcel_kind::user, "bob");
  EXPECT_TRUE(is(berr, errc::bad_state)) << sys->render(berr);
}

// Fencing (docs/CLUSTER.md): the commander numbers its placements under the
// generation the deposit gave it at start, and every parcel carries it.
TEST_F(tree, the_commander_places_under_the_generation_the_deposit_gave_it) {
  auto cid = ctx->cids->mint();
  auto user = registry::guest_name(cid);
  ASSERT_EQ(n_of(serve(cid, "POST", "/n")), 1);  // placed: the commander has its generation by now
  EXPECT_EQ(backend->next_commander_generation(), 2u) << "the commander should have taken generation 1";
  bool frozen = false;
  (*self)->request(commander, 5s, freeze_atom::value, user)
    .receive([&](bool) { frozen = true; }, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  ASSERT_TRUE(frozen);
  auto p = backend->get_user(user);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->owner_epoch >> 32, 1u);
  EXPECT_GE(p->owner_epoch & 0xffffffffu, 1u);
}

// The claim files a batch deferred (store::deposit::do_deferred) are made once
// the deposit has written what was queued; not during the soft quit, when every
// write goes first (what is left costs a wake a file creation, nothing else).
TEST_F(tree, the_deposit_makes_deferred_claim_files_between_batches_but_not_during_the_quit) {
  store::parcel p;
  p.payload = store::pack(tally{1});
  p.owner_epoch = 1;
  auto first_writes = [&](const std::string& prefix) {
    std::vector<store::deposit::batch_entry> batch;
    for (int i = 0; i < 200; ++i)
      batch.push_back({false, prefix + std::to_string(i), p});
    auto errors = backend->put_batch(batch);
    ASSERT_EQ(std::count(errors.begin(), errors.end(), ""), 200);
    ASSERT_EQ(backend->do_deferred(0), 200u);
  };
  auto put_through_the_actor = [&](const std::string& user) {
    (*self)->request(deposit, 5s, put_atom::value, parcel_kind::user, user, p)
      .receive([](std::uint64_t) {}, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  };
  first_writes("idle");
  put_through_the_actor("writer");  // a batch written: the deferred work follows it
  EXPECT_TRUE(troupe::test::eventually([&] { return backend->do_deferred(0) == 0; }));
  const auto parcel = std::filesystem::path(store::filesystem_parcel_path(dir.string(), parcel_kind::user, "idle7"));
  EXPECT_TRUE(std::filesystem::exists(parcel.parent_path() / (".claim-" + parcel.filename().string())));

  (*self)->request(deposit, 5s, quit_atom::value, std::int64_t{60000}, (dir / "fallback").string())
    .receive([](bool) {}, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  first_writes("quit");
  put_through_the_actor("writer");
  put_through_the_actor("writer");  // answered after whatever the first one scheduled
  EXPECT_EQ(backend->do_deferred(0), 200u);
}

// A stale write is answered stale_owner at once and never parked, even while
// the soft quit retries refused writes and parks them in its fallback.
TEST_F(tree, a_stale_write_is_refused_at_once_even_during_the_soft_quit) {
  ASSERT_FALSE(backend->claim_user("sam", 50));  // a newer placement holds him
  auto fallback = dir / "fallback";
  (*self)->request(deposit, 5s, quit_atom::value, std::int64_t{60000}, fallback.string())
    .receive([](bool) {}, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  store::parcel p;
  p.payload = store::pack(tally{7});
  p.owner_epoch = 40;
  caf::error got;
  (*self)->request(deposit, 3s, put_atom::value, parcel_kind::user, std::string("sam"), p)
    .receive([&](std::uint64_t) { ADD_FAILURE() << "the stale write was answered as written"; },
             [&](caf::error& e) { got = e; });
  EXPECT_TRUE(is(got, errc::stale_owner)) << sys->render(got);
  p.owner_epoch = 50;  // the owner's own write lands
  (*self)->request(deposit, 3s, put_atom::value, parcel_kind::user, std::string("sam"), p)
    .receive([](std::uint64_t) {}, [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  (*self)->request(deposit, 5s, quit_atom::value)
    .receive(
      [&](std::uint64_t rescued, std::string& fallback_used, std::vector<std::string>& lost) {
        EXPECT_EQ(rescued, 0u);
        EXPECT_EQ(fallback_used, "");
        EXPECT_TRUE(lost.empty());
      },
      [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
  EXPECT_FALSE(std::filesystem::exists(fallback));
  EXPECT_EQ(backend->counters().fenced.load(), 1u);
  EXPECT_EQ(backend->get_user("sam")->owner_epoch, 50u);
}

// commander.durability = "reply": the global store answers a change by the outcome
// of the write that carries it — refused by the deposit (deposit_failed):
// not applied, not_durable; any other failure (no answer: a timeout): kept,
// durability_unknown. Against a deposit that answers puts as told.
TEST(global_store, a_refused_write_applies_nothing_and_an_unanswered_one_is_kept_as_unknown) {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  auto ctx = std::make_shared<node_context>();
  ctx->recipe().commander.durability = "reply";
  enum class answer { written, refused, lost };
  auto next_answer = std::make_shared<std::atomic<answer>>(answer::written);
  auto puts = std::make_shared<std::atomic<int>>(0);
  auto deposit = sys.spawn([next_answer, puts]() -> caf::behavior {
    return {
      [next_answer, puts](put_atom, parcel_kind, std::string&, store::parcel& p) -> caf::result<std::uint64_t> {
        ++*puts;
        switch (next_answer->load()) {
          case answer::written: return static_cast<std::uint64_t>(p.payload.size());
          case answer::refused: return make_error(errc::deposit_failed, "no space left on device");
          case answer::lost: break;
        }
        return caf::make_error(caf::sec::request_timeout);
      },
    };
  });
  auto store = spawn_global_store(sys, ctx, caf::actor_cast<deposit_handle>(deposit),
                                  global_store_start{global_snapshot{{"k", "1"}}, false});
  caf::scoped_actor self{sys};
  auto op = [&](detail::global_op::kind what, const std::string& value = {}) {
    detail::global_op o;
    o.what = what;
    o.key = "k";
    o.has_value = what == detail::global_op::kind::set;
    o.value = value;
    detail::global_reply out;
    out.refusal = "<no answer>";
    self->request(store, 5s, global_atom::value, std::move(o))
      .receive([&](detail::global_reply& r) { out = std::move(r); },
               [&](caf::error& e) { out.refusal = sys.render(e); });
    return out;
  };
  using kind = detail::global_op::kind;
  next_answer->store(answer::refused);
  EXPECT_EQ(op(kind::set, "2").refusal, "not_durable");
  EXPECT_EQ(op(kind::get).value, "1") << "a refused write applied nothing";
  next_answer->store(answer::lost);
  EXPECT_EQ(op(kind::set, "3").refusal, "durability_unknown");
  EXPECT_EQ(op(kind::get).value, "3") << "a write that may have landed is kept";
  next_answer->store(answer::written);
  EXPECT_EQ(op(kind::erase).refusal, "");
  EXPECT_FALSE(op(kind::get).found);
  EXPECT_EQ(puts->load(), 3) << "one write per change here (none in flight together)";
  EXPECT_EQ(ctx->metrics.changes_rolled_back.load(), 1u);
  caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(deposit, caf::exit_reason::user_shutdown);
}

TEST_F(tree, a_user_crashing_max_user_restarts_times_is_quarantined_alone_then_served_from_his_last_good_state) {
  auto& g = ctx->recipe().groups.front();  // the workers read their group's settings live
  g.max_user_restarts = 2;
  g.restart_window_seconds = 2;
  auto a = ctx->cids->mint(), b = ctx->cids->mint();
  ASSERT_EQ(n_of(serve(a, "POST", "/n")), 1);
  ASSERT_EQ(n_of(serve(b, "POST", "/n")), 1);
  EXPECT_EQ(serve(a, "POST", "/boom").status, 502);  // the first crash: restarted
  EXPECT_EQ(n_of(serve(a, "GET", "/n")), 1);
  EXPECT_EQ(serve(a, "POST", "/boom").status, 502);  // the second within 2 s: quarantined
  caf::error refused;
  eventually([&] {
    (*self)->request(commander, 5s, resolve_atom::value, a, false).receive(
      [&](placement&) {}, [&](caf::error& e) { refused = e; });  // his down may still be on its way
    return bool(refused);
  }, 5s);
  ASSERT_TRUE(refused) << "he was never refused";  // (CAF 0.17: an empty error has no category to ask)
  ASSERT_TRUE(is(refused, errc::user_quarantined)) << sys->render(refused);
  auto r = refusal_of(refused);
  ASSERT_TRUE(r);
  EXPECT_GE(r->retry_after, 1u);
  EXPECT_LE(r->retry_after, 2u);
  EXPECT_NE(r->text.find(registry::guest_name(a)), std::string::npos) << r->text;
  EXPECT_EQ(n_of(serve(b, "POST", "/n")), 2);  // everyone else is served
  EXPECT_GE(ctx->metrics.admission_rejections[static_cast<std::size_t>(refusal_reason::quarantined)].load(), 1u);
  // Once his oldest crash left the window he is served again, from his last good state.
  http_response back;
  eventually([&] {  // the commander places him once the window has passed
    bool placed = false;
    (*self)->request(commander, 5s, resolve_atom::value, a, false).receive(
      [&](placement& p) {
        placed = true;
        back = call(p.actor, a, "GET", "/n");
      },
      [&](caf::error&) {});
    return placed;
  }, 10s, 50ms);
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(n_of(back), 1);
}

}  // namespace tree_test_file
