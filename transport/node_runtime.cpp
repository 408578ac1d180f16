#include "transport/node_runtime_impl.hpp"

#include "actors/worker_pipes.hpp"

namespace troupe {

int usage_error(const std::string& text) {
  std::string line = text;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::cerr << "troupe: " << line << std::endl;
  return node_exit::usage;
}

namespace {

// The generated cookie secret, in the deposit directory.
constexpr std::string_view cookie_secret_file = "cookie.secret";
// Its name in a deposit that keeps secrets itself (PostgreSQL).
constexpr std::string_view cookie_secret_name = "cookie";
// A configured secret shorter than this could be guessed from one minted id.
constexpr std::size_t min_cookie_secret_bytes = 16;

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0')
    return "node";
  return buf;
}

// An IPv6 host in brackets, for an address shown with its port.
std::string shown(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}


}  // namespace

node_runtime::impl::impl(config::recipe recipe, const config::recipe_sources& sources, app_types types)
  : ctx_(std::make_shared<node_context>()), types_(std::move(types)) {
  ctx_->recipe() = std::move(recipe);
  // A worker process composes the same recipe from its bootstrap (never from its command line).
  ctx_->worker_boot.config_file = sources.file;
  ctx_->worker_boot.config_text = sources.file_text.value_or("");
  ctx_->worker_boot.env = sources.env;
  ctx_->worker_boot.sets = sources.sets;
  ctx_->worker_boot.profile = sources.profile;
  sources_ = sources;
}

int node_runtime::impl::start() {
  for (auto step : {&impl::parse_addresses, &impl::load_tls, &impl::open_orchestration_log, &impl::open_deposit,
                    &impl::load_cookie_secret, &impl::describe_node, &impl::restore_global_store,
                    &impl::start_actor_system, &impl::spawn_services, &impl::spawn_commander,
                    &impl::open_worker_gate, &impl::start_groups, &impl::spawn_orchestrator, &impl::join_cluster, &impl::spawn_bridge,
                    &impl::open_front})
    if (int code = (this->*step)()) {
      stop_parts();
      return code;
    }
  announce();
  return 0;
}

void node_runtime::impl::reload_tls() {
  if (!front_->tls_enabled()) {
    spdlog::info("SIGHUP: TLS is off, nothing to reload");
    return;
  }
  front_->reload_tls();  // logs and counts its outcome
}

void node_runtime::impl::reload_profile() {
  orchestration_request q;
  q.what = "reload";
  q.who = "SIGHUP";
  caf::scoped_actor self{*sys_};  // the signal thread, never an asio or actor thread: it may wait
  self->request(orchestrator_, ctx_->request_timeout(), orchestrate_atom::value, std::move(q))
    .receive(
      [](orchestration_answer& a) {
        auto body = nlohmann::json::parse(a.body, nullptr, false);
        if (a.status == 200)
          spdlog::info("SIGHUP: profile reloaded: {}, generation {}", body.value("outcome", "?"),
                       body.value("generation", std::uint64_t{0}));
        else
          spdlog::info("SIGHUP: profile not reloaded ({}): {}", a.status, body.value("error", a.body));
      },
      [this](caf::error& err) { spdlog::warn("SIGHUP: the orchestrator did not answer: {}", sys_->render(err)); });
}

int node_runtime::impl::parse_addresses() {
  auto& recipe = ctx_->recipe();
  try {
    listen_ = config::split_listen(recipe.node.listen);
    if (!recipe.node.plain_listen.empty())
      plain_listen_ = config::split_listen(recipe.node.plain_listen, "node.plain_listen");
  } catch (const config::recipe_error& e) {
    return usage_error(e.what());
  }
  return 0;
}

int node_runtime::impl::load_tls() {
  auto& node = ctx_->node();
  if (node.tls_cert.empty())
    return 0;
  tls_paths paths{node.tls_cert, node.tls_key, node.tls_client_ca};
  auto loaded = troupe::load_tls(paths);
  if (loaded.index() == 1)
    return usage_error(std::get<1>(loaded));
  tls_ = std::make_shared<tls_credentials>(std::move(paths), std::move(std::get<0>(loaded)));
  return 0;
}

