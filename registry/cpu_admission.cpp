#include "registry/cpu_admission.hpp"

#include <cmath>

namespace troupe::registry {

cpu_temperature::cpu_temperature(seconds heating, seconds cooling) : heating_(heating), cooling_(cooling) {
  if (!(heating.count() > 0) || !(cooling.count() > 0))
    throw std::invalid_argument("cpu temperature: heating and cooling seconds must be > 0");
}

void cpu_temperature::sample(double percent, clock::time_point now) {
  if (percent < 0)
    percent = 0;
  if (!last_) {
    value_ = percent;
    last_ = now;
    return;
  }
  if (now < *last_)
    return;
  const double dt = seconds(now - *last_).count();
  last_ = now;
  const double tau = (percent > value_ ? heating_ : cooling_).count();
  value_ += (percent - value_) * (1 - std::exp(-dt / tau));
}

cpu_admission::cpu_admission(const cpu_admission_settings& settings)
  : settings_(settings), temperature_(settings.heating, settings.cooling) {
  if (settings.reopen_percent < 0 || settings.close_percent <= 0)
    throw std::invalid_argument("cpu admission: close_percent must be > 0 and reopen_percent >= 0");
  if (settings.reopen_percent >= settings.close_percent)
    throw std::invalid_argument("cpu admission: reopen_percent must be below close_percent");
  if (settings.offload_percent && *settings.offload_percent <= settings.close_percent)
    throw std::invalid_argument("cpu admission: offload_percent must be above close_percent");
  if (settings.admission_interval.count() < 0)
    throw std::invalid_argument("cpu admission: the admission interval must be >= 0");
}

cpu_admission::change cpu_admission::sample(double cpu_percent, clock::time_point now) {
  temperature_.sample(cpu_percent, now);
  const double t = temperature_.value();
  if (open_ && t > settings_.close_percent) {
    open_ = false;
    return change::closed;
  }
  if (!open_ && t < settings_.reopen_percent) {
    open_ = true;
    return change::reopened;
  }
  return change::none;
}

bool cpu_admission::admits(clock::time_point now) const noexcept {
  if (!open_)
    return false;
  return !last_admitted_ || now - *last_admitted_ >= settings_.admission_interval;
}

bool cpu_admission::wants_offload() const noexcept {
  return !open_ && settings_.offload_percent && temperature_.value() > *settings_.offload_percent;
}

}  // namespace troupe::registry
