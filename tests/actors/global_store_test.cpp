// The global store in an actor of its own (issue 13): it answers while its
// commander is busy, grants no lease before the commander's generation gives
// it the tokens' floor, and serves nothing of a takeover before its snapshot
// is read. Against a deposit actor that holds its answers until told.
//
// On CAF's deterministic test coordinator: no thread runs an actor by itself;
// the test delivers every message (run()) and fires every timeout
// (trigger_timeouts()) when it decides to, so each step's order is the test's,
// never the machine's.
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "config/recipe.hpp"
#include "deterministic_system.hpp"
#include "registry/epoch_source.hpp"
#include "store/codec.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

namespace global_store_test_file {

using namespace troupe;
using namespace std::chrono_literals;

namespace {

using let_go_atom = caf::atom_constant<caf::atom("tletgo")>;  // the test lets the deposit answer

// A deposit that answers the commander's generation and the snapshot read
// only when the test releases them; every other request the usual way.
struct held_deposit_state {
  std::optional<caf::typed_response_promise<std::uint64_t>> generation;
  std::optional<caf::typed_response_promise<std::vector<store::parcel>>> snapshot;
};

struct held_deposit_seen {
  bool generation_asked = false;
  bool snapshot_asked = false;
};

caf::behavior held_deposit(caf::stateful_actor<held_deposit_state>* self, std::shared_ptr<held_deposit_seen> seen) {
  return {
    [=](generation_atom) -> caf::result<std::uint64_t> {
      auto p = self->make_response_promise<std::uint64_t>();
      self->state.generation = p;
      seen->generation_asked = true;
      return p;
    },
    [=](get_atom, parcel_kind, std::string&) -> caf::result<std::vector<store::parcel>> {
      auto p = self->make_response_promise<std::vector<store::parcel>>();
      self->state.snapshot = p;
      seen->snapshot_asked = true;
      return p;
    },
    [=](put_atom, parcel_kind, std::string&, store::parcel& p) { return static_cast<std::uint64_t>(p.payload.size()); },
    [=](let_go_atom, std::uint64_t generation) {
      if (auto& g = self->state.generation)
        g->deliver(generation);
      self->state.generation.reset();
    },
    [=](let_go_atom, global_snapshot& values) {
      store::parcel p;
      p.payload = store::pack(values);
      if (auto& s = self->state.snapshot)
        s->deliver(std::vector<store::parcel>{std::move(p)});
      self->state.snapshot.reset();
    },
  };
}

detail::global_op op_of(detail::global_op::kind what, const std::string& key, const std::string& value = {}) {
  detail::global_op o;
  o.what = what;
  o.key = key;
  o.has_value = what == detail::global_op::kind::set || what == detail::global_op::kind::commit;
  o.value = value;
  if (what == detail::global_op::kind::lease) {
    o.ttl_ms = 10000;
    o.wait_ms = 1000;
  }
  return o;
}

// What an asynchronous request brought back (a helper actor holds the request).
struct answer {
  bool arrived = false;
  detail::global_reply reply;
  std::string error;
};

class global_store_actor : public ::testing::Test, protected test::deterministic_system {
protected:
  global_store_actor() : deterministic_system(register_types) {
    ctx = std::make_shared<node_context>();
    ctx->node_name = "test-node";
    seen = std::make_shared<held_deposit_seen>();
    deposit = sys->spawn(held_deposit, seen);
  }

  ~global_store_actor() override {
    // Whatever still waits on the deposit gets its answer, so that everybody can stop.
    caf::anon_send(deposit, let_go_atom::value, std::uint64_t{1});
    caf::anon_send(deposit, let_go_atom::value, global_snapshot{});
    for (auto& h : holders)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    if (commander)
      caf::anon_send_exit(commander, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deposit, caf::exit_reason::user_shutdown);
    sched->run();
    // Helpers still waiting on an answer end with their requests' timeouts.
    sched->trigger_timeouts();
    sched->run();
    sys.reset();
  }

  // Asks the store (a helper actor holds the request); the answer arrives as
  // the test runs the actors.
  std::shared_ptr<answer> ask(detail::global_op o) {
    auto a = std::make_shared<answer>();
    sys->spawn([a, o = std::move(o), store = store](caf::event_based_actor* helper) mutable {
      helper->request(store, 30s, global_atom::value, std::move(o))
        .then(
          [a](detail::global_reply& r) {
            a->reply = std::move(r);
            a->arrived = true;
          },
          [a, helper](caf::error& e) {
            a->error = helper->system().render(e);
            a->arrived = true;
          });
    });
    return a;
  }