int node_runtime::impl::open_orchestration_log() {
  auto& recipe = ctx_->recipe();
  if (recipe.deposit.backend != "filesystem") {  // deposit.path holds the node's own files only
    std::error_code ec;
    if (std::filesystem::create_directories(recipe.deposit.path, ec))
      std::filesystem::permissions(recipe.deposit.path, std::filesystem::perms::owner_all, ec);
  }
  try {
    auto& c = recipe.commander;
    operations_ = std::make_shared<orchestration_log>(
      c.orchestration_log.empty() ? recipe.deposit.path + "/orchestration.log" : c.orchestration_log,
      c.orchestration_log_max_bytes, c.orchestration_log_files);
  } catch (const std::exception& e) {
    return usage_error("commander.orchestration_log: " + std::string(e.what()));
  }
  return 0;
}

int node_runtime::impl::open_deposit() {
  auto& deposit = ctx_->deposit();
  if (deposit.backend == "postgres") {
    try {
      store::postgres_options o;
      o.url = deposit.url;
      o.schema = deposit.schema;
      deposit_store_ = store::make_postgres_deposit(o);
    } catch (const std::exception& e) {  // the text never holds the password (redact_postgres_url)
      return usage_error("deposit: cannot use the PostgreSQL deposit at " +
                         (deposit.url.empty() ? std::string("the PG* variables' database")
                                              : store::redact_postgres_url(deposit.url)) +
                         ": " + e.what());
    }
    spdlog::info("deposit: PostgreSQL {} schema {}",
                 deposit.url.empty() ? std::string("(PG* variables)") : store::redact_postgres_url(deposit.url),
                 deposit.schema);
    return 0;
  }
  try {
    deposit_store_ = store::make_filesystem_deposit(deposit.path);
  } catch (const std::exception& e) {
    return usage_error("deposit.path: cannot use \"" + deposit.path + "\": " + e.what());
  }
  return 0;
}

int node_runtime::impl::load_cookie_secret() {
  auto& recipe = ctx_->recipe();
  any_process_group_ =
    std::any_of(recipe.groups.begin(), recipe.groups.end(), [](auto& g) { return g.process_isolation(); });
  secret_origin_ = "node.cookie_secret";
  try {
    std::string secret = recipe.node.cookie_secret;
    const auto secret_file = recipe.deposit.path + "/" + std::string(cookie_secret_file);
    if (secret.empty() && recipe.deposit.backend == "postgres") {
      // A file an earlier troupe generated on this host seeds the database
      // (its sessions go on); else a fresh one. The first member's stands.
      auto candidate = registry::read_secret(secret_file).value_or(registry::generate_secret());
      secret = deposit_store_->load_or_create_secret(std::string(cookie_secret_name), candidate).value();
      OPENSSL_cleanse(candidate.data(), candidate.size());
      secret_origin_ = "the PostgreSQL deposit (" + recipe.deposit.schema + ".secrets)";
    } else if (secret.empty()) {
      secret_origin_ = secret_file;
      secret = registry::load_or_create_secret(secret_origin_);
      deposit_secret_ = secret;
    } else if (secret.size() < min_cookie_secret_bytes)
      return usage_error("node.cookie_secret: must be empty (generated into the deposit) or at least "
                         + std::to_string(min_cookie_secret_bytes) + " bytes long");
    ctx_->cids = std::make_shared<const registry::cid_signer>(secret);
    if (any_process_group_)  // its worker processes sign as it does (their bootstrap carries it)
      ctx_->worker_boot.cookie_secret = secret;
    if (recipe.cluster.enabled())  // what every member's gate asks of the others
      cluster_key_ = gate::cluster_key(secret);
    OPENSSL_cleanse(secret.data(), secret.size());
  } catch (const std::exception& e) {
    return usage_error("node.cookie_secret: " + std::string(e.what()));
  }
  return 0;
}

