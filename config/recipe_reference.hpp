#pragma once
/// \file
/// The reference of every recipe key, generated from the one schema that also
/// validates them (config/recipe_fields.hpp): docs/config.md carries it
/// between `<!-- reference:begin -->` and `<!-- reference:end -->`, and a test
/// fails when the two differ (`troupe config-reference` prints it).

#include <string>

namespace troupe::config {

/// A Markdown table: | Key | Type | Default | Range | Applied |, one row per
/// key in schema order (groups as `group.NAME.KEY`, `[[cors]]` and
/// `[[static]]` entries as `cors[N].KEY`, `static[N].KEY`); "hot" keys are
/// applied by a profile while the node runs, the others need a restart;
/// secrets are marked.
std::string reference_markdown();

}  // namespace troupe::config
