#include "actors/deposit.hpp"

#include "actors/commander.hpp"
#include "actors/errors.hpp"
#include "actors/global_store.hpp"
#include "actors/rate_limited_log.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace troupe {

namespace {

// Puts written with one group commit at most (a batch costs the filesystem
// deposit two flushes whatever its size: the soft quit's rate follows it).
constexpr std::size_t max_batch = 2048;
// The backend's deferred work done between two batches: 64 claim files, ~2 ms here.
constexpr std::size_t deferred_slice = 64;
// While the soft quit retries refused puts: how often.
constexpr auto retry_period = std::chrono::milliseconds(250);
// While the backend is unreachable: how often held reads try again.
constexpr auto reread_period = std::chrono::milliseconds(200);
// The key of the health probe's parcel: '%' keys are the platform's own
// (never counted as users, never expired).
const std::string health_probe_key = "%health-probe";

using steady = std::chrono::steady_clock;
using put_promise = caf::typed_response_promise<std::uint64_t>;

// Puts waiting for the same write: entries and their answers, index by index.
struct put_batch {
  std::vector<store::deposit::batch_entry> entries;
  std::vector<put_promise> promises;
  std::vector<std::string> reasons;  // why the deposit refused each (held puts only)

  bool empty() const noexcept { return entries.empty(); }
  std::size_t size() const noexcept { return entries.size(); }
  void add(store::deposit::batch_entry e, put_promise p, std::string reason = {}) {
    entries.push_back(std::move(e));
    promises.push_back(std::move(p));
    reasons.push_back(std::move(reason));
  }
};

// What an operator reads in the log for a parcel written nowhere.
std::string label_of(const store::deposit::batch_entry& e) {
  if (e.connection)
    return "connection " + registry::redact(e.key);
  if (e.key == global_snapshot_key)
    return "the global store";
  return registry::redact(e.key);
}

// The fallback of the soft quit lives here because this actor owns the
// backend: a put refused at quit is retried, then parked in a second
// filesystem deposit and answered as written, so the user (or the commander)
// leaves as frozen and nothing else changes. node_main asks what was parked
// (quit_atom) and sets the exit code from it.
struct deposit_state {
  static const char* name;
  deposit_handle::stateful_pointer<deposit_state> self = nullptr;
  std::shared_ptr<store::deposit> backend;
  health_signals* health = nullptr;
  put_batch staged;
  std::uint64_t staged_number = 0;  // which batch `staged` is: a flush_atom for an older one is stale
  // Stale writes come in bursts (every user of a fenced node): one line a second.
  rate_limited_log fenced_log{spdlog::level::warn};

  // -- the soft quit ---------------------------------------------------------------
  bool quitting = false;
  bool deferred_scheduled = false;
  steady::time_point retry_until;
  std::string fallback_dir;
  std::unique_ptr<store::deposit> fallback;
  std::string fallback_error;  // why the fallback could not be opened ("" : not tried or fine)
  put_batch retrying;
  bool retry_scheduled = false;
  bool refusal_logged = false;
  std::uint64_t rescued = 0;
  std::vector<std::string> lost;

  // -- reads while the backend is unreachable ------------------------------------------
  // A wake's read (get or claim) that finds the backend unreachable
  // (store::deposit_unavailable: a database gone) waits here, retried every
  // reread_period, until read_hold has passed: a short outage delays the
  // wake instead of failing it.
  struct pending_read {
    parcel_kind kind;
    bool claim;
    std::string key;
    std::uint64_t epoch;
    caf::typed_response_promise<std::vector<store::parcel>> promise;
    steady::time_point until;
  };
  caf::timespan read_hold{0};
  std::vector<pending_read> held_reads;
  bool reread_scheduled = false;
  std::string unreachable_reason;  // the backend's last word, for the answer when the hold runs out

  // Answers `r` from the backend, or holds it while the backend is unreachable.
  void read(pending_read r) {
    if (auto out = try_read(r)) {
      if (*out)
        r.promise.deliver(std::move(**out));
      else
        r.promise.deliver(std::move(out->error()));
      return;
    }
    if (steady::now() >= r.until) {
      r.promise.deliver(make_error(errc::deposit_failed, "the deposit is unreachable: " + unreachable_reason));
      return;
    }
    held_reads.push_back(std::move(r));
    backend->counters().reads_waiting.store(static_cast<std::int64_t>(held_reads.size()), std::memory_order_relaxed);
    if (!reread_scheduled) {
      reread_scheduled = true;
      self->delayed_send(self, reread_period, reread_atom::value);
    }
  }

  void reread() {
    reread_scheduled = false;
    auto held = std::move(held_reads);
    held_reads.clear();
    for (auto& r : held)
      read(std::move(r));
    backend->counters().reads_waiting.store(static_cast<std::int64_t>(held_reads.size()), std::memory_order_relaxed);
  }

  // The backend's answer for one read; nullopt while it is unreachable.
  using parcels_or_error = caf::expected<std::vector<store::parcel>>;
  std::optional<parcels_or_error> try_read(const pending_read& r) {
    try {
      auto& b = *backend;
      auto p = r.claim ? b.claim_user(r.key, r.epoch)
                       : (r.kind == parcel_kind::user ? b.get_user(r.key) : b.get_connection(r.key));
      std::vector<store::parcel> out;
      if (p)
        out.push_back(std::move(*p));
      return parcels_or_error{std::move(out)};
    } catch (const store::stale_owner_error& e) {
      return parcels_or_error{stale(r.key, e.what())};
    } catch (const store::parcel_quarantined& e) {
      if (r.kind == parcel_kind::connection)  // the backend logged it; he is a guest again
        return parcels_or_error{std::vector<store::parcel>{}};
      return parcels_or_error{make_error(errc::bad_state, e.what())};
    } catch (const store::deposit_unavailable& e) {
      unreachable_reason = e.what();
      return std::nullopt;
    } catch (const std::exception& e) {
      return parcels_or_error{make_error(errc::deposit_failed, e.what())};
    }
  }

  // The backend's answer for each entry ("" written); a throw fails them all.
  static std::vector<std::string> write(store::deposit& b, const std::vector<store::deposit::batch_entry>& entries) {
    try {
      auto errors = b.put_batch(entries);
      errors.resize(entries.size());
      return errors;
    } catch (const std::exception& e) {
      return std::vector<std::string>(entries.size(), e.what());
    }
  }

  // Health's view of the primary deposit: did this write work?
  void record(bool ok) {
    if (!health)
      return;
    if (ok) {
      health->deposit_consecutive_failures.store(0, std::memory_order_relaxed);
      health->deposit_last_success_unix_ms.store(unix_now_ms(), std::memory_order_relaxed);
    } else {
      health->deposit_consecutive_failures.fetch_add(1, std::memory_order_relaxed);
      health->deposit_last_failure_unix_ms.store(unix_now_ms(), std::memory_order_relaxed);
    }
  }

  // Writes `batch` to the primary deposit; answers what landed; what did not
  // is answered failed, or, during the soft quit, held for a retry / the fallback.
  void write_primary(put_batch batch) {
    auto t0 = steady::now();
    auto errors = write(*backend, batch.entries);
    spdlog::debug("deposit: {} parcel(s) written in {} us", batch.size(),
                  std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - t0).count());
    // A stale write is the deposit working as it should: not a failure for health.
    bool all_ok = std::all_of(errors.begin(), errors.end(), [](auto& e) { return e.empty() || store::is_stale_owner(e); });
    record(all_ok);
    put_batch refused;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (errors[i].empty() && !batch.entries[i].connection && batch.entries[i].key != global_snapshot_key
          && batch.entries[i].contents.cause == store::parcel_cause::checkpoint)
        backend->counters().checkpoints.fetch_add(1, std::memory_order_relaxed);
      if (errors[i].empty())
        batch.promises[i].deliver(static_cast<std::uint64_t>(batch.entries[i].contents.payload.size()));
      else if (store::is_stale_owner(errors[i]))  // never retried, never parked: the newer owner's state stands
        batch.promises[i].deliver(stale(batch.entries[i].key, errors[i]));
      else if (!quitting)
        batch.promises[i].deliver(make_error(errc::deposit_failed, errors[i]));
      else
        refused.add(std::move(batch.entries[i]), std::move(batch.promises[i]), std::move(errors[i]));
    }
    if (refused.empty())
      return;
    if (!refusal_logged) {  // once: the outcome of each parcel is told at the end
      refusal_logged = true;
      spdlog::error("soft quit: the deposit refuses writes ({}); retrying for up to {} ms, then the fallback {}",
                    refused.reasons.front(),
                    std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                retry_until - steady::now()).count()),
                    fallback_dir);
    }
    if (steady::now() >= retry_until)
      return rescue(std::move(refused));
    for (std::size_t i = 0; i < refused.size(); ++i)
      retrying.add(std::move(refused.entries[i]), std::move(refused.promises[i]), std::move(refused.reasons[i]));
    if (!retry_scheduled) {
      retry_scheduled = true;
      self->delayed_send(self, retry_period, retry_atom::value);
    }
  }

  // A write or claim refused by fencing: logged (rate-limited) and answered stale_owner.
  caf::error stale(const std::string& key, const std::string& why) {
    fenced_log("deposit: fenced: a write or claim of user {} at an owner epoch older than his current one was "
               "refused; the newer owner's state stands",
               registry::redact(key));
    return make_error(errc::stale_owner, why);
  }

  // Writes every staged parcel in one batch and answers each.
  void flush() {
    if (staged.empty())
      return;
    auto batch = std::move(staged);
    staged = {};
    write_primary(std::move(batch));
    schedule_deferred();
  }

  // The backend's deferred work runs a slice at a time after what is queued
  // (puts queued meanwhile go first), and not at all once the soft quit began:
  // then every write goes first, and what is left only costs a wake a file creation.
  void schedule_deferred() {
    if (quitting || deferred_scheduled || backend->do_deferred(0) == 0)
      return;
    deferred_scheduled = true;
    self->send(self, deferred_atom::value);
  }

  void do_deferred() {
    deferred_scheduled = false;
    if (quitting)
      return;
    try {
      backend->do_deferred(deferred_slice);
    } catch (const std::exception& e) {
      spdlog::warn("deposit: deferred work failed: {}", e.what());
      return;
    }
    schedule_deferred();
  }

  void retry() {
    retry_scheduled = false;
    if (retrying.empty())
      return;
    auto batch = std::move(retrying);
    retrying = {};
    write_primary(std::move(batch));
  }

  // The deposit refused these at quit past the retries: the fallback deposit takes them.
  void rescue(put_batch batch) {
    if (!fallback && fallback_error.empty()) {
      try {
        fallback = store::make_filesystem_deposit(fallback_dir);
      } catch (const std::exception& e) {
        fallback_error = e.what();
        spdlog::error("soft quit: the fallback deposit {} cannot be used: {}", fallback_dir, fallback_error);
      }
    }
    auto errors = fallback ? write(*fallback, batch.entries)
                           : std::vector<std::string>(batch.size(), "fallback unusable: " + fallback_error);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (errors[i].empty()) {
        ++rescued;
        batch.promises[i].deliver(static_cast<std::uint64_t>(batch.entries[i].contents.payload.size()));
        continue;
      }
      lost.push_back(label_of(batch.entries[i]));
      spdlog::error("soft quit: {} could not be written (deposit: {}; fallback {}: {})", lost.back(),
                    batch.reasons[i], fallback_dir, errors[i]);
      batch.promises[i].deliver(make_error(errc::deposit_failed, batch.reasons[i] + "; fallback: " + errors[i]));
    }
  }

  // Health asked: is the deposit still writable? Skipped while writes are known to work.
  void probe(std::int64_t fresh_ms) {
    if (quitting || !health)
      return;
    if (health->deposit_consecutive_failures.load(std::memory_order_relaxed) == 0
        && unix_now_ms() - health->deposit_last_success_unix_ms.load(std::memory_order_relaxed) < fresh_ms)
      return;
    flush();
    store::parcel p;
    p.writer_worker = "health";
    p.cause = store::parcel_cause::checkpoint;
    auto errors = write(*backend, {{false, health_probe_key, std::move(p)}});
    if (!errors.front().empty() && health->deposit_consecutive_failures.load(std::memory_order_relaxed) == 0)
      spdlog::error("deposit: a probe write failed: {}", errors.front());
    record(errors.front().empty());
  }
};

const char* deposit_state::name = "troupe.deposit";

template <class F>
auto guarded(F&& fn) -> caf::result<decltype(fn())> {
  try {
    return fn();
  } catch (const std::exception& e) {
    return make_error(errc::deposit_failed, e.what());
  }
}

