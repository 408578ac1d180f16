#include "transport/node_main.hpp"

#include <troupe/version.hpp>
#include "actors/log_format.hpp"

#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/orchestration_log.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/health.hpp"
#include "actors/worker_process.hpp"
#include "cluster/agent.hpp"
#include "cluster/commander_link.hpp"
#include "gate/dial.hpp"
#include "gate/listener.hpp"
#include "store/postgres_deposit.hpp"
#include "transport/bridge.hpp"
#include "transport/census_cli.hpp"
#include "transport/forwarder.hpp"
#include "transport/front.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <openssl/crypto.h>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <pthread.h>
#include <unistd.h>

namespace troupe {

namespace {

// Exit codes (README "The node"): 0 everything is in the deposit; 1 something
// was lost (or the shutdown hung); 2 bad flags or recipe; 3 nothing was lost but
// part of it is in the fallback deposit only (an operator must copy it back).
constexpr int exit_lost = 1;
constexpr int exit_usage = 2;
constexpr int exit_in_fallback = 3;

// Where a soft quit parks what the deposit refuses: deposit.fallback_path, or
// $TMPDIR/troupe-rescue (/tmp/troupe-rescue).
std::string fallback_directory(const config::recipe& recipe) {
  if (!recipe.deposit.fallback_path.empty())
    return recipe.deposit.fallback_path;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/troupe-rescue";
}

std::string joined(const std::vector<std::string>& names, std::size_t at_most = 50) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < at_most; ++i)
    out += (i ? ", " : "") + names[i];
  if (names.size() > at_most)
    out += ", and " + std::to_string(names.size() - at_most) + " more";
  return out;
}

// The generated cookie secret, in the deposit directory.
constexpr std::string_view cookie_secret_file = "cookie.secret";
// Its name in a deposit that keeps secrets itself (PostgreSQL).
constexpr std::string_view cookie_secret_name = "cookie";
// A configured secret shorter than this could be guessed from one minted id.
constexpr std::size_t min_cookie_secret_bytes = 16;

int usage_error(const std::string& text) {
  std::string line = text;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::cerr << "troupe: " << line << std::endl;
  return exit_usage;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0')
    return "node";
  return buf;
}

// Logs go to stderr (stdout carries the ready line). SPDLOG_LEVEL, when set,
// wins over [node] log_level.
void setup_logging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_color_mt("troupe");
  logger->set_formatter(log_formatter(format));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::cfg::load_env_levels();
  spdlog::flush_on(spdlog::level::warn);
}

struct node_flags {
  std::string config_file;
  std::string listen;
  std::string deposit;
  std::string admin_token;
  std::string app;
  std::string join;
  std::vector<std::string> sets;
};

// Flags are --set entries that come before the user's own --set arguments.
config::recipe_sources sources_of(const node_flags& f) {
  config::recipe_sources src;
  src.file = f.config_file;
  src.env = config::troupe_environment();
  if (!f.listen.empty())
    src.sets.push_back("node.listen=" + f.listen);
  if (!f.deposit.empty())
    src.sets.push_back("deposit.path=" + f.deposit);
  if (!f.admin_token.empty())
    src.sets.push_back("node.admin_token=" + f.admin_token);
  if (!f.join.empty())
    src.sets.push_back("cluster.join=" + f.join);
  for (auto& s : f.sets)
    src.sets.push_back(s);
  return src;
}

