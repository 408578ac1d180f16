#pragma once
/// \file
/// The user actor's state machine as a plain class (docs/design.md "The user's
/// phases"): which phase he is in, what may run now, what waits, and when he
/// checkpoints, freezes, rests or leaves. Its side effects go through
/// `user_effects`, which the actor implements (actors/user.cpp) and unit tests
/// record (tests/actors/user_core_test.cpp): no actor system is needed to drive it.

#include "registry/census_model.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace troupe {

/// What the user actor is doing; exactly one at a time.
enum class user_phase : std::uint8_t {
  waking,    ///< reading (claiming) his parcel: requests and messages wait
  serving,   ///< free: the next request or message runs
  deferred,  ///< a request's next step is pending (after, login/logout, global store, push): everything waits
  telling,   ///< a request awaits a message's outcome: messages run meanwhile, requests wait
  writing,   ///< a change is being made durable (durability "reply"): everything waits
  freezing,  ///< his parcels are being written: everything waits, then he leaves (or serves on if a write failed)
  refused,   ///< his parcel is quarantined: every request and message is refused, nothing is written
  resting,   ///< he left his state with his worker and stopped (terminal)
  fenced,    ///< a newer placement holds him: he left, writing nothing (terminal)
  stopped,   ///< gone: frozen, retired, failed, relocated or not woken (terminal)
};

const char* to_string(user_phase p) noexcept;

/// When a changed store is made durable (group.durability).
enum class durability : std::uint8_t { freeze, interval, reply };

/// "reply" → reply, "interval" → interval, anything else → freeze.
durability durability_of(std::string_view name) noexcept;

/// The user's timers (the tick's `which`; the worker keeps them).
enum class user_timer : std::uint8_t { idle = 0, checkpoint = 1, resume = 2, later = 3, deferred = 4 };

/// What becomes of an arriving request or message.
enum class arrival : std::uint8_t {
  serve,               ///< run it now
  queue,               ///< it waits for its turn
  refuse_full,         ///< his queue is full (limits.user_queue_length)
  refuse_quarantined,  ///< his parcel is quarantined
  refuse_leaving,      ///< he is leaving this worker: the sender routes it again
};

/// What a request's pending next step waits for.
enum class deferral : std::uint8_t {
  none,
  timer,      ///< after(): his resume timer
  elsewhere,  ///< a reply (login/logout, the global store, a push)
  tell,       ///< a message's outcome (tell_then): messages are served meanwhile
};

/// How a connection he is given (adopt) is answered.
enum class adoption : std::uint8_t {
  answer_now,       ///< nothing to make durable
  save_now,         ///< its parcel is written (durability interval | reply)
  save_after_wake,  ///< written once his wake tells he is here
};

/// What the outcome of a tell_then's message does to the request waiting for it.
enum class tell_answer : std::uint8_t {
  run_now,  ///< the request's next step runs now
  park,     ///< a message's change is being written: the step runs after that write
};

/// Why he leaves (user_effects::leave).
enum class user_exit : std::uint8_t {
  frozen,     ///< his parcels are durable (or he had none to write)
  fenced,     ///< the deposit refused his owner epoch as stale
  relocated,  ///< his parcel says another group: he is placed there
  not_woken,  ///< his parcel could not be read: it stays for the next try
  failed,     ///< a handler threw: his worker restarts him from his last good state
  retired,    ///< a guest whose last connection left (login, logout)
  rested,     ///< idle: his state waits in his worker
};

/// What the outcome of a freeze's writes was, all parcels together.
enum class freeze_writes : std::uint8_t { written, failed, stale };

/// The side effects of user_core, carried out by the user actor.
class user_effects {
public:
  virtual ~user_effects() = default;
  /// Starts timer `which` (through his worker): in `delay` the core gets the matching tick.
  virtual void arm_timer(user_timer which, std::chrono::milliseconds delay, std::uint64_t arg) = 0;
  /// Serves the oldest waiting message / request; false when none waits.
  virtual bool serve_waiting_message() = 0;
  virtual bool serve_waiting_request() = 0;
  /// Writes a checkpoint parcel (the answer: nothing, checkpoint_failed or fence).
  virtual void write_checkpoint() = 0;
  /// Tells the commander he is freezing: it holds his routing until he is frozen or thaws.
  virtual void hold_routing() = 0;
  /// Writes his parcels for freeze `attempt` (the answer, all writes together: freeze_written(attempt, …)).
  virtual void write_freeze_parcels(std::uint8_t cause, std::uint64_t attempt) = 0;
  /// A freeze whose write failed: the commander routes to him again, the freeze's askers get an error.
  virtual void thaw() = 0;
  /// The soft quit does not wait for a sleeping handler (after()): its request is answered 503 now.
  virtual void answer_sleeper() = 0;
  /// Connections adopted during his wake: saved and answered (ok) or failed.
  virtual void settle_adoptions(bool ok) = 0;
  /// The census's view of him.
  virtual void show(registry::user_state s) = 0;
  /// He leaves: answers what waits, tells whom it concerns, stops the actor.
  virtual void leave(user_exit why) = 0;
  /// True until he first holds a state (nothing installed, nothing kept).
  virtual bool state_pristine() const = 0;
};

/// His group's policies, as the core needs them.
struct user_policy {
  durability mode = durability::freeze;
  std::chrono::milliseconds idle_after{30 * 60 * 1000};      ///< user_idle_freeze_minutes
  std::chrono::milliseconds guest_idle_after{2000};          ///< guest_idle_seconds
  std::chrono::milliseconds checkpoint_every{5000};          ///< checkpoint_seconds
  std::chrono::milliseconds rest_after{0};                   ///< rest_idle_seconds; 0: he never rests
  bool guest = false;                                        ///< a guest_<cid>
};

/// What the actor knows at an idle check.
struct idle_facts {
  std::chrono::milliseconds idle_for{0};  ///< since his last real activity (or his start)
  bool streaming = false;                 ///< an open stream is not idleness
  bool holds_live_work = false;           ///< something waits, or is bound to his actor (timers, channels, queues)
};

class user_core {
public:
  /// How far ahead an idle check is armed at most: a pending timer costs
  /// memory until it is due, dead user or not, so a crash storm's leftovers
  /// are bounded by its rate × this horizon, not × the idle threshold.
  static constexpr std::chrono::milliseconds idle_timer_horizon{10000};

  user_core(user_policy policy, user_effects& fx) : policy_(policy), fx_(&fx) {}
  user_core(const user_core&) = delete;
  user_core& operator=(const user_core&) = delete;

  user_phase phase() const noexcept { return phase_; }
  const user_policy& policy() const noexcept { return policy_; }
  /// His group's idle freezes changed while he lives (docs/config.md "Profiles"):
  /// his next idle check (at most idle_timer_horizon away) judges by them.
  void tune_idleness(std::chrono::milliseconds idle_after, std::chrono::milliseconds guest_idle_after) noexcept {
    policy_.idle_after = idle_after;
    policy_.guest_idle_after = guest_idle_after;
  }
  bool terminal() const noexcept {
    return phase_ == user_phase::resting || phase_ == user_phase::fenced || phase_ == user_phase::stopped;
  }
  /// Whether a request (or a freeze) must wait: he wakes, a request's step or
  /// a change's write is pending, or he freezes. A message's write started
  /// while he was free leaves him free (it still holds everything back: `phase`).
  bool busy() const noexcept;
  std::optional<std::uint8_t> freeze_wanted() const noexcept { return freeze_wanted_; }
  bool quitting() const noexcept { return quitting_; }
  deferral pending() const noexcept { return deferral_; }

  // -- starting ----------------------------------------------------------------------
  /// Starts with a state at hand (no wake): serves at once.
  void start();
  /// Starts by reading (claiming) his parcel, which the actor asks for:
  /// everything waits until its answer (woke, quarantined, relocated, wake_failed or fence).
  void wake();
  /// The wake's answers.
  void woke();
  void quarantined();  ///< his parcel does not load: refused from now on
  void relocated();    ///< his parcel says another group
  void wake_failed();
  /// Starts again from what he left when he rested; his idleness counts on.
  void resumed(const idle_facts& f);

