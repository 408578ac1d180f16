#pragma once
/// \file
/// (Internal to transport/.) The node's composition root: node_runtime owns
/// every part of a running node and brings them up and down in one documented
/// order. transport/node_main.cpp keeps the command line beside it (flags, the
/// recipe's sources, logging, signals) and only calls start(), reload_tls()
/// and stop().
///
/// start() — each part after what it depends on (Seastar's sharded<T> is the model):
///
///  1. addresses        node.listen / node.plain_listen parsed
///  2. tls              the front's certificate pair loaded (a bad pair stops the start here)
///  3. orchestration log
///  4. deposit          filesystem or PostgreSQL (deposit.backend)
///  5. cookie secret    configured, or generated into the deposit
///  6. context          metrics, per-route figures, the node's name
///  7. global snapshot  read back before any actor or thread exists
///  8. actor system     CAF, its middleman (and openssl for cluster.tls_*)
///  9. services         deposit actor, health, census, forwarder (and the
///                      deposit's census thread)
/// 10. commander        a lone node's commander and global store, or a member's links to the cluster's
/// 11. worker gate      only with process-isolated groups
/// 12. groups           each started and reported to the commander
/// 13. cluster          the agent, the cluster gate, the join (members only)
/// 14. bridge           the front's one actor
/// 15. front            listening; then the ready line on stdout
///
/// stop() — the orderly stop, in reverse: the front drains (shutdown grace,
/// then 503 to what is still awaited) and stops; the soft quit freezes every
/// user to the deposit (node.shutdown_freeze_seconds, the fallback deposit
/// for what it refuses); the cookie secret is written back if the deposit
/// lost it; then the parts from 14 down to 9 are stopped, the actor system
/// waits for every actor, and the front goes last. A watchdog ends the
/// process (exit 1) if any of it hangs. A start() that fails stops what it
/// had started, in the same reverse order.

#include "config/recipe.hpp"

#include <troupe/app.hpp>

#include <memory>
#include <string>

namespace troupe {

/// Exit codes (README "The node"): 0 everything is in the deposit; 1 something
/// was lost (or the start or the shutdown failed); 2 bad flags or recipe; 3
/// nothing was lost but part of it is in the fallback deposit only (an
/// operator must copy it back).
namespace node_exit {
constexpr int ok = 0;
constexpr int lost = 1;
constexpr int usage = 2;
constexpr int in_fallback = 3;
}  // namespace node_exit

/// Says `text` on stderr as one line ("troupe: ..."); returns node_exit::usage.
int usage_error(const std::string& text);

class node_runtime {
public:
  /// `recipe` composed from `sources` (a worker process composes the same
  /// recipe from them); every group's user type is one of `types`.
  node_runtime(config::recipe recipe, const config::recipe_sources& sources, app_types types);
  /// Stops whatever is still running (after a failed start, nothing is).
  ~node_runtime();
  node_runtime(const node_runtime&) = delete;
  node_runtime& operator=(const node_runtime&) = delete;

  /// Brings the node up (the order above). 0: it serves, and the ready line
  /// is out; else the exit code, with everything it had started stopped again.
  int start();
  /// SIGHUP: loads the TLS pair again (logged; TLS off: said so, nothing done).
  void reload_tls();
  /// SIGHUP: reads the active profile again and applies it (docs/config.md
  /// "Profiles"); the outcome is logged and written to the orchestration log.
  void reload_profile();
  /// The orderly stop; `why` names its cause in the log ("SIGTERM"). Returns the exit code.
  int stop(const char* why);

private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe
