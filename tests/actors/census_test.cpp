// The census actor's glue (actors/census.cpp) on CAF's deterministic test
// coordinator: no thread runs an actor by itself; the test delivers every
// message (run()) and moves the clock (advance_time()), so a probe's timeout
// fires exactly when the test says, never when the machine is slow.
// The register and the documents themselves: census_book_test.cpp.
#include "actors/census.hpp"
#include "actors/orchestration_log.hpp"
#include "deterministic_system.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>

namespace census_test_file {

using namespace troupe;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// A user actor as the census sees it: it says what it is at start, and
// answers probes with `mailbox` (or never, when `silent`).
caf::behavior fake_user(caf::event_based_actor* self, census_handle census, std::string name, bool silent) {
  census_note note;
  note.kind = static_cast<std::uint8_t>(actor_kind::user);
  note.name = std::move(name);
  note.parent = "w1";
  note.connections = 1;
  self->send(census, note_atom::value, note);
  return {
    [=](probe_atom, std::uint64_t query, bool) -> caf::result<actor_probe> {
      if (silent)
        return caf::delegated<actor_probe>{};  // never answered
      actor_probe p;
      p.query = query;
      p.mailbox = 3;
      return p;
    },
  };
}

// What an asynchronous query brought back (a helper actor holds the request).
struct answer {
  bool arrived = false;
  json doc;
  std::string error;
};

class census_actor : public ::testing::Test, protected test::deterministic_system {
protected:
  census_actor() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "troupe-census.XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
    ctx = std::make_shared<node_context>();
    ctx->node_name = "test-node";
    census = spawn_census(*sys, ctx,
                          std::make_shared<orchestration_log>((dir / "orchestration.log").string(), 1 << 20, 2));
    sched->run();
  }

  ~census_actor() override {
    for (auto& m : members)
      caf::anon_send_exit(m, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(census, caf::exit_reason::user_shutdown);
    sched->run();
    sched->trigger_timeouts();  // helpers still waiting end with their requests' timeouts
    sched->run();
    members.clear();
    census = nullptr;
    sys.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  caf::actor add_user(const std::string& name, bool silent = false) {
    members.push_back(sys->spawn(fake_user, census, name, silent));
    sched->run();
    return members.back();
  }

  // Asks for the users' census (probed); the answer arrives as the test runs the actors.
  std::shared_ptr<answer> ask_users() {
    auto a = std::make_shared<answer>();
    census_query q;
    q.kind = "user";
    sys->spawn([a, q, census = census](caf::event_based_actor* helper) {
      helper->request(census, 30s, census_atom::value, q)
        .then(
          [a](std::string& body) {
            a->doc = json::parse(body);
            a->arrived = true;
          },
          [a, helper](caf::error& e) {
            a->error = helper->system().render(e);
            a->arrived = true;
          });
    });
    sched->run();
    return a;
  }

  std::filesystem::path dir;
  node_context_ptr ctx;
  census_handle census;
  std::vector<caf::actor> members;
};

TEST_F(census_actor, a_query_waits_for_its_probes_and_not_past_their_time) {
  add_user("alice");
  add_user("bob", true);
  auto a = ask_users();
  ASSERT_FALSE(a->arrived) << "bob's probe is not back";
  sched->advance_time(200ms);
  sched->run();
  ASSERT_FALSE(a->arrived) << "the probes' time (250 ms) is not up yet";
  sched->advance_time(60ms);
  sched->run();
  ASSERT_TRUE(a->arrived);
  ASSERT_TRUE(a->error.empty()) << a->error;
  auto& rows = a->doc["actors"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["name"], "alice");
  EXPECT_EQ(rows[0]["mailbox"], 3);
  EXPECT_FALSE(rows[0].contains("probe"));
  EXPECT_EQ(rows[1]["name"], "bob");
  EXPECT_EQ(rows[1]["probe"], "timeout");
}

TEST_F(census_actor, a_query_whose_probes_all_answer_needs_no_timer) {
  add_user("alice");
  add_user("carol");
  auto a = ask_users();
  ASSERT_TRUE(a->arrived) << "both answered as soon as they ran";
  EXPECT_EQ(a->doc["actors"][1]["mailbox"], 3);
}

TEST_F(census_actor, a_member_that_stops_leaves_it) {
  add_user("alice");
  auto bob = add_user("bob");
  caf::anon_send_exit(bob, caf::exit_reason::user_shutdown);
  sched->run();  // his down message reaches the census
  auto a = ask_users();
  ASSERT_TRUE(a->arrived);
  EXPECT_EQ(a->doc["matched"], 1);
  EXPECT_EQ(a->doc["actors"][0]["name"], "alice");
}

// Its samples are dated by the wall clock (registry/rate_history, tested
// there); here, that its timer comes every second and is armed again.
TEST_F(census_actor, it_samples_the_rate_history_once_a_second) {
  EXPECT_EQ(sched->advance_time(999ms), 0u);
  EXPECT_EQ(sched->advance_time(1ms), 1u) << "the first sample is due";
  sched->run();
  EXPECT_EQ(sched->advance_time(1s), 1u) << "and the next, a second later";
  sched->run();
}

}  // namespace
}  // namespace census_test_file
