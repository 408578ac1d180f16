#include "registry/worker_admission.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace troupe::registry {

namespace {

std::uint32_t whole_seconds_at_least_one(double s) {
  if (!(s > 1))
    return 1;
  return static_cast<std::uint32_t>(std::min(std::ceil(s), 86400.0));  // a day: past it the figure means nothing
}

}  // namespace

worker_admission::worker_admission(const worker_admission_settings& settings, std::uint64_t mem_total_bytes) {
  if (settings.max_workers < 1)
    throw std::invalid_argument("worker admission: max_workers must be >= 1");
  max_users_ = settings.max_users;
  machine_alarm_percent_ = settings.machine_memory_alarm_percent;
  if (settings.cpu) {
    cpu_.emplace(*settings.cpu);
    cpu_settings_ = *settings.cpu;
  }
  if (mem_total_bytes == 0)
    return;
  const double budget = settings.memory_max_percent / 100 * static_cast<double>(mem_total_bytes);
  if (settings.own_process) {
    const double share = budget / settings.max_workers;
    const double close = settings.worker_memory_admission_percent / 100 * share;
    close_bytes_ = static_cast<std::uint64_t>(close);
    reopen_bytes_ = static_cast<std::uint64_t>(std::max(0.0, close - memory_reopen_margin * share));
    if (settings.restart_occupancy_max_percent > 0)
      replace_bytes_ = static_cast<std::uint64_t>(settings.restart_occupancy_max_percent / 100 * share);
  } else {
    close_bytes_ = static_cast<std::uint64_t>(budget);
    reopen_bytes_ = static_cast<std::uint64_t>((1 - memory_reopen_margin) * budget);
  }
}

bool worker_admission::sample(std::optional<double> cpu_percent, std::optional<std::uint64_t> rss_bytes,
                              clock::time_point now) {
  const auto before = reason();
  if (cpu_ && cpu_percent)
    cpu_->sample(*cpu_percent, now);
  if (rss_bytes) {
    rss_ = rss_bytes;
    if (close_bytes_ > 0) {
      if (!memory_closed_ && *rss_bytes > close_bytes_)
        memory_closed_ = true;
      else if (memory_closed_ && *rss_bytes < reopen_bytes_)
        memory_closed_ = false;
    }
  }
  return reason() != before;
}

bool worker_admission::sample_machine(double used_percent) {
  const auto before = reason();
  // The same hysteresis as the worker's own memory: reopens 10 points below the alarm.
  if (machine_alarm_percent_ > 0) {
    if (!machine_closed_ && used_percent > machine_alarm_percent_)
      machine_closed_ = true;
    else if (machine_closed_ && used_percent < machine_alarm_percent_ - 100 * memory_reopen_margin)
      machine_closed_ = false;
  }
  return reason() != before;
}

bool worker_admission::count_users(std::size_t hosted) {
  const auto before = reason();
  hosted_ = hosted;
  return reason() != before;
}

bool worker_admission::set_max_users(int max_users) {
  const auto before = reason();
  max_users_ = max_users;
  return reason() != before;
}

admission_block worker_admission::reason() const noexcept {
  if (memory_closed_)
    return admission_block::memory;
  if (machine_closed_)
    return admission_block::machine_memory;
  if (!room_for_one_more())
    return admission_block::users;
  if (cpu_ && !cpu_->open())
    return admission_block::cpu;
  return admission_block::none;
}

std::uint32_t worker_admission::retry_after(std::optional<seconds> until_first_idle_freeze) const {
  std::uint32_t s = 0;
  if (memory_closed_ || machine_closed_ || !room_for_one_more())  // a freeze frees memory and a place
    s = memory_retry_after(until_first_idle_freeze);
  if (cpu_ && !cpu_->open())
    s = std::max(s, cpu_retry_after());
  return s;
}

std::uint32_t worker_admission::cpu_retry_after() const {
  if (!cpu_)
    return 1;
  const double t = cpu_->temperature(), reopen = cpu_settings_.reopen_percent;
  if (!(reopen > 0) || !(t > reopen))
    return 1;
  return whole_seconds_at_least_one(cpu_settings_.cooling.count() * std::log(t / reopen));
}

std::uint32_t worker_admission::memory_retry_after(std::optional<seconds> until_first_idle_freeze) {
  return whole_seconds_at_least_one(until_first_idle_freeze ? until_first_idle_freeze->count() : 1);
}

bool worker_admission::wants_replacement() const noexcept {
  return replace_bytes_ > 0 && rss_ && *rss_ > replace_bytes_;
}

std::optional<std::string> offload_ledger::beat(
  const std::vector<std::pair<std::string_view, std::uint64_t>>& busy_ns) {
  std::unordered_map<std::string, std::uint64_t> at_start;  // the hosted users' baselines
  at_start.reserve(busy_ns.size());
  std::optional<std::string_view> pick;
  std::uint64_t least = 0;
  std::size_t active = 0;
  for (auto& [name, busy] : busy_ns) {
    std::string key(name);
    auto before = since_.find(key);
    const std::uint64_t base = before == since_.end() ? 0 : before->second;
    at_start.emplace(std::move(key), open_ ? base : busy);
    if (!open_ || busy <= base)
      continue;
    ++active;
    if (!pick || busy - base < least) {
      pick = name;
      least = busy - base;
    }
  }
  if (!open_ || active < 2) {
    open_ = true;
    since_ = std::move(at_start);  // departed users leave the window
    return std::nullopt;
  }
  since_.clear();  // a new window: everyone's counter as it is now
  for (auto& [name, busy] : busy_ns)
    since_.emplace(std::string(name), busy);
  return std::string(*pick);
}

}  // namespace troupe::registry
