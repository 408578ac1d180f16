#pragma once
/// \file
/// What every actor of one node shares: the node's name, its effective
/// recipe, the user actor types it can host, and its counters. Immutable after
/// start-up except the counters (atomics); one per node, never global.

#include "actors/app.hpp"
#include "actors/health.hpp"
#include "actors/messages.hpp"
#include "actors/metrics.hpp"
#include "actors/rate_limited_log.hpp"
#include "config/recipe.hpp"
#include "registry/ids.hpp"

#include "gate/token_table.hpp"

#include <caf/actor.hpp>
#include <caf/duration.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

/// Whether this cluster member may serve its users right now: it may until
/// `until_ms` (steady clock), which its cluster agent pushes forward at every
/// heartbeat while it has the majority. A member that was stopped (SIGSTOP, a
/// starved process) therefore refuses requests from the instant it resumes,
/// before its agent even ran (read on the io threads).
struct serving_signal {
  std::atomic<std::int64_t> until_ms{0};
  bool may_serve() const noexcept { return now_ms() < until_ms.load(std::memory_order_relaxed); }
  static std::int64_t now_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
  }
};

/// What a worker process reads from its bootstrap descriptor: the node's
/// recipe sources, its cookie secret and the child's gate token. Never on a
/// command line or in an environment (/proc shows those to local users).
struct worker_bootstrap {
  std::string token;
  std::string cookie_secret;
  std::string config_file;
  std::vector<std::pair<std::string, std::string>> env;  ///< the node's TROUPE_* variables
  std::vector<std::string> sets;                         ///< every --set the node's recipe was composed with
};

struct node_context {
  std::string node_name;
  config::recipe recipe;
  app_types apps;
  node_metrics metrics;
  /// Failing handlers, logged at most once a second (a crash storm must not flood the log).
  rate_limited_log handler_failure_log{spdlog::level::err};
  /// The node's census: members tell it their state. Set before any member starts.
  census_member_view census;
  /// What /_troupe/health is judged on (atomics: read by the io thread, written by actors).
  health_signals health;
  /// Mints and verifies connection ids under the node's cookie secret
  /// (node.cookie_secret, or the one generated into the deposit). A context
  /// nobody gave one signs under a random secret of its own (tests).
  std::shared_ptr<const registry::cid_signer> cids =
    std::make_shared<const registry::cid_signer>(registry::cid_signer::with_random_secret());

  /// Set on a cluster member (null on a lone node): the front serves users only while it says so.
  std::shared_ptr<const serving_signal> serving;

  /// Set when a group has isolation = "process": the worker gate's port (on
  /// 127.0.0.1), the tokens its slots expect there, and what every child's
  /// bootstrap carries besides its own token.
  std::shared_ptr<gate::token_table> worker_tokens;
  std::uint16_t worker_gate_port = 0;
  worker_bootstrap worker_boot;

  /// limits.hold_seconds as a CAF timeout.
  caf::duration hold_timeout() const { return to_duration(recipe.limits.hold_seconds); }
  /// limits.request_timeout_seconds as a CAF timeout.
  caf::duration request_timeout() const { return to_duration(recipe.limits.request_timeout_seconds); }

  /// A recipe's seconds as a timer's delay: at least 1 ms (0 would fire at once).
  static std::chrono::milliseconds timer_millis(double seconds) {
    return std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds * 1000)));
  }

  static caf::duration to_duration(double seconds) {
    return caf::duration{std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000))};
  }
};

using node_context_ptr = std::shared_ptr<node_context>;

}  // namespace troupe