int run_node(const node_flags& flags, const app_types& types) {
  // Signals are taken by this thread alone (sigwait below): block them before
  // any other thread exists (the orchestration log's writer is one) so every
  // thread inherits the mask; else a SIGINT can land on another thread and kill
  // the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reloads the TLS pair (docs/tls.md)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // -- the recipe -------------------------------------------------------------------
  auto ctx = std::make_shared<node_context>();
  try {
    auto src = sources_of(flags);
    if (!flags.app.empty())  // --app NAME: the default group's user type
      src.sets.insert(src.sets.begin() + (src.sets.size() - flags.sets.size()),
                      "group.default.user_type=" + flags.app);
    ctx->recipe = config::load_recipe(src);
    // A worker process composes the same recipe from its bootstrap (never from its command line).
    ctx->worker_boot.config_file = src.file;
    ctx->worker_boot.env = src.env;
    ctx->worker_boot.sets = src.sets;
  } catch (const config::recipe_error& e) {
    return usage_error(e.what());
  }
  auto& recipe = ctx->recipe;
  for (auto& g : recipe.groups)
    if (!types.find(g.user_type)) {
      std::string known;
      for (auto& n : types.names())
        known += (known.empty() ? "" : ", ") + n;
      return usage_error("group." + g.name + ".user_type: unknown user type \"" + g.user_type + "\" (known: "
                         + known + ")");
    }
  // Before the deposit is opened: what it logs at start (a directory narrowed)
  // goes to stderr, never to stdout, which carries the ready line alone.
  setup_logging(recipe.node.log_level, recipe.log.format);
  std::pair<std::string, std::uint16_t> listen, plain_listen;
  try {
    listen = config::split_listen(recipe.node.listen);
    if (!recipe.node.plain_listen.empty())
      plain_listen = config::split_listen(recipe.node.plain_listen, "node.plain_listen");
  } catch (const config::recipe_error& e) {
    return usage_error(e.what());
  }
  // A pair that does not load stops the start here, before anything runs.
  std::shared_ptr<tls_credentials> tls;
  if (!recipe.node.tls_cert.empty()) {
    tls_paths paths{recipe.node.tls_cert, recipe.node.tls_key, recipe.node.tls_client_ca};
    auto loaded = load_tls(paths);
    if (loaded.index() == 1)
      return usage_error(std::get<1>(loaded));
    tls = std::make_shared<tls_credentials>(std::move(paths), std::move(std::get<0>(loaded)));
  }
  if (recipe.deposit.backend != "filesystem") {  // deposit.path holds the node's own files only
    std::error_code ec;
    if (std::filesystem::create_directories(recipe.deposit.path, ec))
      std::filesystem::permissions(recipe.deposit.path, std::filesystem::perms::owner_all, ec);
  }
  std::shared_ptr<orchestration_log> operations;
  try {
    auto& c = recipe.commander;
    operations = std::make_shared<orchestration_log>(
      c.orchestration_log.empty() ? recipe.deposit.path + "/orchestration.log" : c.orchestration_log,
      c.orchestration_log_max_bytes, c.orchestration_log_files);
  } catch (const std::exception& e) {
    return usage_error("commander.orchestration_log: " + std::string(e.what()));
  }
  std::shared_ptr<store::deposit> deposit_store;
  if (recipe.deposit.backend == "postgres") {
    try {
      store::postgres_options o;
      o.url = recipe.deposit.url;
      o.schema = recipe.deposit.schema;
      deposit_store = store::make_postgres_deposit(o);
    } catch (const std::exception& e) {  // the text never holds the password (redact_postgres_url)
      return usage_error("deposit: cannot use the PostgreSQL deposit at " +
                         (recipe.deposit.url.empty() ? std::string("the PG* variables' database")
                                                     : store::redact_postgres_url(recipe.deposit.url)) +
                         ": " + e.what());
    }
    spdlog::info("deposit: PostgreSQL {} schema {}",
                 recipe.deposit.url.empty() ? std::string("(PG* variables)") : store::redact_postgres_url(recipe.deposit.url),
                 recipe.deposit.schema);
  } else {
    try {
      deposit_store = store::make_filesystem_deposit(recipe.deposit.path);
    } catch (const std::exception& e) {
      return usage_error("deposit.path: cannot use \"" + recipe.deposit.path + "\": " + e.what());
    }
  }
  // The key of the connection ids: configured (shared by the members of a
  // cluster) or generated once into the deposit (shared by every node on it):
  // on PostgreSQL into the database, the source of truth every host shares;
  // on the filesystem into the deposit directory.
  std::string secret_origin = "node.cookie_secret";  // logged (the secret itself never is)
  const bool any_process_group =
    std::any_of(recipe.groups.begin(), recipe.groups.end(), [](auto& g) { return g.process_isolation(); });
  std::string cluster_key;
  std::string deposit_secret;  // generated into the deposit directory: written back if the deposit loses it
  try {
    std::string secret = recipe.node.cookie_secret;
    const auto secret_file = recipe.deposit.path + "/" + std::string(cookie_secret_file);
    if (secret.empty() && recipe.deposit.backend == "postgres") {
      // A file an earlier troupe generated on this host seeds the database
      // (its sessions go on); else a fresh one. The first member's stands.
      auto candidate = registry::read_secret(secret_file).value_or(registry::generate_secret());
      secret = deposit_store->load_or_create_secret(std::string(cookie_secret_name), candidate).value();
      OPENSSL_cleanse(candidate.data(), candidate.size());
      secret_origin = "the PostgreSQL deposit (" + recipe.deposit.schema + ".secrets)";
    } else if (secret.empty()) {
      secret_origin = secret_file;
      secret = registry::load_or_create_secret(secret_origin);
      deposit_secret = secret;
    } else if (secret.size() < min_cookie_secret_bytes)
      return usage_error("node.cookie_secret: must be empty (generated into the deposit) or at least "
                         + std::to_string(min_cookie_secret_bytes) + " bytes long");
    ctx->cids = std::make_shared<const registry::cid_signer>(secret);
    if (any_process_group)  // its worker processes sign as it does (their bootstrap carries it)
      ctx->worker_boot.cookie_secret = secret;
    if (recipe.cluster.enabled())  // what every member's gate asks of the others
      cluster_key = gate::cluster_key(secret);
    OPENSSL_cleanse(secret.data(), secret.size());
  } catch (const std::exception& e) {
    return usage_error("node.cookie_secret: " + std::string(e.what()));
  }
  ctx->metrics.deposit = &deposit_store->counters();
  for (auto& g : recipe.groups)
    ctx->metrics.add_group(g.name);
  ctx->health.deposit_last_success_unix_ms.store(unix_now_ms());  // it was just created and probed
  ctx->apps = types;
  // Per-route figures for every route of the types the groups serve: a finite
  // set made here, read without a lock by the front afterwards.
  for (auto& g : recipe.groups)
    if (auto* routes = types.routes(g.user_type))
      routes->for_each_route([&](const std::string& method, const std::string& pattern) {
        ctx->metrics.add_route(g.user_type, method, pattern);
      });
  ctx->metrics.history = registry::rate_history(recipe.node.history_seconds);
  ctx->node_name = recipe.node.name.empty() ? host_name() : recipe.node.name;
  if (recipe.cluster.enabled() && recipe.node.name.empty()) {
    // Members must have distinct names, and several may share a host.
    auto port = config::split_listen(recipe.cluster.listen, "cluster.listen").second;
    ctx->node_name += "-" + (port ? std::to_string(port) : registry::redact(ctx->cids->mint()).substr(0, 6));
  }
  spdlog::info("connection ids are signed with the secret of {}", secret_origin);


  // The global store comes back from its snapshot before anybody is served,
  // and before any actor or thread exists: a snapshot that cannot be read (an I/O
  // error, or quarantined) stops the start cleanly, with exit code 1.
  global_snapshot global;
  try {
    if (auto p = deposit_store->get_user(global_snapshot_key))
      store::unpack(p->payload, global);
  } catch (const std::exception& e) {
    spdlog::critical("the global store's snapshot cannot be read: {}", e.what());
    return 1;
  }

  // -- the actors -----------------------------------------------------------------------
  caf::actor_system_config cfg;
  register_types(cfg);
  cluster::register_types(cfg);
  // CAF's middleman, so that actors of other nodes can exist here (their
  // requests go through the forwarder). It listens on nothing by itself: a
  // port opens only when the cluster publishes one ([cluster], issue 11).
  // Automatic connections would open a wildcard plain-TCP listener: never.
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.enable-automatic-connections", false);
  // Node-to-node TLS (all three files, checked by the recipe): mutual, with
  // certificates chained to cluster.tls_ca. Without them CAF's openssl module
  // is not loaded at all, so it can never fall back to anonymous TLS.
  bool cluster_tls = recipe.cluster.enabled() && !recipe.cluster.tls_cert.empty();
  if (cluster_tls) {
    for (auto [key, file] : {std::pair{"cluster.tls_cert", recipe.cluster.tls_cert},
                             std::pair{"cluster.tls_key", recipe.cluster.tls_key},
                             std::pair{"cluster.tls_ca", recipe.cluster.tls_ca}})
      if (::access(file.c_str(), R_OK) != 0)
        return usage_error(std::string(key) + ": cannot read \"" + file + "\": " + std::strerror(errno));
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = recipe.cluster.tls_cert;
    cfg.openssl_key = recipe.cluster.tls_key;
    cfg.openssl_cafile = recipe.cluster.tls_ca;
  }
  cfg.set("scheduler.max-threads", recipe.node.actor_threads);
  cfg.set("scheduler.policy", caf::atom_from_string(recipe.node.actor_scheduler));
  auto sys = std::make_unique<caf::actor_system>(cfg);
  // A wake's read waits out a short database outage, answered before the user's own request gives up.
  auto deposit = spawn_deposit(*sys, deposit_store, &ctx->health,
                               std::chrono::duration_cast<caf::timespan>(
                                 std::chrono::duration<double>(recipe.limits.hold_seconds * 0.8)));
  auto health = spawn_health(*sys, ctx, caf::actor_cast<caf::actor>(deposit));
  auto census = spawn_census(*sys, ctx, operations);
  // Users on other nodes are served through the forwarder; a node declared
  // down leaves the routing cache with its in-flight requests.
  auto routes = std::make_shared<route_cache>();
  auto forwarder = spawn_forwarder(*sys, ctx, [weak = std::weak_ptr<route_cache>(routes)](const caf::node_id& node) {
    if (auto r = weak.lock())
      r->forget_node(node);
  });
  ctx->census = census;
  // How many users the deposit holds, and who they are (the census lists them
  // as frozen): counted beside the start, never before it.
  std::thread census_of_deposit([deposit_store, ctx, census] {
    constexpr std::size_t batch_size = 4096;
    std::vector<std::string> batch;
    std::int64_t found = 0;
    try {
      deposit_store->for_each_user([&](const std::string& name) {
        batch.push_back(name);
        ++found;
        if (batch.size() == batch_size)
          caf::anon_send(census, scan_atom::value, std::exchange(batch, {}), false);
      });
    } catch (const std::exception& e) {
      spdlog::error("listing the deposit's users failed: {}", e.what());
    }
    ctx->metrics.users_frozen.fetch_add(found);
    caf::anon_send(census, scan_atom::value, std::move(batch), true);
  });
  // A lone node runs its own commander and global store. A cluster member
  // talks to the cluster's (on the oldest member) through its commander link
  // and its global store link, and runs them itself when it becomes the
  // oldest (its agent starts them).
  commander_handle commander;
  global_store_handle global_store;
  caf::actor cluster_agent;
  std::vector<group_handle> groups;
  std::shared_ptr<serving_signal> serving;
  if (!recipe.cluster.enabled()) {
    global_store = spawn_global_store(*sys, ctx, deposit, global_store_start{std::move(global), false});
    commander = spawn_commander(*sys, ctx, caf::actor_cast<caf::actor>(deposit), global_store);
  } else {
    auto hold = std::chrono::milliseconds(static_cast<std::int64_t>(recipe.limits.hold_seconds * 1000));
    // Longer than any asker waits: a soft quit's freeze budget, a request's timeout.
    auto longest = std::chrono::milliseconds(static_cast<std::int64_t>(
      (recipe.node.shutdown_freeze_seconds + recipe.limits.request_timeout_seconds + recipe.limits.hold_seconds) * 1000));
    auto link = cluster::spawn_commander_link(*sys, ctx->node_name, hold, recipe.limits.max_inflight, longest);
    commander = caf::actor_cast<commander_handle>(link);
    global_store = caf::actor_cast<global_store_handle>(
      cluster::spawn_global_store_link(*sys, ctx->node_name, hold, recipe.limits.max_inflight, longest));
    serving = std::make_shared<serving_signal>();
    ctx->serving = serving;
  }
  // Worker processes (isolation = "process") pass the node's worker gate, on
  // loopback only, before any group starts them; the cluster port's gate
  // (below) is the same kind. Both vet every connection on a thread of their
  // own, so stray clients never reach the middleman that carries heartbeats.
  std::unique_ptr<gate::listener> worker_gate, cluster_gate;
  auto gate_options = [&](std::string name, gate::kind which) {
    gate::listener_options o;
    o.name = std::move(name);
    o.which = which;
    o.max_pending = recipe.limits.gate_max_pending;
    o.handshake_timeout = node_context::timer_millis(recipe.limits.gate_handshake_timeout_seconds);
    return o;
  };
  if (any_process_group) {
    auto tokens = std::make_shared<gate::token_table>();
    auto o = gate_options("worker gate", gate::kind::worker);
    o.host = "127.0.0.1";
    try {
      worker_gate = std::make_unique<gate::listener>(
        *sys, std::move(o), [tokens](const gate::nonce& n, const gate::mac& m) { return tokens->take(n, m); },
        &ctx->metrics.worker_gate_refusals);
    } catch (const std::exception& e) {
      spdlog::critical("the worker gate cannot listen on 127.0.0.1: {}", e.what());
      for (auto a : {caf::actor_cast<caf::actor>(commander), caf::actor_cast<caf::actor>(health),
                     caf::actor_cast<caf::actor>(forwarder), caf::actor_cast<caf::actor>(census),
                     caf::actor_cast<caf::actor>(deposit)})
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
      deposit = nullptr;
      census_of_deposit.join();
      return 1;
    }
    ctx->worker_tokens = std::move(tokens);
    ctx->worker_gate_port = worker_gate->port();
    spdlog::info("worker gate on 127.0.0.1:{}", ctx->worker_gate_port);
  }
  // What a start that fails from here on must stop (the actor system waits for every actor).
  auto abandon_start = [&] {
    cluster_gate.reset();
    worker_gate.reset();
    if (cluster_agent)
      caf::anon_send_exit(cluster_agent, caf::exit_reason::user_shutdown);
    for (auto& g : groups)
      caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(commander, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(global_store, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(census, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deposit, caf::exit_reason::user_shutdown);
    deposit = nullptr;
    if (census_of_deposit.joinable())
      census_of_deposit.join();
  };
  {
    caf::scoped_actor self{*sys};  // start-up only: never on an asio thread
    for (auto& g : recipe.groups) {
      auto group = spawn_group(*sys, ctx, g, caf::actor_cast<caf::actor>(commander),
                               caf::actor_cast<caf::actor>(global_store), caf::actor_cast<caf::actor>(deposit));
      groups.push_back(group);
      bool ok = false;
      self->request(group, std::chrono::seconds(10), workers_atom::value)
        .receive(
          [&](std::vector<worker_handle>& workers) {
            // As the group: the commander learns the group that grows and retires these workers.
            caf::send_as(group, commander, workers_atom::value, g.name, ctx->node_name, std::move(workers));
            ok = true;
          },
          [&](caf::error& err) { spdlog::critical("group {} did not start: {}", g.name, sys->render(err)); });
      if (!ok) {
        abandon_start();
        return 1;
      }
    }
  }
  // A cluster member joins (or starts) its cluster once its groups exist:
  // its agent is published on cluster.listen, and the node serves nothing
  // until it is a member (docs/CLUSTER.md).
  if (recipe.cluster.enabled()) {
    auto& cc = recipe.cluster;
    auto cluster_listen = config::split_listen(cc.listen, "cluster.listen");
    cluster::agent_config ac;
    ac.cluster_name = cc.name;
    ac.join = cc.join;
    ac.heartbeat_interval = std::chrono::milliseconds(cc.heartbeat_interval_ms);
    ac.failure_timeout = std::chrono::milliseconds(cc.failure_timeout_ms);
    ac.join_timeout = std::chrono::milliseconds(cc.join_timeout_ms);
    ac.connector = gate::spawn_connector(*sys, gate::dial_settings{gate::kind::cluster, cluster_key, cluster_tls,
                                                                   std::chrono::milliseconds(cc.join_timeout_ms)});
    ac.leader_listeners = {caf::actor_cast<caf::actor>(commander), caf::actor_cast<caf::actor>(global_store)};
    ac.down_listeners = {caf::actor_cast<caf::actor>(forwarder)};
    for (auto& g : groups)
      ac.fence_listeners.push_back(caf::actor_cast<caf::actor>(g));
    ac.serving = serving;
    ac.census = caf::actor_cast<caf::actor>(census);
    ac.metrics = &ctx->metrics;
    ac.start_commander = [sys = sys.get(), ctx, deposit](std::vector<std::string> members) {
      // A takeover: the new global store reads the snapshot the last one wrote.
      auto store = spawn_global_store(*sys, ctx, deposit, global_store_start{{}, true});
      auto commander = spawn_commander(*sys, ctx, caf::actor_cast<caf::actor>(deposit), store,
                                       commander_start{std::move(members)});
      return cluster::leader_actors{caf::actor_cast<caf::actor>(commander), caf::actor_cast<caf::actor>(store)};
    };
    ac.self = cluster::member_record{ctx->node_name, cluster::new_incarnation(), "", 0};
    auto agent = cluster::spawn_agent(*sys, std::move(ac));
    cluster_agent = caf::actor_cast<caf::actor>(agent);
    caf::anon_send(census, agent_atom::value, cluster_agent);  // its census answers for the cluster from now on
    // The members reach the agent through the cluster port's gate: only a
    // connection that holds the cluster's key gets to CAF (in TLS when set).
    auto o = gate_options("cluster gate", gate::kind::cluster);
    o.host = cluster_listen.first;
    o.port = cluster_listen.second;
    o.tls = cluster_tls;
    try {
      auto whom = gate::publish_of(*sys, agent);
      cluster_gate = std::make_unique<gate::listener>(
        *sys, std::move(o),
        [key = cluster_key, whom](const gate::nonce& n, const gate::mac& m) -> std::optional<gate::published> {
          if (gate::same(gate::sign(key, gate::kind::cluster, n), m))
            return whom;
          return std::nullopt;
        },
        &ctx->metrics.cluster_gate_refusals);
    } catch (const std::exception& e) {
      abandon_start();
      return usage_error("cluster.listen: cannot listen on " + cc.listen + ": " + e.what());
    }
    std::string shown = cluster_listen.first.find(':') != std::string::npos ? "[" + cluster_listen.first + "]"
                                                                              : cluster_listen.first;
    std::string address = shown + ":" + std::to_string(cluster_gate->port());
    bool joined = false;
    std::string why;
    {
      caf::scoped_actor self{*sys};
      self->request(agent, std::chrono::milliseconds(cc.join_timeout_ms * 2 + 1000), cluster::ready_atom::value, address)
        .receive([&](bool) { joined = true; }, [&](caf::error& err) { why = sys->render(err); });
    }
    if (!joined) {
      spdlog::critical("cluster: node {} cannot join {} through {}: {}", ctx->node_name, cc.name, cc.join, why);
      abandon_start();
      return 1;
    }
    spdlog::info("cluster: member {} of {} at {} ({})", ctx->node_name, cc.name, address,
                 cluster_tls ? "TLS" : "plaintext");
  }
  auto bridge = spawn_bridge(*sys, commander, global_store, census, ctx->hold_timeout(), ctx->request_timeout());
  auto log_node = [&](const char* what, const std::string& outcome, nlohmann::json numbers) {
    caf::anon_send(census, log_atom::value,
                   orchestration_entry{"node", "", what, "node", outcome, numbers.dump(), ""});
  };
  auto stop_actors = [&] {
    if (cluster_agent)
      caf::anon_send_exit(cluster_agent, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(bridge, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(census, caf::exit_reason::user_shutdown);
    for (auto& g : groups)
      caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
    cluster_gate.reset();  // their threads end before the actor system
    worker_gate.reset();
    caf::anon_send_exit(commander, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(global_store, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deposit, caf::exit_reason::user_shutdown);
    deposit = nullptr;  // a detached actor's thread waits for its last handle to go
    if (census_of_deposit.joinable())
      census_of_deposit.join();
  };

  // -- the front ------------------------------------------------------------------------
  auto http = std::make_unique<front>(ctx, bridge, forwarder, routes);
  if (tls)
    http->use_tls(tls);
  try {
    http->listen(listen.first, listen.second);
  } catch (const std::exception& e) {
    stop_actors();
    return usage_error("node.listen: cannot listen on " + recipe.node.listen + ": " + e.what());
  }
  if (!recipe.node.plain_listen.empty()) {
    try {
      http->listen_plain(plain_listen.first, plain_listen.second);
    } catch (const std::exception& e) {
      stop_actors();
      return usage_error("node.plain_listen: cannot listen on " + recipe.node.plain_listen + ": " + e.what());
    }
  }
  http->start(recipe.node.io_threads);
  auto shown = [](const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; };
  std::string shown_host = shown(listen.first);
  const char* scheme = tls ? "https" : "http";
  std::cout << "troupe node listening on " << scheme << "://" << shown_host << ":" << http->port();
  if (http->plain_port())  // the same one ready line: "... and http://HOST:PORT"
    std::cout << " and http://" << shown(plain_listen.first) << ":" << http->plain_port();
  std::cout << std::endl;
  if (tls) {
    auto id = tls->identity();
    spdlog::info("TLS: serving {} (serial {}){}; SIGHUP or POST /_troupe/tls/reload loads the pair again", id.subject,
                 id.serial, recipe.node.tls_client_ca.empty() ? "" : ", client certificates required");
  }
  if (!recipe.node.admin_token.empty())  // stdout carries the one ready line only
    spdlog::info("console on {}://{}:{}/_troupe/console", scheme, shown_host, http->port());
  log_node("start", "ok", {{"listen", shown_host + ":" + std::to_string(http->port())}, {"groups", recipe.groups.size()}});
  spdlog::info("node {} up: group {} hosts '{}' on {} worker(s); {} io thread(s), {} actor thread(s)",
               ctx->node_name, recipe.groups.front().name, recipe.groups.front().user_type,
               recipe.groups.front().workers, recipe.node.io_threads, recipe.node.actor_threads);

  int sig = 0;
  for (sigwait(&signals, &sig); sig == SIGHUP; sigwait(&signals, &sig)) {
    if (!http->tls_enabled()) {
      spdlog::info("SIGHUP: TLS is off, nothing to reload");
      continue;
    }
    http->reload_tls();  // logs and counts its outcome
  }

  // -- orderly stop ---------------------------------------------------------------------
  auto grace = std::chrono::milliseconds(static_cast<std::int64_t>(recipe.node.shutdown_grace_seconds * 1000));
  spdlog::info("{}: stopping; in-flight requests get {} ms", sig == SIGINT ? "SIGINT" : "SIGTERM", grace.count());
  // A watchdog: whatever hangs, the process leaves (non-zero, said out loud).
  // The drain gets the grace period; the soft quit (fsyncs) gets its own budget.
  auto watchdog_deadline = std::make_shared<std::atomic<std::int64_t>>(0);
  auto arm = [watchdog_deadline](std::chrono::milliseconds budget) {
    watchdog_deadline->store(std::chrono::duration_cast<std::chrono::milliseconds>(
                               (std::chrono::steady_clock::now() + budget).time_since_epoch())
                               .count());
  };
  arm(grace + std::chrono::seconds(15));
  std::thread([watchdog_deadline] {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count();
      if (now > watchdog_deadline->load()) {
        spdlog::critical("shutdown did not complete in time; exiting: users still live are not saved");
        spdlog::shutdown();
        std::_Exit(exit_lost);
      }
    }
  }).detach();
  http->begin_shutdown();
  if (!http->wait_drained(grace)) {
    // What the actors did not answer within the grace gets 503 + Retry-After
    // now (a client may retry elsewhere), rather than a cut connection.
    spdlog::warn("shutdown: requests still in flight after the grace period are answered 503");
    http->answer_in_flight_unavailable();
    if (!http->wait_drained(std::chrono::seconds(1)))
      spdlog::warn("shutdown: connections still open are cut");
  }
  http->stop();
  // The soft quit: every user freezes to the deposit; a restart on the same
  // deposit brings each back on his next request. It has node.shutdown_freeze_seconds:
  // the deposit actor retries refused writes for a third of it (at most 20 s,
  // below the users' 30 s deposit timeout), then parks them in the fallback
  // deposit; users who cannot freeze within 90% of it are named as not saved.
  auto budget = std::chrono::milliseconds(static_cast<std::int64_t>(recipe.node.shutdown_freeze_seconds * 1000));
  arm(budget + std::chrono::seconds(10));
  auto retry_ms = std::min<std::int64_t>(budget.count() / 3, 20000);
  auto fallback_dir = fallback_directory(recipe);
  std::vector<std::string> not_saved;
  std::uint64_t frozen = 0;
  std::uint64_t rescued = 0;
  std::string rescue_dir;
  auto t0 = std::chrono::steady_clock::now();
  {
    caf::scoped_actor self{*sys};
    self->request(deposit, std::chrono::seconds(5), quit_atom::value, retry_ms, fallback_dir)
      .receive([](bool) {},
               [&](caf::error& err) { spdlog::error("soft quit: the deposit did not answer: {}", sys->render(err)); });
    self->request(commander, budget + std::chrono::seconds(1), quit_atom::value, ctx->node_name)
      .receive(
        [&](std::uint64_t n, std::vector<std::string>& failed) {
          frozen = n;
          not_saved = std::move(failed);
        },
        [&](caf::error& err) {
          spdlog::error("soft quit: the commander did not answer: {}", sys->render(err));
          not_saved.push_back("every live user");
        });
    self->request(deposit, std::chrono::seconds(5), quit_atom::value)
      .receive(
        [&](std::uint64_t parked, std::string& dir, std::vector<std::string>& lost) {
          rescued = parked;
          rescue_dir = std::move(dir);
          for (auto& l : lost)  // the users among them are named by the commander already
            if (std::find(not_saved.begin(), not_saved.end(), l) == not_saved.end())
              not_saved.push_back(std::move(l));
        },
        [&](caf::error& err) {
          spdlog::error("soft quit: the deposit did not report: {}", sys->render(err));
          not_saved.push_back("unknown (the deposit did not report)");
        });
  }
  // The deposit may have lost its cookie secret (removed and healed): without
  // it every session would end at the next start.
  if (!deposit_secret.empty()) {
    try {
      if (registry::store_secret_if_absent(secret_origin, deposit_secret))
        spdlog::warn("soft quit: the deposit had lost {}; written back", secret_origin);
    } catch (const std::exception& e) {
      spdlog::error("soft quit: {} is missing and cannot be written back: {}", secret_origin, e.what());
    }
    OPENSSL_cleanse(deposit_secret.data(), deposit_secret.size());
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  int exit_code = 0;
  nlohmann::json numbers{{"frozen", frozen}, {"ms", ms}};
  if (rescued) {
    spdlog::error("soft quit: {} parcel(s) the deposit refused are in the fallback deposit {}: copy its users/ and "
                  "connections/ into {} (or start a node on it) before they are needed",
                  rescued, rescue_dir, recipe.deposit.path);
    numbers["fallback_parcels"] = rescued;
    numbers["fallback_path"] = rescue_dir;
    exit_code = exit_in_fallback;
  }
  if (!not_saved.empty()) {
    spdlog::error("soft quit: NOT SAVED ({}): {}", not_saved.size(), joined(not_saved));
    numbers["not_saved"] = not_saved;
    exit_code = exit_lost;
  }
  if (exit_code == 0)
    spdlog::info("soft quit: {} user(s) frozen in {} ms", frozen, ms);
  log_node("quit", exit_code == 0 ? "ok" : exit_code == exit_in_fallback ? "fallback" : "failed", numbers);
  arm(std::chrono::seconds(15));
  stop_actors();
  sys.reset();   // waits for every actor: none is left behind
  http.reset();  // after the actors: pending replies post into its (stopped) io_context
  spdlog::info("stopped (exit code {})", exit_code);
  spdlog::shutdown();
  return exit_code;
}

}  // namespace

int node_main(int argc, char** argv, app_types types) {
  CLI::App app{"troupe: an actor-model service platform", "troupe"};
  app.set_version_flag("--version", "troupe " TROUPE_VERSION);
  // `troupe` alone is a question, not a mistake: the usage on stdout, exit 0.
  app.require_subcommand(0, 1);
  node_flags flags;
  auto* node = app.add_subcommand("node", "run a node serving user actors over HTTP");
  node->add_option("--listen", flags.listen, "HOST:PORT to listen on (node.listen)");
  node->add_option("--deposit", flags.deposit, "directory of the deposit (deposit.path)");
  node->add_option("--admin-token", flags.admin_token, "token of the admin surface (node.admin_token)");
  node->add_option("--config", flags.config_file, "TOML recipe")->check(CLI::ExistingFile);
  node->add_option("--set", flags.sets, "KEY=VALUE, overrides any recipe key (repeatable)");
  node->add_option("--app", flags.app, "user actor type of the default group (group.default.user_type)");
  node->add_option("--join", flags.join, "HOST:PORT of any member of the cluster to join (cluster.join)");
  worker_process_flags wflags;
  auto* worker = app.add_subcommand("worker", "a worker process of a node (started by the node itself; "
                                              "docs/SUPERVISION.md \"Workers as processes\")");
  worker->add_option("--parent", wflags.parent, "127.0.0.1:PORT of the node's worker gate")->required();
  worker->add_option("--parent-pid", wflags.parent_pid, "the node's pid")->required();
  worker->add_option("--worker", wflags.worker, "its worker's name");
  worker->add_option("--bootstrap-fd", wflags.bootstrap_fd,
                     "the inherited descriptor its node wrote its recipe, cookie secret and gate token to");
  census_flags cflags;
  auto* census = app.add_subcommand("census", "show a node's census (docs/census.md)");
  add_census_options(*census, cflags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);  // "troupe 0.2.0" on stdout, exit 0
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  if (node->parsed())
    return run_node(flags, types);
  if (census->parsed())
    return run_census(cflags);
  if (worker->parsed())
    return run_worker_process(wflags, types);
  std::cout << app.help();
  return 0;
}

}  // namespace troupe
