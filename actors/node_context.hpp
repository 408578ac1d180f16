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
#include "config/fwd.hpp"
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

class worker_pipe_directory;
class worker_pipe_service;

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
  std::string config_text;  ///< the recipe file's text as its node read it (the child does not read the file again)
  std::vector<std::pair<std::string, std::string>> env;  ///< the node's TROUPE_* variables
  std::vector<std::string> sets;                         ///< every --set the node's recipe was composed with
  std::vector<std::pair<std::string, std::string>> profile;  ///< the profile level in force (config/profile.hpp)
  std::uint32_t pipes = 0;  ///< its worker pipes, on descriptors worker_pipe_fd.. (actors/worker_pipes.hpp)
};

struct node_context {
  /// A node with the default recipe (tests change it through recipe() before they start anything).
  node_context();
  explicit node_context(config::recipe r);
  node_context(const node_context&) = delete;
  node_context& operator=(const node_context&) = delete;
  ~node_context();

  std::string node_name;

  /// The node's effective recipe, whole (config/recipe.hpp): for the start-up, a
  /// worker's bootstrap and tests. Readers of one section use its accessor below
  /// and include only that section's header, so a changed field recompiles only
  /// its readers (docs/building.md).
  config::recipe& recipe() noexcept { return *recipe_; }
  const config::recipe& recipe() const noexcept { return *recipe_; }
  const config::node_settings& node() const noexcept { return *sections_.node; }
  const config::limits_settings& limits() const noexcept { return *sections_.limits; }
  const config::channel_settings& channel() const noexcept { return *sections_.channel; }
  const config::deposit_settings& deposit() const noexcept { return *sections_.deposit; }
  const config::commander_settings& commander() const noexcept { return *sections_.commander; }
  const config::cluster_settings& cluster() const noexcept { return *sections_.cluster; }
  /// The group called `name` (config/group_settings.hpp), or nullptr.
  const config::group_settings* group(const std::string& name) const;
  /// The group a newcomer is born in: commander.default_group, else the first.
  const config::group_settings& default_group() const;
  /// Every group, "default" first if present (never empty).
  const std::vector<config::group_settings>& groups() const;
  /// The settings in force since the last applied generation (the
  /// orchestrator's, actors/orchestrator.hpp), for actors of this process that
  /// read a hot key at their beat; null until a profile changed something
  /// while the node runs (then recipe() is what is in force).
  std::shared_ptr<const config::recipe> settings_in_force() const { return std::atomic_load(&in_force_); }
  /// The orchestrator, after each generation that changed something.
  void put_in_force(std::shared_ptr<const config::recipe> r) { std::atomic_store(&in_force_, std::move(r)); }
  /// The `[[cors]]` entries (config/cors_settings.hpp), in order.
  const std::vector<config::cors_settings>& cors() const;
  /// The `[[static]]` mounts (config/static_settings.hpp).
  const std::vector<config::static_settings>& statics() const;

  app_types apps;
  node_metrics metrics;
  /// Failing handlers, logged at most once a second (a crash storm must not flood the log).
  rate_limited_log handler_failure_log{spdlog::level::err};
  /// Handlers' answers refused for an invalid header or cookie, logged once per route.
  once_per_key_log invalid_response_log;
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
  /// The node's ends of its worker processes' pipes (actors/worker_pipes.hpp);
  /// null when no group runs processes (their requests then take the forwarder).
  std::shared_ptr<worker_pipe_directory> worker_pipes;
  /// In a worker process: its side of the pipes (set before its worker starts; its heartbeat reads it).
  std::weak_ptr<const worker_pipe_service> pipe_service;

  /// limits.hold_seconds as a CAF timeout.
  caf::duration hold_timeout() const;
  /// limits.request_timeout_seconds as a CAF timeout.
  caf::duration request_timeout() const;

  /// A recipe's seconds as a timer's delay: at least 1 ms (0 would fire at once).
  static std::chrono::milliseconds timer_millis(double seconds) {
    return std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds * 1000)));
  }

  static caf::duration to_duration(double seconds) {
    return caf::duration{std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000))};
  }

private:
  std::unique_ptr<config::recipe> recipe_;
  std::shared_ptr<const config::recipe> in_force_;  // read and written with std::atomic_load/store
  struct sections {  // into *recipe_, which never moves
    const config::node_settings* node;
    const config::limits_settings* limits;
    const config::channel_settings* channel;
    const config::deposit_settings* deposit;
    const config::commander_settings* commander;
    const config::cluster_settings* cluster;
  } sections_;
};

using node_context_ptr = std::shared_ptr<node_context>;

}  // namespace troupe
