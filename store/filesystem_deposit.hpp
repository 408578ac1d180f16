// The filesystem deposit (docs/deposit.md): one file per parcel, fenced by owner
// epochs, group-committed with a filesystem flush. Its sources: filesystem_deposit.cpp
// (writes, reads, the structure), filesystem_fencing.cpp (owner epochs, claims, the
// commander generation, group commit), filesystem_scan.cpp (sweep, counts,
// quarantine). Internal to the store module: make_filesystem_deposit() is the API.
#pragma once

#include "store/filesystem_files.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>

namespace troupe::store::fs_deposit {

class filesystem_deposit final : public deposit {
public:
  explicit filesystem_deposit(const std::string& dir);

  void put_user(const std::string& user, const parcel& p) override;
  std::optional<parcel> get_user(const std::string& user) override;
  void remove_user(const std::string& user) override;
  std::string quarantine_user(const std::string& user, const std::string& reason) override;
  std::uint64_t owner_epoch(const std::string& user) override;

  std::optional<parcel> claim_user(const std::string& user, std::uint64_t epoch) override;

  std::uint64_t next_commander_generation() override;

  // Writes `generation` to `path` durably (temp file, fsync, rename, fsync of DIR); throws on failure.
  void write_generation(const std::string& path, std::uint64_t generation);

  // After a heal: DIR/commander-generation went with its directory. The
  // generation this process gave is written back (under the lock, never
  // below what the file holds), so that a restarted commander's epochs stay
  // above those of the parcels written since (docs/deposit.md "Owner epochs").
  void restore_generation();

  void put_connection(const std::string& cid, const parcel& p) override;
  std::optional<parcel> get_connection(const std::string& cid) override;
  void remove_connection(const std::string& cid) override;

  // Keys starting with '%' (escaped "%25") are the platform's own (the global
  // store's snapshot): never expired, never counted as users.
  static bool is_platform_key(const std::string& escaped);

  std::size_t sweep(std::chrono::seconds user_max_age, std::chrono::seconds guest_max_age) override;

  void for_each_user(const std::function<void(const std::string&)>& fn) override;

  std::size_t count_users() override;

private:
  std::string temp_name(const std::string& dir);

  [[noreturn]] void fail(const std::string& what, const std::string& path, int e);

  /// A failed write, read, remove or quarantine: counted, and the health clocks.
  void note_failure();
  void note_success();

  /// Narrows a deposit directory that is open to group or others to 0700's
  /// bits (logged). Shared sticky directories (/tmp given as DIR) are left alone.
  static void tighten(const std::string& dir, mode_t mode);

  /// Recreates what is missing of DIR (when its parent exists), users,
  /// connections and quarantine after someone removed them. True when anything
  /// was made (the caller retries what failed); counted and logged.
  bool heal(const std::string& why);

  // --- fencing ------------------------------------------------------------------

  static std::string claim_path(const location& loc);

  /// Locks the shard of `loc` (its lock file beside the shards); 0 or an errno.
  int lock_shard(const location& loc, file_lock& held);

  /// His claim (0: none). An empty claim file is none (made by his first
  /// write: see fenced_rename); one that does not read as a number (a crash
  /// cut it: claims are not fsynced) counts as none, logged. `exists`: whether
  /// the file is there. Throws on I/O errors.
  std::uint64_t read_claim(const location& loc, bool* exists = nullptr);

  /// The owner epoch in the header of his parcel in place (0: none, not a
  /// parcel, or format 1). Reads only the header's bytes. Throws on I/O errors.
  std::uint64_t parcel_epoch(const location& loc);

  /// The larger of his claim and his parcel's epoch (no lock taken here).
  std::uint64_t current_epoch(const location& loc);

  /// Under the shard lock: refuses `epoch` older than his current one
  /// (counted). Returns whether his claim file exists.
  bool check_fence(const location& loc, std::string_view key, std::uint64_t epoch);

  /// Writes his claim: a fixed-width record (20 digits and a newline)
  /// written in place, so that a user woken again costs no new file (only his
  /// first claim creates one). Readers see it whole: every reader that acts on
  /// it holds the shard lock, as this writer does. Not fsynced (see
  /// claim_user); a record a crash cut reads as no claim. Throws deposit_error.
  void write_claim(const location& loc, std::uint64_t epoch);

  /// Refuses a parcel that names another owner than its key (it could never be read back).
  void check_owner(std::string_view key, const parcel& p);

  std::vector<std::string> put_batch(const std::vector<batch_entry>& batch) override;

  /// rename_into_place of a USER parcel, fenced: under the shard lock, the
  /// epoch is checked against his current one, then renamed. A stale one
  /// removes the temp file and throws stale_owner_error; a check that cannot
  /// read removes it and throws deposit_error. Else 0 or the rename's errno.
  int fenced_rename(const std::string& tmp, const location& loc, std::string_view key, std::uint64_t epoch);