deposit_handle::behavior_type deposit_impl(deposit_handle::stateful_pointer<deposit_state> self,
                                           std::shared_ptr<store::deposit> backend, health_signals* health,
                                           caf::timespan read_hold) {
  self->state.self = self;
  self->state.backend = std::move(backend);
  self->state.health = health;
  self->state.read_hold = read_hold;
  return {
    [=](put_atom, parcel_kind kind, std::string& key, store::parcel& p) -> caf::result<std::uint64_t> {
      auto& st = self->state;
      auto promise = self->make_response_promise<std::uint64_t>();
      if (st.staged.empty())  // handled after everything already queued: they form one batch
        self->send(self, flush_atom::value, ++st.staged_number);
      st.staged.add({kind == parcel_kind::connection, std::move(key), std::move(p)}, promise);
      if (st.staged.size() >= max_batch)
        st.flush();
      return promise;
    },
    [=](flush_atom, std::uint64_t number) {
      // A batch written early (full, or before a read) leaves its flush_atom
      // behind: flushing then would write the few puts queued since as a batch
      // of their own, two filesystem flushes for a handful of parcels.
      if (number == self->state.staged_number)
        self->state.flush();
    },
    [=](get_atom, parcel_kind kind, std::string& key) -> caf::result<std::vector<store::parcel>> {
      auto promise = self->make_response_promise<std::vector<store::parcel>>();
      self->state.flush();
      self->state.read({kind, false, std::move(key), 0, promise, steady::now() + self->state.read_hold});
      return promise;
    },
    [=](claim_atom, std::string& user, std::uint64_t epoch) -> caf::result<std::vector<store::parcel>> {
      auto promise = self->make_response_promise<std::vector<store::parcel>>();
      self->state.flush();  // his own writes queued before land first (a restart's claim follows them)
      self->state.read({parcel_kind::user, true, std::move(user), epoch, promise, steady::now() + self->state.read_hold});
      return promise;
    },
    [=](reread_atom) { self->state.reread(); },
    [=](generation_atom) {
      return guarded([&] { return self->state.backend->next_commander_generation(); });
    },
    [=](quarantine_atom, const std::string& user, const std::string& reason) {
      self->state.flush();  // what he wrote last is what goes to quarantine
      return guarded([&] { return self->state.backend->quarantine_user(user, reason); });
    },
    [=](remove_atom, parcel_kind kind, const std::string& key) {
      self->state.flush();
      return guarded([&] {
        auto& b = *self->state.backend;
        kind == parcel_kind::user ? b.remove_user(key) : b.remove_connection(key);
        return true;
      });
    },
    [=](sweep_atom, double user_hours, double guest_hours) {
      self->state.flush();
      return guarded([&] {
        auto secs = [](double h) { return std::chrono::seconds(static_cast<std::int64_t>(h * 3600)); };
        return static_cast<std::uint64_t>(self->state.backend->sweep(secs(user_hours), secs(guest_hours)));
      });
    },
    [=](quit_atom, std::int64_t retry_ms, const std::string& fallback_dir) {
      auto& st = self->state;
      st.quitting = true;
      st.retry_until = steady::now() + std::chrono::milliseconds(std::max<std::int64_t>(0, retry_ms));
      st.fallback_dir = fallback_dir;
      return true;
    },
    [=](quit_atom) -> caf::result<std::uint64_t, std::string, std::vector<std::string>> {
      auto& st = self->state;
      st.flush();
      if (!st.retrying.empty()) {
        auto held = std::move(st.retrying);
        st.retrying = {};
        st.rescue(std::move(held));
      }
      return {st.rescued, st.fallback ? st.fallback_dir : std::string{}, st.lost};
    },
    [=](probe_write_atom, std::int64_t fresh_ms) { self->state.probe(fresh_ms); },
    [=](retry_atom) { self->state.retry(); },
    [=](deferred_atom) { self->state.do_deferred(); },
  };
}

}  // namespace

deposit_handle spawn_deposit(caf::actor_system& sys, std::shared_ptr<store::deposit> backend,
                             health_signals* health, caf::timespan read_hold) {
  return sys.spawn<caf::detached>(deposit_impl, std::move(backend), health, read_hold);
}

}  // namespace troupe