  // -- requests and messages ----------------------------------------------------------
  arrival admit_request(std::size_t waiting, std::size_t limit) const noexcept;
  arrival admit_message(std::size_t waiting, std::size_t limit) const noexcept;
  /// Serves what waits, messages and requests taking turns, or starts a freeze asked meanwhile.
  void drain();
  /// The request just run has a next step; `delay` for a timer. Returns the deferral's number.
  std::uint64_t defer(deferral kind, std::chrono::milliseconds delay = {});
  /// His resume timer `id` is due: true when the deferred step runs now (stale numbers are ignored).
  bool deferral_due(std::uint64_t id);
  /// A deferred step's reply came: the step runs now (then drain()).
  void resume_request();
  tell_answer tell_answered();
  /// A change is being made durable before the answer (durability "reply").
  void begin_request_write();
  void begin_message_write();
  /// The request's write ended (either way): he serves on.
  void request_written();
  /// The message's write ended: back to serving or telling (parked tell steps, then drain(), follow).
  void message_written();
  /// A handler threw: he leaves; his worker restarts him.
  void failed();

  // -- his store -------------------------------------------------------------------------
  /// The running handler changed his store.
  void changed();
  /// Whether the handler just run changed it, and forget it (once per handler).
  bool take_change() noexcept { return std::exchange(changed_now_, false); }
  bool changed_now() const noexcept { return changed_now_; }
  bool dirty() const noexcept { return dirty_; }
  void mark_dirty() noexcept { dirty_ = true; }
  /// A guest who never had a state has nothing to lose and is never written anywhere.
  bool empty_guest() const;

  // -- checkpoints and idleness --------------------------------------------------------
  void arm_checkpoint();
  void checkpoint_due();
  void checkpoint_failed();
  void arm_idle(std::chrono::milliseconds after = std::chrono::milliseconds::zero());
  /// His idle timer: he freezes, rests, or is looked at again later. `rest_now`:
  /// false right after a resume (whatever woke him is in his mailbox).
  void idle_due(const idle_facts& f, bool rest_now = true);
  std::chrono::milliseconds idle_threshold() const;

  // -- freezing and leaving --------------------------------------------------------------
  /// Freeze (cause: a store::parcel_cause); right away, or once what is pending is done.
  void freeze_asked(std::uint8_t cause);
  /// All his freeze's writes answered; a stale attempt is ignored.
  void freeze_written(std::uint64_t attempt, freeze_writes outcome);
  /// The deposit refused his epoch: he leaves, writing nothing more. False when he was gone already.
  bool fence();
  /// A guest whose last connection left.
  void retire();

  // -- login / logout ----------------------------------------------------------------------
  /// A guest's login is on its way: no checkpoint of his may be written meanwhile.
  void login_started();
  void login_ended();

  // -- a connection he is given ---------------------------------------------------------
  adoption adopt(bool fresh, bool own_guest_connection) const noexcept;

  // -- replies he awaits (may_rest: nothing may be on its way to his actor) -----------
  void asked() noexcept { ++awaiting_replies_; }
  void answered() noexcept {
    if (awaiting_replies_ > 0)
      --awaiting_replies_;
  }
  std::size_t awaiting_replies() const noexcept { return awaiting_replies_; }

  bool may_rest(const idle_facts& f) const noexcept;

private:
  void begin_freeze(std::uint8_t cause);
  void leave(user_phase to, user_exit why);

  user_policy policy_;
  user_effects* fx_;
  user_phase phase_ = user_phase::serving;
  deferral deferral_ = deferral::none;
  user_phase after_write_ = user_phase::serving;  // where a message's write returns to
  bool writing_request_ = false;                  // the write is a request's (else a message's)
  bool dirty_ = false;                            // changed since his last durable parcel
  bool changed_now_ = false;                      // changed by the handler being run
  bool quitting_ = false;                         // the freeze is the soft quit's
  bool idle_check_pending_ = false;
  bool checkpoint_pending_ = false;
  bool leaving_as_guest_ = false;
  std::optional<std::uint8_t> freeze_wanted_;     // asked while busy: starts once free
  std::uint64_t deferral_id_ = 0;
  std::uint64_t freeze_attempt_ = 0;
  std::size_t awaiting_replies_ = 0;
};

}  // namespace troupe
