// The filesystem deposit's file primitives and layout (docs/deposit.md "Layout"),
// shared by its sources. Internal to the store module (include/troupe/ is the API).
#pragma once

#include "store/deposit.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace troupe::store::fs_deposit {

/// Escaped keys longer than this are cut into nested directories (NAME_MAX is
/// 255 and the file also gets ".parcel", or ".sweep-<pid>-" while expired).
inline constexpr std::size_t max_piece = 200;
/// Deepest nesting: 255 bytes escaped to at most 765 characters = 4 pieces.
inline constexpr int max_depth = 4;
/// A temp file (or sweep tombstone) untouched for this long is a crash's leftover.
inline constexpr std::int64_t leftover_grace_ns = 60LL * 1000 * 1000 * 1000;
inline constexpr std::string_view suffix = ".parcel";
inline constexpr std::string_view temp_prefix = ".tmp-";
inline constexpr std::string_view tomb_prefix = ".sweep-";
inline constexpr std::string_view marker_prefix = ".quarantined-";
inline constexpr std::string_view claim_prefix = ".claim-";
inline constexpr std::string_view generation_name = "commander-generation";
inline constexpr std::string_view generation_lock_name = ".commander-generation.lock";
/// How much of a parcel the fencing check reads first (its header is far smaller).
inline constexpr std::size_t header_prefix_bytes = 4096;
/// Modes of everything the deposit makes: nobody but the node's user reads a parcel.
inline constexpr mode_t dir_mode = 0700;
inline constexpr mode_t file_mode = 0600;

inline std::string errno_text(int e) {
  return std::generic_category().message(e);
}

inline bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

inline bool is_kept(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '@' || c == '-';
}

inline constexpr char hex_digits[] = "0123456789abcdef";

inline std::string shard_of(std::string_view key) {
  std::uint64_t h = checksum(key.data(), key.size());
  h ^= h >> 32;
  h ^= h >> 16;
  h ^= h >> 8;
  auto b = static_cast<unsigned>(h & 0xff);
  return {hex_digits[b >> 4], hex_digits[b & 0xf]};
}

inline std::int64_t ns_of(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ns_of(ts);
}

/// What a non-regular directory entry is, for logs and quarantine reasons.
inline const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISLNK(mode))
    return "a symlink";
  if (S_ISFIFO(mode))
    return "a fifo";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  return "not a regular file";
}

/// Where one parcel lives.
struct location {
  std::string lock;  ///< its shard's fencing lock: <base>/.fence-<shard>.lock
  std::string dir;   ///< its directory (the shard, or the deepest piece directory)
  std::string name;  ///< last piece + ".parcel"
  std::string path;  ///< dir + "/" + name
  std::string escaped;
};

inline location locate(const std::string& base, std::string_view key) {
  location loc;
  loc.escaped = escape_key(key);
  const std::string shard = shard_of(key);
  loc.dir = base + "/" + shard;
  loc.lock = base + "/.fence-" + shard + ".lock";
  std::size_t pos = 0;
  while (loc.escaped.size() - pos > max_piece) {
    loc.dir += '/';
    loc.dir.append(loc.escaped, pos, max_piece);
    pos += max_piece;
  }
  loc.name = loc.escaped.substr(pos);
  loc.name += suffix;
  loc.path = loc.dir + "/" + loc.name;
  return loc;
}

/// 0 or an errno.
inline int write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

inline int fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  int e = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return e;
}

/// Creates the directories of `dir` below `base` (which exists), each made
/// durable in its parent. 0 or an errno.
inline int make_dirs(const std::string& base, const std::string& dir) {
  std::size_t pos = base.size();
  while (pos < dir.size()) {
    std::size_t next = dir.find('/', pos + 1);
    if (next == std::string::npos)
      next = dir.size();
    std::string sub = dir.substr(0, next);
    if (::mkdir(sub.c_str(), dir_mode) == 0) {
      if (int e = fsync_dir(dir.substr(0, pos)))
        return e;
    } else if (errno != EEXIST) {
      return errno;
    }
    pos = next;
  }
  return 0;
}

/// Moves `from` to `to` unless `to` exists (EEXIST). 0 or an errno.
inline int move_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0)
    return 0;
  int e = errno;
  if (e != EINVAL && e != ENOSYS && e != ENOTSUP)
    return e;
  // Filesystem without RENAME_NOREPLACE: link (refuses to replace) + unlink.
  if (::link(from.c_str(), to.c_str()) != 0)
    return errno;
  if (::unlink(from.c_str()) != 0)
    return errno;
  return 0;
}

struct dir_entry {
  std::string name;
  struct stat st;
};

/// The entries of `dir` (lstat'ed), or an errno.
inline int list_dir(const std::string& dir, std::vector<dir_entry>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d)
    return errno;
  int fd = ::dirfd(d);
  while (true) {
    errno = 0;
    struct dirent* ent = ::readdir(d);
    if (!ent) {
      int e = errno;
      ::closedir(d);
      return e;
    }
    std::string_view name = ent->d_name;
    if (name == "." || name == "..")
      continue;
    dir_entry de;
    de.name = std::string(name);
    if (::fstatat(fd, ent->d_name, &de.st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;  // vanished meanwhile
    out.push_back(std::move(de));
  }
}

inline bool is_shard_name(std::string_view n) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return n.size() == 2 && hex(n[0]) && hex(n[1]);
}

/// An flock(2)'ed file, unlocked (closed) on destruction. Every holder opens
/// its own description, so threads of one process exclude each other as
/// processes do.
class file_lock {
public:
  file_lock() = default;
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;
  ~file_lock() { release(); }
  /// Unlocks (closes) what is held, if anything.
  void release() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }
  /// Opens (creating it, 0600) and locks `path` exclusively; 0 or an errno.
  int lock(const std::string& path) {
    release();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
      return errno;
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      ::close(fd);
      return e;
    }
    fd_ = fd;
    return 0;
  }

private:
  int fd_ = -1;
};

/// Reads up to `limit` bytes of `fd` from its start into `out`; 0 or an errno.
inline int read_prefix(int fd, std::size_t limit, bytes& out) {
  out.clear();
  char buf[16384];
  while (out.size() < limit) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    if (n == 0)
      break;
    out.insert(out.end(), buf, buf + n);
  }
  return 0;
}

/// A small text file holding one decimal number (a claim, the generation).
/// ENOENT: nullopt with e = 0. Anything but digits (and a trailing newline): nullopt, e = EINVAL.
inline std::optional<std::uint64_t> read_number(const std::string& path, int& e) {
  e = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT)
      e = errno;
    return std::nullopt;
  }
  bytes text;
  e = read_prefix(fd, 64, text);
  ::close(fd);
  if (e)
    return std::nullopt;
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  if (text.empty() || text.size() > 20) {
    e = EINVAL;
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || v > (~std::uint64_t{0} - 9) / 10) {
      e = EINVAL;
      return std::nullopt;
    }
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

}  // namespace troupe::store::fs_deposit
