// Profiles (issue 27, config/profile.hpp): the level between the recipe and
// the environment, TOML or JSON, stored as <profiles_path>/<NAME>.toml; the
// composition lists every problem; each key's level; the digest.
#include "config/profile.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace profile_test_file {

using namespace troupe::config;
namespace fs = std::filesystem;

namespace {

using troupe::config::test::temp_dir;

std::vector<std::string> keys(const std::vector<recipe_error>& problems) {
  std::vector<std::string> out;
  for (auto& p : problems)
    out.push_back(p.key());
  return out;
}

}  // namespace

TEST(profile, toml_and_json_say_the_same) {
  auto toml = parse_profile("[limits]\nmax_inflight = 500\nhold_seconds = 2.5\n[node]\ninline_handlers = false\n"
                            "trusted_proxies = [\"10.0.0.0/8\", \"::1/128\"]\n[group.default]\nworkers = 3\n",
                            profile_format::toml, "busy");
  auto json = parse_profile(R"({"limits": {"max_inflight": 500, "hold_seconds": 2.5},
                                "node": {"inline_handlers": false, "trusted_proxies": ["10.0.0.0/8", "::1/128"]},
                                "group": {"default": {"workers": 3}}})",
                            profile_format::json, "inline");
  std::sort(toml.begin(), toml.end());
  std::sort(json.begin(), json.end());
  EXPECT_EQ(toml, json);
  profile_entries expected{{"group.default.workers", "3"},
                           {"limits.hold_seconds", "2.5"},
                           {"limits.max_inflight", "500"},
                           {"node.inline_handlers", "false"},
                           {"node.trusted_proxies", "10.0.0.0/8,::1/128"}};
  EXPECT_EQ(toml, expected);
}

