// The settings in force and their generations (issue 27, config/settings_ledger.hpp):
// a hot key applies as the next generation, a key that needs a restart or a
// composition that does not hold is refused whole with every violation, the
// same values change nothing, and the levels are composed again each time.
#include "config/settings_ledger.hpp"

#include <gtest/gtest.h>

namespace settings_ledger_test_file {

using namespace troupe::config;
using outcome = apply_result::outcome;

namespace {

settings_ledger boot(recipe_sources s = {}) {
  recipe r;
  auto problems = compose_recipe(s, r);
  EXPECT_TRUE(problems.empty());
  return settings_ledger(std::move(s), std::move(r), "");
}

}  // namespace

TEST(settings_ledger, only_hot_keys_are_hot) {
  EXPECT_TRUE(hot_key("group.default.user_idle_freeze_minutes"));
  EXPECT_TRUE(hot_key("group.any.guest_idle_seconds"));
  EXPECT_TRUE(hot_key("group.default.workers"));
  EXPECT_TRUE(hot_key("group.default.worker_max_users"));
  EXPECT_FALSE(hot_key("group.default.worker_max_number"));
  EXPECT_FALSE(hot_key("limits.max_inflight"));
  EXPECT_FALSE(hot_key("node.listen"));
  EXPECT_FALSE(hot_key("nonsense"));
  EXPECT_FALSE(hot_key("group.user_idle_freeze_minutes"));
}

TEST(settings_ledger, the_start_is_generation_one_and_a_hot_change_the_next) {
  auto ledger = boot();
  EXPECT_EQ(ledger.generation(), 1u);
  EXPECT_EQ(ledger.source(), "boot");
  auto digest = ledger.digest();
  auto r = ledger.apply({{"group.default.user_idle_freeze_minutes", "5"}}, "inline", "");
  ASSERT_EQ(r.what, outcome::applied);
  ASSERT_EQ(r.changed.size(), 1u);
  EXPECT_EQ(r.changed[0].key, "group.default.user_idle_freeze_minutes");
  EXPECT_EQ(r.changed[0].from, 30);
  EXPECT_EQ(r.changed[0].to, 5);
  EXPECT_EQ(ledger.generation(), 2u);
  EXPECT_EQ(ledger.source(), "inline");
  EXPECT_EQ(ledger.in_force().groups[0].user_idle_freeze_minutes, 5);
  EXPECT_NE(ledger.digest(), digest);
  auto status = ledger.status();
  EXPECT_EQ(status["generation"], 2);
  EXPECT_EQ(status["effective_settings"]["group.default.user_idle_freeze_minutes"], 5);
  EXPECT_EQ(ledger.config()["settings"]["group.default.user_idle_freeze_minutes"]["level"], "profile");
}

TEST(settings_ledger, the_same_values_again_change_nothing_not_even_the_generation) {
  auto ledger = boot();
  ASSERT_EQ(ledger.apply({{"group.default.guest_idle_seconds", "9"}}, "profile", "p1").what, outcome::applied);
  auto digest = ledger.digest();
  auto again = ledger.apply({{"group.default.guest_idle_seconds", "9"}}, "profile", "p2");
  EXPECT_EQ(again.what, outcome::unchanged);
  EXPECT_TRUE(again.changed.empty());
  EXPECT_EQ(ledger.generation(), 2u);
  EXPECT_EQ(ledger.digest(), digest);
  EXPECT_EQ(ledger.active_profile(), "p1");
}

TEST(settings_ledger, a_key_that_needs_a_restart_refuses_the_whole_apply) {
  auto ledger = boot();
  auto r = ledger.apply({{"group.default.user_idle_freeze_minutes", "5"}, {"limits.max_inflight", "3"},
                         {"group.default.isolation", "process"}},
                        "inline", "");
  ASSERT_EQ(r.what, outcome::rejected);
  ASSERT_EQ(r.violations.size(), 2u);
  EXPECT_EQ(r.violations[0].key, "group.default.isolation");
  EXPECT_EQ(r.violations[0].rule, "needs a restart");
  EXPECT_EQ(r.violations[0].value, "process");
  EXPECT_EQ(r.violations[1].key, "limits.max_inflight");
  EXPECT_TRUE(r.changed.empty());
  EXPECT_EQ(ledger.generation(), 1u) << "all or nothing";
  EXPECT_EQ(ledger.in_force().groups[0].user_idle_freeze_minutes, 30);
}

TEST(settings_ledger, an_invalid_composition_lists_every_violation_with_its_value) {
  auto ledger = boot();
  auto r = ledger.apply({{"group.default.user_idle_freeze_minutes", "-1"},
                         {"limits.max_bodyy", "3"},
                         {"group.default.guest_idle_seconds", "soon"}},
                        "inline", "");
  ASSERT_EQ(r.what, outcome::rejected);
  ASSERT_EQ(r.violations.size(), 3u);
  EXPECT_EQ(r.violations[0].key, "limits.max_bodyy");
  EXPECT_EQ(r.violations[0].rule, "unknown key");
  EXPECT_EQ(r.violations[0].value, "3");
  EXPECT_EQ(r.violations[1].key, "group.default.guest_idle_seconds");
  EXPECT_NE(r.violations[1].rule.find("expected a number"), std::string::npos) << r.violations[1].rule;
  EXPECT_EQ(r.violations[2].key, "group.default.user_idle_freeze_minutes");
  EXPECT_EQ(r.violations[2].value, "-1");
  EXPECT_EQ(ledger.generation(), 1u);
}

TEST(settings_ledger, a_key_only_the_earlier_profile_set_falls_back_to_the_lower_levels) {
  recipe_sources s;
  s.sets = {"group.default.guest_idle_seconds=7"};
  auto ledger = boot(s);
  ASSERT_EQ(ledger.apply({{"group.default.user_idle_freeze_minutes", "5"}, {"group.default.guest_idle_seconds", "1"}},
                         "profile", "p1")
              .what,
            outcome::applied);
  EXPECT_EQ(ledger.in_force().groups[0].guest_idle_seconds, 7) << "--set stays above the profile";
  ASSERT_EQ(ledger.apply({{"group.default.guest_idle_seconds", "3"}}, "profile", "p2").what, outcome::applied);
  EXPECT_EQ(ledger.in_force().groups[0].user_idle_freeze_minutes, 30) << "only P1 set it: back to the default";
  EXPECT_EQ(ledger.generation(), 3u);
  EXPECT_EQ(ledger.active_profile(), "p2");
  ASSERT_EQ(ledger.apply({{"group.default.guest_idle_seconds", "4"}}, "inline", "").what, outcome::unchanged)
    << "--set decides guest_idle_seconds whatever the profile says";
}

// A cluster member puts the leader's generation in force as that generation,
// even when its settings do not change (it acknowledges the leader's number).
TEST(settings_ledger, a_member_adopts_the_leaders_generation_number) {
  auto ledger = boot();
  auto r = ledger.adopt({7, "profile", "busy", {{"group.default.guest_idle_seconds", "9"}}});
  ASSERT_EQ(r.what, outcome::applied);
  EXPECT_EQ(ledger.generation(), 7u);
  EXPECT_EQ(ledger.source(), "profile");
  EXPECT_EQ(ledger.active_profile(), "busy");
  EXPECT_EQ(ledger.in_force().groups[0].guest_idle_seconds, 9);
  auto digest = ledger.digest();
  // The same values under the next number: unchanged, but the number is the leader's.
  r = ledger.adopt({8, "inline", "", {{"group.default.guest_idle_seconds", "9"}}});
  EXPECT_EQ(r.what, outcome::unchanged);
  EXPECT_EQ(ledger.generation(), 8u);
  EXPECT_EQ(ledger.source(), "inline");
  EXPECT_EQ(ledger.active_profile(), "");
  EXPECT_EQ(ledger.digest(), digest);
  // A generation that does not compose here is refused whole.
  r = ledger.adopt({9, "inline", "", {{"limits.max_inflight", "5"}}});
  EXPECT_EQ(r.what, outcome::rejected);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].rule, "needs a restart");
  EXPECT_EQ(ledger.generation(), 8u);
  // An operator's apply after that continues from the leader's number.
  ASSERT_EQ(ledger.apply({{"group.default.guest_idle_seconds", "3"}}, "inline", "").what, outcome::applied);
  EXPECT_EQ(ledger.generation(), 9u);
}

TEST(settings_ledger, the_record_the_leader_stores_reads_back_whole) {
  auto ledger = boot();
  ASSERT_EQ(ledger.apply({{"group.default.guest_idle_seconds", "9"}, {"group.default.user_idle_freeze_minutes", "4"}},
                         "profile", "night")
              .what,
            outcome::applied);
  auto text = encode_record(ledger.record());
  auto back = decode_record(text);
  EXPECT_EQ(back.generation, 2u);
  EXPECT_EQ(back.source, "profile");
  EXPECT_EQ(back.name, "night");
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].first, "group.default.user_idle_freeze_minutes");
  EXPECT_EQ(back.entries[1].second, "4");
  // Another member adopting it composes the same settings.
  auto other = boot();
  ASSERT_EQ(other.adopt(back).what, outcome::applied);
  EXPECT_EQ(other.digest(), ledger.digest());
  EXPECT_THROW(decode_record("{\"generation\": 3}"), recipe_error);
  EXPECT_THROW(decode_record("not json"), recipe_error);
  EXPECT_THROW(decode_record(R"({"generation":0,"source":"boot","name":"","entries":[]})"), recipe_error);
}

}  // namespace settings_ledger_test_file
