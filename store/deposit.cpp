#include "store/deposit.hpp"

#include <spdlog/spdlog.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

namespace troupe::store {

namespace {

constexpr std::size_t max_key_bytes = 255;
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

/// Where one parcel lives.
struct location {
  std::string dir;   ///< its directory (the shard, or the deepest piece directory)
  std::string name;  ///< last piece + ".parcel"
  std::string path;  ///< dir + "/" + name
  std::string escaped;
};

location locate(const std::string& base, std::string_view key) {
  location loc;
  loc.escaped = escape_key(key);
  loc.dir = base + "/" + shard_of(key);
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
    if (::mkdir(sub.c_str(), 0755) == 0) {
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
    std::filesystem::create_directories(root_, ec);
    if (ec)
      throw deposit_error("cannot create deposit directory " + root_ + ": " + ec.message());
    if (!std::filesystem::is_directory(root_, ec))
      throw deposit_error("deposit path " + root_ + " is not a directory");
    for (const auto* sub : {&users_, &connections_, &quarantine_}) {
      if (::mkdir(sub->c_str(), 0755) != 0 && errno != EEXIST)
        throw deposit_error("cannot create deposit directory " + *sub + ": " + errno_text(errno));
      if (!std::filesystem::is_directory(*sub, ec))
        throw deposit_error("deposit path " + *sub + " is not a directory");
    }
    if (int e = fsync_dir(root_))
      throw deposit_error("cannot fsync deposit directory " + root_ + ": " + errno_text(e));
    // Probe that each directory can be written (root ignores modes: try it).
    for (const auto* sub : {&users_, &connections_, &quarantine_}) {
      std::string probe = temp_name(*sub);
      int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
        if (parcel_name.empty() || parcel_name[0] == '.' || !ends_with(parcel_name, suffix))
          return;
        if (settle(dir + "/" + parcel_name, dir + "/" + name, max_age(users, key_prefix + parcel_name), now) && users)
          ++users_removed;
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
  std::string temp_name(const std::string& dir) {
    return dir + "/" + std::string(temp_prefix) + std::to_string(::getpid()) + "-" +
           std::to_string(temp_counter_.fetch_add(1, std::memory_order_relaxed));
  }

  [[noreturn]] void fail(const std::string& what, const std::string& path, int e) {
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    throw deposit_error("deposit: " + what + " " + path + ": " + errno_text(e));
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
      std::string path;
    };
    std::vector<std::optional<written>> done(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      try {
        auto loc = locate(batch[i].connection ? connections_ : users_, batch[i].key);
        auto tmp = write_temp(batch[i].connection ? connections_ : users_, loc, batch[i].contents, false);
        done[i] = written{std::move(tmp), loc.path};
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
        counters_.failures.fetch_add(1, std::memory_order_relaxed);
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
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!done[i])
        continue;
      if (::rename(done[i]->tmp.c_str(), done[i]->path.c_str()) != 0) {
        int e = errno;
        ::unlink(done[i]->tmp.c_str());
        counters_.failures.fetch_add(1, std::memory_order_relaxed);
        errors[i] = "deposit: cannot rename " + done[i]->tmp + " to " + done[i]->path + ": " + errno_text(e);
        done[i].reset();
      }
    }
    auto err = flush("after renaming");
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!done[i])
        continue;
      if (err.empty())
        counters_.writes.fetch_add(1, std::memory_order_relaxed);
      else
        errors[i] = err;  // in place, but maybe not durable: say so
    }
    return errors;
  }

  // Writes `p` to a new temp file next to its parcel (fsynced if `sync`); returns its path.
  std::string write_temp(const std::string& base, const location& loc, const parcel& p, bool sync) {
    bytes data = encode(p);
    std::string tmp;
    int fd = -1;
    bool dirs_made = false;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      tmp = temp_name(loc.dir);
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0)
        break;
      int e = errno;
      if (e == EEXIST)  // a crash's leftover with a reused pid
        continue;
      if (e == ENOENT && !dirs_made) {
        dirs_made = true;
        if (int me = make_dirs(base, loc.dir))
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
    location loc = locate(base, key);
    std::string tmp = write_temp(base, loc, p, true);
    if (::rename(tmp.c_str(), loc.path.c_str()) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      fail("cannot rename " + tmp + " to", loc.path, e);
    }
    // The new parcel is in place; without this it may not survive a crash.
    if (int e = fsync_dir(loc.dir))
      fail("cannot fsync directory", loc.dir, e);
    counters_.writes.fetch_add(1, std::memory_order_relaxed);
  }

