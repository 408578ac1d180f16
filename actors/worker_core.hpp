#pragma once
/// \file
/// The worker actor's state machine as a plain class (docs/design.md "The
/// worker's phases"): its phase (serving, draining, replacing, stopped), the
/// users it hosts (live or resting), their crashes, restarts and quarantine,
/// their last good states and owner epochs, the drops and the requests that
/// wait for a down message, and its freeze runs (at most a window of freezes
/// in flight). Its side effects go through `worker_effects`, which the actor
/// implements (actors/worker.cpp) and unit tests record
/// (tests/actors/worker_core_test.cpp): no actor system is needed to drive it.

#include "registry/short_name.hpp"
#include "store/codec.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace troupe {

/// What the worker is doing; exactly one at a time.
enum class worker_phase : std::uint8_t {
  serving,    ///< hosts its users and takes newcomers (as far as its admission lets)
  draining,   ///< an operator's drain: no newcomer, every user freezes, then it stops (or serves on if one failed)
  replacing,  ///< past its occupancy limit: no newcomer, every user freezes, then its group replaces it
  stopped,    ///< drained: it quits (terminal)
};

const char* to_string(worker_phase p) noexcept;

/// Why every user freezes (a freeze run).
enum class freeze_purpose : std::uint8_t {
  quit,     ///< the soft quit (cause quit); the phase stays
  drain,    ///< an operator's drain: stopped once all are durable
  replace,  ///< its replacement: asked once all are durable
  fence,    ///< its node fenced itself: a user whose freeze failed is stopped too; the phase stays
};

const char* to_string(freeze_purpose p) noexcept;

/// How a user actor ended (the down message's reason, as the core needs it).
enum class user_end : std::uint8_t {
  normal,  ///< left normally, was shut down, or could not wake (his next request retries)
  crash,   ///< anything else: restarted, or quarantined
};

/// What the core made of a down message.
enum class down_verdict : std::uint8_t {
  unknown,      ///< not a user actor of this worker (or his down came already)
  dropped,      ///< an operator dropped him: his drop is answered
  left,         ///< he ended normally: nothing to restart
  restarted,    ///< he crashed and was started again
  quarantined,  ///< he crashed too often: left down, refused until his oldest crash leaves the window
  superseded,   ///< he crashed, but a request found him dead first and started him again
};

const char* to_string(down_verdict v) noexcept;

/// What becomes of an attach or a message for a user (the worker's admission of him).
enum class hosting : std::uint8_t {
  hosted,              ///< his actor (live, resumed or started now) is `user_id`
  refuse_degraded,     ///< its group is degraded: nobody is served
  refuse_draining,     ///< a newcomer while it drains or is being replaced: the commander places him elsewhere
  refuse_quarantined,  ///< a newcomer whose actor crashed too often
};

const char* to_string(hosting h) noexcept;

struct hosting_answer {
  hosting verdict = hosting::hosted;
  std::uint64_t user_id = 0;     ///< his actor, when hosted
  std::uint32_t retry_after = 0; ///< seconds, when refused as degraded or quarantined
};

/// What to do with a request that found its user's actor dead.
enum class found_dead : std::uint8_t {
  await_down,  ///< his down message is still on its way: done again at it (redo_after_down)
  retry_now,   ///< his down came already: done again now (he is started afresh)
};

/// The outcome of an operator's drop.
enum class drop_verdict : std::uint8_t {
  gone,          ///< he was resting (no actor): forgotten at once
  await_down,    ///< his actor is stopped: answered at his down message (drop_done)
  no_such_user,  ///< not hosted here
};

/// How to start a user actor (worker_effects::spawn_user).
struct user_launch {
  store::bytes parcel;        ///< a state to start from: his last good state, or what the order carried
  bool wake = true;           ///< read his parcel from the deposit first
  bool resume = false;        ///< he rests here: he starts from what he left (the actor keeps it)
  std::uint64_t owner_epoch = 0;
  std::uint32_t restarts = 0; ///< his crashes within the window
};

