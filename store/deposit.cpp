#include "store/deposit.hpp"

#include <spdlog/spdlog.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <tuple>
#include <system_error>
#include <utility>

namespace troupe::store {

namespace {

/// Escaped keys longer than this are cut into nested directories (NAME_MAX is
/// 255 and the file also gets ".parcel", or ".sweep-<pid>-" while expired).
constexpr std::size_t max_piece = 200;
/// Deepest nesting: 255 bytes escaped to at most 765 characters = 4 pieces.
constexpr int max_depth = 4;
/// A temp file (or sweep tombstone) untouched for this long is a crash's leftover.
constexpr std::int64_t leftover_grace_ns = 60LL * 1000 * 1000 * 1000;
constexpr std::string_view suffix = ".parcel";
constexpr std::string_view temp_prefix = ".tmp-";
constexpr std::string_view tomb_prefix = ".sweep-";
constexpr std::string_view marker_prefix = ".quarantined-";
constexpr std::string_view claim_prefix = ".claim-";
constexpr std::string_view generation_name = "commander-generation";
constexpr std::string_view generation_lock_name = ".commander-generation.lock";
/// How much of a parcel the fencing check reads first (its header is far smaller).
constexpr std::size_t header_prefix_bytes = 4096;
/// Modes of everything the deposit makes: nobody but the node's user reads a parcel.
constexpr mode_t dir_mode = 0700;
constexpr mode_t file_mode = 0600;

std::string errno_text(int e) {
  return std::generic_category().message(e);
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

bool is_kept(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '@' || c == '-';
}

const char hex_digits[] = "0123456789abcdef";

std::string shard_of(std::string_view key) {
  std::uint64_t h = checksum(key.data(), key.size());
  h ^= h >> 32;
  h ^= h >> 16;
  h ^= h >> 8;
  auto b = static_cast<unsigned>(h & 0xff);
  return {hex_digits[b >> 4], hex_digits[b & 0xf]};
}

std::int64_t ns_of(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ns_of(ts);
}

/// What a non-regular directory entry is, for logs and quarantine reasons.
const char* kind_of(mode_t mode) {
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

location locate(const std::string& base, std::string_view key) {
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
int write_all(int fd, const char* data, std::size_t size) {
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

int fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  int e = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return e;
}

/// Creates the directories of `dir` below `base` (which exists), each made
/// durable in its parent. 0 or an errno.
int make_dirs(const std::string& base, const std::string& dir) {
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
int move_no_replace(const std::string& from, const std::string& to) {
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
int list_dir(const std::string& dir, std::vector<dir_entry>& out) {
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

bool is_shard_name(std::string_view n) {
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
int read_prefix(int fd, std::size_t limit, bytes& out) {
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
std::optional<std::uint64_t> read_number(const std::string& path, int& e) {
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

class filesystem_deposit final : public deposit {
public:
  explicit filesystem_deposit(const std::string& dir)
      : root_(dir) {
    if (root_.empty())
      throw deposit_error("deposit directory not given");
    while (root_.size() > 1 && root_.back() == '/')
      root_.pop_back();
    users_ = root_ + "/users";
    connections_ = root_ + "/connections";
    quarantine_ = root_ + "/quarantine";

    std::error_code ec;
    // The parents are not the deposit's (default modes); DIR itself is made 0700.
    auto parent = std::filesystem::path(root_).parent_path();
    if (!parent.empty())
      std::filesystem::create_directories(parent, ec);
    if (ec)
      throw deposit_error("cannot create deposit directory " + parent.string() + ": " + ec.message());
    for (const auto* d : {&root_, &users_, &connections_, &quarantine_}) {
      if (::mkdir(d->c_str(), dir_mode) != 0 && errno != EEXIST)
        throw deposit_error("cannot create deposit directory " + *d + ": " + errno_text(errno));
      struct stat st {};
      if (::stat(d->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw deposit_error("deposit path " + *d + " is not a directory");
      tighten(*d, st.st_mode);
    }
    if (int e = fsync_dir(root_))
      throw deposit_error("cannot fsync deposit directory " + root_ + ": " + errno_text(e));
    // Probe that each directory can be written (root ignores modes: try it).
    for (const auto* sub : {&users_, &connections_, &quarantine_}) {
      std::string probe = temp_name(*sub);
      int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file_mode);
      if (fd < 0)
        throw deposit_error("deposit directory " + *sub + " cannot be written: " + errno_text(errno));
      ::close(fd);
      ::unlink(probe.c_str());
    }
  }

  void put_user(const std::string& user, const parcel& p) override {
    put(users_, user, p);
  }
  std::optional<parcel> get_user(const std::string& user) override {
    return get(users_, user);
  }
  void remove_user(const std::string& user) override {
    remove(users_, user);
  }
  std::string quarantine_user(const std::string& user, const std::string& reason) override {
    location loc = locate(users_, user);
    std::string qpath;
    try {
      qpath = quarantine(loc, user, reason, true);
    } catch (const std::exception&) {
      note_failure();
      throw;
    }
    note_success();  // nothing to move (qpath ""): the marker is left all the same
    return qpath;
  }
  std::uint64_t owner_epoch(const std::string& user) override {
    location loc = locate(users_, user);
    try {
      auto e = current_epoch(loc);
      note_success();
      return e;
    } catch (const std::exception&) {
      note_failure();
      throw;
    }
  }

  std::optional<parcel> claim_user(const std::string& user, std::uint64_t epoch) override {
    location loc = locate(users_, user);
    file_lock held;
    if (int e = lock_shard(loc, held))
      fail("cannot lock", loc.lock, e);
    std::uint64_t claimed = 0;
    try {
      claimed = read_claim(loc);
    } catch (const std::exception&) {
      note_failure();
      throw;
    }
    auto p = get(users_, user);  // quarantines, counts and throws as get_user does
    const std::uint64_t current = std::max(claimed, p ? p->owner_epoch : 0);
    if (epoch < current) {
      counters_.fenced.fetch_add(1, std::memory_order_relaxed);
      throw stale_owner_error(std::string(user), epoch, current);
    }
    if (epoch > current)
      write_claim(loc, epoch);
    return p;
  }

  std::uint64_t next_commander_generation() override {
    const std::string path = root_ + "/" + std::string(generation_name);
    const std::string lock_path = root_ + "/" + std::string(generation_lock_name);
    generation_locked_ = true;  // a heal meanwhile must not lock it again (flock: this very process would wait)
    struct unlocked {
      bool& flag;
      ~unlocked() { flag = false; }
    } reset{generation_locked_};
    file_lock held;
    int e = held.lock(lock_path);
    if (e == ENOENT && heal("locking " + lock_path))
      e = held.lock(lock_path);
    if (e)
      fail("cannot lock", lock_path, e);
    auto current = read_number(path, e);
    if (e == EINVAL) {
      note_failure();
      throw deposit_error("deposit: " + path + " does not hold a generation number; refusing to guess one "
                          "(an operator restores it: docs/deposit.md \"Fencing\")");
    }
    if (e)
      fail("cannot read", path, e);
    // A file removed with its directory under this process starts from what it gave, not from 0.
    const std::uint64_t next = std::max(current.value_or(0), generation_given_) + 1;
    write_generation(path, next);
    generation_given_ = next;
    return next;
  }

  // Writes `generation` to `path` durably (temp file, fsync, rename, fsync of DIR); throws on failure.
  void write_generation(const std::string& path, std::uint64_t generation) {
    const std::string text = std::to_string(generation) + "\n";
    std::string tmp = temp_name(root_);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file_mode);
    if (fd < 0)
      fail("cannot create temp file", tmp, errno);
    int e = write_all(fd, text.data(), text.size());
    if (!e && ::fsync(fd) != 0)
      e = errno;
    if (::close(fd) != 0 && !e)
      e = errno;
    if (!e && ::rename(tmp.c_str(), path.c_str()) != 0)
      e = errno;
    if (e) {
      ::unlink(tmp.c_str());
      fail("cannot write", path, e);
    }
    if (int se = fsync_dir(root_))
      fail("cannot fsync directory", root_, se);
    note_success();
  }

  // After a heal: DIR/commander-generation went with its directory. The
  // generation this process gave is written back (under the lock, never
  // below what the file holds), so that a restarted commander's epochs stay
  // above those of the parcels written since (docs/deposit.md "Owner epochs").
  void restore_generation() {
    if (generation_given_ == 0 || generation_locked_)
      return;
    const std::string path = root_ + "/" + std::string(generation_name);
    const std::string lock_path = root_ + "/" + std::string(generation_lock_name);
    try {
      file_lock held;
      if (int e = held.lock(lock_path))
        fail("cannot lock", lock_path, e);
      int e = 0;
      auto current = read_number(path, e);
      if (e == ENOENT || (!e && current.value_or(0) < generation_given_)) {
        write_generation(path, generation_given_);
        spdlog::warn("deposit: {} was gone with its directory; generation {} written back", path, generation_given_);
      }
    } catch (const deposit_error& err) {
      spdlog::error("deposit: the commander generation could not be written back after a heal: {}", err.what());
    }
  }

  void put_connection(const std::string& cid, const parcel& p) override {
    put(connections_, cid, p);
  }
  std::optional<parcel> get_connection(const std::string& cid) override {
    return get(connections_, cid);
  }
  void remove_connection(const std::string& cid) override {
    remove(connections_, cid);
  }

  // Keys starting with '%' (escaped "%25") are the platform's own (the global
  // store's snapshot): never expired, never counted as users.
  static bool is_platform_key(const std::string& escaped) { return starts_with(escaped, "%25"); }

  std::size_t sweep(std::chrono::seconds user_max_age, std::chrono::seconds guest_max_age) override {
    auto ns = [](std::chrono::seconds s) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(s).count();
    };
    const std::int64_t user_ns = ns(user_max_age);
    const std::int64_t guest_ns = ns(guest_max_age);
    const std::int64_t conn_ns = std::max(user_ns, guest_ns);
    const std::int64_t now = now_ns();
    std::size_t users_removed = 0;

    // The escaped key starts with "guest_" exactly when the key does.
    auto max_age = [&](bool users, const std::string& escaped_key) {
      return !users ? conn_ns : starts_with(escaped_key, "guest_") ? guest_ns : user_ns;
    };
    auto visit = [&](bool users, const std::string& dir, const dir_entry& de, const std::string& key_prefix) {
      const std::string& name = de.name;
      if (starts_with(name, temp_prefix)) {
        if (now - ns_of(de.st.st_mtim) > leftover_grace_ns)
          unlink_counted(dir + "/" + name, "leftover temp file");
        return;
      }
      if (starts_with(name, tomb_prefix)) {  // a crashed sweep's: finish its work
        auto dash = name.find('-', tomb_prefix.size());
        if (dash == std::string::npos || now - ns_of(de.st.st_ctim) <= leftover_grace_ns)
          return;
        std::string parcel_name = name.substr(dash + 1);
        const bool claim = users && starts_with(parcel_name, claim_prefix);
        const std::string key_name = claim ? parcel_name.substr(claim_prefix.size()) : parcel_name;
        if (key_name.empty() || key_name[0] == '.' || !ends_with(parcel_name, suffix))
          return;
        if (settle(dir + "/" + parcel_name, dir + "/" + name, max_age(users, key_prefix + key_name), now) && users &&
            !claim)
          ++users_removed;
        return;
      }
      if (users && starts_with(name, claim_prefix)) {  // a claim goes when it is as old as an expired parcel
        const std::string key_name = name.substr(claim_prefix.size());
        if (key_name.empty() || key_name[0] == '.' || !ends_with(name, suffix))
          return;
        const std::int64_t max_ns = max_age(users, key_prefix + key_name);
        if (now - ns_of(de.st.st_mtim) > max_ns)
          expire(dir, name, max_ns, now);
        return;
      }
      if (name.empty() || name[0] == '.' || !ends_with(name, suffix) || is_platform_key(key_prefix + name))
        return;
      const std::int64_t max_ns = max_age(users, key_prefix + name);
      if (now - ns_of(de.st.st_mtim) <= max_ns)
        return;
      if (expire(dir, name, max_ns, now) && users)
        ++users_removed;
    };
    walk_kind(users_, [&](auto&&... a) { visit(true, a...); });
    walk_kind(connections_, [&](auto&&... a) { visit(false, a...); });
    counters_.removed.fetch_add(users_removed, std::memory_order_relaxed);
    return users_removed;
  }

  void for_each_user(const std::function<void(const std::string&)>& fn) override {
    walk_kind(users_, [&](const std::string&, const dir_entry& de, const std::string& key_prefix) {
      if (de.name.empty() || de.name[0] == '.' || !ends_with(de.name, suffix) || is_platform_key(key_prefix + de.name))
        return;
      auto escaped = key_prefix + de.name.substr(0, de.name.size() - suffix.size());
      if (auto key = unescape_key(escaped))
        fn(*key);
    });
  }

  std::size_t count_users() override {
    std::size_t n = 0;
    walk_kind(users_, [&](const std::string&, const dir_entry& de, const std::string&) {
      if (!de.name.empty() && de.name[0] != '.' && ends_with(de.name, suffix) && !is_platform_key(de.name))
        ++n;
    });
    return n;
  }

private:
  static constexpr std::size_t max_deferred_claims = 1 << 16;  // paths: ~8 MiB at most
  std::mutex deferred_mutex_;
  std::vector<std::string> deferred_claims_;  // claim files to make (do_deferred)

  std::string temp_name(const std::string& dir) {
    return dir + "/" + std::string(temp_prefix) + std::to_string(::getpid()) + "-" +
           std::to_string(temp_counter_.fetch_add(1, std::memory_order_relaxed));
  }

  [[noreturn]] void fail(const std::string& what, const std::string& path, int e) {
    note_failure();
    throw deposit_error("deposit: " + what + " " + path + ": " + errno_text(e));
  }

  /// A failed write, read, remove or quarantine: counted, and the health clocks.
  void note_failure() {
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    counters_.consecutive_failures.fetch_add(1, std::memory_order_relaxed);
    counters_.last_failure_unix_ms.store(now_unix_ms(), std::memory_order_relaxed);
  }
  void note_success() {
    counters_.consecutive_failures.store(0, std::memory_order_relaxed);
    counters_.last_success_unix_ms.store(now_unix_ms(), std::memory_order_relaxed);
  }

  /// Narrows a deposit directory that is open to group or others to 0700's
  /// bits (logged). Shared sticky directories (/tmp given as DIR) are left alone.
  static void tighten(const std::string& dir, mode_t mode) {
    if ((mode & 077) == 0)
      return;
    if (mode & S_ISVTX) {
      spdlog::warn("deposit: {} is a shared (sticky) directory of mode {:o}; not narrowing it: give the deposit "
                   "a directory of its own",
                   dir, mode & 07777);
      return;
    }
    const mode_t narrowed = mode & 0700;
    if (::chmod(dir.c_str(), narrowed) != 0) {
      spdlog::warn("deposit: {} has mode {:o} and cannot be narrowed: {}", dir, mode & 07777, errno_text(errno));
      return;
    }
    spdlog::warn("deposit: {} had mode {:o}, open to others; narrowed to {:o}", dir, mode & 07777, narrowed);
  }

  /// Recreates what is missing of DIR (when its parent exists), users,
  /// connections and quarantine after someone removed them. True when anything
  /// was made (the caller retries what failed); counted and logged.
  bool heal(const std::string& why) {
    int made = 0;
    for (const auto* d : {&root_, &users_, &connections_, &quarantine_}) {
      if (::mkdir(d->c_str(), dir_mode) == 0) {
        ++made;
        continue;
      }
      if (errno != EEXIST) {
        spdlog::error("deposit: {} is missing ({}) and cannot be recreated: {}", *d, why, errno_text(errno));
        return false;
      }
    }
    if (made == 0)
      return false;
    fsync_dir(root_);  // best effort: the next write syncs its own directory
    auto parent = std::filesystem::path(root_).parent_path().string();
    if (!parent.empty())
      fsync_dir(parent);
    counters_.healed.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("deposit: the deposit's structure under {} was missing ({}); recreated {} director{}", root_, why,
                 made, made == 1 ? "y" : "ies");
    restore_generation();
    return true;
  }

  // --- fencing ------------------------------------------------------------------

  static std::string claim_path(const location& loc) {
    return loc.dir + "/" + std::string(claim_prefix) + loc.name;
  }

  /// Locks the shard of `loc` (its lock file beside the shards); 0 or an errno.
  int lock_shard(const location& loc, file_lock& held) {
    int e = held.lock(loc.lock);
    if (e == ENOENT && heal("locking " + loc.lock))
      e = held.lock(loc.lock);
    return e;
  }

  /// His claim (0: none). An empty claim file is none (made by his first
  /// write: see fenced_rename); one that does not read as a number (a crash
  /// cut it: claims are not fsynced) counts as none, logged. `exists`: whether
  /// the file is there. Throws on I/O errors.
  std::uint64_t read_claim(const location& loc, bool* exists = nullptr) {
    int e = 0;
    auto v = read_number(claim_path(loc), e);
    if (exists)
      *exists = v.has_value() || e != 0;
    if (e == EINVAL && ::access(claim_path(loc).c_str(), F_OK) == 0) {
      struct stat st {};
      if (::stat(claim_path(loc).c_str(), &st) == 0 && st.st_size == 0)
        return 0;  // made empty by his first write
    }
    if (e == EINVAL) {
      spdlog::warn("deposit: the claim {} does not read as an owner epoch; taken as none", claim_path(loc));
      return 0;
    }
    if (e)
      throw deposit_error("deposit: cannot read " + claim_path(loc) + ": " + errno_text(e));
    return v.value_or(0);
  }

  /// The owner epoch in the header of his parcel in place (0: none, not a
  /// parcel, or format 1). Reads only the header's bytes. Throws on I/O errors.
  std::uint64_t parcel_epoch(const location& loc) {
    int fd = ::open(loc.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOENT || errno == ELOOP || errno == ENXIO)  // none, or not a parcel (a write replaces it)
        return 0;
      throw deposit_error("deposit: cannot open " + loc.path + ": " + errno_text(errno));
    }
    bytes head;
    int e = read_prefix(fd, header_prefix_bytes, head);
    bool truncated = false;
    std::optional<std::uint64_t> epoch;
    if (!e) {
      epoch = peek_owner_epoch(head.data(), head.size(), &truncated);
      if (!epoch && truncated && head.size() == header_prefix_bytes) {  // a header longer than the prefix
        ::lseek(fd, 0, SEEK_SET);
        e = read_prefix(fd, ~std::size_t{0}, head);
        if (!e)
          epoch = peek_owner_epoch(head.data(), head.size());
      }
    }
    ::close(fd);
    if (e == EISDIR)
      return 0;
    if (e)
      throw deposit_error("deposit: cannot read " + loc.path + ": " + errno_text(e));
    return epoch.value_or(0);  // unreadable: its read quarantines it; a write replaces it
  }

  /// The larger of his claim and his parcel's epoch (no lock taken here).
  std::uint64_t current_epoch(const location& loc) {
    return std::max(read_claim(loc), parcel_epoch(loc));
  }

  /// Under the shard lock: refuses `epoch` older than his current one
  /// (counted). Returns whether his claim file exists.
  bool check_fence(const location& loc, std::string_view key, std::uint64_t epoch) {
    bool claim_exists = false;
    const std::uint64_t current = std::max(read_claim(loc, &claim_exists), parcel_epoch(loc));
    if (epoch < current) {
      counters_.fenced.fetch_add(1, std::memory_order_relaxed);
      throw stale_owner_error(std::string(key), epoch, current);
    }
    return claim_exists;
  }

  /// Writes his claim: a fixed-width record (20 digits and a newline)
  /// written in place, so that a user woken again costs no new file (only his
  /// first claim creates one). Readers see it whole: every reader that acts on
  /// it holds the shard lock, as this writer does. Not fsynced (see
  /// claim_user); a record a crash cut reads as no claim. Throws deposit_error.
  void write_claim(const location& loc, std::uint64_t epoch) {
    char text[22];
    std::snprintf(text, sizeof text, "%020llu\n", static_cast<unsigned long long>(epoch));
    const std::size_t size = 21;
    const std::string path = claim_path(loc);
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, file_mode);
      if (fd >= 0 || errno != ENOENT || attempt > 0)
        break;
      int me = make_dirs(users_, loc.dir);  // a new user's shard (or the removed structure)
      if (me == ENOENT && heal("claiming " + path))
        me = make_dirs(users_, loc.dir);
      if (me)
        fail("cannot create directory", loc.dir, me);
    }
    if (fd < 0)
      fail("cannot write the claim", path, errno);
    int e = 0;
    ssize_t n = ::pwrite(fd, text, size, 0);
    if (n < 0)
      e = errno;
    else if (static_cast<std::size_t>(n) != size)
      e = EIO;
    if (::close(fd) != 0 && !e)
      e = errno;
    if (e)
      fail("cannot write the claim", path, e);
    note_success();
  }

  /// Refuses a parcel that names another owner than its key (it could never be read back).
  void check_owner(std::string_view key, const parcel& p) {
    if (!p.owner.empty() && p.owner != key) {
      note_failure();
      throw deposit_error("deposit: a parcel of '" + p.owner + "' cannot be written under '" + std::string(key) +
                          "'");
    }
  }

  std::vector<std::string> put_batch(const std::vector<batch_entry>& batch) override {
    std::vector<std::string> errors(batch.size());
    if (batch.size() == 1) {  // one fsync of one file is cheaper than a filesystem flush
      try {
        put(batch[0].connection ? connections_ : users_, batch[0].key, batch[0].contents);
      } catch (const std::exception& e) {
        errors[0] = e.what();
      }
      return errors;
    }
    // 1. every temp file written, none synced; 2. one flush; 3. the renames;
    // 4. one more flush, which makes the renames durable.
    struct written {
      std::string tmp;
      location loc;
    };
    std::vector<std::optional<written>> done(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      try {
        const auto& base = batch[i].connection ? connections_ : users_;
        check_owner(batch[i].key, batch[i].contents);
        auto loc = locate(base, batch[i].key);
        auto tmp = write_temp(base, loc, encode(batch[i].contents, batch[i].key), false);
        done[i] = written{std::move(tmp), std::move(loc)};
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
    auto flush = [&](const char* when) {
      int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      int e = fd < 0 ? errno : (::syncfs(fd) == 0 ? 0 : errno);
      if (fd >= 0)
        ::close(fd);
      if (e)
        note_failure();
      return e ? "deposit: cannot flush " + root_ + " " + when + ": " + errno_text(e) : std::string{};
    };
    if (auto err = flush("before renaming"); !err.empty()) {
      for (std::size_t i = 0; i < batch.size(); ++i)
        if (done[i]) {
          ::unlink(done[i]->tmp.c_str());
          errors[i] = err;
        }
      return errors;
    }
    // The users of one shard are renamed under one lock (connections are not fenced).
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (done[i])
        order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {  // a key twice: the later wins
      return std::tie(batch[a].connection, done[a]->loc.lock) < std::tie(batch[b].connection, done[b]->loc.lock);
    });
    file_lock held;
    const std::string* held_path = nullptr;
    int lock_error = 0;
    for (std::size_t i : order) {
      int e = 0;
      try {
        if (batch[i].connection) {
          e = rename_into_place(done[i]->tmp, done[i]->loc, batch[i].key);
        } else {
          if (!held_path || *held_path != done[i]->loc.lock) {
            held_path = &done[i]->loc.lock;
            lock_error = lock_shard(done[i]->loc, held);
          }
          e = lock_error;
          if (!e && !check_and_rename(done[i]->tmp, done[i]->loc, batch[i].key, batch[i].contents.owner_epoch, e)
              && !e && is_user_key(batch[i].key))
            defer_claim_file(done[i]->loc);
        }
      } catch (const std::exception& x) {  // stale (the temp file is gone), or the check could not read
        errors[i] = x.what();
        done[i].reset();
        continue;
      }
      if (e != 0) {
        ::unlink(done[i]->tmp.c_str());
        note_failure();
        errors[i] = "deposit: cannot rename " + done[i]->tmp + " to " + done[i]->loc.path + ": " + errno_text(e);
        done[i].reset();
      }
    }
    auto err = flush("after renaming");
    bool any = false;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!done[i])
        continue;
      if (!err.empty()) {
        errors[i] = err;  // in place, but maybe not durable: say so
        continue;
      }
      any = true;
      counters_.writes.fetch_add(1, std::memory_order_relaxed);
      if (!batch[i].connection)
        clear_marker(done[i]->loc);
    }
    if (any)
      note_success();
    return errors;
  }

  /// rename_into_place of a USER parcel, fenced: under the shard lock, the
  /// epoch is checked against his current one, then renamed. A stale one
  /// removes the temp file and throws stale_owner_error; a check that cannot
  /// read removes it and throws deposit_error. Else 0 or the rename's errno.
  int fenced_rename(const std::string& tmp, const location& loc, std::string_view key, std::uint64_t epoch) {
    file_lock held;
    if (int e = lock_shard(loc, held))
      return e;
    int e = 0;
    if (!check_and_rename(tmp, loc, key, epoch, e) && e == 0 && is_user_key(key))
      make_claim_file(claim_path(loc));
    return e;
  }

  /// fenced_rename's work once the shard lock is held: `renamed` gets 0 or the
  /// rename's errno. Returns whether his claim file exists.
  bool check_and_rename(const std::string& tmp, const location& loc, std::string_view key, std::uint64_t epoch,
                        int& renamed) {
    bool claim_exists = true;
    try {
      claim_exists = check_fence(loc, key, epoch);
    } catch (const stale_owner_error&) {
      ::unlink(tmp.c_str());
      throw;
    } catch (const std::exception&) {
      ::unlink(tmp.c_str());
      note_failure();
      throw;
    }
    renamed = rename_into_place(tmp, loc, key);
    return claim_exists;
  }

  /// His first write makes his (empty: no claim) claim file, so that his wake
  /// writes the claim in place instead of creating a file on the way to his
  /// first answer. No lock needed: O_EXCL never touches a claim written meanwhile.
  static void make_claim_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, file_mode);
    if (fd >= 0)
      ::close(fd);
  }

  /// A batch leaves the claim file to do_deferred: a file creation costs as
  /// much as the parcel's own here (most of a batch's first writes, e.g. a soft
  /// quit of fresh guests). Past max_deferred_claims, his wake creates it.
  void defer_claim_file(const location& loc) {
    std::lock_guard<std::mutex> guard(deferred_mutex_);
    if (deferred_claims_.size() < max_deferred_claims)
      deferred_claims_.push_back(claim_path(loc));
  }

  std::size_t do_deferred(std::size_t max_steps) override {
    std::vector<std::string> now;
    std::size_t left = 0;
    {
      std::lock_guard<std::mutex> guard(deferred_mutex_);
      const std::size_t n = std::min(max_steps, deferred_claims_.size());
      now.assign(std::make_move_iterator(deferred_claims_.end() - static_cast<std::ptrdiff_t>(n)),
                 std::make_move_iterator(deferred_claims_.end()));
      deferred_claims_.resize(deferred_claims_.size() - n);
      left = deferred_claims_.size();
    }
    for (const auto& path : now)
      make_claim_file(path);
    return left;
  }

  /// Not a platform key ('%…': the global store, the health probe): nobody claims those.
  static bool is_user_key(std::string_view key) { return !key.empty() && key[0] != '%'; }

  /// Renames a written temp file onto its parcel's path; 0 or an errno. A
  /// directory in the way (which rename cannot replace) is quarantined first.
  int rename_into_place(const std::string& tmp, const location& loc, std::string_view key) {
    if (::rename(tmp.c_str(), loc.path.c_str()) == 0)
      return 0;
    int e = errno;
    if (e != EISDIR && e != ENOTEMPTY && e != EEXIST)
      return e;
    try {
      if (quarantine(loc, key, "a directory in place of a parcel, replaced by a write", false).empty())
        return e;
    } catch (const std::exception&) {
      return e;
    }
    return ::rename(tmp.c_str(), loc.path.c_str()) == 0 ? 0 : errno;
  }

  // Writes `data` to a new temp file (0600) next to its parcel (fsynced if
  // `sync`); returns its path. Missing directories are made (0700), the
  // deposit's structure healed once if it is gone.
  std::string write_temp(const std::string& base, const location& loc, const bytes& data, bool sync) {
    std::string tmp;
    int fd = -1;
    bool dirs_made = false;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      tmp = temp_name(loc.dir);
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file_mode);
      if (fd >= 0)
        break;
      int e = errno;
      if (e == EEXIST)  // a crash's leftover with a reused pid
        continue;
      if (e == ENOENT && !dirs_made) {
        dirs_made = true;
        int me = make_dirs(base, loc.dir);
        if (me == ENOENT && heal("writing " + loc.path))
          me = make_dirs(base, loc.dir);
        if (me)
          fail("cannot create directory", loc.dir, me);
        continue;
      }
      fail("cannot create temp file", tmp, e);
    }
    if (fd < 0)
      fail("cannot create temp file", tmp, EEXIST);
    if (int e = write_all(fd, data.data(), data.size())) {
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot write", tmp, e);
    }
    if (sync && ::fsync(fd) != 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot fsync", tmp, e);
    }
    if (::close(fd) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      fail("cannot close", tmp, e);
    }
    return tmp;
  }

  void put(const std::string& base, std::string_view key, const parcel& p) {
    check_owner(key, p);
    location loc = locate(base, key);
    const bytes data = encode(p, key);
    for (int attempt = 0;; ++attempt) {
      std::string tmp = write_temp(base, loc, data, true);
      int e = &base == &users_ ? fenced_rename(tmp, loc, key, p.owner_epoch) : rename_into_place(tmp, loc, key);
      if (e == 0)
        break;
      ::unlink(tmp.c_str());
      if (e == ENOENT && attempt == 0)  // its directory went away meanwhile: write_temp heals it
        continue;
      fail("cannot rename " + tmp + " to", loc.path, e);
    }
    // The new parcel is in place; without this it may not survive a crash.
    if (int e = fsync_dir(loc.dir))
      fail("cannot fsync directory", loc.dir, e);
    if (&base == &users_)
      clear_marker(loc);
    counters_.writes.fetch_add(1, std::memory_order_relaxed);
    note_success();
  }

  std::optional<parcel> get(const std::string& base, std::string_view key) {
    const bool users = &base == &users_;
    location loc = locate(base, key);
    // O_NOFOLLOW: a symlink is not followed (ELOOP); O_NONBLOCK: a fifo does not block the open.
    int fd = ::open(loc.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      if (e == ENOENT) {
        if (users)
          throw_if_marked(loc, key);
        note_success();
        return std::nullopt;
      }
      struct stat st {};
      if (::lstat(loc.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))  // symlink (ELOOP), socket (ENXIO)
        refuse(loc, key, std::string(kind_of(st.st_mode)) + " in place of a parcel", users);
      fail("cannot open", loc.path, e);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      fail("cannot stat", loc.path, e);
    }
    if (!S_ISREG(st.st_mode)) {  // a directory or a fifo
      ::close(fd);
      refuse(loc, key, std::string(kind_of(st.st_mode)) + " in place of a parcel", users);
    }
    bytes data;
    if (st.st_size > 0)
      data.reserve(static_cast<std::size_t>(st.st_size));
    char buf[16384];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        int e = errno;
        ::close(fd);
        fail("cannot read", loc.path, e);
      }
      if (n == 0)
        break;
      data.insert(data.end(), buf, buf + n);
    }
    ::close(fd);
    counters_.reads.fetch_add(1, std::memory_order_relaxed);
    parcel p;
    try {
      p = decode(data);
    } catch (const codec_error& e) {
      refuse(loc, key, e.what(), users);
    }
    if (!p.owner.empty() && p.owner != key)
      refuse(loc, key, "written for '" + p.owner + "', found under '" + std::string(key) + "'", users);
    note_success();
    return p;
  }

