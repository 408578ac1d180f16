#include "registry/rate_history.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace troupe::registry {

std::size_t latency_bucket(std::uint64_t us) noexcept {
  auto it = std::lower_bound(latency_bounds_us.begin(), latency_bounds_us.end(), us);
  return static_cast<std::size_t>(it - latency_bounds_us.begin());
}

std::optional<double> latency_quantile_ms(const latency_counts& counts, double q) noexcept {
  std::uint64_t total = 0;
  for (auto c : counts)
    total += c;
  if (total == 0)
    return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  double rank = q * static_cast<double>(total);
  double below = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0)
      continue;
    if (below + static_cast<double>(counts[i]) >= rank) {
      if (i == latency_bounds_us.size())
        return static_cast<double>(latency_bounds_us.back()) / 1000.0;
      double lo = i == 0 ? 0.0 : static_cast<double>(latency_bounds_us[i - 1]);
      double hi = static_cast<double>(latency_bounds_us[i]);
      double within = (rank - below) / static_cast<double>(counts[i]);
      return (lo + (hi - lo) * std::clamp(within, 0.0, 1.0)) / 1000.0;
    }
    below += static_cast<double>(counts[i]);
  }
  return static_cast<double>(latency_bounds_us.back()) / 1000.0;
}

rate_history::rate_history(std::size_t capacity) : ring_(std::max<std::size_t>(1, capacity)) {}

void rate_history::record(std::int64_t unix_ms, const rate_counters& now) {
  if (!last_ms_ || unix_ms <= *last_ms_) {
    if (!last_ms_)
      last_ms_ = unix_ms;
    last_ = now;
    return;
  }
  double seconds = static_cast<double>(unix_ms - *last_ms_) / 1000.0;
  auto delta = [](std::uint64_t was, std::uint64_t is) { return is > was ? is - was : 0; };
  auto rate = [&](std::uint64_t was, std::uint64_t is) { return static_cast<double>(delta(was, is)) / seconds; };
  rate_sample s;
  s.unix_ms = unix_ms;
  s.requests_per_s = rate(last_.requests, now.requests);
  s.errors_per_s = rate(last_.errors, now.errors);
  s.wakes_per_s = rate(last_.wakes, now.wakes);
  s.freezes_per_s = rate(last_.freezes, now.freezes);
  latency_counts interval{};
  for (std::size_t i = 0; i < interval.size(); ++i)
    interval[i] = delta(last_.latency[i], now.latency[i]);
  s.p50_ms = latency_quantile_ms(interval, 0.50);
  s.p99_ms = latency_quantile_ms(interval, 0.99);
  if (size_ < ring_.size()) {
    ring_[(head_ + size_) % ring_.size()] = s;
    ++size_;
  } else {
    ring_[head_] = s;
    head_ = (head_ + 1) % ring_.size();
  }
  last_ms_ = unix_ms;
  last_ = now;
}

std::vector<rate_sample> rate_history::samples() const {
  std::vector<rate_sample> out;
  out.reserve(size_);
  for (std::size_t i = 0; i < size_; ++i)
    out.push_back(at(i));
  return out;
}

std::optional<rate_sample> rate_history::latest() const {
  if (size_ == 0)
    return std::nullopt;
  return at(size_ - 1);
}

std::string iso_utc(std::int64_t unix_ms) {
  auto secs = static_cast<std::time_t>(unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000);
  auto ms = static_cast<int>(unix_ms - static_cast<std::int64_t>(secs) * 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

nlohmann::json to_json(const rate_sample& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"t", iso_utc(s.unix_ms)},
          {"unix_ms", s.unix_ms},
          {"requests_per_s", s.requests_per_s},
          {"errors_per_s", s.errors_per_s},
          {"wakes_per_s", s.wakes_per_s},
          {"freezes_per_s", s.freezes_per_s},
          {"p50_ms", opt(s.p50_ms)},
          {"p99_ms", opt(s.p99_ms)}};
}

nlohmann::json rate_history::to_json() const {
  auto arr = nlohmann::json::array();
  for (std::size_t i = 0; i < size_; ++i)
    arr.push_back(registry::to_json(at(i)));
  return {{"interval_seconds", 1}, {"capacity", capacity()}, {"samples", std::move(arr)}};
}

}  // namespace troupe::registry
