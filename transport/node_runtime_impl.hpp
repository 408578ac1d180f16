#pragma once
// node_runtime's parts (internal to transport/, not installed): the class
// both halves of its definition share — the start, in order, in
// node_runtime.cpp; the drain, the soft quit and the stop in node_shutdown.cpp.

#include "transport/node_runtime.hpp"

#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/health.hpp"
#include "actors/orchestration_log.hpp"
#include "actors/orchestrator.hpp"
#include "cluster/agent.hpp"
#include "cluster/commander_link.hpp"
#include "gate/dial.hpp"
#include "gate/listener.hpp"
#include "store/postgres_deposit.hpp"
#include "transport/bridge.hpp"
#include "transport/forwarder.hpp"
#include "transport/front.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace troupe {

// Named, not anonymous: node_runtime::impl, defined in this header, holds these
// (an anonymous type in a header would differ per translation unit: -Wsubobject-linkage).
namespace node_runtime_detail {

// Whatever hangs in a stop, the process leaves (exit 1, said out loud) once
// the budget last armed is spent. A detached thread: it ends with the process.
class shutdown_watchdog {
public:
  void arm(std::chrono::milliseconds budget) {
    deadline_->store(now_ms() + budget.count());
    if (started_)
      return;
    started_ = true;
    std::thread([deadline = deadline_] {
      while (true) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (now_ms() > deadline->load()) {
          spdlog::critical("shutdown did not complete in time; exiting: users still live are not saved");
          spdlog::shutdown();
          std::_Exit(node_exit::lost);
        }
      }
    }).detach();
  }

private:
  static std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
  }
  std::shared_ptr<std::atomic<std::int64_t>> deadline_ = std::make_shared<std::atomic<std::int64_t>>(0);
  bool started_ = false;
};

// What the soft quit reports.
struct quit_report {
  std::uint64_t frozen = 0;
  std::vector<std::string> not_saved;
  std::uint64_t rescued = 0;
  std::string rescue_dir;
  std::int64_t ms = 0;
};

}  // namespace node_runtime_detail

using node_runtime_detail::quit_report;
using node_runtime_detail::shutdown_watchdog;

class node_runtime::impl {
public:
  impl(config::recipe recipe, const config::recipe_sources& sources, app_types types);

  ~impl();

  // The start, in order (node_runtime.hpp): every step returns 0 to go on, or the exit code.
  int start();

  void reload_tls();

  void reload_profile();

  int stop(const char* why);

private:
  // -- 1. addresses ---------------------------------------------------------------------
  int parse_addresses();

  // -- 2. the front's TLS pair: one that does not load stops the start here, before anything runs
  int load_tls();

  // -- 3. the orchestration log ---------------------------------------------------------
  int open_orchestration_log();

  // -- 4. the deposit -------------------------------------------------------------------
  int open_deposit();

  // -- 5. the key of the connection ids -------------------------------------------------
  // Configured (shared by the members of a cluster) or generated once into the
  // deposit (shared by every node on it): on PostgreSQL into the database, the
  // source of truth every host shares; on the filesystem into the deposit directory.
  int load_cookie_secret();

  // -- 6. the context: figures, the node's name -----------------------------------------
  int describe_node();

  // -- 7. the global store's snapshot ---------------------------------------------------
  // Read back before anybody is served, and before any actor or thread exists:
  // a snapshot that cannot be read (an I/O error, or quarantined) stops the
  // start cleanly, with exit code 1.
  int restore_global_store();

  // -- 8. the actor system --------------------------------------------------------------
  int start_actor_system();

  // -- 9. the node's services -----------------------------------------------------------
  int spawn_services();

  // -- 10. the commander ----------------------------------------------------------------
  // A lone node runs its own commander and global store. A cluster member
  // talks to the cluster's (on the oldest member) through its commander link
  // and its global store link, and runs them itself when it becomes the
  // oldest (its agent starts them: join_cluster).
  int spawn_commander();

