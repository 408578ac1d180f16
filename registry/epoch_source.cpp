#include "registry/epoch_source.hpp"

namespace troupe::registry {

bool epoch_source::start(std::uint64_t generation) noexcept {
  if (generation == 0 || generation > max_generation || generation <= generation_)
    return false;
  generation_ = generation;
  counter_ = 0;
  return true;
}

std::optional<std::uint64_t> epoch_source::next() noexcept {
  if (!started() || counter_ >= limit_)
    return std::nullopt;
  return make(generation_, ++counter_);
}

}  // namespace troupe::registry
