#pragma once
/// \file
/// The recipe's keys as tables of fields (name, member, rule) and the checks of a
/// value against its rule: what reading a recipe (config/recipe.cpp) and checking
/// it (config/recipe_checks.cpp) share. Internal to troupe::config.

#include "config/recipe.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

namespace troupe::config::detail {

// ---------------------------------------------------------------------------
// Formatting helpers (every message is one line).

/// `s` in double quotes, control characters escaped, long strings shortened.
inline std::string quote(const std::string& s) {
  std::string out = "\"";
  std::size_t n = 0;
  for (char c : s) {
    if (++n > 64) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// 30 -> "30", 0.05 -> "0.05", 1e300 -> "1e+300".
inline std::string number(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15)
    return std::to_string(static_cast<long long>(d));
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, res.ptr);
}

inline std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ---------------------------------------------------------------------------
// The key table: one entry per setting, with its validation rule. Both the
// parsers (file, env, --set) and validate() read it, so a key exists, parses
// and is checked in exactly one place.

struct rule {
  enum { none, at_least, greater_than } lower = none;
  double lo = 0;
  bool has_hi = false;
  double hi = 0;
  const char* choices = nullptr;  ///< "a|b|c"
  bool nonempty = false;
};

inline rule at_least(double lo) { rule r; r.lower = rule::at_least; r.lo = lo; return r; }
inline rule between(double lo, double hi) { rule r = at_least(lo); r.has_hi = true; r.hi = hi; return r; }
inline rule positive(double hi) { rule r; r.lower = rule::greater_than; r.lo = 0; r.has_hi = true; r.hi = hi; return r; }
inline rule one_of(const char* choices) { rule r; r.choices = choices; return r; }
inline rule nonempty() { rule r; r.nonempty = true; return r; }

// Durations are converted to std::chrono by their users; these ceilings keep
// every one of them far inside a nanosecond count's range (~292 years).
constexpr double max_seconds = 1e9;  // ~31 years
constexpr double max_minutes = 1e7;  // ~19 years
constexpr double max_hours = 1e5;    // ~11 years

template <class S>
using member = std::variant<std::string S::*, int S::*, std::uint64_t S::*, double S::*, bool S::*,
                            std::vector<std::string> S::*>;

template <class S>
struct field {
  const char* name;
  member<S> ptr;
  rule check;
  bool secret = false;  ///< shown as "***" wherever settings are shown (GET /_troupe/config)
  /// Applied while the node runs (POST /_troupe/orchestration/apply): its
  /// readers take a new value at their next beat. Every other key needs a restart.
  bool hot = false;
};

inline const std::vector<field<node_settings>>& node_fields() {
  static const std::vector<field<node_settings>> f{
    {"listen", &node_settings::listen, {}},  // checked by split_listen
    {"admin_token", &node_settings::admin_token, {}, true},
    {"name", &node_settings::name, {}},
    {"log_level", &node_settings::log_level, one_of("trace|debug|info|warn|error|critical|off")},
    {"io_threads", &node_settings::io_threads, between(1, 64)},
    {"actor_scheduler", &node_settings::actor_scheduler, one_of("sharing|stealing")},
    {"inline_handlers", &node_settings::inline_handlers, {}},
    {"worker_pipes", &node_settings::worker_pipes, {}},
    {"actor_threads", &node_settings::actor_threads, between(1, 256)},
    {"shutdown_grace_seconds", &node_settings::shutdown_grace_seconds, between(0, max_seconds)},
    {"shutdown_freeze_seconds", &node_settings::shutdown_freeze_seconds, positive(max_seconds)},
    {"cookie_secret", &node_settings::cookie_secret, {}, true},
    {"health_probe_seconds", &node_settings::health_probe_seconds, positive(max_seconds)},
    {"health_max_restart_rate", &node_settings::health_max_restart_rate, positive(1e9)},
    {"history_seconds", &node_settings::history_seconds, between(10, 86400)},
    {"cookie_max_age_seconds", &node_settings::cookie_max_age_seconds, between(0, 34560000)},
    {"trusted_proxies", &node_settings::trusted_proxies, {}},  // each checked as a network in validate()
    {"tls_cert", &node_settings::tls_cert, {}},            // read and checked at start (transport/tls_credentials)
    {"tls_key", &node_settings::tls_key, {}},
    {"tls_client_ca", &node_settings::tls_client_ca, {}},
    {"plain_listen", &node_settings::plain_listen, {}},    // checked by split_listen when set
  };
  return f;
}

inline const std::vector<field<limits_settings>>& limits_fields() {
  using L = limits_settings;
  static const std::vector<field<L>> f{
    {"max_body_bytes", &L::max_body_bytes, at_least(1)},
    // Beast's header limit is a 32-bit count.
    {"max_header_bytes", &L::max_header_bytes, between(1024, 4294967295.0)},
    {"request_timeout_seconds", &L::request_timeout_seconds, positive(max_seconds)},
    {"max_inflight", &L::max_inflight, at_least(1)},
    {"hold_seconds", &L::hold_seconds, positive(max_seconds)},
    {"idle_timeout_seconds", &L::idle_timeout_seconds, positive(max_seconds)},
    {"read_timeout_seconds", &L::read_timeout_seconds, positive(max_seconds)},
    {"user_queue_length", &L::user_queue_length, at_least(1)},
    {"max_pages_per_connection", &L::max_pages_per_connection, at_least(1)},
    {"max_consoles", &L::max_consoles, at_least(1)},
    {"max_unauthenticated_consoles", &L::max_unauthenticated_consoles, at_least(1)},
    {"max_connections", &L::max_connections, at_least(1)},
    {"max_buffered_body_bytes", &L::max_buffered_body_bytes, at_least(1)},
    {"max_live_users", &L::max_live_users, at_least(1)},
    {"max_pages_per_user", &L::max_pages_per_user, at_least(1)},
    {"max_forwarded_requests", &L::max_forwarded_requests, at_least(1)},
    {"worker_pipe_frame_bytes", &L::worker_pipe_frame_bytes, between(65536, 4294967295.0)},
    {"max_streams", &L::max_streams, at_least(1)},
    {"max_streams_per_user", &L::max_streams_per_user, at_least(1)},
    {"stream_queue_bytes", &L::stream_queue_bytes, at_least(64)},
    {"stream_credit_bytes", &L::stream_credit_bytes, at_least(64)},
    {"stream_max_event_bytes", &L::stream_max_event_bytes, at_least(16)},
    {"stream_keepalive_seconds", &L::stream_keepalive_seconds, between(0, max_seconds)},
    {"tls_handshake_timeout_seconds", &L::tls_handshake_timeout_seconds, positive(max_seconds)},
    {"max_stream_body_bytes", &L::max_stream_body_bytes, at_least(1)},
    {"upload_chunk_bytes", &L::upload_chunk_bytes, at_least(512)},
    {"max_deferred_seconds", &L::max_deferred_seconds, positive(max_seconds)},
    {"shard_stall_ms", &L::shard_stall_ms, positive(max_seconds * 1000)},
    {"machine_memory_alarm_percent", &L::machine_memory_alarm_percent, positive(100)},
    {"commander_memory_max_percent", &L::commander_memory_max_percent, positive(100)},
    {"max_message_bytes", &L::max_message_bytes, at_least(1)},
    {"gate_max_pending", &L::gate_max_pending, at_least(1)},
    {"gate_handshake_timeout_seconds", &L::gate_handshake_timeout_seconds, positive(max_seconds)},
  };
  return f;
}

inline const std::vector<field<deposit_settings>>& deposit_fields() {
  static const std::vector<field<deposit_settings>> f{
    {"backend", &deposit_settings::backend, one_of("filesystem|postgres")},
    {"url", &deposit_settings::url, {}, true},  // may hold a password
    {"schema", &deposit_settings::schema, nonempty()},
    {"path", &deposit_settings::path, nonempty()},
    {"fallback_path", &deposit_settings::fallback_path, {}},
    {"low_space_percent", &deposit_settings::low_space_percent, between(0, 99)},
  };
  return f;
}

inline const std::vector<field<commander_settings>>& commander_fields() {
  using C = commander_settings;
  static const std::vector<field<C>> f{
    {"user_expiry_hours", &C::user_expiry_hours, positive(max_hours)},
    {"guest_expiry_hours", &C::guest_expiry_hours, positive(max_hours)},
    {"durability", &C::durability, one_of("freeze|reply")},
    {"global_max_value_bytes", &C::global_max_value_bytes, at_least(1)},
    {"global_max_waiters", &C::global_max_waiters, at_least(1)},
    {"global_max_lease_seconds", &C::global_max_lease_seconds, positive(max_seconds)},
    {"orchestration_log", &C::orchestration_log, {}},
    {"orchestration_log_max_bytes", &C::orchestration_log_max_bytes, at_least(1024)},
    {"orchestration_log_files", &C::orchestration_log_files, at_least(1)},
    {"default_group", &C::default_group, {}},  // checked against the groups in validate()
  };
  return f;
}

inline const std::vector<field<cluster_settings>>& cluster_fields() {
  using C = cluster_settings;
  static const std::vector<field<C>> f{
    {"listen", &C::listen, {}},  // checked by split_listen when set
    {"name", &C::name, nonempty()},
    {"join", &C::join, {}},      // checked by split_listen when set
    {"heartbeat_interval_ms", &C::heartbeat_interval_ms, between(10, 60000)},
    {"failure_timeout_ms", &C::failure_timeout_ms, between(100, 600000)},
    {"join_timeout_ms", &C::join_timeout_ms, between(100, 600000)},
    {"tls_cert", &C::tls_cert, {}},
    {"tls_key", &C::tls_key, {}},
    {"tls_ca", &C::tls_ca, {}},
    {"allow_plaintext", &C::allow_plaintext, {}},
  };
  return f;
}

inline const std::vector<field<channel_settings>>& channel_fields() {
  using C = channel_settings;
  static const std::vector<field<C>> f{
    {"overflow", &C::overflow, one_of("close|drop_oldest")},
    {"max_queued_frames", &C::max_queued_frames, at_least(1)},
    {"max_queued_bytes", &C::max_queued_bytes, at_least(1024)},
    {"max_frame_bytes", &C::max_frame_bytes, at_least(256)},
    {"max_sockets", &C::max_sockets, at_least(1)},
    {"max_sockets_per_connection", &C::max_sockets_per_connection, at_least(1)},
    {"max_sockets_per_user", &C::max_sockets_per_user, at_least(1)},
    {"max_calls_per_socket", &C::max_calls_per_socket, at_least(1)},
    {"idle_timeout_seconds", &C::idle_timeout_seconds, positive(max_seconds)},
    {"push_timeout_seconds", &C::push_timeout_seconds, positive(max_seconds)},
    {"max_push_users", &C::max_push_users, at_least(1)},
  };
  return f;
}

inline const std::vector<field<log_settings>>& log_fields() {
  static const std::vector<field<log_settings>> f{
    {"format", &log_settings::format, one_of("text|json")},
  };
  return f;
}

inline const std::vector<field<orchestration_settings>>& orchestration_fields() {
  static const std::vector<field<orchestration_settings>> f{
    {"profiles_path", &orchestration_settings::profiles_path, {}},
    {"profile_name", &orchestration_settings::profile_name, {}},
  };
  return f;
}

inline const std::vector<field<group_settings>>& group_fields() {
  using G = group_settings;
  static const std::vector<field<G>> f{
    {"name", &G::name, {}},  // checked by check_group_name
    {"user_type", &G::user_type, nonempty()},
    {"isolation", &G::isolation, one_of("thread|process")},
    {"workers", &G::workers, between(1, 1024), false, true},
    {"worker_max_number", &G::worker_max_number, between(0, 1024)},
    {"worker_max_users", &G::worker_max_users, between(0, 100000000), false, true},
    {"worker_min_life_seconds", &G::worker_min_life_seconds, between(0, max_seconds)},
    {"cpu_retirement_quiet_seconds", &G::cpu_retirement_quiet_seconds, positive(max_seconds)},
    {"user_idle_freeze_minutes", &G::user_idle_freeze_minutes, positive(max_minutes), false, true},
    {"durability", &G::durability, one_of("freeze|interval|reply")},
    {"checkpoint_seconds", &G::checkpoint_seconds, positive(max_seconds)},
    {"max_restarts", &G::max_restarts, at_least(0)},
    {"restart_window_seconds", &G::restart_window_seconds, positive(max_seconds)},
    {"recovery_interval_seconds", &G::recovery_interval_seconds, between(0, max_seconds)},
    {"max_user_restarts", &G::max_user_restarts, at_least(1)},
    {"stuck_timeout_seconds", &G::stuck_timeout_seconds, between(0.1, max_seconds)},
    {"permanent_failure_exitcode", &G::permanent_failure_exitcode, between(0, 255)},
    {"memory_max_percent", &G::memory_max_percent, positive(100)},
    {"worker_memory_admission_percent", &G::worker_memory_admission_percent, positive(1000)},
    {"restart_occupancy_max_percent", &G::restart_occupancy_max_percent, between(0, 1000)},
    {"cpu_admission_close_percent", &G::cpu_admission_close_percent, between(0, 100000)},
    {"cpu_admission_reopen_percent", &G::cpu_admission_reopen_percent, between(0, 100000)},
    {"cpu_offload_percent", &G::cpu_offload_percent, between(0, 100000)},
    {"cpu_heating_seconds", &G::cpu_heating_seconds, positive(max_seconds)},
    {"cpu_cooling_seconds", &G::cpu_cooling_seconds, positive(max_seconds)},
    {"worker_admission_interval_seconds", &G::worker_admission_interval_seconds, between(0, max_seconds)},
    {"guest_idle_seconds", &G::guest_idle_seconds, positive(max_seconds), false, true},
    {"rest_idle_seconds", &G::rest_idle_seconds, between(0, max_seconds)},
  };
  return f;
}

template <class S>
const field<S>* find_field(const std::vector<field<S>>& fields, const std::string& name) {
  for (auto& f : fields)
    if (name == f.name) return &f;
  return nullptr;
}

/// " (did you mean PREFIX.KEY?)" when a known key is close to `name`.
template <class S>
inline std::string suggestion(const std::vector<field<S>>& fields, const std::string& name,
                       const std::string& prefix) {
  const field<S>* best = nullptr;
  std::size_t best_d = 3;
  for (auto& f : fields) {
    auto d = edit_distance(name, f.name);
    if (d < best_d) best = &f, best_d = d;
  }
  return best ? " (did you mean " + prefix + "." + best->name + "?)" : "";
}

inline const char* const sections =
  "node, limits, deposit, commander, cluster, channel, log, orchestration, group, cors or static";

inline bool valid_group_name(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

inline const char* const group_name_rule = "1-32 characters of [a-z0-9_]";

// ---------------------------------------------------------------------------
// Range checks (validate()).

inline void check_number(const std::string& key, const rule& r, long double v, const std::string& shown) {
  if (r.lower == rule::at_least && v < r.lo)
    throw recipe_error(key, "must be at least " + number(r.lo) + " (got " + shown + ")");
  if (r.lower == rule::greater_than && !(v > r.lo))
    throw recipe_error(key, "must be greater than " + number(r.lo) + " (got " + shown + ")");
  if (r.has_hi && v > r.hi)
    throw recipe_error(key, "must be at most " + number(r.hi) + " (got " + shown + ")");
}

inline void check_string(const std::string& key, const rule& r, const std::string& v) {
  if (r.nonempty && v.empty()) throw recipe_error(key, "must not be empty");
  if (r.choices) {
    std::string all = r.choices;
    std::size_t pos = 0;
    while (pos <= all.size()) {
      auto bar = all.find('|', pos);
      if (bar == std::string::npos) bar = all.size();
      if (all.compare(pos, bar - pos, v) == 0 && v.size() == bar - pos) return;
      pos = bar + 1;
    }
    throw recipe_error(key, "must be one of " + all + " (got " + quote(v) + ")");
  }
}

template <class S>
inline void check_fields(const S& s, const std::vector<field<S>>& fields, const std::string& prefix) {
  for (auto& f : fields) {
    std::string key = prefix + "." + f.name;
    std::visit(
      [&](auto ptr) {
        const auto& v = s.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          check_string(key, f.check, v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (auto& each : v)
            check_string(key, f.check, each);
        } else if constexpr (std::is_same_v<T, bool>) {
          // nothing to check
        } else if constexpr (std::is_same_v<T, double>) {
          if (!std::isfinite(v)) throw recipe_error(key, "must be a finite number (got " + number(v) + ")");
          check_number(key, f.check, v, number(v));
        } else {
          check_number(key, f.check, static_cast<long double>(v), std::to_string(v));
        }
      },
      f.ptr);
  }
}

inline const std::vector<field<cors_settings>>& cors_fields() {
  using C = cors_settings;
  static const std::vector<field<C>> f{
    {"origins", &C::origins, {}},  // checked in check_cors
    {"methods", &C::methods, {}},
    {"headers", &C::headers, {}},
    {"max_age_seconds", &C::max_age_seconds, between(0, 86400)},
    {"credentials", &C::credentials, {}},
  };
  return f;
}

inline const std::vector<field<static_settings>>& static_fields() {
  using S = static_settings;
  static const std::vector<field<S>> f{
    {"prefix", &S::prefix, nonempty()},  // and its shape: check_static
    {"root", &S::root, nonempty()},
    {"index", &S::index, {}},
    {"spa_fallback", &S::spa_fallback, {}},
    {"cache_control", &S::cache_control, {}},
  };
  return f;
}

}  // namespace troupe::config::detail
