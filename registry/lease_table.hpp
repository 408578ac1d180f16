#pragma once
/// \file
/// The global store's table: key → value, with exclusive leases for
/// read-modify-write. Plain data owned by one actor (the commander), so no
/// locks; the actor turns its answers into replies and timers.
///
/// - A lease (for_update) is exclusive per key and carries a fencing token;
///   tokens only grow, so a commit with a stale token is refused
///   (lease_expired) and a late holder never overwrites a newer value.
/// - Requesters for a held key wait in FIFO order, in a bounded queue, each
///   with its own deadline.
/// - A lease ends by commit (the complete new value), abort (nothing), the
///   holder going down, or its TTL; the next waiter is granted at once.
/// - set/erase on a held key are refused (key_leased): a writer without the
///   lease would overwrite a read-modify-write in progress.
/// - Durable changes (the owner's durability "reply"): stage_set, stage_erase
///   and stage_commit stage a change instead of applying it; the owner writes
///   the staged changes as one batch (begin_batch: the values as they will be)
///   and settles it with the write's outcome; one batch is open at a time.
///   get shows the last settled value. A lease ends at its commit and the next
///   holder reads the staged value, so a hot key's commits share one write;
///   what depends on the open batch is tracked: when that batch is refused,
///   the staged changes that read its values (`depends`) are refused too, and
///   a lease holding such a value is doomed (its commit refused not_durable).
///   A refused batch is dropped, as if never asked; one applied, or of unknown
///   outcome, becomes the settled value.
///
/// `Waiter` is whatever the owner needs to answer a waiting requester later
/// (a response promise).

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe::registry {

/// Why the table refuses something.
enum class lease_refusal : std::uint8_t {
  none = 0,
  invalid_key,     ///< empty, longer than max_key_bytes, or not UTF-8
  value_too_big,   ///< longer than max_value_bytes
  invalid_ttl,     ///< not > 0 or above max_ttl
  queue_full,      ///< max_waiters_per_key requesters wait already
  wait_expired,    ///< the requester's deadline passed before a grant
  lease_expired,   ///< the token is not the key's current lease (stale, reclaimed, or never granted)
  key_leased,      ///< set/erase while somebody holds the key's lease
  no_such_key,
  // Set by the owner, never by the table: the outcome of a durable change.
  not_durable,         ///< the deposit refused its write: not applied
  durability_unknown,  ///< the write was not answered: it may or may not be durable (kept)
};

const char* to_string(lease_refusal r) noexcept;

/// True for a UTF-8 string without NUL.
bool valid_utf8(const std::string& s) noexcept;

template <class Waiter>
class lease_table {
public:
  using clock = std::chrono::steady_clock;

  struct limits {
    std::size_t max_key_bytes = 256;
    std::size_t max_value_bytes = 1 << 20;
    std::size_t max_waiters_per_key = 1024;
    clock::duration max_ttl = std::chrono::minutes(10);
  };

  /// An exclusive lease on one key.
  struct lease {
    std::uint64_t token = 0;
    std::string holder;             ///< who holds it (e.g. an actor address)
    clock::time_point since{};
    clock::time_point until{};
  };

  /// What a granted requester receives.
  struct grant {
    std::string key;
    std::uint64_t token = 0;
    std::optional<std::string> value;  ///< the current value (nullopt: absent)
    clock::time_point until{};
  };

  /// A waiter answered by an event (granted, or refused with a reason).
  struct outcome {
    Waiter waiter;
    std::optional<grant> granted;
    lease_refusal refused = lease_refusal::none;
  };

  explicit lease_table(limits lim = {}) : limits_(lim) {}

  // -- plain access ----------------------------------------------------------------

  lease_refusal check_key(const std::string& key) const {
    return key.empty() || key.size() > limits_.max_key_bytes || !valid_utf8(key) ? lease_refusal::invalid_key
                                                                                 : lease_refusal::none;
  }

  std::optional<std::string> get(const std::string& key) const {
    auto i = entries_.find(key);
    if (i == entries_.end() || !i->second.value)
      return std::nullopt;
    return i->second.value;
  }

  lease_refusal set(const std::string& key, std::string value) {
    lease_refusal why;
    if (auto* e = writable(key, value, why))
      e->value = std::move(value);
    return why;
  }

  lease_refusal erase(const std::string& key) {
    auto i = entries_.find(key);
    if (i == entries_.end() || !i->second.value)
      return lease_refusal::no_such_key;
    if (i->second.held)
      return lease_refusal::key_leased;
    i->second.value.reset();
    prune(i);
    return lease_refusal::none;
  }

  // -- leases ----------------------------------------------------------------------

  /// Asks for the lease of `key` for `ttl`. Granted now: the grant (the waiter
  /// is not kept). Queued: nullopt, the waiter is answered later by commit,
  /// abort, holder_down or expire. Refused: the refusal in `refused`.
  std::optional<grant> for_update(const std::string& key, const std::string& holder, clock::duration ttl,
                                  clock::time_point deadline, Waiter waiter, clock::time_point now,
                                  lease_refusal& refused) {
    refused = check_key(key);
    if (refused == lease_refusal::none && (ttl <= clock::duration::zero() || ttl > limits_.max_ttl))
      refused = lease_refusal::invalid_ttl;
    if (refused != lease_refusal::none)
      return std::nullopt;
    auto& e = entries_[key];
    if (!e.held)
      return grant_to(key, e, holder, ttl, now);
    if (e.queue.size() >= limits_.max_waiters_per_key) {
      refused = lease_refusal::queue_full;
      return std::nullopt;
    }
    e.queue.push_back({holder, ttl, deadline, std::move(waiter)});
    return std::nullopt;
  }

  /// Installs `value` (nullopt: erase) if `token` is the key's current lease;
  /// the lease ends and the next waiter, if any, is granted (in `next`).
  lease_refusal commit(const std::string& key, std::uint64_t token, std::optional<std::string> value,
                       clock::time_point now, std::vector<outcome>& next) {
    auto i = entries_.find(key);
    if (i == entries_.end() || !i->second.held || i->second.held->token != token)
      return lease_refusal::lease_expired;
    if (value && value->size() > limits_.max_value_bytes)
      return lease_refusal::value_too_big;  // the lease stays: the holder may retry or abort
    i->second.value = std::move(value);
    release(i, now, next);
    return lease_refusal::none;
  }

  /// Ends the lease `token` without applying anything.
  lease_refusal abort(const std::string& key, std::uint64_t token, clock::time_point now,
                      std::vector<outcome>& next) {
    auto i = entries_.find(key);
    if (i == entries_.end() || !i->second.held || i->second.held->token != token)
      return lease_refusal::lease_expired;
    release(i, now, next);
    return lease_refusal::none;
  }

  // -- durable changes ---------------------------------------------------------------
  // `depends` (out): the change read a value of the open batch, so it is refused
  // if that batch is (settle's answer names the keys).

  /// As set, but staged for the next batch (a later stage of the same key in
  /// the same batch wins). A blind write: it depends on nothing.
  lease_refusal stage_set(const std::string& key, std::string value, bool& depends) {
    depends = false;
    lease_refusal why;
    if (auto* e = writable(key, value, why))
      e->next = staged{std::move(value), false};
    return why;
  }

  /// As erase (of the value as it will be once what is staged is settled), staged.
  lease_refusal stage_erase(const std::string& key, bool& depends) {
    depends = false;
    auto i = entries_.find(key);
    if (i == entries_.end() || !latest(i->second))
      return lease_refusal::no_such_key;
    auto& e = i->second;
    if (e.held)
      return lease_refusal::key_leased;
    depends = unsettled_depends(e);  // it found the key in a value the deposit may refuse
    e.next = staged{std::nullopt, depends};
    return lease_refusal::none;
  }

  /// As commit, but the value is staged for the next batch; the lease ends
  /// now (the next waiter, in `next`, reads the staged value). A doomed
  /// lease (it read a value of a refused batch) is refused not_durable.
  lease_refusal stage_commit(const std::string& key, std::uint64_t token, std::optional<std::string> value,
                             clock::time_point now, std::vector<outcome>& next, bool& depends) {
    depends = false;
    auto i = entries_.find(key);
    if (i == entries_.end() || !i->second.held || i->second.held->token != token)
      return lease_refusal::lease_expired;
    if (value && value->size() > limits_.max_value_bytes)
      return lease_refusal::value_too_big;  // the lease stays: the holder may retry or abort
    auto& e = i->second;
    auto basis = e.held_basis;
    if (basis == basis_of::doomed) {
      release(i, now, next);
      return lease_refusal::not_durable;
    }
    depends = basis == basis_of::writing || (basis == basis_of::next && e.next && e.next->depends);
    e.next = staged{std::move(value), depends};
    release(i, now, next);
    return lease_refusal::none;
  }

  /// True when changes wait for the next batch.
  bool has_staged() const noexcept {
    for (auto& [key, e] : entries_)
      if (e.next)
        return true;
    return false;
  }

  /// True between begin_batch and settle.
  bool batch_open() const noexcept { return batch_open_; }

  /// Starts a batch (none may be open): what was staged is now being written.
  /// Returns every value as it is once the batch is applied: what to write.
  std::map<std::string, std::string> begin_batch() {
    batch_open_ = true;
    std::map<std::string, std::string> out;
    for (auto& [key, e] : entries_) {
      if (e.next) {
        e.writing = std::move(e.next);
        e.next.reset();
        if (e.held && e.held_basis == basis_of::next)
          e.held_basis = basis_of::writing;
      }
      const auto& v = e.writing ? e.writing->value : e.value;
      if (v)
        out.emplace(key, *v);
    }
    return out;
  }

  /// Ends the open batch: `applied` (written, or outcome unknown) installs its
  /// changes. Refused: they are dropped, and so are the changes staged since
  /// that read them (the owner refuses those whose `depends` was set, on the
  /// keys returned), and the leases holding such values are doomed.
  std::vector<std::string> settle(bool applied) {
    batch_open_ = false;
    std::vector<std::string> refused;
    for (auto i = entries_.begin(); i != entries_.end();) {
      auto& e = i->second;
      if (!e.writing) {
        ++i;
        continue;
      }
      if (applied) {
        e.value = std::move(e.writing->value);
        if (e.next)
          e.next->depends = false;
        if (e.held && e.held_basis == basis_of::writing)
          e.held_basis = basis_of::settled;
      } else {
        refused.push_back(i->first);
        bool next_refused = e.next && e.next->depends;
        if (e.held && (e.held_basis == basis_of::writing || (e.held_basis == basis_of::next && next_refused)))
          e.held_basis = basis_of::doomed;
        if (next_refused)
          e.next.reset();  // its value came from the refused one (a blind write after it would have cleared this)
      }
      e.writing.reset();
      i = prune(i);
    }
    return refused;
  }

  /// The holder went down: every lease it held ends with nothing applied, and
  /// its waiting requests are dropped. Returns how many leases were reclaimed.
  std::size_t holder_down(const std::string& holder, clock::time_point now, std::vector<outcome>& next) {
    return reclaim(
      now, next, [&](const waiting& w) { return w.holder == holder; }, [](waiting&) {},
      [&](const lease& l) { return l.holder == holder; });
  }

  /// Reclaims leases past their TTL and answers waiters past their deadline.
  /// Returns how many leases were reclaimed.
  std::size_t expire(clock::time_point now, std::vector<outcome>& next) {
    return reclaim(
      now, next, [&](const waiting& w) { return w.deadline <= now; },
      [&](waiting& w) { next.push_back({std::move(w.waiter), std::nullopt, lease_refusal::wait_expired}); },
      [&](const lease& l) { return l.until <= now; });
  }

  /// The earliest lease TTL or waiter deadline, for the owner's timer.
  std::optional<clock::time_point> next_deadline() const {
    std::optional<clock::time_point> out;
    auto consider = [&](clock::time_point t) {
      if (!out || t < *out)
        out = t;
    };
    for (auto& [key, e] : entries_) {
      if (e.held)
        consider(e.held->until);
      for (auto& w : e.queue)
        consider(w.deadline);
    }
    return out;
  }

  // -- inspection --------------------------------------------------------------------

  std::size_t keys() const noexcept {
    std::size_t n = 0;
    for (auto& [key, e] : entries_)
      n += e.value.has_value();
    return n;
  }

  /// Tokens granted from now on are above `floor` (a commander taking over
  /// starts above every token its predecessors could have granted).
  void tokens_above(std::uint64_t floor) noexcept { last_token_ = std::max(last_token_, floor); }

  std::size_t leases() const noexcept {
    std::size_t n = 0;
    for (auto& [key, e] : entries_)
      n += e.held.has_value();
    return n;
  }

  /// Visits every key: f(key, value or nullptr, lease or nullptr, waiting requesters).
  template <class F>
  void for_each(F&& f) const {
    for (auto& [key, e] : entries_)
      f(key, e.value ? &*e.value : nullptr, e.held ? &*e.held : nullptr, e.queue.size());
  }

  /// Visits the requesters waiting for `key`, first in line first: f(holder, ttl).
  template <class F>
  void for_each_waiter(const std::string& key, F&& f) const {
    auto i = entries_.find(key);
    if (i == entries_.end())
      return;
    for (auto& w : i->second.queue)
      f(w.holder, w.ttl);
  }

  /// Every value (staged changes aside), for persistence.
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> out;
    for (auto& [key, e] : entries_)
      if (e.value)
        out.emplace(key, *e.value);
    return out;
  }

private:
  struct waiting {
    std::string holder;
    clock::duration ttl;
    clock::time_point deadline;
    Waiter waiter;
  };

  struct staged {
    std::optional<std::string> value;  ///< nullopt: erase
    bool depends = false;              ///< (next only) the value derives from the open batch's
  };

  // What the current lease read: the settled value, the open batch's, the
  // next batch's, or a value of a refused batch (doomed).
  enum class basis_of : std::uint8_t { settled, writing, next, doomed };

  struct entry {
    std::optional<std::string> value;  ///< the settled value: what get shows
    std::optional<lease> held;
    basis_of held_basis = basis_of::settled;
    std::deque<waiting> queue;
    std::optional<staged> writing;     ///< in the open batch
    std::optional<staged> next;        ///< for the next batch
  };

  static bool busy(const entry& e) noexcept { return e.held || e.writing || e.next; }

  // Whether the value as it will be derives from the open batch.
  static bool unsettled_depends(const entry& e) noexcept { return e.next ? e.next->depends : e.writing.has_value(); }

  // The value as it will be once everything staged is settled as applied.
  static const std::optional<std::string>& latest(const entry& e) noexcept {
    return e.next ? e.next->value : e.writing ? e.writing->value : e.value;
  }

  using iterator = typename std::map<std::string, entry>::iterator;

  // Drops the waiters `drop_waiter` selects (after `on_drop`), ends the leases
  // `ends_lease` selects (granting the next waiter); returns the leases ended.
  template <class DropWaiter, class OnDrop, class EndsLease>
  std::size_t reclaim(clock::time_point now, std::vector<outcome>& next, DropWaiter drop_waiter, OnDrop on_drop,
                      EndsLease ends_lease) {
    std::size_t reclaimed = 0;
    for (auto i = entries_.begin(); i != entries_.end();) {
      auto& q = i->second.queue;
      for (auto w = q.begin(); w != q.end();) {
        if (drop_waiter(*w)) {
          on_drop(*w);
          w = q.erase(w);
        } else {
          ++w;
        }
      }
      if (i->second.held && ends_lease(*i->second.held)) {
        ++reclaimed;
        auto key = i->first;
        release(i, now, next);
        i = entries_.upper_bound(key);
      } else {
        i = prune(i);
      }
    }
    return reclaimed;
  }

  grant grant_to(const std::string& key, entry& e, const std::string& holder, clock::duration ttl,
                 clock::time_point now) {
    e.held = lease{++last_token_, holder, now, now + ttl};
    e.held_basis = e.next ? basis_of::next : e.writing ? basis_of::writing : basis_of::settled;
    return grant{key, e.held->token, latest(e), e.held->until};
  }

  // Ends the current lease and grants the next live waiter.
  void release(iterator i, clock::time_point now, std::vector<outcome>& next) {
    i->second.held.reset();
    grant_next(i, now, next);
  }

  // Grants the next live waiter if the key is not leased (prunes it if nothing is left).
  void grant_next(iterator i, clock::time_point now, std::vector<outcome>& next) {
    auto& e = i->second;
    if (e.held)
      return;
    while (!e.queue.empty()) {
      auto w = std::move(e.queue.front());
      e.queue.pop_front();
      if (w.deadline <= now) {
        next.push_back({std::move(w.waiter), std::nullopt, lease_refusal::wait_expired});
        continue;
      }
      next.push_back({std::move(w.waiter), grant_to(i->first, e, w.holder, w.ttl, now), lease_refusal::none});
      return;
    }
    prune(i);
  }

  // Forgets an entry with nothing left in it; returns the next iterator.
  iterator prune(iterator i) {
    if (i != entries_.end() && !i->second.value && !busy(i->second) && i->second.queue.empty())
      return entries_.erase(i);
    return i == entries_.end() ? i : std::next(i);
  }

  limits limits_;
  std::map<std::string, entry> entries_;

  // The entry a blind write of `value` at `key` goes to; nullptr (and why) when
  // the key is invalid, the value too big, or the key leased.
  entry* writable(const std::string& key, const std::string& value, lease_refusal& why) {
    why = check_key(key);
    if (why == lease_refusal::none && value.size() > limits_.max_value_bytes)
      why = lease_refusal::value_too_big;
    if (why != lease_refusal::none)
      return nullptr;
    auto& e = entries_[key];
    if (e.held) {
      why = lease_refusal::key_leased;
      return nullptr;
    }
    return &e;
  }
  std::uint64_t last_token_ = 0;
  bool batch_open_ = false;
};

}  // namespace troupe::registry
