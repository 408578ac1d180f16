#include "actors/worker_core.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {

const char* to_string(worker_phase p) noexcept {
  switch (p) {
    case worker_phase::serving: return "serving";
    case worker_phase::draining: return "draining";
    case worker_phase::replacing: return "replacing";
    case worker_phase::stopped: return "stopped";
  }
  return "?";
}

const char* to_string(freeze_purpose p) noexcept {
  switch (p) {
    case freeze_purpose::quit: return "quit";
    case freeze_purpose::drain: return "drain";
    case freeze_purpose::replace: return "replace";
    case freeze_purpose::fence: return "fence";
  }
  return "?";
}

const char* to_string(down_verdict v) noexcept {
  switch (v) {
    case down_verdict::unknown: return "unknown";
    case down_verdict::dropped: return "dropped";
    case down_verdict::left: return "left";
    case down_verdict::restarted: return "restarted";
    case down_verdict::quarantined: return "quarantined";
    case down_verdict::superseded: return "superseded";
  }
  return "?";
}

const char* to_string(hosting h) noexcept {
  switch (h) {
    case hosting::hosted: return "hosted";
    case hosting::refuse_degraded: return "refuse_degraded";
    case hosting::refuse_draining: return "refuse_draining";
    case hosting::refuse_quarantined: return "refuse_quarantined";
  }
  return "?";
}

// -- its users ------------------------------------------------------------------------------

bool worker_core::hosts(std::string_view user) const {
  registry::short_name name(user);
  return live_.count(name) > 0 || resting_.count(name) > 0;
}

std::uint64_t worker_core::epoch_of(std::string_view user) const {
  auto e = epochs_.find(registry::short_name(user));
  return e == epochs_.end() ? 0 : e->second;
}

std::uint64_t worker_core::live_id(std::string_view user) const {
  auto u = live_.find(registry::short_name(user));
  return u == live_.end() ? 0 : u->second;
}

std::string worker_core::user_of(std::uint64_t id) const {
  auto n = names_.find(id);
  return n == names_.end() ? std::string() : n->second.str();
}

bool worker_core::current(std::uint64_t id) const {
  auto n = names_.find(id);
  if (n == names_.end())
    return false;
  auto u = live_.find(n->second);
  return u != live_.end() && u->second == id;
}

std::uint64_t worker_core::live(const std::string& user) {
  if (auto id = live_id(user))
    return id;
  if (resting(user))
    return start(user, user_launch{{}, false, false, epoch_of(user), 0});
  return 0;
}

void worker_core::for_each_hosted(const std::function<void(const registry::short_name&, std::uint64_t)>& f) const {
  auto epoch = [this](const registry::short_name& name) {
    auto e = epochs_.find(name);
    return e == epochs_.end() ? std::uint64_t{0} : e->second;
  };
  for (auto& [name, id] : live_)
    f(name, epoch(name));
  for (auto& name : resting_)
    f(name, epoch(name));
}

std::vector<std::pair<std::string, store::bytes>> worker_core::states_left_down() const {
  std::vector<std::pair<std::string, store::bytes>> left;
  for (auto& [user, state] : restart_from_)
    if (!state.empty() && !live_.count(registry::short_name(user)))
      left.emplace_back(user, state);
  return left;
}

// -- admission of attaches and messages --------------------------------------------------

void worker_core::forget_old_crashes(std::deque<clock::time_point>& history, clock::time_point now) const {
  auto window = std::chrono::duration<double>(policy_.restart_window_seconds);
  while (!history.empty() && now - history.front() > window)
    history.pop_front();
}

std::optional<std::uint32_t> worker_core::quarantined(const std::string& user, clock::time_point now) {
  auto c = crashes_.find(user);
  if (c == crashes_.end())
    return std::nullopt;
  forget_old_crashes(c->second, now);
  if (c->second.empty()) {
    crashes_.erase(c);
    return std::nullopt;
  }
  if (static_cast<int>(c->second.size()) < policy_.max_user_restarts)
    return std::nullopt;
  double left = policy_.restart_window_seconds - std::chrono::duration<double>(now - c->second.front()).count();
  return static_cast<std::uint32_t>(std::clamp(std::ceil(left), 1.0, 4e9));
}

std::size_t worker_core::crashes(const std::string& user) const {
  auto c = crashes_.find(user);
  return c == crashes_.end() ? 0 : c->second.size();
}