  std::optional<parcel> get(const std::string& base, std::string_view key) {
    location loc = locate(base, key);
    int fd = ::open(loc.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == ENOENT)
        return std::nullopt;
      fail("cannot open", loc.path, e);
    }
    bytes data;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0)
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
    try {
      return decode(data);
    } catch (const codec_error& e) {
      quarantine(loc, e.what());
      return std::nullopt;
    }
  }

  void quarantine_copy(bool connection, const std::string& key, const std::string& reason) override {
    location loc = locate(connection ? connections_ : users_, key);
    int in = ::open(loc.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
      fail("cannot open", loc.path, errno);
    std::string qpath;
    int out = -1;
    for (int attempt = 0; attempt < 1000 && out < 0; ++attempt) {
      qpath = quarantine_ + "/" + quarantine_name(loc) + "." + std::to_string(static_cast<long long>(std::time(nullptr)))
              + "." + std::to_string(quarantine_counter_.fetch_add(1, std::memory_order_relaxed));
      out = ::open(qpath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (out < 0 && errno != EEXIST)
        break;
    }
    if (out < 0) {
      int e = errno;
      ::close(in);
      fail("cannot create", qpath, e);
    }
    char buf[16384];
    int e = 0;
    while (true) {
      ssize_t n = ::read(in, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        e = n < 0 ? errno : 0;
        break;
      }
      if ((e = write_all(out, buf, static_cast<std::size_t>(n))))
        break;
    }
    if (!e && ::fsync(out) != 0)
      e = errno;
    ::close(in);
    ::close(out);
    if (e) {
      ::unlink(qpath.c_str());
      fail("cannot copy to quarantine", qpath, e);
    }
    fsync_dir(quarantine_);
    counters_.quarantined.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("deposit: parcel {} cannot be used ({}); a copy is quarantined as {}", loc.path, reason, qpath);
  }

  // The quarantine file name of a parcel (before ".<unix time>.<counter>").
  static std::string quarantine_name(const location& loc) {
    std::string qname = loc.escaped;
    if (qname.size() > max_piece - 40) {  // keep room for ".parcel.<time>.<counter>"
      std::uint64_t h = checksum(loc.escaped.data(), loc.escaped.size());
      std::string hex;
      for (int i = 15; i >= 0; --i)
        hex += hex_digits[(h >> (i * 4)) & 0xf];
      qname = qname.substr(0, max_piece - 60) + "~" + hex;
    }
    return qname + std::string(suffix);
  }

  void quarantine(const location& loc, const std::string& reason) {
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
    for (int attempt = 0; attempt < 1000 && e == EEXIST; ++attempt) {
      qpath = quarantine_ + "/" + qname + "." + unix_time + "." +
              std::to_string(quarantine_counter_.fetch_add(1, std::memory_order_relaxed));
      e = move_no_replace(loc.path, qpath);
    }
    if (e == ENOENT) {  // gone meanwhile (swept): nothing left to protect
      spdlog::error("deposit: parcel {} failed verification ({}) and vanished before quarantine", loc.path, reason);
      return;
    }
    if (e != 0) {
      spdlog::error("deposit: parcel {} failed verification ({}) and cannot be quarantined: {}", loc.path, reason,
                    errno_text(e));
      fail("cannot quarantine", loc.path, e);
    }
    fsync_dir(quarantine_);  // best effort: the move is already done
    fsync_dir(loc.dir);
    counters_.quarantined.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("deposit: parcel {} failed verification ({}); quarantined as {}", loc.path, reason, qpath);
  }

  void remove(const std::string& base, std::string_view key) {
    location loc = locate(base, key);
    if (::unlink(loc.path.c_str()) != 0 && errno != ENOENT)
      fail("cannot remove", loc.path, errno);
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
  std::atomic<std::uint64_t> temp_counter_{0};
  std::atomic<std::uint64_t> quarantine_counter_{0};
};

}  // namespace

std::string escape_key(std::string_view key) {
  if (key.empty())
    throw std::invalid_argument("deposit key is empty");
  if (key.size() > max_key_bytes)
    throw std::invalid_argument("deposit key is over " + std::to_string(max_key_bytes) + " bytes");
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
