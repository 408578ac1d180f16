// The reference of docs/config.md is generated from the schema that validates
// the recipe (config/recipe_reference.hpp): this test fails when the two
// differ, and prints what to paste (or run `troupe config-reference`).
#include "config/recipe_reference.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace recipe_reference_test_file {

using troupe::config::reference_markdown;

std::string docs_reference() {
  std::ifstream in(std::string(TROUPE_SOURCE_DIR) + "/docs/config.md");
  std::stringstream text;
  text << in.rdbuf();
  auto doc = text.str();
  const std::string begin = "<!-- reference:begin -->\n", end = "<!-- reference:end -->";
  auto b = doc.find(begin), e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b)
    return "(no reference markers in docs/config.md)";
  return doc.substr(b + begin.size(), e - b - begin.size());
}

TEST(recipe_reference, docs_config_md_carries_the_reference_the_schema_generates) {
  auto generated = reference_markdown();
  EXPECT_EQ(docs_reference(), generated) << "paste this between the reference markers of docs/config.md:\n"
                                         << generated;
}

TEST(recipe_reference, every_key_has_a_row_with_its_type_default_range_and_whether_it_is_hot) {
  auto r = reference_markdown();
  EXPECT_NE(r.find("| `limits.max_body_bytes` | integer | `1048576` | ≥ 1 | restart |"), std::string::npos) << r;
  EXPECT_NE(r.find("| `group.NAME.user_idle_freeze_minutes` | number | `30` | > 0, ≤ 10000000 | **hot** |"),
            std::string::npos)
    << r;
  EXPECT_NE(r.find("| `node.admin_token` | string | `\"\"` |  | restart, secret |"), std::string::npos) << r;
  EXPECT_NE(r.find("| `group.NAME.isolation` | string | `\"thread\"` | `thread` `process` | restart |"),
            std::string::npos)
    << r;
  EXPECT_NE(r.find("| `group.NAME.worker_max_users` | integer | `0` | 0–100000000 | **hot** |"), std::string::npos)
    << r;
}

}  // namespace recipe_reference_test_file