  // Asks the store and delivers every message until nothing is left to do: its answer.
  detail::global_reply call(detail::global_op o) {
    auto a = ask(std::move(o));
    sched->run();
    if (!a->arrived) {
      detail::global_reply none;
      none.refusal = "<no answer>";
      return none;
    }
    if (!a->error.empty())
      a->reply.refusal = a->error;
    return a->reply;
  }

  node_context_ptr ctx;
  std::shared_ptr<held_deposit_seen> seen;
  caf::actor deposit;
  global_store_handle store;
  commander_handle commander;
  std::vector<caf::actor> holders;  // helper actors that live until the end
};

}  // namespace

// The commander's mailbox is held (it waits for its generation, which the
// deposit does not give yet): the global store answers reads, writes and
// the admin listing all the same. With the store inside the commander (before
// issue 13) none of these answered until the commander's wait ended.
TEST_F(global_store_actor, answers_while_its_commander_is_busy) {
  using kind = detail::global_op::kind;
  store = spawn_global_store(*sys, ctx, caf::actor_cast<deposit_handle>(deposit),
                             global_store_start{global_snapshot{{"k", "1"}}, false});
  commander = spawn_commander(*sys, ctx, caf::actor_cast<deposit_handle>(deposit), store);
  sched->run();
  ASSERT_TRUE(seen->generation_asked) << "the commander never asked its generation";
  // The commander is busy: an order it would refuse at once stays unanswered while its generation is held.
  auto commander_answered = std::make_shared<bool>(false);
  sys->spawn([commander_answered, commander = commander](caf::event_based_actor* helper) {
    helper->request(commander, 60s, freeze_atom::value, std::string("nobody"))
      .then([commander_answered](bool) { *commander_answered = true; },
            [commander_answered](caf::error&) { *commander_answered = true; });
  });

  EXPECT_EQ(call(op_of(kind::get, "k")).value, "1");
  EXPECT_EQ(call(op_of(kind::set, "k", "2")).refusal, "");
  auto got = call(op_of(kind::get, "k"));
  EXPECT_TRUE(got.found);
  EXPECT_EQ(got.value, "2");
  std::string listing = "<no answer>";
  sys->spawn([&listing, store = store](caf::event_based_actor* helper) {
    helper->request(store, 5s, global_atom::value)
      .then([&listing](std::string& json) { listing = std::move(json); },
            [&listing, helper](caf::error& e) { listing = helper->system().render(e); });
  });
  sched->run();
  EXPECT_NE(listing.find("\"key\":\"k\""), std::string::npos) << listing;
  EXPECT_FALSE(*commander_answered) << "the commander was not busy: the test proves nothing";

  // Its generation given, the commander answers again.
  caf::anon_send(deposit, let_go_atom::value, std::uint64_t{3});
  sched->run();
  EXPECT_TRUE(*commander_answered);
}

// A lease asked before the commander's generation is known waits for it, and
// its fencing token is above every token an earlier commander's store could
// have granted (they share the owner epochs' scheme).
TEST_F(global_store_actor, grants_no_lease_below_its_commanders_generation) {
  using kind = detail::global_op::kind;
  store = spawn_global_store(*sys, ctx, caf::actor_cast<deposit_handle>(deposit));
  commander = spawn_commander(*sys, ctx, caf::actor_cast<deposit_handle>(deposit), store);
  sched->run();
  ASSERT_TRUE(seen->generation_asked);
  // One asker, the lease first: once the read after it is answered, the store has seen the lease.
  auto lease = std::make_shared<answer>();
  auto read = std::make_shared<answer>();
  sys->spawn([lease, read, store = store](caf::event_based_actor* helper) {
    for (auto [a, o] : {std::pair{lease, op_of(kind::lease, "hot")}, std::pair{read, op_of(kind::get, "hot")}})
      helper->request(store, 30s, global_atom::value, o)
        .then(
          [a = a](detail::global_reply& r) {
            a->reply = std::move(r);
            a->arrived = true;
          },
          [a = a, helper](caf::error& e) {
            a->error = helper->system().render(e);
            a->arrived = true;
          });
  });
  sched->run();
  ASSERT_TRUE(read->arrived);
  EXPECT_EQ(read->reply.refusal, "") << "reads are served meanwhile";
  EXPECT_FALSE(lease->arrived) << "a lease was granted before the tokens' floor was known";
  caf::anon_send(deposit, let_go_atom::value, std::uint64_t{7});
  sched->run();
  ASSERT_TRUE(lease->arrived);
  EXPECT_EQ(lease->error, "");
  EXPECT_EQ(lease->reply.refusal, "");
  EXPECT_GT(lease->reply.token, registry::epoch_source::make(7, 0));
}

// Without a generation within the hold budget, a waiting lease is refused
// (wait_expired: nothing applied, retry), never left hanging.
TEST_F(global_store_actor, a_lease_waiting_past_the_hold_budget_is_refused) {
  ctx->recipe().limits.hold_seconds = 0.2;
  store = spawn_global_store(*sys, ctx, caf::actor_cast<deposit_handle>(deposit));
  auto lease = ask(op_of(detail::global_op::kind::lease, "hot"));
  sched->run();
  ASSERT_FALSE(lease->arrived) << "answered before its budget was spent";
  // Time passes on the test's clock (no real wait): timeouts fire one at a time
  // in the order of their deadlines, the hold budget (0.2 s) long before the
  // asker's own (30 s).
  for (int fired = 0; fired < 16 && !lease->arrived && sched->trigger_timeout(); ++fired)
    sched->run();
  ASSERT_TRUE(lease->arrived);
  EXPECT_EQ(lease->error, "");
  EXPECT_EQ(lease->reply.refusal, "wait_expired");
}

// A takeover's store reads the snapshot first: what is asked meanwhile is
// served after, with the values the last store wrote (never an empty store,
// never a write the snapshot would then overwrite).
TEST_F(global_store_actor, a_takeover_serves_nothing_before_its_snapshot_is_read) {
  using kind = detail::global_op::kind;
  store = spawn_global_store(*sys, ctx, caf::actor_cast<deposit_handle>(deposit), global_store_start{{}, true});
  sched->run();
  ASSERT_TRUE(seen->snapshot_asked);
  auto early_get = ask(op_of(kind::get, "a"));
  auto early_set = ask(op_of(kind::set, "b", "new"));
  sched->run();
  EXPECT_FALSE(early_get->arrived || early_set->arrived) << "served before the snapshot was read";
  caf::anon_send(deposit, let_go_atom::value, global_snapshot{{"a", "old-a"}, {"b", "old-b"}});
  sched->run();
  ASSERT_TRUE(early_get->arrived && early_set->arrived);
  EXPECT_TRUE(early_get->reply.found);
  EXPECT_EQ(early_get->reply.value, "old-a");
  EXPECT_EQ(early_set->reply.refusal, "");
  EXPECT_EQ(call(op_of(kind::get, "b")).value, "new") << "the write asked during the read was overwritten by it";
}

// A cluster member declared down (the agent tells the commander): the commander
// tells its global store, which gives back the leases that member's actors held
// at once, nothing applied — the next requester is granted the key well before
// the TTL. Here the "member" is this process (its actors' node).
TEST_F(global_store_actor, a_member_declared_down_to_the_commander_loses_its_leases) {
  using kind = detail::global_op::kind;
  store = spawn_global_store(*sys, ctx, caf::actor_cast<deposit_handle>(deposit),
                             global_store_start{global_snapshot{{"k", "1"}}, false});
  commander = spawn_commander(*sys, ctx, caf::actor_cast<deposit_handle>(deposit), store);
  sched->run();
  ASSERT_TRUE(seen->generation_asked);
  caf::anon_send(deposit, let_go_atom::value, std::uint64_t{2});
  // The first holder stays alive (a holder that stops gives its lease back by itself).
  auto first = std::make_shared<answer>();
  auto holder = sys->spawn([first, store = store](caf::event_based_actor* h) -> caf::behavior {
    auto o = op_of(kind::lease, "k");
    o.ttl_ms = 60000;
    h->request(store, 30s, global_atom::value, o)
      .then(
        [first](detail::global_reply& r) {
          first->reply = std::move(r);
          first->arrived = true;
        },
        [first](caf::error&) { first->arrived = true; });
    return {[](tick_atom) {}};
  });
  holders.push_back(holder);
  sched->run();
  ASSERT_TRUE(first->arrived);
  ASSERT_EQ(first->reply.refusal, "");
  caf::anon_send(commander, node_down_atom::value, sys->node());
  sched->run();
  ASSERT_EQ(ctx->metrics.global_reclaimed_holder_down.load(), 1u)
    << "the lease of the member's holder was not released";
  // Granted now, though the first holder lives and its lease's TTL is a minute.
  auto second_op = op_of(kind::lease, "k");
  second_op.wait_ms = 20000;
  auto second = ask(second_op);
  sched->run();
  ASSERT_TRUE(second->arrived) << "the lease waits for its holder's TTL";
  EXPECT_EQ(second->reply.refusal, "");
  EXPECT_EQ(second->reply.value, "1") << "the first holder's lease applied nothing";
  EXPECT_GT(second->reply.token, first->reply.token);
}

}  // namespace global_store_test_file