  /// Quarantines what is at loc.path and throws parcel_quarantined (users: the
  /// marker keeps telling it). When it vanished meanwhile, throws all the same:
  /// what was there could not be trusted, and the caller must not start empty.
  [[noreturn]] void refuse(const location& loc, std::string_view key, const std::string& reason, bool users) {
    std::string qpath;
    try {
      qpath = quarantine(loc, key, reason, users);
    } catch (const std::exception&) {
      note_failure();
      throw;
    }
    note_success();  // the disk answered; what it held was bad (counted as quarantined)
    throw parcel_quarantined(std::string(key), reason, qpath);
  }

  /// Moves whatever is at loc.path (as is: a bad parcel, a directory, a
  /// fifo, …) into DIR/quarantine; with `mark`, leaves the marker in its
  /// place. Returns the quarantine path, "" when nothing was there any more.
  /// Throws deposit_error when it cannot be moved.
  std::string quarantine(const location& loc, std::string_view key, const std::string& reason, bool mark) {
    std::string qname = loc.escaped;
    if (qname.size() > max_piece - 40) {  // keep room for ".parcel.<time>.<counter>"
      std::uint64_t h = checksum(loc.escaped.data(), loc.escaped.size());
      std::string hex;
      for (int i = 15; i >= 0; --i)
        hex += hex_digits[(h >> (i * 4)) & 0xf];
      qname = qname.substr(0, max_piece - 60) + "~" + hex;
    }
    qname += suffix;
    const auto unix_time = std::to_string(static_cast<long long>(std::time(nullptr)));
    std::string qpath;
    int e = EEXIST;
    bool healed = false;
    for (int attempt = 0; attempt < 1000 && (e == EEXIST || e == ENOENT); ++attempt) {
      qpath = quarantine_ + "/" + qname + "." + unix_time + "." +
              std::to_string(quarantine_counter_.fetch_add(1, std::memory_order_relaxed));
      e = move_no_replace(loc.path, qpath);
      if (e != ENOENT)
        continue;
      struct stat st {};
      if (::lstat(loc.path.c_str(), &st) != 0)
        break;  // the parcel itself is gone
      if (healed || !heal("quarantining " + loc.path))
        break;  // quarantine/ is gone and cannot be made
      healed = true;
    }
    if (e == ENOENT && ::access(loc.path.c_str(), F_OK) != 0) {  // gone meanwhile (swept): nothing left to move
      spdlog::error("deposit: {} ({}) is gone: nothing to quarantine", loc.path, reason);
      if (mark)
        write_marker(loc, key, "", reason);
      return {};
    }
    if (e != 0) {
      spdlog::error("deposit: {} ({}) cannot be quarantined: {}", loc.path, reason, errno_text(e));
      throw deposit_error("deposit: cannot quarantine " + loc.path + ": " + errno_text(e));
    }
    fsync_dir(quarantine_);  // best effort: the move is already done
    fsync_dir(loc.dir);
    counters_.quarantined.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("deposit: the parcel of '{}' at {} cannot be trusted ({}); quarantined as {}", key, loc.path,
                  reason, qpath);
    if (mark)
      write_marker(loc, key, qpath, reason);
    return qpath;
  }

