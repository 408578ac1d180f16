// The filesystem deposit: construction, writes, reads, healing the structure.
#include "store/filesystem_deposit.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>

namespace troupe::store::fs_deposit {

filesystem_deposit::filesystem_deposit(const std::string& dir)
  : root_(dir), pid_text_(std::to_string(::getpid())) {
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

void filesystem_deposit::put_user(const std::string& user, const parcel& p) {
  put(users_, user, p);
}

std::optional<parcel> filesystem_deposit::get_user(const std::string& user) {
  return get(users_, user);
}

void filesystem_deposit::remove_user(const std::string& user) {
  remove(users_, user);
}

void filesystem_deposit::put_connection(const std::string& cid, const parcel& p) {
  put(connections_, cid, p);
}

std::optional<parcel> filesystem_deposit::get_connection(const std::string& cid) {
  return get(connections_, cid);
}

void filesystem_deposit::remove_connection(const std::string& cid) {
  remove(connections_, cid);
}

std::string filesystem_deposit::temp_name(const std::string& dir) {
  return dir + "/" + std::string(temp_prefix) + pid_text_ + "-" +
         std::to_string(temp_counter_.fetch_add(1, std::memory_order_relaxed));
}

[[noreturn]] void filesystem_deposit::fail(const std::string& what, const std::string& path, int e) {
  note_failure();
  throw deposit_error("deposit: " + what + " " + path + ": " + errno_text(e));
}

void filesystem_deposit::note_failure() {
  counters_.failures.fetch_add(1, std::memory_order_relaxed);
  counters_.consecutive_failures.fetch_add(1, std::memory_order_relaxed);
  counters_.last_failure_unix_ms.store(now_unix_ms(), std::memory_order_relaxed);
}

void filesystem_deposit::note_success() {
  counters_.consecutive_failures.store(0, std::memory_order_relaxed);
  counters_.last_success_unix_ms.store(now_unix_ms(), std::memory_order_relaxed);
}

void filesystem_deposit::tighten(const std::string& dir, mode_t mode) {
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

bool filesystem_deposit::heal(const std::string& why) {
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

int filesystem_deposit::rename_into_place(const std::string& tmp, const location& loc, std::string_view key) {
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

std::string filesystem_deposit::write_temp(const std::string& base, const location& loc, const bytes& data, bool sync) {
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

void filesystem_deposit::put(const std::string& base, std::string_view key, const parcel& p) {
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

std::optional<parcel> filesystem_deposit::get(const std::string& base, std::string_view key) {
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

void filesystem_deposit::remove(const std::string& base, std::string_view key) {
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

}  // namespace troupe::store::fs_deposit