  // Worker processes (isolation = "process") pass the node's worker gate, on
  // loopback only, before any group starts them; the cluster port's gate
  // (join_cluster) is the same kind. Both vet every connection on a thread of
  // their own, so stray clients never reach the middleman that carries heartbeats.
  gate::listener_options gate_options(std::string name, gate::kind which) const;

  // -- 11. the worker gate --------------------------------------------------------------
  int open_worker_gate();

  // -- 12. the groups -------------------------------------------------------------------
  int start_groups();

  // The orchestrator (actors/orchestrator.hpp) exists before the cluster
  // agent, which tells it who leads.
  int spawn_orchestrator();

  // -- 13. the cluster ------------------------------------------------------------------
  // A cluster member joins (or starts) its cluster once its groups exist: its
  // agent is published on cluster.listen, and the node serves nothing until
  // it is a member (docs/CLUSTER.md).
  int join_cluster();

  // -- 14. the bridge --------------------------------------------------------------------
  int spawn_bridge();

  // -- 15. the front --------------------------------------------------------------------
  int open_front();

  // The ready line on stdout (alone there), then what the log says of the node.
  void announce();

  // An entry of the orchestration log about the node itself.
  void record(const char* what, const std::string& outcome, const nlohmann::json& numbers);

  // -- the stop -------------------------------------------------------------------------

  // The front stops accepting; what is in flight gets `grace`, then 503 + Retry-After
  // (a client may retry elsewhere) rather than a cut connection.
  // The line saying so comes after the front stopped accepting: a client that reads it
  // and connects is refused, never served.
  void drain_front(const char* why, std::chrono::milliseconds grace);

  // The soft quit: every user freezes to the deposit; a restart on the same
  // deposit brings each back on his next request. It has `budget`
  // (node.shutdown_freeze_seconds): the deposit actor retries refused writes
  // for a third of it (at most 20 s, below the users' 30 s deposit timeout),
  // then parks them in the fallback deposit; users who cannot freeze within
  // 90% of it are named as not saved.
  quit_report soft_quit(std::chrono::milliseconds budget);

  // The deposit may have lost its cookie secret (removed and healed): without
  // it every session would end at the next start.
  void write_back_secret();

  // The soft quit's outcome: logged, written to the orchestration log, and the exit code.
  int report_quit(const quit_report& r);

  // Steps 14 down to 9, each told to leave (the actor system then waits for
  // them); idempotent, and only what was started. The front is stopped by
  // drain_front.
  void stop_parts();

  node_context_ptr ctx_;
  app_types types_;
  std::pair<std::string, std::uint16_t> listen_, plain_listen_;
  std::shared_ptr<tls_credentials> tls_;             // null: no TLS on the front
  std::shared_ptr<orchestration_log> operations_;
  std::shared_ptr<store::deposit> deposit_store_;
  bool any_process_group_ = false;
  bool cluster_tls_ = false;
  std::string secret_origin_;   // logged (the secret itself never is)
  std::string cluster_key_;
  std::string deposit_secret_;  // generated into the deposit directory: written back if the deposit loses it
  global_snapshot global_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  deposit_handle deposit_;
  caf::actor health_;
  census_handle census_;
  std::shared_ptr<route_cache> routes_;
  forwarder_handle forwarder_;
  std::thread census_of_deposit_;
  commander_handle commander_;
  global_store_handle global_store_;
  std::shared_ptr<serving_signal> serving_;
  std::unique_ptr<gate::listener> worker_gate_;
  std::vector<group_handle> groups_;
  cluster::agent_handle cluster_agent_;
  std::unique_ptr<gate::listener> cluster_gate_;
  config::recipe_sources sources_;  // the levels the recipe was composed from (the orchestrator's base)
  orchestrator_handle orchestrator_;
  bridge_handle bridge_;
  std::unique_ptr<front> front_;
  shutdown_watchdog watchdog_;
};

}  // namespace troupe
