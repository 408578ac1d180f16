#include "transport/channel_quota.hpp"

#include <algorithm>

namespace troupe {

channel_quota::channel_quota(std::uint64_t max_per_connection, std::uint64_t max_per_user)
  : max_per_connection_(max_per_connection), max_per_user_(max_per_user) {}

bool channel_quota::try_open(std::uint64_t socket, const std::string& cid, closer close) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& of_connection = by_connection_[cid];
  if (of_connection.size() >= max_per_connection_)
    return false;  // not empty: the entry stays for its sockets
  of_connection.push_back(socket);
  sockets_[socket] = socket_entry{cid, {}, std::move(close)};
  return true;
}

bool channel_quota::try_admit(std::uint64_t socket, const std::string& user) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = sockets_.find(socket);
  if (s == sockets_.end())
    return false;
  leave_user_locked(s->second);
  return admit_locked(s->second, user);
}

bool channel_quota::move(std::uint64_t socket, const std::string& cid, const std::string& user) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = sockets_.find(socket);
  if (s == sockets_.end())
    return false;
  leave_user_locked(s->second);
  if (s->second.cid != cid) {  // a new id: nobody else can hold it yet
    leave_connection_locked(s->second.cid, socket);
    by_connection_[cid].push_back(socket);
    s->second.cid = cid;
  }
  return admit_locked(s->second, user);
}

void channel_quota::release(std::uint64_t socket) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = sockets_.find(socket);
  if (s == sockets_.end())
    return;
  leave_user_locked(s->second);
  leave_connection_locked(s->second.cid, socket);
  sockets_.erase(s);
}

std::size_t channel_quota::close_connection(const std::string& cid, std::uint64_t except) {
  std::vector<closer> closing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto c = by_connection_.find(cid);
    if (c == by_connection_.end())
      return 0;
    for (auto socket : c->second)
      if (auto s = sockets_.find(socket); socket != except && s != sockets_.end())
        closing.push_back(s->second.close);
  }
  for (auto& close : closing)
    if (close)
      close();
  return closing.size();
}

std::size_t channel_quota::sockets_of_connection(const std::string& cid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto c = by_connection_.find(cid);
  return c == by_connection_.end() ? 0 : c->second.size();
}

std::size_t channel_quota::sockets_of_user(const std::string& user) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto u = per_user_.find(user);
  return u == per_user_.end() ? 0 : static_cast<std::size_t>(u->second);
}

bool channel_quota::admit_locked(socket_entry& s, const std::string& user) {
  if (user.empty())
    return false;  // "" marks a socket counted under nobody
  auto& count = per_user_[user];
  if (count >= max_per_user_)
    return false;  // at the limit: not 0, the entry stays
  ++count;
  s.user = user;
  return true;
}

void channel_quota::leave_user_locked(socket_entry& s) {
  if (s.user.empty())
    return;
  if (auto u = per_user_.find(s.user); u != per_user_.end() && --u->second == 0)
    per_user_.erase(u);
  s.user.clear();
}

void channel_quota::leave_connection_locked(const std::string& cid, std::uint64_t socket) {
  auto c = by_connection_.find(cid);
  if (c == by_connection_.end())
    return;
  auto& sockets = c->second;
  sockets.erase(std::remove(sockets.begin(), sockets.end(), socket), sockets.end());
  if (sockets.empty())
    by_connection_.erase(c);
}

}  // namespace troupe