int node_runtime::impl::describe_node() {
  auto& recipe = ctx_->recipe();
  ctx_->metrics.deposit = &deposit_store_->counters();
  for (auto& g : recipe.groups)
    ctx_->metrics.add_group(g.name);
  ctx_->health.deposit_last_success_unix_ms.store(unix_now_ms());  // it was just created and probed
  ctx_->apps = types_;
  // Per-route figures for every route of the types the groups serve: a finite
  // set made here, read without a lock by the front afterwards.
  for (auto& g : recipe.groups)
    if (auto* routes = types_.routes(g.user_type)) {
      std::size_t index = 0;  // for_each_route goes in declaration order: the routes' numbers
      routes->for_each_route([&](const std::string& method, const std::string& pattern) {
        ctx_->metrics.add_route(g.user_type, method, pattern, routes->guarded(index++));
      });
    }
  ctx_->metrics.history = registry::rate_history(recipe.node.history_seconds);
  ctx_->node_name = recipe.node.name.empty() ? host_name() : recipe.node.name;
  if (recipe.cluster.enabled() && recipe.node.name.empty()) {
    // Members must have distinct names, and several may share a host.
    auto port = config::split_listen(recipe.cluster.listen, "cluster.listen").second;
    ctx_->node_name += "-" + (port ? std::to_string(port) : registry::redact(ctx_->cids->mint()).substr(0, 6));
  }
  spdlog::info("connection ids are signed with the secret of {}", secret_origin_);
  return 0;
}

int node_runtime::impl::restore_global_store() {
  try {
    if (auto p = deposit_store_->get_user(global_snapshot_key))
      store::unpack(p->payload, global_);
  } catch (const std::exception& e) {
    spdlog::critical("the global store's snapshot cannot be read: {}", e.what());
    return node_exit::lost;
  }
  return 0;
}

int node_runtime::impl::start_actor_system() {
  auto& recipe = ctx_->recipe();
  register_types(cfg_);
  cluster::register_types(cfg_);
  // CAF's middleman, so that actors of other nodes can exist here (their
  // requests go through the forwarder). It listens on nothing by itself: a
  // port opens only when the cluster publishes one ([cluster], issue 11).
  // Automatic connections would open a wildcard plain-TCP listener: never.
  cfg_.load<caf::io::middleman>();
  cfg_.set("middleman.enable-automatic-connections", false);
  // Node-to-node TLS (all three files, checked by the recipe): mutual, with
  // certificates chained to cluster.tls_ca. Without them CAF's openssl module
  // is not loaded at all, so it can never fall back to anonymous TLS.
  cluster_tls_ = recipe.cluster.enabled() && !recipe.cluster.tls_cert.empty();
  if (cluster_tls_) {
    for (auto [key, file] : {std::pair{"cluster.tls_cert", recipe.cluster.tls_cert},
                             std::pair{"cluster.tls_key", recipe.cluster.tls_key},
                             std::pair{"cluster.tls_ca", recipe.cluster.tls_ca}})
      if (::access(file.c_str(), R_OK) != 0)
        return usage_error(std::string(key) + ": cannot read \"" + file + "\": " + std::strerror(errno));
    cfg_.load<caf::openssl::manager>();
    cfg_.openssl_certificate = recipe.cluster.tls_cert;
    cfg_.openssl_key = recipe.cluster.tls_key;
    cfg_.openssl_cafile = recipe.cluster.tls_ca;
  }
  cfg_.set("scheduler.max-threads", recipe.node.actor_threads);
  cfg_.set("scheduler.policy", caf::atom_from_string(recipe.node.actor_scheduler));
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  return 0;
}