hosting_answer worker_core::host(const std::string& user, std::optional<std::uint32_t> degraded, user_launch launch,
                                 clock::time_point now) {
  if (degraded)  // its group is degraded: nobody is served (his actor refuses too)
    return {hosting::refuse_degraded, 0, *degraded};
  bool hosted = hosts(user);
  if (!hosted && !takes_newcomers())  // the commander places him elsewhere
    return {hosting::refuse_draining, 0, 0};
  if (!hosted)
    if (auto retry = quarantined(user, now))
      return {hosting::refuse_quarantined, 0, *retry};
  return {hosting::hosted, hosted ? live(user) : start(user, std::move(launch)), 0};
}

std::uint64_t worker_core::start(const std::string& user, user_launch how) {
  registry::short_name name(user);
  how.resume = resting_.erase(name) > 0;  // what he left when he rested is all he is
  if (auto r = restart_from_.find(user); r != restart_from_.end()) {
    if (!r->second.empty()) {  // his last good state wins over his parcel, which is as old or older
      how.parcel = std::move(r->second);
      how.wake = false;
    }
    restart_from_.erase(r);
  }
  epochs_[name] = how.owner_epoch;
  how.restarts = static_cast<std::uint32_t>(crashes(user));
  auto id = fx_->spawn_user(user, std::move(how));
  names_[id] = name;
  live_[name] = id;
  return id;
}

found_dead worker_core::dead(const std::string& user, std::uint64_t id) {
  if (names_.count(id)) {
    // His down message is still on its way: what he died of (a crash that
    // quarantines him?), or whether he rests, is known only then.
    awaiting_down_.insert(id);
    return found_dead::await_down;
  }
  if (auto j = live_.find(registry::short_name(user)); j != live_.end() && j->second == id)
    live_.erase(j);
  return found_dead::retry_now;
}

// -- his actor's own news ------------------------------------------------------------------

void worker_core::last_good_state(std::string user, store::bytes state) {
  restart_from_[std::move(user)] = std::move(state);
}

bool worker_core::rested(const std::string& user, std::uint64_t id) {
  auto u = live_.find(registry::short_name(user));
  if (u == live_.end() || u->second != id)
    return false;  // not ours any more (dropped, released, fenced): nothing of his is kept
  resting_.insert(u->first);
  live_.erase(u);
  return true;
}

bool worker_core::released(const std::string& user) {
  registry::short_name name(user);
  live_.erase(name);
  return resting_.erase(name) > 0;
}

// A crashed user is restarted at once (from the last good state he left,
// else his last durable parcel), unless his actor crashed max_user_restarts
// times within restart_window_seconds: then he is quarantined alone (not
// restarted; attaches refuse him until his oldest crash leaves the window,
// then he starts from that last good state).
down_verdict worker_core::down(std::uint64_t id, user_end how, clock::time_point now) {
  auto n = names_.find(id);
  if (n == names_.end())
    return down_verdict::unknown;
  auto user = n->second.str();
  names_.erase(n);
  auto verdict = [&] {
    if (dropping_.erase(id)) {
      fx_->drop_done(id);
      restart_from_.erase(user);
      if (!hosts(user))
        epochs_.erase(registry::short_name(user));
      return down_verdict::dropped;
    }
    auto u = live_.find(registry::short_name(user));
    bool current = u != live_.end() && u->second == id;
    if (current)
      live_.erase(u);
    if (how == user_end::normal) {
      if (!hosts(user))  // his placement ended (a resting user's goes on); the next one brings its own epoch
        epochs_.erase(registry::short_name(user));
      return down_verdict::left;
    }
    auto& history = crashes_[user];
    forget_old_crashes(history, now);
    history.push_back(now);
    ++restarts_;
    fx_->show(phase_, restarts_);
    if (!current)
      return down_verdict::superseded;  // a request found him dead first and started him again
    if (static_cast<int>(history.size()) >= policy_.max_user_restarts)
      return down_verdict::quarantined;
    // From the last good state he left, else his last durable parcel; under the same placement's epoch.
    start(user, user_launch{{}, true, false, epoch_of(user), 0});
    return down_verdict::restarted;
  }();
  // What found him dead before this message: done again now that his crash
  // is counted (a quarantined user is refused, not restarted).
  if (awaiting_down_.erase(id))
    fx_->redo_after_down(id);
  return verdict;
}

// -- operators and its node ------------------------------------------------------------------

drop_verdict worker_core::drop(const std::string& user) {
  registry::short_name name(user);
  if (resting_.erase(name)) {  // no actor: gone at once
    restart_from_.erase(user);
    epochs_.erase(name);
    return drop_verdict::gone;
  }
  auto i = live_.find(name);
  if (i == live_.end())
    return drop_verdict::no_such_user;
  dropping_.insert(i->second);
  fx_->stop_user(i->second);
  live_.erase(i);
  return drop_verdict::await_down;
}