/// The side effects of worker_core, carried out by the worker actor.
class worker_effects {
public:
  using clock = std::chrono::steady_clock;
  virtual ~worker_effects() = default;
  /// Spawns user `user` (a resumed one takes what he left); returns his actor's id.
  virtual std::uint64_t spawn_user(const std::string& user, user_launch how) = 0;
  /// Stops user actor `id` without freezing him (a drop; a fenced user whose freeze failed).
  virtual void stop_user(std::uint64_t id) = 0;
  /// Asks user actor `id` to freeze for run `run` before `deadline`; the
  /// answer comes back as user_frozen / user_not_frozen.
  virtual void freeze_user(std::uint64_t run, const std::string& user, std::uint64_t id, freeze_purpose why,
                           clock::time_point deadline) = 0;
  /// Run `run` is over: `frozen` users froze, `failed` (their names) did not
  /// (called before the run's own `done` and what its purpose does next).
  virtual void freeze_done(std::uint64_t run, freeze_purpose why, std::uint64_t frozen,
                           const std::vector<std::string>& failed) = 0;
  /// Dropped user actor `id` is gone: his drop is answered.
  virtual void drop_done(std::uint64_t id) = 0;
  /// What found user actor `id` dead before his down message is done again now.
  virtual void redo_after_down(std::uint64_t id) = 0;
  /// The census's view of the worker changed (its phase, its restarts).
  virtual void show(worker_phase p, std::uint32_t restarts) = 0;
  /// Drained: every user is durable; the worker stops.
  virtual void stop_worker(std::uint64_t frozen) = 0;
  /// Replacing: every user is durable; its group is asked for a new process.
  virtual void ask_replacement(std::uint64_t frozen, std::uint64_t rss_bytes) = 0;
};

/// Its group's policies, as the core needs them.
struct worker_policy {
  int max_user_restarts = 5;           ///< crashes within the window that quarantine a user
  double restart_window_seconds = 60;  ///< group.restart_window_seconds
  /// Freezes a run has in flight at once: a deposit batch's worth. CAF 0.17
  /// keeps an actor's pending requests in a flat map searched linearly, so
  /// 100,000 requests at once cost quadratic time in the worker (and as many
  /// timeouts in the clock), while the deposit gets full batches from a window as well:
  /// two of its batches (2,048 each), one being written while the next one fills
  /// (each batch costs two filesystem flushes whatever its size). A freeze in flight
  /// holds an encoded copy of one live user's state.
  std::size_t freeze_window = 4096;
};

class worker_core {
public:
  using clock = std::chrono::steady_clock;
  /// What a freeze run answers once over: how many froze, the names of those who did not.
  using run_done = std::function<void(std::uint64_t frozen, const std::vector<std::string>& failed)>;

  worker_core(worker_policy policy, worker_effects& fx) : policy_(policy), fx_(&fx) {}
  worker_core(const worker_core&) = delete;
  worker_core& operator=(const worker_core&) = delete;

  worker_phase phase() const noexcept { return phase_; }
  const worker_policy& policy() const noexcept { return policy_; }
  /// Its group's settings may change while it runs (they are read live): the actor passes them in again.
  void set_policy(const worker_policy& p) noexcept { policy_ = p; }
  /// Whether it takes newcomers (its admission aside): only while serving.
  bool takes_newcomers() const noexcept { return phase_ == worker_phase::serving; }
  /// User restarts on this worker so far.
  std::uint32_t restarts() const noexcept { return restarts_; }

  // -- its users --------------------------------------------------------------------------
  /// Live here (an actor) or resting here (what he left).
  bool hosts(std::string_view user) const;
  bool resting(std::string_view user) const { return resting_.count(registry::short_name(user)) > 0; }
  std::size_t live_count() const noexcept { return live_.size(); }
  std::size_t resting_count() const noexcept { return resting_.size(); }
  /// His owner epoch (0: none known).
  std::uint64_t epoch_of(std::string_view user) const;
  /// His live actor's id; 0 when none.
  std::uint64_t live_id(std::string_view user) const;
  /// Whether `id` is the live actor of his name (his timers go to him only then).
  bool current(std::uint64_t id) const;
  /// Whether `id` is a user actor of this worker whose down message has not come yet.
  bool knows(std::uint64_t id) const { return names_.count(id) > 0; }
  /// The name of user actor `id` until his down message; empty when unknown.
  std::string user_of(std::uint64_t id) const;
  /// His actor: the live one, or one started now from what he left if he rests; 0 when not hosted.
  std::uint64_t live(const std::string& user);
  template <class F>
  void for_each_live(F&& f) const {
    for (auto& [name, id] : live_)
      f(name, id);
  }
  /// Every hosted user (live, then resting) with his owner epoch.
  void for_each_hosted(const std::function<void(const registry::short_name&, std::uint64_t)>& f) const;
  /// The last good states of users left down (not live here): the soft quit writes them.
  std::vector<std::pair<std::string, store::bytes>> states_left_down() const;

