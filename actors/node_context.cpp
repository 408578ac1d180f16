#include "actors/node_context.hpp"

#include "config/recipe.hpp"

namespace troupe {

node_context::node_context() : node_context(config::recipe{}) {}

node_context::node_context(config::recipe r)
  : recipe_(std::make_unique<config::recipe>(std::move(r))),
    sections_{&recipe_->node,      &recipe_->limits,    &recipe_->channel,
              &recipe_->deposit,   &recipe_->commander, &recipe_->cluster} {}

node_context::~node_context() = default;

const config::group_settings* node_context::group(const std::string& name) const { return recipe_->group(name); }

const config::group_settings& node_context::default_group() const { return recipe_->default_group(); }

const std::vector<config::group_settings>& node_context::groups() const { return recipe_->groups; }

const std::vector<config::cors_settings>& node_context::cors() const { return recipe_->cors; }

const std::vector<config::static_settings>& node_context::statics() const { return recipe_->statics; }

caf::duration node_context::hold_timeout() const { return to_duration(recipe_->limits.hold_seconds); }

caf::duration node_context::request_timeout() const { return to_duration(recipe_->limits.request_timeout_seconds); }

}  // namespace troupe