  // --- quarantine markers: a user whose parcel was quarantined stays refused --------

  static std::string marker_path(const location& loc) {
    return loc.dir + "/" + std::string(marker_prefix) + loc.name;
  }

  /// Best effort (logged): without it the next read finds nothing and would start him empty.
  void write_marker(const location& loc, std::string_view key, const std::string& qpath, const std::string& reason) {
    const std::string text = qpath + "\n" + reason + "\n";
    const std::string path = marker_path(loc);
    try {
      std::string tmp = write_temp(users_, loc, bytes(text.begin(), text.end()), true);
      if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw deposit_error("cannot rename " + tmp + " to " + path + ": " + errno_text(e));
      }
      fsync_dir(loc.dir);
    } catch (const std::exception& e) {
      note_failure();
      spdlog::error("deposit: the quarantine marker of '{}' ({}) cannot be written: {}; his next read finds nothing",
                    key, path, e.what());
    }
  }

  /// A user whose parcel was quarantined and not replaced since: parcel_quarantined.
  void throw_if_marked(const location& loc, std::string_view key) {
    const std::string path = marker_path(loc);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOENT)
        return;
      fail("cannot open the quarantine marker", path, errno);
    }
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    std::string text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    auto nl = text.find('\n');
    std::string qpath = nl == std::string::npos ? std::string() : text.substr(0, nl);
    std::string reason = nl == std::string::npos ? text : text.substr(nl + 1);
    while (!reason.empty() && reason.back() == '\n')
      reason.pop_back();
    note_success();
    throw parcel_quarantined(std::string(key), "quarantined earlier: " + reason, qpath);
  }

  void clear_marker(const location& loc) {
    const std::string path = marker_path(loc);
    if (::unlink(path.c_str()) == 0) {
      fsync_dir(loc.dir);
      spdlog::info("deposit: {} removed: a new parcel is in place", path);
    } else if (errno != ENOENT) {
      spdlog::warn("deposit: cannot remove the quarantine marker {}: {}", path, errno_text(errno));
    }
  }

  void remove(const std::string& base, std::string_view key) {
    location loc = locate(base, key);
    if (::unlink(loc.path.c_str()) != 0) {
      int e = errno;
      if (e == EISDIR || e == EPERM) {  // a directory (EPERM on some systems): moved aside, never deleted
        struct stat st {};
        if (::lstat(loc.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
          try {
            quarantine(loc, key, "a directory in place of a removed parcel", false);
            e = 0;
          } catch (const std::exception&) {
          }
        }
      }
      if (e != 0 && e != ENOENT)
        fail("cannot remove", loc.path, e);
    }
    if (&base == &users_)
      clear_marker(loc);
    note_success();
  }
  // --- scanning (sweep, count_users) ------------------------------------------

  /// Calls f(dir, entry, key_prefix) for every non-directory entry below the
  /// shards of `base`; key_prefix is the escaped key of the piece directories.
  template <class F>
  void walk_kind(const std::string& base, F&& f) {
    std::vector<dir_entry> shards;
    if (int e = list_dir(base, shards)) {
      scan_failure(base, e);
      return;
    }
    for (const auto& s : shards)
      if (S_ISDIR(s.st.st_mode) && is_shard_name(s.name))
        walk(base + "/" + s.name, std::string(), 0, f);
  }

  template <class F>
  void walk(const std::string& dir, const std::string& key_prefix, int depth, F& f) {
    std::vector<dir_entry> entries;
    if (int e = list_dir(dir, entries)) {
      if (e != ENOENT)
        scan_failure(dir, e);
      return;
    }
    for (const auto& de : entries) {
      if (S_ISDIR(de.st.st_mode)) {
        if (depth < max_depth && de.name.size() == max_piece && de.name.find('.') == std::string::npos)
          walk(dir + "/" + de.name, key_prefix + de.name, depth + 1, f);
      } else if (S_ISREG(de.st.st_mode)) {
        f(dir, de, key_prefix);
      }
    }
  }

  void scan_failure(const std::string& path, int e) {
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("deposit: cannot scan {}: {}", path, errno_text(e));
  }

  bool unlink_counted(const std::string& path, const char* what) {
    if (::unlink(path.c_str()) == 0 || errno == ENOENT)
      return true;
    int e = errno;
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("deposit: cannot remove {} {}: {}", what, path, errno_text(e));
    return false;
  }

  /// Removes the expired parcel dir/name unless it is rewritten meanwhile:
  /// it is first renamed aside (atomically taking whatever is there), checked
  /// again, and put back if a write landed between the scan and the rename.
  bool expire(const std::string& dir, const std::string& name, std::int64_t max_ns, std::int64_t now) {
    std::string path = dir + "/" + name;
    std::string tomb = dir + "/" + std::string(tomb_prefix) + std::to_string(::getpid()) + "-" + name;
    if (::rename(path.c_str(), tomb.c_str()) != 0) {
      int e = errno;
      if (e != ENOENT) {
        counters_.failures.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("deposit: cannot expire {}: {}", path, errno_text(e));
      }
      return false;
    }
    return settle(path, tomb, max_ns, now);
  }

  /// tomb holds what was at path: delete it if still expired, else put it back
  /// (unless an even newer parcel is there already). True if deleted as expired.
  bool settle(const std::string& path, const std::string& tomb, std::int64_t max_ns, std::int64_t now) {
    struct stat st {};
    if (::lstat(tomb.c_str(), &st) != 0)
      return false;
    if (now - ns_of(st.st_mtim) > max_ns)
      return unlink_counted(tomb, "expired parcel");
    int e = move_no_replace(tomb, path);
    if (e == EEXIST)
      unlink_counted(tomb, "superseded parcel");
    else if (e != 0) {
      counters_.failures.fetch_add(1, std::memory_order_relaxed);
      spdlog::error("deposit: cannot put back {} as {}: {}", tomb, path, errno_text(e));
    }
    return false;
  }

  std::string root_, users_, connections_, quarantine_;
  std::uint64_t generation_given_ = 0;  // the last commander generation this object gave (0: none)
  bool generation_locked_ = false;      // next_commander_generation holds the generation lock
  std::atomic<std::uint64_t> temp_counter_{0};
  std::atomic<std::uint64_t> quarantine_counter_{0};
};

}  // namespace