  // -- admission of attaches and messages ------------------------------------------------
  /// Whether a user is quarantined at `now`: the seconds until his oldest
  /// crash leaves the window (at least 1); nullopt when he may be started
  /// (his crashes past the window are forgotten).
  std::optional<std::uint32_t> quarantined(const std::string& user, clock::time_point now);
  /// An attach or a message for `user`: refused (its group is `degraded` with
  /// that Retry-After; a newcomer while not serving; a newcomer quarantined),
  /// else his actor (started from `launch` if he is not hosted).
  hosting_answer host(const std::string& user, std::optional<std::uint32_t> degraded, user_launch launch,
                      clock::time_point now);
  /// Starts `user` (his resting state, then his last good state, win over `launch`'s parcel).
  std::uint64_t start(const std::string& user, user_launch launch);
  /// A request to user actor `id` failed as "receiver down".
  found_dead dead(const std::string& user, std::uint64_t id);

  // -- his actor's own news ----------------------------------------------------------------
  /// A failing user left his last good state (empty: he had none) for his restart.
  void last_good_state(std::string user, store::bytes state);
  /// User actor `id` rests: true when he is still ours (his state is kept), false when not (dropped, released, fenced).
  bool rested(const std::string& user, std::uint64_t id);
  /// He retires by himself (a guest whose connection logged in): forgotten. True when he was resting.
  bool released(const std::string& user);
  /// His down message.
  down_verdict down(std::uint64_t id, user_end how, clock::time_point now);
  /// His crashes within the window (after a down: what quarantined him).
  std::size_t crashes(const std::string& user) const;

  // -- operators and its node ----------------------------------------------------------------
  /// An operator drops him: at once when resting, else at his down message.
  drop_verdict drop(const std::string& user);
  /// Freezes every user hosted now (resting ones are started when their turn
  /// comes), all before `deadline`; `done` once all answered. Returns the run's number.
  std::uint64_t freeze_all(freeze_purpose why, clock::time_point deadline, run_done done = {});
  /// A drain: no newcomer, every user freezes; stopped once all are durable, serving again if one failed.
  std::uint64_t drain(clock::time_point deadline, run_done done = {});
  /// Past its occupancy limit (`rss_bytes` resident): as a drain, then its
  /// replacement is asked. Only from serving: false when not started.
  bool replace(std::uint64_t rss_bytes, clock::time_point deadline);
  /// Its node fenced itself: resting users are started, every user freezes
  /// (stopped if that fails) and is forgotten at once. Returns how many freeze.
  std::size_t fence(clock::time_point deadline);
  /// A freeze of run `run` answered.
  void user_frozen(std::uint64_t run);
  /// `stale`: a newer placement holds him (fenced by the deposit): neither frozen nor failed.
  void user_not_frozen(std::uint64_t run, const std::string& user, std::uint64_t id, bool stale);
  /// Freeze runs not over yet.
  std::size_t runs_in_flight() const noexcept { return runs_.size(); }

private:
  struct freeze_run {
    freeze_purpose why;
    clock::time_point deadline;
    std::vector<std::pair<std::string, std::uint64_t>> todo;  // 0: resting when the run began
    std::size_t next = 0, in_flight = 0;
    std::uint64_t frozen = 0;
    std::vector<std::string> failed;
    run_done done;
  };
  void enter(worker_phase p);
  void pump(std::uint64_t run);
  void finish(std::uint64_t run);
  void forget_old_crashes(std::deque<clock::time_point>& history, clock::time_point now) const;

  using name_hash = registry::short_name_hash;
  worker_policy policy_;
  worker_effects* fx_;
  worker_phase phase_ = worker_phase::serving;
  std::uint32_t restarts_ = 0;
  std::uint64_t replacement_rss_ = 0;  // resident bytes when its replacement began
  std::unordered_map<registry::short_name, std::uint64_t, name_hash> live_;  // name → his live actor
  std::unordered_set<registry::short_name, name_hash> resting_;             // what each left: the actor's
  std::unordered_map<std::uint64_t, registry::short_name> names_;           // actor → name, until his down
  // The owner epoch of each hosted user's placement: a crashed user is
  // restarted under the same placement, so with the same epoch.
  std::unordered_map<registry::short_name, std::uint64_t, name_hash> epochs_;
  std::unordered_map<std::string, std::deque<clock::time_point>> crashes_;
  // The last good state a failing user left (an encoded parcel): what his
  // restart starts from; kept until he is started again (or written at quit).
  std::unordered_map<std::string, store::bytes> restart_from_;
  std::unordered_set<std::uint64_t> dropping_;        // answered at their down
  std::unordered_set<std::uint64_t> awaiting_down_;   // requests found them dead: redone at their down
  std::unordered_map<std::uint64_t, freeze_run> runs_;
  std::uint64_t last_run_ = 0;
};

}  // namespace troupe
