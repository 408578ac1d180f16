// The filesystem deposit: owner epochs, claims, the commander generation, group commit.
#include "store/filesystem_deposit.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>

namespace troupe::store::fs_deposit {

std::uint64_t filesystem_deposit::owner_epoch(const std::string& user) {
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

std::optional<parcel> filesystem_deposit::claim_user(const std::string& user, std::uint64_t epoch) {
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

std::uint64_t filesystem_deposit::next_commander_generation() {
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

void filesystem_deposit::write_generation(const std::string& path, std::uint64_t generation) {
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

void filesystem_deposit::restore_generation() {
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

std::string filesystem_deposit::claim_path(const location& loc) {
  return loc.dir + "/" + std::string(claim_prefix) + loc.name;
}

int filesystem_deposit::lock_shard(const location& loc, file_lock& held) {
  int e = held.lock(loc.lock);
  if (e == ENOENT && heal("locking " + loc.lock))
    e = held.lock(loc.lock);
  return e;
}

std::uint64_t filesystem_deposit::read_claim(const location& loc, bool* exists) {
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

std::uint64_t filesystem_deposit::parcel_epoch(const location& loc) {
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

std::uint64_t filesystem_deposit::current_epoch(const location& loc) {
  return std::max(read_claim(loc), parcel_epoch(loc));
}

bool filesystem_deposit::check_fence(const location& loc, std::string_view key, std::uint64_t epoch) {
  bool claim_exists = false;
  const std::uint64_t current = std::max(read_claim(loc, &claim_exists), parcel_epoch(loc));
  if (epoch < current) {
    counters_.fenced.fetch_add(1, std::memory_order_relaxed);
    throw stale_owner_error(std::string(key), epoch, current);
  }
  return claim_exists;
}

void filesystem_deposit::write_claim(const location& loc, std::uint64_t epoch) {
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

void filesystem_deposit::check_owner(std::string_view key, const parcel& p) {
  if (!p.owner.empty() && p.owner != key) {
    note_failure();
    throw deposit_error("deposit: a parcel of '" + p.owner + "' cannot be written under '" + std::string(key) +
                        "'");
  }
}

std::vector<std::string> filesystem_deposit::put_batch(const std::vector<batch_entry>& batch) {
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
  std::string held_path;  // a copy: an entry that fails is reset below
  int lock_error = 0;
  for (std::size_t i : order) {
    int e = 0;
    try {
      if (batch[i].connection) {  // after every user: the last shard's lock is not needed any more
        held.release();
        e = rename_into_place(done[i]->tmp, done[i]->loc, batch[i].key);
      } else {
        if (held_path != done[i]->loc.lock) {
          held_path = done[i]->loc.lock;
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

int filesystem_deposit::fenced_rename(const std::string& tmp, const location& loc, std::string_view key, std::uint64_t epoch) {
  file_lock held;
  if (int e = lock_shard(loc, held))
    return e;
  int e = 0;
  if (!check_and_rename(tmp, loc, key, epoch, e) && e == 0 && is_user_key(key))
    make_claim_file(claim_path(loc));
  return e;
}

bool filesystem_deposit::check_and_rename(const std::string& tmp, const location& loc, std::string_view key, std::uint64_t epoch,
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

void filesystem_deposit::make_claim_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, file_mode);
  if (fd >= 0)
    ::close(fd);
}

void filesystem_deposit::defer_claim_file(const location& loc) {
  std::lock_guard<std::mutex> guard(deferred_mutex_);
  if (deferred_claims_.size() < max_deferred_claims)
    deferred_claims_.push_back(claim_path(loc));
}

std::size_t filesystem_deposit::do_deferred(std::size_t max_steps) {
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

bool filesystem_deposit::is_user_key(std::string_view key) { return !key.empty() && key[0] != '%'; }

}  // namespace troupe::store::fs_deposit