  /// fenced_rename's work once the shard lock is held: `renamed` gets 0 or the
  /// rename's errno. Returns whether his claim file exists.
  bool check_and_rename(const std::string& tmp, const location& loc, std::string_view key, std::uint64_t epoch,
                        int& renamed);

  /// His first write makes his (empty: no claim) claim file, so that his wake
  /// writes the claim in place instead of creating a file on the way to his
  /// first answer. No lock needed: O_EXCL never touches a claim written meanwhile.
  static void make_claim_file(const std::string& path);

  /// A batch leaves the claim file to do_deferred: a file creation costs as
  /// much as the parcel's own here (most of a batch's first writes, e.g. a soft
  /// quit of fresh guests). Past max_deferred_claims, his wake creates it.
  void defer_claim_file(const location& loc);

  std::size_t do_deferred(std::size_t max_steps) override;

  /// Not a platform key ('%…': the global store, the health probe): nobody claims those.
  static bool is_user_key(std::string_view key);

  /// Renames a written temp file onto its parcel's path; 0 or an errno. A
  /// directory in the way (which rename cannot replace) is quarantined first.
  int rename_into_place(const std::string& tmp, const location& loc, std::string_view key);

  // Writes `data` to a new temp file (0600) next to its parcel (fsynced if
  // `sync`); returns its path. Missing directories are made (0700), the
  // deposit's structure healed once if it is gone.
  std::string write_temp(const std::string& base, const location& loc, const bytes& data, bool sync);

  void put(const std::string& base, std::string_view key, const parcel& p);

  std::optional<parcel> get(const std::string& base, std::string_view key);

  /// Quarantines what is at loc.path and throws parcel_quarantined (users: the
  /// marker keeps telling it). When it vanished meanwhile, throws all the same:
  /// what was there could not be trusted, and the caller must not start empty.
  [[noreturn]] void refuse(const location& loc, std::string_view key, const std::string& reason, bool users);

  /// Moves whatever is at loc.path (as is: a bad parcel, a directory, a
  /// fifo, …) into DIR/quarantine; with `mark`, leaves the marker in its
  /// place. Returns the quarantine path, "" when nothing was there any more.
  /// Throws deposit_error when it cannot be moved.
  std::string quarantine(const location& loc, std::string_view key, const std::string& reason, bool mark);
  // quarantine() counted in the health counters: a throw is a failure, an answer a success.
  std::string quarantine_counted(const location& loc, std::string_view key, const std::string& reason, bool mark);

  // --- quarantine markers: a user whose parcel was quarantined stays refused --------

  static std::string marker_path(const location& loc);

  /// Best effort (logged): without it the next read finds nothing and would start him empty.
  void write_marker(const location& loc, std::string_view key, const std::string& qpath, const std::string& reason);

  /// A user whose parcel was quarantined and not replaced since: parcel_quarantined.
  void throw_if_marked(const location& loc, std::string_view key);

  void clear_marker(const location& loc);

  void remove(const std::string& base, std::string_view key);

  // --- scanning (sweep, count_users) ------------------------------------------

  /// Calls f(dir, entry, key_prefix) for every non-directory entry below the
  /// shards of `base`; key_prefix is the escaped key of the piece directories.
  template <class F>
  void walk_kind(const std::string& base, F&& f);

  template <class F>
  void walk(const std::string& dir, const std::string& key_prefix, int depth, F& f);

  void scan_failure(const std::string& path, int e);

  bool unlink_counted(const std::string& path, const char* what);

  /// Removes the expired parcel dir/name unless it is rewritten meanwhile:
  /// it is first renamed aside (atomically taking whatever is there), checked
  /// again, and put back if a write landed between the scan and the rename.
  bool expire(const std::string& dir, const std::string& name, std::int64_t max_ns, std::int64_t now);

  /// tomb holds what was at path: delete it if still expired, else put it back
  /// (unless an even newer parcel is there already). True if deleted as expired.
  bool settle(const std::string& path, const std::string& tomb, std::int64_t max_ns, std::int64_t now);

  std::string root_, users_, connections_, quarantine_;
  std::uint64_t generation_given_ = 0;  // the last commander generation this object gave (0: none)
  bool generation_locked_ = false;      // next_commander_generation holds the generation lock
  std::atomic<std::uint64_t> temp_counter_{0};
  // Names temp files (with temp_counter_): getpid is a system call on every write otherwise.
  const std::string pid_text_;
  std::atomic<std::uint64_t> quarantine_counter_{0};
  static constexpr std::size_t max_deferred_claims = 1 << 16;  // paths: ~8 MiB at most
  std::mutex deferred_mutex_;
  std::vector<std::string> deferred_claims_;  // claim files to make (do_deferred)
};

}  // namespace troupe::store::fs_deposit
