#include "registry/restart_intensity.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::registry {

const char* to_string(degradation d) noexcept {
  switch (d) {
    case degradation::none: return "none";
    case degradation::restart_intensity: return "restart_intensity";
    case degradation::all_parked: return "all_parked";
  }
  return "unknown";
}

namespace {

restart_intensity::clock::duration seconds(double s) {
  return std::chrono::duration_cast<restart_intensity::clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

restart_intensity::restart_intensity(int max_restarts, double window_seconds, double recovery_seconds,
                                     std::size_t slots)
  : max_restarts_(std::max(0, max_restarts)),
    window_(seconds(window_seconds)),
    recovery_(seconds(std::max(0.0, recovery_seconds))),
    parked_(slots, false) {}

void restart_intensity::forget_before(clock::time_point now) {
  while (!restarts_.empty() && now - restarts_.front() > window_)
    restarts_.pop_front();
}

void restart_intensity::degrade(degradation why, clock::time_point now) {
  if (why_ == degradation::none)
    since_ = now;
  why_ = why;
}

bool restart_intensity::record(clock::time_point now) {
  if (degraded())
    return false;
  forget_before(now);
  restarts_.push_back(now);
  if (static_cast<int>(restarts_.size()) <= max_restarts_)
    return true;
  degrade(degradation::restart_intensity, now);
  return false;
}

void restart_intensity::park(std::size_t slot, clock::time_point now) {
  if (slot >= parked_.size())
    parked_.resize(slot + 1, false);
  parked_[slot] = true;
  if (parked_count() == parked_.size())
    degrade(degradation::all_parked, now);
}

std::size_t restart_intensity::parked_count() const noexcept {
  return static_cast<std::size_t>(std::count(parked_.begin(), parked_.end(), true));
}

std::optional<restart_intensity::clock::time_point> restart_intensity::recovery_at() const noexcept {
  if (why_ != degradation::restart_intensity || recovery_ == clock::duration::zero())
    return std::nullopt;
  return since_ + recovery_;
}

bool restart_intensity::recover(clock::time_point now) {
  auto at = recovery_at();
  if (!at || now < *at)
    return false;
  restarts_.clear();
  why_ = degradation::none;
  return true;
}

std::uint32_t restart_intensity::retry_after(clock::time_point now) const noexcept {
  auto at = recovery_at();
  if (!at)
    return 0;
  double left = std::chrono::duration<double>(*at - now).count();
  return static_cast<std::uint32_t>(std::clamp(std::ceil(left), 1.0, 4e9));
}

std::size_t restart_intensity::restarts_in_window(clock::time_point now) {
  forget_before(now);
  return restarts_.size();
}

}  // namespace troupe::registry
