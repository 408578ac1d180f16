#pragma once
/// \file
/// The channels of users who froze with pages bound to open sockets
/// (docs/channels.md): kept by the commander and handed to each user's next
/// placement, which binds his pages to those sockets again. Bounded: past
/// `max_bindings` the users who froze longest ago are let go first (their
/// pages open their channels again on a 409). A plain class: a unit test
/// drives it without an actor system.

#include "actors/channel.hpp"

#include <cstddef>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

class kept_channels {
public:
  explicit kept_channels(std::size_t max_bindings) : max_(max_bindings) {}

  /// User `user` froze with these bindings (none: whatever was kept for him goes).
  void keep(const std::string& user, std::vector<channel_binding> bindings);
  /// His bindings, for the placement that starts him again (forgotten here).
  std::vector<channel_binding> take(const std::string& user);
  /// Drops every binding `gone` says is gone (the sockets of a member declared down).
  void forget_if(const std::function<bool(const channel_binding&)>& gone);

  std::size_t users() const noexcept { return by_user_.size(); }
  std::size_t bindings() const noexcept { return count_; }

private:
  struct entry {
    std::vector<channel_binding> bindings;
    std::list<std::string>::iterator age;  // its place in oldest_
  };
  std::size_t max_;
  std::size_t count_ = 0;
  std::unordered_map<std::string, entry> by_user_;
  std::list<std::string> oldest_;  // users, the one who froze longest ago first
};

}  // namespace troupe