void check_key(std::string_view key) {
  if (key.empty())
    throw std::invalid_argument("deposit key is empty");
  if (key.size() > max_key_bytes)
    throw std::invalid_argument("deposit key is over " + std::to_string(max_key_bytes) + " bytes");
}

std::int64_t now_unix_ms() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string escape_key(std::string_view key) {
  check_key(key);
  std::string out;
  out.reserve(key.size());
  for (char ch : key) {
    auto c = static_cast<unsigned char>(ch);
    if (is_kept(c)) {
      out += ch;
    } else {
      out += '%';
      out += hex_digits[c >> 4];
      out += hex_digits[c & 0xf];
    }
  }
  return out;
}

std::optional<std::string> unescape_key(std::string_view escaped) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '%') {
      out += escaped[i];
      continue;
    }
    if (i + 2 >= escaped.size() || hex(escaped[i + 1]) < 0 || hex(escaped[i + 2]) < 0)
      return std::nullopt;
    out += static_cast<char>(hex(escaped[i + 1]) * 16 + hex(escaped[i + 2]));
    i += 2;
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

std::string filesystem_parcel_path(const std::string& dir, parcel_kind kind, std::string_view key) {
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/')
    root.pop_back();
  return locate(root + (kind == parcel_kind::user ? "/users" : "/connections"), key).path;
}

std::unique_ptr<deposit> make_filesystem_deposit(const std::string& dir) {
  return std::make_unique<filesystem_deposit>(dir);
}

}  // namespace troupe::store
