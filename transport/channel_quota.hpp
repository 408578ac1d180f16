#pragma once
/// \file
/// The channel sockets open on this node, by connection and by user
/// (channel.max_sockets_per_connection, channel.max_sockets_per_user,
/// docs/channels.md "The socket"), and how to close those of a connection id
/// that login or logout ended. Owned by the front, shared by its sessions
/// (any thread: one mutex); a plain class, a unit test drives it without sockets.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

class channel_quota {
public:
  /// Closes one socket (it posts to the socket's session, which may be gone by
  /// then). Run outside the lock: it may not call back into the quota at once.
  using closer = std::function<void()>;

  channel_quota(std::uint64_t max_per_connection, std::uint64_t max_per_user);

  /// Socket `socket` (a number unique on this front) of connection `cid`
  /// opens: counted under `cid`, with `close` to end it (close_connection).
  /// False, nothing counted, when `cid` has max_per_connection sockets already.
  bool try_open(std::uint64_t socket, const std::string& cid, closer close);
  /// Counts open socket `socket` under `user`, its connection's user. False,
  /// not counted under him, when he has max_per_user sockets already (or the
  /// socket is not open here).
  bool try_admit(std::uint64_t socket, const std::string& user);
  /// Login or logout over socket `socket` moved it to connection `cid` (a new
  /// id) of `user`: its counts follow it. False when `user` has max_per_user
  /// sockets already: it then counts under `cid` and under no user.
  bool move(std::uint64_t socket, const std::string& cid, const std::string& user);
  /// Socket `socket` closed: its counts go (a connection or user whose count
  /// reaches 0 is forgotten).
  void release(std::uint64_t socket);
  /// Login or logout ended connection id `cid`: the closer of each of its
  /// sockets but `except` runs (they stay counted until they release). Returns how many.
  std::size_t close_connection(const std::string& cid, std::uint64_t except = 0);

  /// Sockets counted under connection `cid`, and under user `user`.
  std::size_t sockets_of_connection(const std::string& cid) const;
  std::size_t sockets_of_user(const std::string& user) const;

private:
  struct socket_entry {
    std::string cid;
    std::string user;  // "" until admitted
    closer close;
  };
  // Under mutex_: counts `socket` under `user` if he is below max_per_user_.
  bool admit_locked(socket_entry& s, const std::string& user);
  void leave_user_locked(socket_entry& s);
  void leave_connection_locked(const std::string& cid, std::uint64_t socket);

  const std::uint64_t max_per_connection_;
  const std::uint64_t max_per_user_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, socket_entry> sockets_;
  // Each connection's sockets (at most max_per_connection_: a vector), and each user's count.
  std::unordered_map<std::string, std::vector<std::uint64_t>> by_connection_;
  std::unordered_map<std::string, std::uint64_t> per_user_;
};

}  // namespace troupe