int node_runtime::impl::spawn_services() {
  auto& recipe = ctx_->recipe();
  auto& sys = *sys_;
  // A wake's read waits out a short database outage, answered before the user's own request gives up.
  deposit_ = spawn_deposit(sys, deposit_store_, &ctx_->health,
                           std::chrono::duration_cast<caf::timespan>(
                             std::chrono::duration<double>(recipe.limits.hold_seconds * 0.8)));
  health_ = spawn_health(sys, ctx_, deposit_);
  census_ = spawn_census(sys, ctx_, operations_);
  // Users on other nodes are served through the forwarder; a node declared
  // down leaves the routing cache with its in-flight requests.
  routes_ = std::make_shared<route_cache>();
  forwarder_ = spawn_forwarder(sys, ctx_, [weak = std::weak_ptr<route_cache>(routes_)](const caf::node_id& node) {
    if (auto r = weak.lock())
      r->forget_node(node);
  });
  ctx_->census = census_;
  // How many users the deposit holds, and who they are (the census lists them
  // as frozen): counted beside the start, never before it.
  census_of_deposit_ = std::thread([store = deposit_store_, ctx = ctx_, census = census_] {
    constexpr std::size_t batch_size = 4096;
    std::vector<std::string> batch;
    std::int64_t found = 0;
    try {
      store->for_each_user([&](const std::string& name) {
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
  return 0;
}

int node_runtime::impl::spawn_commander() {
  auto& recipe = ctx_->recipe();
  if (!recipe.cluster.enabled()) {
    global_store_ = spawn_global_store(*sys_, ctx_, deposit_, global_store_start{std::move(global_), false});
    commander_ = troupe::spawn_commander(*sys_, ctx_, deposit_, global_store_);
    return 0;
  }
  auto hold = config::to_millis(recipe.limits.hold_seconds);
  // Longer than any asker waits: a soft quit's freeze budget, a request's timeout.
  auto longest = config::to_millis(recipe.node.shutdown_freeze_seconds + recipe.limits.request_timeout_seconds
                            + recipe.limits.hold_seconds);
  auto link = cluster::spawn_commander_link(*sys_, ctx_->node_name, hold, recipe.limits.max_inflight, longest);
  commander_ = caf::actor_cast<commander_handle>(link);
  global_store_ = caf::actor_cast<global_store_handle>(
    cluster::spawn_global_store_link(*sys_, ctx_->node_name, hold, recipe.limits.max_inflight, longest));
  serving_ = std::make_shared<serving_signal>();
  ctx_->serving = serving_;
  return 0;
}

gate::listener_options node_runtime::impl::gate_options(std::string name, gate::kind which) const {
  gate::listener_options o;
  o.name = std::move(name);
  o.which = which;
  o.max_pending = ctx_->limits().gate_max_pending;
  o.handshake_timeout = node_context::timer_millis(ctx_->limits().gate_handshake_timeout_seconds);
  return o;
}

int node_runtime::impl::open_worker_gate() {
  if (!any_process_group_)
    return 0;
  auto tokens = std::make_shared<gate::token_table>();
  auto o = gate_options("worker gate", gate::kind::worker);
  o.host = "127.0.0.1";
  try {
    worker_gate_ = std::make_unique<gate::listener>(
      *sys_, std::move(o), [tokens](const gate::nonce& n, const gate::mac& m) { return tokens->take(n, m); },
      &ctx_->metrics.worker_gate_refusals);
  } catch (const std::exception& e) {
    spdlog::critical("the worker gate cannot listen on 127.0.0.1: {}", e.what());
    return node_exit::lost;
  }
  ctx_->worker_tokens = std::move(tokens);
  ctx_->worker_gate_port = worker_gate_->port();
  if (ctx_->node().worker_pipes)
    ctx_->worker_pipes = std::make_shared<worker_pipe_directory>();
  spdlog::info("worker gate on 127.0.0.1:{}", ctx_->worker_gate_port);
  return 0;
}

int node_runtime::impl::start_groups() {
  caf::scoped_actor self{*sys_};  // start-up only: never on an asio thread
  for (auto& g : ctx_->recipe().groups) {
    auto group = spawn_group(*sys_, ctx_, g, commander_, global_store_, deposit_);
    groups_.push_back(group);
    bool ok = false;
    self->request(group, std::chrono::seconds(10), workers_atom::value)
      .receive(
        [&](std::vector<worker_handle>& workers) {
          // As the group: the commander learns the group that grows and retires these workers.
          caf::send_as(group, commander_, workers_atom::value, g.name, ctx_->node_name, std::move(workers));
          ok = true;
        },
        [&](caf::error& err) { spdlog::critical("group {} did not start: {}", g.name, sys_->render(err)); });
    if (!ok)
      return node_exit::lost;
  }
  return 0;
}

int node_runtime::impl::join_cluster() {
  auto& recipe = ctx_->recipe();
  if (!recipe.cluster.enabled())
    return 0;
  auto& cc = recipe.cluster;
  auto cluster_listen = config::split_listen(cc.listen, "cluster.listen");
  cluster::agent_config ac;
  ac.cluster_name = cc.name;
  ac.join = cc.join;
  ac.heartbeat_interval = std::chrono::milliseconds(cc.heartbeat_interval_ms);
  ac.failure_timeout = std::chrono::milliseconds(cc.failure_timeout_ms);
  ac.join_timeout = std::chrono::milliseconds(cc.join_timeout_ms);
  ac.connector = gate::spawn_connector(*sys_, gate::dial_settings{gate::kind::cluster, cluster_key_, cluster_tls_,
                                                                  std::chrono::milliseconds(cc.join_timeout_ms)});
  ac.leader_listeners = {caf::actor_cast<caf::actor>(commander_), caf::actor_cast<caf::actor>(global_store_)};
  ac.down_listeners = {forwarder_};
  for (auto& g : groups_)
    ac.fence_listeners.push_back(g);
  ac.serving = serving_;
  ac.orchestrator = orchestrator_;
  ac.census = census_;
  ac.metrics = &ctx_->metrics;
  ac.start_commander = [sys = sys_.get(), ctx = ctx_, deposit = deposit_](std::vector<std::string> members) {
    // A takeover: the new global store reads the snapshot the last one wrote.
    auto store = spawn_global_store(*sys, ctx, deposit, global_store_start{{}, true});
    auto commander = troupe::spawn_commander(*sys, ctx, deposit, store,
                                             commander_start{std::move(members)});
    return cluster::leader_actors{caf::actor_cast<caf::actor>(commander), caf::actor_cast<caf::actor>(store)};
  };
  ac.self = cluster::member_record{ctx_->node_name, cluster::new_incarnation(), "", 0};
  auto agent = cluster::spawn_agent(*sys_, std::move(ac));
  cluster_agent_ = agent;
  caf::anon_send(census_, agent_atom::value, cluster_view_handle{agent});  // its census answers for the cluster from now on
  // The members reach the agent through the cluster port's gate: only a
  // connection that holds the cluster's key gets to CAF (in TLS when set).
  auto o = gate_options("cluster gate", gate::kind::cluster);
  o.host = cluster_listen.first;
  o.port = cluster_listen.second;
  o.tls = cluster_tls_;
  try {
    auto whom = gate::publish_of(*sys_, agent);
    cluster_gate_ = std::make_unique<gate::listener>(
      *sys_, std::move(o),
      [key = cluster_key_, whom](const gate::nonce& n, const gate::mac& m) -> std::optional<gate::published> {
        if (gate::same(gate::sign(key, gate::kind::cluster, n), m))
          return whom;
        return std::nullopt;
      },
      &ctx_->metrics.cluster_gate_refusals);
  } catch (const std::exception& e) {
    return usage_error("cluster.listen: cannot listen on " + cc.listen + ": " + e.what());
  }
  std::string address = shown(cluster_listen.first) + ":" + std::to_string(cluster_gate_->port());
  bool joined = false;
  std::string why;
  {
    caf::scoped_actor self{*sys_};
    self->request(agent, std::chrono::milliseconds(cc.join_timeout_ms * 2 + 1000), cluster::ready_atom::value,
                  address)
      .receive([&](bool) { joined = true; }, [&](caf::error& err) { why = sys_->render(err); });
  }
  if (!joined) {
    spdlog::critical("cluster: node {} cannot join {} through {}: {}", ctx_->node_name, cc.name, cc.join, why);
    return node_exit::lost;
  }
  spdlog::info("cluster: member {} of {} at {} ({})", ctx_->node_name, cc.name, address,
               cluster_tls_ ? "TLS" : "plaintext");
  return 0;
}

int node_runtime::impl::spawn_orchestrator() {
  orchestrator_ = troupe::spawn_orchestrator(*sys_, ctx_, sources_, groups_, census_, deposit_);
  return 0;
}

int node_runtime::impl::spawn_bridge() {
  bridge_ = troupe::spawn_bridge(*sys_, commander_, global_store_, census_, orchestrator_, ctx_->hold_timeout(),
                                 ctx_->request_timeout());
  return 0;
}

int node_runtime::impl::open_front() {
  auto& node = ctx_->node();
  try {
    front_ = std::make_unique<front>(ctx_, bridge_, forwarder_, routes_);
  } catch (const std::runtime_error& e) {  // a [[static]] root that is no directory
    return usage_error(e.what());
  }
  if (tls_)
    front_->use_tls(tls_);
  try {
    front_->listen(listen_.first, listen_.second);
  } catch (const std::exception& e) {
    return usage_error("node.listen: cannot listen on " + node.listen + ": " + e.what());
  }
  if (!node.plain_listen.empty()) {
    try {
      front_->listen_plain(plain_listen_.first, plain_listen_.second);
    } catch (const std::exception& e) {
      return usage_error("node.plain_listen: cannot listen on " + node.plain_listen + ": " + e.what());
    }
  }
  front_->start(node.io_threads);
  return 0;
}

void node_runtime::impl::announce() {
  auto& recipe = ctx_->recipe();
  std::string shown_host = shown(listen_.first);
  const char* scheme = tls_ ? "https" : "http";
  std::cout << "troupe node listening on " << scheme << "://" << shown_host << ":" << front_->port();
  if (front_->plain_port())  // the same one ready line: "... and http://HOST:PORT"
    std::cout << " and http://" << shown(plain_listen_.first) << ":" << front_->plain_port();
  std::cout << std::endl;
  if (tls_) {
    auto id = tls_->identity();
    spdlog::info("TLS: serving {} (serial {}){}; SIGHUP or POST /_troupe/tls/reload loads the pair again",
                 id.subject, id.serial, recipe.node.tls_client_ca.empty() ? "" : ", client certificates required");
  }
  if (!recipe.node.admin_token.empty())  // stdout carries the one ready line only
    spdlog::info("console on {}://{}:{}/_troupe/console", scheme, shown_host, front_->port());
  record("start", "ok",
         {{"listen", shown_host + ":" + std::to_string(front_->port())}, {"groups", recipe.groups.size()}});
  spdlog::info("node {} up: group {} hosts '{}' on {} worker(s); {} io thread(s), {} actor thread(s)",
               ctx_->node_name, recipe.groups.front().name, recipe.groups.front().user_type,
               recipe.groups.front().workers, recipe.node.io_threads, recipe.node.actor_threads);
}

void node_runtime::impl::record(const char* what, const std::string& outcome, const nlohmann::json& numbers) {
  caf::anon_send(census_, log_atom::value, orchestration_entry{"node", "", what, "node", outcome, numbers.dump(), ""});
}

node_runtime::node_runtime(config::recipe recipe, const config::recipe_sources& sources, app_types types)
  : impl_(std::make_unique<impl>(std::move(recipe), sources, std::move(types))) {}

node_runtime::~node_runtime() = default;

int node_runtime::start() {
  return impl_->start();
}

void node_runtime::reload_tls() {
  impl_->reload_tls();
}

void node_runtime::reload_profile() {
  impl_->reload_profile();
}

int node_runtime::stop(const char* why) {
  return impl_->stop(why);
}

}  // namespace troupe