void worker_core::enter(worker_phase p) {
  phase_ = p;
  fx_->show(phase_, restarts_);
}

std::uint64_t worker_core::freeze_all(freeze_purpose why, clock::time_point deadline, run_done done) {
  auto run = ++last_run_;
  auto& r = runs_[run];
  r.why = why;
  r.deadline = deadline;
  r.done = std::move(done);
  r.todo.reserve(live_.size() + resting_.size());
  for (auto& [name, id] : live_)
    r.todo.emplace_back(name.str(), id);
  for (auto& name : resting_)  // started again when their turn comes (the window bounds them too)
    r.todo.emplace_back(name.str(), 0);
  // In name order: a run goes the same way each time it is given the same users.
  std::sort(r.todo.begin(), r.todo.end());
  pump(run);
  return run;
}

// Looks its run up again after every effect: an effect may answer at once
// (and so finish the run) without breaking it.
void worker_core::pump(std::uint64_t run) {
  for (;;) {
    auto it = runs_.find(run);
    if (it == runs_.end())
      return;
    if (it->second.next == it->second.todo.size()) {
      if (it->second.in_flight == 0)
        finish(run);
      return;
    }
    if (it->second.in_flight >= policy_.freeze_window)
      return;
    auto [name, id] = it->second.todo[it->second.next++];
    if (!id) {
      id = live(name);  // a resting user starts now, to freeze as anybody does
      if ((it = runs_.find(run)) == runs_.end())
        return;
      if (!id) {  // he rested and left since (froze, retired): nothing of his is here
        ++it->second.frozen;
        continue;
      }
    }
    ++it->second.in_flight;
    fx_->freeze_user(run, name, id, it->second.why, it->second.deadline);
  }
}

void worker_core::user_frozen(std::uint64_t run) {
  auto it = runs_.find(run);
  if (it == runs_.end() || it->second.in_flight == 0)
    return;
  ++it->second.frozen;
  --it->second.in_flight;
  pump(run);
}

void worker_core::user_not_frozen(std::uint64_t run, const std::string& user, std::uint64_t id, bool stale) {
  auto it = runs_.find(run);
  if (it == runs_.end() || it->second.in_flight == 0)
    return;
  // Stale: a newer placement holds him, his state is not this worker's to
  // save (the deposit counted and logged it) and he left.
  if (!stale) {
    it->second.failed.push_back(user);
    if (it->second.why == freeze_purpose::fence)  // a fenced node must not keep his stale state
      fx_->stop_user(id);
  }
  --it->second.in_flight;
  pump(run);
}

void worker_core::finish(std::uint64_t run) {
  auto node = runs_.extract(run);
  auto& r = node.mapped();
  fx_->freeze_done(run, r.why, r.frozen, r.failed);
  if (r.done)
    r.done(r.frozen, r.failed);
  if (r.why == freeze_purpose::drain) {
    if (r.failed.empty()) {  // every user is durable (their exits may still be on the way)
      phase_ = worker_phase::stopped;
      fx_->stop_worker(r.frozen);
    } else if (phase_ == worker_phase::draining) {  // a failed freeze keeps it in service
      enter(worker_phase::serving);
    }
  } else if (r.why == freeze_purpose::replace && phase_ == worker_phase::replacing) {  // else a drain took over
    if (r.failed.empty())
      fx_->ask_replacement(r.frozen, replacement_rss_);
    else
      enter(worker_phase::serving);
  }
}

std::uint64_t worker_core::drain(clock::time_point deadline, run_done done) {
  if (phase_ == worker_phase::serving || phase_ == worker_phase::replacing)
    enter(worker_phase::draining);
  return freeze_all(freeze_purpose::drain, deadline, std::move(done));
}

bool worker_core::replace(std::uint64_t rss_bytes, clock::time_point deadline) {
  if (phase_ != worker_phase::serving)
    return false;
  replacement_rss_ = rss_bytes;
  enter(worker_phase::replacing);
  freeze_all(freeze_purpose::replace, deadline);
  return true;
}

std::size_t worker_core::fence(clock::time_point deadline) {
  std::vector<std::string> sleepers;
  for (auto& name : resting_)
    sleepers.emplace_back(name.view());
  for (auto& name : sleepers)  // started now: the worker forgets everybody below
    live(name);
  auto freezing = live_.size();
  if (freezing == 0)
    return 0;
  freeze_all(freeze_purpose::fence, deadline);
  live_.clear();
  restart_from_.clear();
  return freezing;
}

}  // namespace troupe
