#pragma once
/// \file
/// The deposit: the durable store of parcels that freezing users write and
/// waking users read (DESIGN.md "Freezing and waking"). One user parcel per
/// user (his store) and one parcel per connection (a packed connection_record).
///
/// The embedded default is a directory (make_filesystem_deposit). Its layout:
///
///     DIR/users/<shard>/<escaped key>.parcel
///     DIR/users/<shard>/.quarantined-<escaped key>.parcel   (see get_user)
///     DIR/connections/<shard>/<escaped key>.parcel
///     DIR/quarantine/<escaped key>.parcel.<unix time>.<counter>
///     DIR/users/.fence-<shard>.lock                          (fencing: flock'ed around check + write)
///     DIR/users/<shard>/.claim-<escaped key>.parcel          (fencing: his claimed owner epoch, 20 digits)
///     DIR/commander-generation, DIR/.commander-generation.lock
///
/// * Modes: every directory the deposit makes is 0700 (DIR itself, users,
///   connections, quarantine, shards, piece directories), every file 0600
///   (parcels, temp files, markers). An existing DIR, users, connections or
///   quarantine wider than that is tightened at start (logged). Files of older
///   versions keep their modes; the 0700 DIR closes them.
/// * Healing: when DIR (its parent existing), users, connections, quarantine or
///   a shard is found missing (ENOENT) by a write or by a quarantine, the
///   structure is recreated and the operation retried once (counted in
///   deposit_counters::healed, logged): an `rm -rf DIR` does not need a restart.
///
/// * `<shard>`: two lowercase hex digits, the xor-folded low byte of the 64-bit
///   FNV-1a (store::checksum) of the raw key. A parcel is found from its key
///   alone: no index, no scan, nothing read at start-up.
/// * `<escaped key>` (escape_key): every byte of the key in `[a-z0-9_@-]` is kept;
///   every other byte (upper-case letters, '.', '%', '/', NUL, non-ASCII, …) is
///   written `%hh` with two LOWER-case hex digits. So "A" → "%41", "a@b.c" →
///   "a@b%2ec", "." → "%2e", ".." → "%2e%2e", ".hidden" → "%2ehidden". The escaped
///   alphabet has no upper case and no '.', hence: the mapping is injective even on
///   a case-insensitive filesystem ("A" and "a" are distinct files), no escaped
///   key is ".", ".." or starts with '.', and none contains '/'.
/// * Escaped keys longer than 200 characters (only keys well beyond the 64
///   characters of a valid user name) are cut into 200-character pieces; all
///   but the last become nested directories under the shard, the last gets the
///   ".parcel" suffix. Those directories are never removed (they are empty
///   after a remove; harmless).
/// * Names starting with '.' are the deposit's own: `.tmp-<pid>-<n>` (a write
///   in progress, or the leftover of a crash), `.sweep-<pid>-<name>` (a
///   parcel being expired) and `.quarantined-<name>` (a user whose parcel was
///   quarantined: see get_user). Scans never count them; sweep removes leftovers.
/// * Nothing but a regular file is read as a parcel: a directory, fifo,
///   socket or symlink (never followed) at a parcel's path is quarantined as
///   is, like a parcel that fails verification, and a write replaces it.
///
/// Keys (user names, connection ids) are any 1–255 bytes; an empty or longer
/// key throws std::invalid_argument. Valid user names are 1–64 characters of
/// `[A-Za-z0-9_.@-]` or "guest_<cid>"; a key starting with "guest_" is a guest.

#include "store/parcel.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::store {