TEST(profile, what_is_not_a_profile_is_refused_saying_where) {
  auto refused = [](const std::string& text, profile_format f) -> std::string {
    try {
      parse_profile(text, f, "P");
    } catch (const recipe_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refused("[limits\n", profile_format::toml).find("P:"), std::string::npos);
  EXPECT_NE(refused("{", profile_format::json).find("not JSON"), std::string::npos);
  EXPECT_NE(refused("[1, 2]", profile_format::json).find("expected a JSON object"), std::string::npos);
  EXPECT_NE(refused("max_inflight = 3\n", profile_format::toml).find("expected a table of keys"), std::string::npos);
  EXPECT_NE(refused("[limits.deeper]\nx = 1\n", profile_format::toml).find("expected a value, got a table"),
            std::string::npos);
  EXPECT_NE(refused("[group]\ndefault = 3\n", profile_format::toml).find("[group.default]"), std::string::npos);
  EXPECT_NE(refused("[node]\ntrusted_proxies = [1]\n", profile_format::toml).find("array of strings"),
            std::string::npos);
  EXPECT_NE(refused("[node]\ntrusted_proxies = [\"a,b\"]\n", profile_format::toml).find("comma"), std::string::npos);
  EXPECT_NE(refused("[node]\nlisten = 1979-05-27\n", profile_format::toml).find("date or time"), std::string::npos);
  EXPECT_NE(refused(std::string(2 << 20, ' '), profile_format::toml).find("larger than"), std::string::npos);
}

TEST(profile, a_stored_profile_is_its_folders_NAME_toml_and_a_missing_one_is_not_found) {
  temp_dir d;
  d.write("busy.toml", "[limits]\nmax_inflight = 42\n");
  EXPECT_EQ(read_profile(d.str(), "busy"), (profile_entries{{"limits.max_inflight", "42"}}));
  EXPECT_THROW(read_profile(d.str(), "idle"), profile_not_found);
  EXPECT_THROW(read_profile("", "busy"), profile_not_found);
  for (const char* bad : {"../busy", ".hidden", "a/b", "", "a b"}) {
    try {
      read_profile(d.str(), bad);
      ADD_FAILURE() << bad << " was read";
    } catch (const profile_not_found&) {
      ADD_FAILURE() << bad << " was looked for";
    } catch (const recipe_error& e) {
      EXPECT_NE(std::string(e.what()).find("not a profile name"), std::string::npos) << e.what();
    }
  }
}

TEST(profile, a_profile_sits_above_the_recipe_and_below_the_environment_and_set) {
  temp_dir d;
  recipe_sources s;
  s.file = d.write("r.toml", "[limits]\nmax_inflight = 100\nhold_seconds = 3\nmax_consoles = 5\n");
  s.profile = {{"limits.max_inflight", "200"}, {"limits.hold_seconds", "4"}, {"limits.max_consoles", "6"},
               {"limits.max_pages_per_user", "7"}};
  s.env = {{"TROUPE_LIMITS_HOLD_SECONDS", "5"}};
  s.sets = {"limits.max_consoles=8"};
  recipe r;
  ASSERT_TRUE(compose_recipe(s, r).empty());
  EXPECT_EQ(r.limits.max_inflight, 200u);       // profile over recipe
  EXPECT_EQ(r.limits.hold_seconds, 5);          // environment over profile
  EXPECT_EQ(r.limits.max_consoles, 8u);         // set over everything
  EXPECT_EQ(r.limits.max_pages_per_user, 7u);   // profile over default
  auto levels = settings_with_levels(s);
  EXPECT_EQ(levels["limits.max_inflight"]["level"], "profile");
  EXPECT_EQ(levels["limits.hold_seconds"]["level"], "environment");
  EXPECT_EQ(levels["limits.max_consoles"]["level"], "set");
  EXPECT_EQ(levels["limits.max_pages_per_user"]["level"], "profile");
  EXPECT_EQ(levels["limits.max_body_bytes"]["level"], "default");
  EXPECT_EQ(levels["limits.max_inflight"]["value"], 200);
}

TEST(profile, levels_are_composed_again_so_a_key_only_the_last_profile_set_falls_back) {
  temp_dir d;
  recipe_sources s;
  s.file = d.write("r.toml", "[limits]\nmax_inflight = 100\n");
  s.profile = {{"limits.max_inflight", "200"}, {"limits.max_consoles", "9"}};
  recipe p1;
  ASSERT_TRUE(compose_recipe(s, p1).empty());
  s.profile = {{"limits.max_consoles", "3"}};
  recipe p2;
  ASSERT_TRUE(compose_recipe(s, p2).empty());
  EXPECT_EQ(p1.limits.max_inflight, 200u);
  EXPECT_EQ(p2.limits.max_inflight, 100u) << "P2 does not set it: the recipe's again";
  EXPECT_EQ(p2.limits.max_consoles, 3u);
}

TEST(profile, every_problem_of_a_composition_is_listed_and_nothing_comes_of_it) {
  recipe_sources s;
  s.profile = {{"limits.max_inflight", "0"},
               {"limits.max_bodyy", "3"},
               {"group.default.workers", "many"},
               {"orchestration.profile_name", "other"},
               {"limits.stream_credit_bytes", "999999999"}};
  recipe r;
  r.limits.max_inflight = 77;
  auto problems = compose_recipe(s, r);
  EXPECT_EQ(keys(problems),
            (std::vector<std::string>{"limits.max_bodyy", "group.default.workers", "orchestration.profile_name",
                                      "limits.max_inflight", "limits.stream_credit_bytes"}));
  EXPECT_NE(std::string(problems[0].what()).find("profile limits.max_bodyy: unknown key"), std::string::npos)
    << problems[0].what();
  EXPECT_EQ(r.limits.max_inflight, 77u) << "an invalid composition leaves the recipe as it was";
}

TEST(profile, the_digest_is_the_settings_and_secrets_are_hidden_where_shown) {
  recipe a, b;
  EXPECT_EQ(settings_digest(a), settings_digest(b));
  b.limits.max_inflight = 1;
  EXPECT_NE(settings_digest(a), settings_digest(b));
  a.node.admin_token = "s3cret";
  a.deposit.url = "postgresql://u:pw@h/db";
  auto shown = flatten(a, true);
  EXPECT_EQ(shown["node.admin_token"], "***");
  EXPECT_EQ(shown["deposit.url"], "***");
  EXPECT_EQ(shown["node.cookie_secret"], "***");
  EXPECT_EQ(flatten(a, false)["node.admin_token"], "s3cret");
  EXPECT_EQ(shown.dump().find("s3cret"), std::string::npos);
  EXPECT_EQ(shown["group.default.workers"], 1);

  recipe_sources s;
  s.sets = {"node.admin_token=hidden-token"};
  auto levels = settings_with_levels(s);
  EXPECT_EQ(levels["node.admin_token"]["level"], "set") << "compared as it is";
  EXPECT_EQ(levels["node.admin_token"]["value"], "***") << "shown hidden";
}

}  // namespace profile_test_file
