#include "actors/kept_channels.hpp"

#include <algorithm>

namespace troupe {

void kept_channels::keep(const std::string& user, std::vector<channel_binding> bindings) {
  take(user);
  if (bindings.empty())
    return;
  count_ += bindings.size();
  oldest_.push_back(user);
  by_user_.emplace(user, entry{std::move(bindings), std::prev(oldest_.end())});
  while (count_ > max_ && !oldest_.empty())
    take(oldest_.front());
}

std::vector<channel_binding> kept_channels::take(const std::string& user) {
  auto i = by_user_.find(user);
  if (i == by_user_.end())
    return {};
  auto bindings = std::move(i->second.bindings);
  count_ -= bindings.size();
  oldest_.erase(i->second.age);
  by_user_.erase(i);
  return bindings;
}

void kept_channels::forget_if(const std::function<bool(const channel_binding&)>& gone) {
  for (auto i = by_user_.begin(); i != by_user_.end();) {
    auto& b = i->second.bindings;
    auto before = b.size();
    b.erase(std::remove_if(b.begin(), b.end(), gone), b.end());
    count_ -= before - b.size();
    if (b.empty()) {
      oldest_.erase(i->second.age);
      i = by_user_.erase(i);
    } else {
      ++i;
    }
  }
}

}  // namespace troupe