/// Thrown when a write, a remove or a read fails at the I/O level (full disk,
/// read-only directory, I/O error); what() names the path and the errno text.
class deposit_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Thrown by a backend that is not reachable at the moment (a database that
/// went away): nothing was read or changed, and the same call may work once it
/// is back (the backend reconnects by itself). The deposit actor holds the
/// reads of waking users for the hold budget on it before failing them.
class deposit_unavailable : public deposit_error {
public:
  using deposit_error::deposit_error;
};

/// Thrown by get_user / get_connection when the parcel at the key's path could
/// not be trusted and was moved to quarantine: it failed verification, it was
/// written for another owner (a parcel copied over another one's), or it is not
/// a regular file. The key's state EXISTED and is not served: a caller must not
/// start him empty (the user actor refuses the user, 503). Derived from
/// deposit_error, so a caller that does not know it fails safe.
class parcel_quarantined : public deposit_error {
public:
  parcel_quarantined(std::string key, std::string reason, std::string quarantine_path)
      : deposit_error("deposit: the parcel of " + key + " is quarantined (" + reason + ")" +
                      (quarantine_path.empty() ? std::string() : " as " + quarantine_path)),
        key_(std::move(key)),
        reason_(std::move(reason)),
        quarantine_path_(std::move(quarantine_path)) {}
  /// The key asked for.
  const std::string& key() const noexcept { return key_; }
  /// Why ("parcel checksum mismatch", "written for bob", "a directory, not a parcel", …).
  const std::string& reason() const noexcept { return reason_; }
  /// Where the parcel went (under DIR/quarantine); "" when unknown.
  const std::string& quarantine_path() const noexcept { return quarantine_path_; }

private:
  std::string key_, reason_, quarantine_path_;
};

/// Thrown by put_user and claim_user when the write's owner epoch is older
/// than the user's current one (fencing: see "Fencing" below). Nothing was
/// changed. Derived from deposit_error, so a caller that does not know it
/// fails safe (it does not believe the write landed).
class stale_owner_error : public deposit_error {
public:
  stale_owner_error(const std::string& key, std::uint64_t epoch, std::uint64_t current)
      : deposit_error(std::string(stale_owner_prefix) + "the write of " + key + " at owner epoch " +
                      std::to_string(epoch) + " is older than his current epoch " + std::to_string(current)),
        epoch_(epoch),
        current_(current) {}
  /// The start of what() (and of put_batch's text for a stale entry).
  static constexpr std::string_view stale_owner_prefix = "stale owner: ";
  std::uint64_t epoch() const noexcept { return epoch_; }    ///< the refused write's
  std::uint64_t current() const noexcept { return current_; }  ///< the user's, newer

private:
  std::uint64_t epoch_, current_;
};

/// True when a put_batch text says the entry was refused as stale (fencing).
inline bool is_stale_owner(std::string_view error_text) noexcept {
  return error_text.substr(0, stale_owner_error::stale_owner_prefix.size()) == stale_owner_error::stale_owner_prefix;
}

/// What a connection parcel's payload holds: who owns the connection and its pages.
/// The deposit does not interpret payloads; callers pack()/unpack() this.
struct connection_record {
  std::string cid;
  std::string user;
  std::vector<std::string> pages;
  MSGPACK_DEFINE_MAP(cid, user, pages);
};

/// Counters a deposit keeps (read by metrics).
struct deposit_counters {
  std::atomic<std::uint64_t> reads{0};        ///< parcel files actually read (also those failing verification)
  std::atomic<std::uint64_t> writes{0};       ///< parcels written durably
  std::atomic<std::uint64_t> checkpoints{0};  ///< of them, user parcels a live user wrote (cause checkpoint:
                                              ///< durability interval or reply; counted by the deposit actor)
  std::atomic<std::uint64_t> failures{0};     ///< failed writes, removes, reads, quarantines, sweep unlinks
  std::atomic<std::uint64_t> quarantined{0};  ///< parcels (or non-files) moved to quarantine
  std::atomic<std::uint64_t> removed{0};      ///< USER parcels removed by sweep (expired users)
  std::atomic<std::uint64_t> healed{0};       ///< times the missing structure (DIR, users/, …) was recreated
  std::atomic<std::uint64_t> fenced{0};       ///< user writes and claims refused as stale (an older owner epoch)
  // Health (for /_troupe/health): updated by every put, get, remove and batch entry.
  std::atomic<std::int64_t> last_failure_unix_ms{0};  ///< wall clock of the last failed operation; 0 = never
  std::atomic<std::int64_t> last_success_unix_ms{0};  ///< wall clock of the last successful operation; 0 = never
  std::atomic<std::int64_t> consecutive_failures{0};  ///< failed operations since the last success
  /// Reads of waking users held while the backend is unreachable (kept by the deposit actor).
  std::atomic<std::int64_t> reads_waiting{0};
};

class deposit {
public:
  virtual ~deposit() = default;

  // --- users -----------------------------------------------------------------
  /// Atomic and durable, or throws deposit_error leaving any previous parcel
  /// intact. `p.owner` left empty is recorded as `user`; an owner set to
  /// anything else is refused (deposit_error: it could never be read back).
  /// Clears the user's quarantine marker (a new parcel supersedes it).
  /// Fenced: throws stale_owner_error (counted in counters().fenced) when
  /// p.owner_epoch is older than owner_epoch(user), checked and written
  /// atomically against every other deposit object on the same directory.
  virtual void put_user(const std::string& user, const parcel& p) = 0;
  /// nullopt: none, and none was ever quarantined. Throws:
  /// * parcel_quarantined when the parcel in place fails verification, names
  ///   another owner (p.owner non-empty and != user), or is not a regular
  ///   file: it is moved to DIR/quarantine (never deleted), counted, logged at
  ///   error with both paths and both names. A marker stays in its place, so
  ///   every later get_user throws parcel_quarantined too (reason and path from
  ///   the marker) until a put_user or remove_user of him: the user is never
  ///   silently started empty. The operator's way out: move the file back from
  ///   quarantine/ (and remove the marker), or remove the user.
  /// * deposit_error on an I/O error (the parcel may exist: do not start the
  ///   user empty), or when a bad parcel cannot be moved to quarantine.
  virtual std::optional<parcel> get_user(const std::string& user) = 0;
  /// Absent is fine; a failure throws deposit_error. Not fsynced: a crash may
  /// bring the removed parcel back (it is then the last durable state).
  /// Also removes his quarantine marker.
  virtual void remove_user(const std::string& user) = 0;
  /// Moves the user's parcel to quarantine on the caller's word (e.g. its
  /// payload does not decode as his state) and leaves the marker, exactly as
  /// get_user does for a parcel failing verification; `reason` is logged and
  /// kept in the marker. Returns the quarantine path; "" when there was no
  /// parcel (the marker is left all the same). Throws deposit_error on failure.
  virtual std::string quarantine_user(const std::string& user, const std::string& reason) = 0;

  // --- fencing (docs/deposit.md "Fencing") -------------------------------------
  // A user's CURRENT owner epoch is the larger of his claim and the owner_epoch
  // of his parcel in place (0 when neither exists; epoch 0 is the oldest). A
  // user parcel whose owner_epoch is older is refused (stale_owner_error);
  // an equal or newer one is written. The check and the write (or the claim)
  // are one step under an flock(2) of the user's shard, so processes sharing
  // the directory (or a mount with flock and rename semantics) see them in one
  // order. Connection parcels are not fenced.

  /// The user's current owner epoch (no lock: a snapshot).
  virtual std::uint64_t owner_epoch(const std::string& user) = 0;
  /// Reads his parcel exactly like get_user and claims him for `epoch`, in one
  /// step: afterwards every write older than `epoch` is refused, even before
  /// he wrote anything. Throws stale_owner_error (counted, nothing changed,
  /// nothing returned) when his current epoch is newer; an equal epoch is
  /// accepted (a restart of the same placement). Epoch 0 records no claim.
  /// The claim is not fsynced: it only has to outlive the processes it fences,
  /// and a crash of the host ends them too (docs/deposit.md). A user's first
  /// put makes his claim file (empty: no claim), so that his wakes write in place.
  virtual std::optional<parcel> claim_user(const std::string& user, std::uint64_t epoch) = 0;
  /// A commander generation above every one this directory gave before, to
  /// any process: read, incremented and written back durably (fsync, rename,
  /// fsync) under an flock of DIR/.commander-generation.lock. Starts at 1.
  /// Throws deposit_error when it cannot be read or made durable (an
  /// unreadable generation file is refused, never guessed).
  virtual std::uint64_t next_commander_generation() = 0;

  /// The platform secret `name` as the deposit keeps it for every node on it:
  /// the stored value, or `candidate` stored now when there is none (created
  /// once: concurrent callers all get the first stored value). nullopt: this
  /// backend keeps no secrets (the filesystem one: the node keeps the file
  /// <deposit.path>/cookie.secret itself, in the directory its members share).
  /// Throws deposit_error when the store cannot be reached.
  virtual std::optional<std::string> load_or_create_secret(const std::string& name, const std::string& candidate) {
    (void)name;
    (void)candidate;
    return std::nullopt;
  }

  // --- connections (payload = packed connection_record) -----------------------
  /// Like put_user (owner = cid when empty); no marker.
  virtual void put_connection(const std::string& cid, const parcel& p) = 0;
  /// Like get_user, except that no marker is left: parcel_quarantined is thrown
  /// once, by the read that moves the parcel away; later reads find nothing.
  virtual std::optional<parcel> get_connection(const std::string& cid) = 0;
  virtual void remove_connection(const std::string& cid) = 0;

  // --- group commit ------------------------------------------------------------
  /// One parcel of a batch.
  struct batch_entry {
    bool connection = false;  ///< false: a user parcel
    std::string key;
    parcel contents;
  };
  /// Writes many parcels with one flush of the filesystem instead of one fsync
  /// each: every parcel is replaced atomically, and all of them are durable when
  /// this returns. Returns one text per entry: empty when written, else why not
  /// (a failed entry leaves its previous parcel intact; the others still land).
  /// A user entry refused by fencing gets a text for which is_stale_owner() is true.
  virtual std::vector<std::string> put_batch(const std::vector<batch_entry>& batch) = 0;

  /// Does up to `max_steps` of the work put_batch deferred to keep a batch
  /// short, and returns how many steps are left (0: none). The filesystem
  /// deposit defers the empty claim file of each user a batch wrote for the
  /// first time: it only spares his next wake a file creation, so work left
  /// undone (a soft quit does not wait for it) costs that wake the creation,
  /// nothing else. Call it when idle; `do_deferred(0)` only tells what is left.
  virtual std::size_t do_deferred(std::size_t max_steps) {
    (void)max_steps;
    return 0;
  }

  /// Removes parcels whose last write (mtime) is older than the given ages:
  /// guests (keys starting "guest_") after guest_max_age, other users after
  /// user_max_age, connections after the larger of the two; also removes
  /// leftover temp files older than a minute. Returns how many user parcels
  /// were removed (also added to counters().removed). Scans everything: run it
  /// in the background. Never throws for a single file: failures are counted
  /// and logged, the sweep goes on. A parcel rewritten while being swept is
  /// kept.
  virtual std::size_t sweep(std::chrono::seconds user_max_age, std::chrono::seconds guest_max_age) = 0;

  /// Number of user parcels present (scans; start-up metrics and tests, not the hot path).
  /// Keys starting with '%' are the platform's own (e.g. the global store's
  /// snapshot): they are not counted here and never expired by sweep.
  virtual std::size_t count_users() = 0;

  /// Calls fn(name) for every user parcel present (platform keys aside), in
  /// no particular order (scans: the census's start-up listing of frozen users).
  virtual void for_each_user(const std::function<void(const std::string&)>& fn) = 0;

  const deposit_counters& counters() const noexcept { return counters_; }
  deposit_counters& counters() noexcept { return counters_; }

protected:
  deposit_counters counters_;
};

/// The embedded default: a directory. Creates DIR (and parents), DIR/users,
/// DIR/connections, DIR/quarantine (0700; tightens them to 0700 when wider)
/// and probes that each can be written.
/// Throws deposit_error if DIR cannot be created or written.
/// Safe for concurrent calls on different keys from several threads.
std::unique_ptr<deposit> make_filesystem_deposit(const std::string& dir);

/// The longest key a deposit takes, in bytes (every backend: a user name or a connection id).
inline constexpr std::size_t max_key_bytes = 255;

/// Throws std::invalid_argument for an empty key or one over max_key_bytes.
void check_key(std::string_view key);

/// The wall clock in Unix milliseconds (a backend's health timestamps).
std::int64_t now_unix_ms();

/// The escaped form of a key (see the file comment). Throws
/// std::invalid_argument for an empty key or one over max_key_bytes.
std::string escape_key(std::string_view key);

/// The key an escaped form stands for; nullopt when it is not one escape_key makes.
std::optional<std::string> unescape_key(std::string_view escaped);

enum class parcel_kind { user, connection };

/// Where the filesystem deposit rooted at `dir` keeps the parcel of `key`
/// (for tests and operators). Throws std::invalid_argument like escape_key.
std::string filesystem_parcel_path(const std::string& dir, parcel_kind kind, std::string_view key);

}  // namespace troupe::store
