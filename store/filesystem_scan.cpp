// The filesystem deposit: sweep, counts, quarantine and its markers.
#include "store/filesystem_deposit.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>

namespace troupe::store::fs_deposit {

std::string filesystem_deposit::quarantine_user(const std::string& user, const std::string& reason) {
  // Nothing to move (""): the marker is left all the same.
  return quarantine_counted(locate(users_, user), user, reason, true);
}

bool filesystem_deposit::is_platform_key(const std::string& escaped) { return starts_with(escaped, "%25"); }

std::size_t filesystem_deposit::sweep(std::chrono::seconds user_max_age, std::chrono::seconds guest_max_age) {
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

void filesystem_deposit::for_each_user(const std::function<void(const std::string&)>& fn) {
  walk_kind(users_, [&](const std::string&, const dir_entry& de, const std::string& key_prefix) {
    if (de.name.empty() || de.name[0] == '.' || !ends_with(de.name, suffix) || is_platform_key(key_prefix + de.name))
      return;
    auto escaped = key_prefix + de.name.substr(0, de.name.size() - suffix.size());
    if (auto key = unescape_key(escaped))
      fn(*key);
  });
}

std::size_t filesystem_deposit::count_users() {
  std::size_t n = 0;
  walk_kind(users_, [&](const std::string&, const dir_entry& de, const std::string&) {
    if (!de.name.empty() && de.name[0] != '.' && ends_with(de.name, suffix) && !is_platform_key(de.name))
      ++n;
  });
  return n;
}

[[noreturn]] void filesystem_deposit::refuse(const location& loc, std::string_view key, const std::string& reason, bool users) {
  // The disk answered; what it held was bad (counted as quarantined).
  throw parcel_quarantined(std::string(key), reason, quarantine_counted(loc, key, reason, users));
}

std::string filesystem_deposit::quarantine_counted(const location& loc, std::string_view key, const std::string& reason,
                                                   bool mark) {
  std::string qpath;
  try {
    qpath = quarantine(loc, key, reason, mark);
  } catch (const std::exception&) {
    note_failure();
    throw;
  }
  note_success();
  return qpath;
}

std::string filesystem_deposit::quarantine(const location& loc, std::string_view key, const std::string& reason, bool mark) {
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

std::string filesystem_deposit::marker_path(const location& loc) {
  return loc.dir + "/" + std::string(marker_prefix) + loc.name;
}

void filesystem_deposit::write_marker(const location& loc, std::string_view key, const std::string& qpath, const std::string& reason) {
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

void filesystem_deposit::throw_if_marked(const location& loc, std::string_view key) {
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

void filesystem_deposit::clear_marker(const location& loc) {
  const std::string path = marker_path(loc);
  if (::unlink(path.c_str()) == 0) {
    fsync_dir(loc.dir);
    spdlog::info("deposit: {} removed: a new parcel is in place", path);
  } else if (errno != ENOENT) {
    spdlog::warn("deposit: cannot remove the quarantine marker {}: {}", path, errno_text(errno));
  }
}

template <class F>
void filesystem_deposit::walk_kind(const std::string& base, F&& f) {
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
void filesystem_deposit::walk(const std::string& dir, const std::string& key_prefix, int depth, F& f) {
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

void filesystem_deposit::scan_failure(const std::string& path, int e) {
  counters_.failures.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("deposit: cannot scan {}: {}", path, errno_text(e));
}

bool filesystem_deposit::unlink_counted(const std::string& path, const char* what) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT)
    return true;
  int e = errno;
  counters_.failures.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("deposit: cannot remove {} {}: {}", what, path, errno_text(e));
  return false;
}

bool filesystem_deposit::expire(const std::string& dir, const std::string& name, std::int64_t max_ns, std::int64_t now) {
  std::string path = dir + "/" + name;
  std::string tomb = dir + "/" + std::string(tomb_prefix) + pid_text_ + "-" + name;
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

bool filesystem_deposit::settle(const std::string& path, const std::string& tomb, std::int64_t max_ns, std::int64_t now) {
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

}  // namespace troupe::store::fs_deposit
