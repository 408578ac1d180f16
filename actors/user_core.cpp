#include "actors/user_core.hpp"

#include "store/parcel.hpp"

#include <algorithm>

namespace troupe {

const char* to_string(user_phase p) noexcept {
  switch (p) {
    case user_phase::waking: return "waking";
    case user_phase::serving: return "serving";
    case user_phase::deferred: return "deferred";
    case user_phase::telling: return "telling";
    case user_phase::writing: return "writing";
    case user_phase::freezing: return "freezing";
    case user_phase::refused: return "refused";
    case user_phase::resting: return "resting";
    case user_phase::fenced: return "fenced";
    case user_phase::stopped: return "stopped";
  }
  return "?";
}

durability durability_of(std::string_view name) noexcept {
  return name == "reply" ? durability::reply : name == "interval" ? durability::interval : durability::freeze;
}

namespace {
constexpr auto quit_cause = static_cast<std::uint8_t>(store::parcel_cause::quit);
constexpr auto freeze_cause = static_cast<std::uint8_t>(store::parcel_cause::freeze);
}  // namespace

bool user_core::busy() const noexcept {
  switch (phase_) {
    case user_phase::waking:
    case user_phase::deferred:
    case user_phase::telling:
    case user_phase::freezing: return true;
    // A message's write leaves a request free to be decided on only when none was pending before it.
    case user_phase::writing: return writing_request_ || after_write_ != user_phase::serving;
    default: return false;
  }
}

// -- starting --------------------------------------------------------------------------

void user_core::start() {
  phase_ = user_phase::serving;
  fx_->show(registry::user_state::active);
  arm_idle();
}

void user_core::wake() {
  phase_ = user_phase::waking;
  fx_->show(registry::user_state::unfreezing);
}

void user_core::woke() {
  if (phase_ != user_phase::waking)  // fenced meanwhile: a stale answer
    return;
  fx_->settle_adoptions(true);
  phase_ = user_phase::serving;
  fx_->show(registry::user_state::active);
  arm_idle();
  drain();
}

void user_core::quarantined() {
  if (phase_ != user_phase::waking)
    return;
  // Set first: the adoptions are answered without a write (he writes nothing).
  phase_ = user_phase::refused;
  fx_->settle_adoptions(true);
  fx_->show(registry::user_state::active);
}

void user_core::relocated() {
  if (phase_ != user_phase::waking)
    return;
  leave(user_phase::stopped, user_exit::relocated);
}

void user_core::wake_failed() {
  if (phase_ != user_phase::waking)
    return;
  fx_->settle_adoptions(false);
  leave(user_phase::stopped, user_exit::not_woken);
}

void user_core::resumed(const idle_facts& f) {
  phase_ = user_phase::serving;
  fx_->show(registry::user_state::active);
  // Past his freeze (his worker's sweep woke him for it) he freezes now; he
  // rests again only after rest_idle_seconds more.
  idle_due(f, false);
}

// -- requests and messages --------------------------------------------------------------

arrival user_core::admit_request(std::size_t waiting, std::size_t limit) const noexcept {
  if (phase_ == user_phase::refused)
    return arrival::refuse_quarantined;
  if (phase_ == user_phase::serving)
    return arrival::serve;
  return waiting >= limit ? arrival::refuse_full : arrival::queue;
}

arrival user_core::admit_message(std::size_t waiting, std::size_t limit) const noexcept {
  if (phase_ == user_phase::refused)
    return arrival::refuse_quarantined;
  if (terminal())
    return arrival::refuse_leaving;
  if (phase_ == user_phase::serving || phase_ == user_phase::telling)
    return arrival::serve;
  return waiting >= limit ? arrival::refuse_full : arrival::queue;
}

void user_core::drain() {
  if (!busy() && phase_ != user_phase::writing && !terminal() && freeze_wanted_)
    return begin_freeze(*freeze_wanted_);
  // Messages and requests take turns (each queue in its arrival order);
  // messages go on while a request awaits a message's outcome (telling).
  while (!terminal() && phase_ != user_phase::writing) {
    bool served = false;
    if (phase_ == user_phase::serving || phase_ == user_phase::telling)
      served = fx_->serve_waiting_message();
    if (phase_ == user_phase::serving && fx_->serve_waiting_request())
      served = true;
    if (!served)
      break;
  }
}

std::uint64_t user_core::defer(deferral kind, std::chrono::milliseconds delay) {
  phase_ = kind == deferral::tell ? user_phase::telling : user_phase::deferred;
  deferral_ = kind;
  if (kind == deferral::timer)
    fx_->arm_timer(user_timer::resume, delay, ++deferral_id_);
  return deferral_id_;
}

bool user_core::deferral_due(std::uint64_t id) {
  if (phase_ != user_phase::deferred || deferral_ != deferral::timer || id != deferral_id_)
    return false;
  resume_request();
  return true;
}

void user_core::resume_request() {
  if (terminal())
    return;
  phase_ = user_phase::serving;
  deferral_ = deferral::none;
}

tell_answer user_core::tell_answered() {
  if (phase_ == user_phase::writing && !writing_request_) {  // the answer follows the message's write
    after_write_ = user_phase::deferred;
    deferral_ = deferral::elsewhere;
    return tell_answer::park;
  }
  resume_request();
  return tell_answer::run_now;
}

void user_core::begin_request_write() {
  phase_ = user_phase::writing;
  writing_request_ = true;
  after_write_ = user_phase::serving;
  dirty_ = false;
  changed_now_ = false;
}

void user_core::begin_message_write() {
  after_write_ = phase_;
  phase_ = user_phase::writing;
  writing_request_ = false;
  dirty_ = false;
  changed_now_ = false;
}

void user_core::request_written() {
  if (phase_ != user_phase::writing)
    return;
  phase_ = user_phase::serving;
  drain();
}

void user_core::message_written() {
  if (phase_ != user_phase::writing)
    return;
  phase_ = after_write_;
}

void user_core::failed() {
  if (!terminal())
    leave(user_phase::stopped, user_exit::failed);
}

// -- his store ---------------------------------------------------------------------------

void user_core::changed() {
  dirty_ = true;
  changed_now_ = true;
  if (policy_.mode == durability::interval)
    arm_checkpoint();
}

bool user_core::empty_guest() const { return policy_.guest && fx_->state_pristine() && !dirty_; }

// -- checkpoints and idleness ----------------------------------------------------------

void user_core::arm_checkpoint() {
  if (checkpoint_pending_ || terminal())
    return;
  checkpoint_pending_ = true;
  fx_->arm_timer(user_timer::checkpoint, policy_.checkpoint_every, 0);
}

void user_core::checkpoint_due() {
  checkpoint_pending_ = false;
  // A guest's login removes his parcel: a checkpoint now could land after that removal.
  if (!dirty_ || phase_ == user_phase::freezing || terminal() || leaving_as_guest_)
    return;
  dirty_ = false;
  fx_->write_checkpoint();
}

void user_core::checkpoint_failed() {
  dirty_ = true;
  arm_checkpoint();
}

std::chrono::milliseconds user_core::idle_threshold() const {
  return empty_guest() ? std::min(policy_.guest_idle_after, policy_.idle_after) : policy_.idle_after;
}

void user_core::arm_idle(std::chrono::milliseconds after) {
  if (idle_check_pending_ || phase_ == user_phase::freezing || terminal())
    return;
  idle_check_pending_ = true;
  auto wait = after.count() > 0 ? after : idle_threshold();
  if (after.count() == 0 && policy_.rest_after.count() > 0)
    wait = std::min(wait, policy_.rest_after);
  fx_->arm_timer(user_timer::idle, std::min(wait, idle_timer_horizon), 0);
}

void user_core::idle_due(const idle_facts& f, bool rest_now) {
  idle_check_pending_ = false;
  if (terminal())
    return;
  const auto threshold = idle_threshold();
  if (f.idle_for >= threshold && !busy() && !f.streaming)
    return freeze_asked(freeze_cause);
  const auto rest_after = policy_.rest_after;
  const bool rests = rest_after.count() > 0 && rest_after < threshold;
  if (rests && rest_now && f.idle_for >= rest_after && may_rest(f))
    return leave(user_phase::resting, user_exit::rested);
  auto next = busy() ? threshold : threshold - f.idle_for;
  if (rests)  // not resting yet, or not free to: looked at again later
    next = std::min(next, f.idle_for < rest_after && rest_now ? rest_after - f.idle_for : rest_after);
  arm_idle(next);
}

bool user_core::may_rest(const idle_facts& f) const noexcept {
  // Nothing of his is under way or bound to his actor: his state alone says
  // all he is, so it may wait in his worker while his actor is gone.
  return phase_ == user_phase::serving && deferral_ == deferral::none && !freeze_wanted_ && !leaving_as_guest_ &&
         !checkpoint_pending_ && !(dirty_ && policy_.mode != durability::freeze) && awaiting_replies_ == 0 &&
         !f.holds_live_work;
}

// -- freezing and leaving ------------------------------------------------------------------

void user_core::freeze_asked(std::uint8_t cause) {
  if (phase_ == user_phase::freezing || terminal())
    return;
  if (phase_ == user_phase::deferred && deferral_ == deferral::timer && cause == quit_cause) {
    fx_->answer_sleeper();  // the soft quit does not wait for a sleeping handler
    ++deferral_id_;         // its resume tick is stale from now on
    resume_request();
  }
  if (busy() || phase_ == user_phase::writing) {  // freeze right after what is pending
    freeze_wanted_ = cause;
    return;
  }
  begin_freeze(cause);
}

void user_core::begin_freeze(std::uint8_t cause) {
  const bool was_refused = phase_ == user_phase::refused;
  freeze_wanted_.reset();
  phase_ = user_phase::freezing;
  deferral_ = deferral::none;
  const auto attempt = ++freeze_attempt_;
  fx_->hold_routing();  // the commander holds his routing first
  if (empty_guest() || was_refused)  // nothing to write: no state, or a parcel that stays as it is
    return freeze_written(attempt, freeze_writes::written);
  quitting_ = cause == quit_cause;
  if (!quitting_)  // at soft quit the census is going away too: no notes for 100,000 users
    fx_->show(registry::user_state::departing);
  fx_->write_freeze_parcels(cause, attempt);
}

void user_core::freeze_written(std::uint64_t attempt, freeze_writes outcome) {
  if (phase_ != user_phase::freezing || attempt != freeze_attempt_)  // an older freeze's, or he is gone
    return;
  if (outcome == freeze_writes::stale) {
    fence();
    return;
  }
  if (outcome == freeze_writes::failed) {  // the whole freeze is aborted: he stays, serving
    phase_ = user_phase::serving;
    fx_->thaw();
    fx_->show(registry::user_state::active);
    arm_idle();
    drain();
    return;
  }
  leave(user_phase::stopped, user_exit::frozen);
  dirty_ = false;
}

bool user_core::fence() {
  if (terminal())
    return false;
  dirty_ = false;
  leave(user_phase::fenced, user_exit::fenced);
  return true;
}

void user_core::retire() {
  if (!terminal())
    leave(user_phase::stopped, user_exit::retired);
}

void user_core::leave(user_phase to, user_exit why) {
  phase_ = to;
  deferral_ = deferral::none;
  fx_->leave(why);
}

// -- login / logout ---------------------------------------------------------------------------

void user_core::login_started() { leaving_as_guest_ = policy_.guest; }

void user_core::login_ended() {
  // He stays (a failed login, or other connections): checkpoints go on.
  if (std::exchange(leaving_as_guest_, false) && dirty_ && policy_.mode == durability::interval)
    arm_checkpoint();
}

adoption user_core::adopt(bool fresh, bool own_guest_connection) const noexcept {
  if (!fresh || policy_.mode == durability::freeze || own_guest_connection)
    return adoption::answer_now;
  return phase_ == user_phase::waking ? adoption::save_after_wake : adoption::save_now;
}

}  // namespace troupe
