#include "transport/node_runtime_impl.hpp"

namespace troupe {

namespace {

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

}  // namespace

node_runtime::impl::~impl() {
  stop_parts();
  if (front_)  // its channel hub is an actor: told to leave before the actor system waits for it
    front_->stop();
  sys_.reset();    // waits for every actor: none is left behind
  front_.reset();  // after the actors: pending replies post into its (stopped) io_context
}

int node_runtime::impl::stop(const char* why) {
  auto& recipe = ctx_->recipe();
  auto grace = config::to_millis(recipe.node.shutdown_grace_seconds);
  // The drain gets the grace period; the soft quit (fsyncs) gets its own budget.
  watchdog_.arm(grace + std::chrono::seconds(15));
  drain_front(why, grace);
  auto budget = config::to_millis(recipe.node.shutdown_freeze_seconds);
  watchdog_.arm(budget + std::chrono::seconds(10));
  auto report = soft_quit(budget);
  write_back_secret();
  int exit_code = report_quit(report);
  watchdog_.arm(std::chrono::seconds(15));
  stop_parts();
  sys_.reset();    // waits for every actor: none is left behind
  front_.reset();  // after the actors: pending replies post into its (stopped) io_context
  return exit_code;
}

void node_runtime::impl::drain_front(const char* why, std::chrono::milliseconds grace) {
  front_->begin_shutdown();
  spdlog::info("{}: stopping; in-flight requests get {} ms", why, grace.count());
  if (!front_->wait_drained(grace)) {
    spdlog::warn("shutdown: requests still in flight after the grace period are answered 503");
    front_->answer_in_flight_unavailable();
    if (!front_->wait_drained(std::chrono::seconds(1)))
      spdlog::warn("shutdown: connections still open are cut");
  }
  front_->stop();
}

quit_report node_runtime::impl::soft_quit(std::chrono::milliseconds budget) {
  quit_report r;
  auto retry_ms = std::min<std::int64_t>(budget.count() / 3, 20000);
  auto fallback_dir = fallback_directory(ctx_->recipe());
  auto t0 = std::chrono::steady_clock::now();
  {
    caf::scoped_actor self{*sys_};
    self->request(deposit_, std::chrono::seconds(5), quit_atom::value, retry_ms, fallback_dir)
      .receive([](bool) {},
               [&](caf::error& err) { spdlog::error("soft quit: the deposit did not answer: {}", sys_->render(err)); });
    self->request(commander_, budget + std::chrono::seconds(1), quit_atom::value, ctx_->node_name)
      .receive(
        [&](std::uint64_t n, std::vector<std::string>& failed) {
          r.frozen = n;
          r.not_saved = std::move(failed);
        },
        [&](caf::error& err) {
          spdlog::error("soft quit: the commander did not answer: {}", sys_->render(err));
          r.not_saved.push_back("every live user");
        });
    self->request(deposit_, std::chrono::seconds(5), quit_atom::value)
      .receive(
        [&](std::uint64_t parked, std::string& dir, std::vector<std::string>& lost) {
          r.rescued = parked;
          r.rescue_dir = std::move(dir);
          for (auto& l : lost)  // the users among them are named by the commander already
            if (std::find(r.not_saved.begin(), r.not_saved.end(), l) == r.not_saved.end())
              r.not_saved.push_back(std::move(l));
        },
        [&](caf::error& err) {
          spdlog::error("soft quit: the deposit did not report: {}", sys_->render(err));
          r.not_saved.push_back("unknown (the deposit did not report)");
        });
  }
  r.ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void node_runtime::impl::write_back_secret() {
  if (deposit_secret_.empty())
    return;
  try {
    if (registry::store_secret_if_absent(secret_origin_, deposit_secret_))
      spdlog::warn("soft quit: the deposit had lost {}; written back", secret_origin_);
  } catch (const std::exception& e) {
    spdlog::error("soft quit: {} is missing and cannot be written back: {}", secret_origin_, e.what());
  }
  OPENSSL_cleanse(deposit_secret_.data(), deposit_secret_.size());
}

int node_runtime::impl::report_quit(const quit_report& r) {
  int exit_code = node_exit::ok;
  nlohmann::json numbers{{"frozen", r.frozen}, {"ms", r.ms}};
  if (r.rescued) {
    spdlog::error("soft quit: {} parcel(s) the deposit refused are in the fallback deposit {}: copy its users/ and "
                  "connections/ into {} (or start a node on it) before they are needed",
                  r.rescued, r.rescue_dir, ctx_->deposit().path);
    numbers["fallback_parcels"] = r.rescued;
    numbers["fallback_path"] = r.rescue_dir;
    exit_code = node_exit::in_fallback;
  }
  if (!r.not_saved.empty()) {
    spdlog::error("soft quit: NOT SAVED ({}): {}", r.not_saved.size(), joined(r.not_saved));
    numbers["not_saved"] = r.not_saved;
    exit_code = node_exit::lost;
  }
  if (exit_code == node_exit::ok)
    spdlog::info("soft quit: {} user(s) frozen in {} ms", r.frozen, r.ms);
  record("quit",
         exit_code == node_exit::ok ? "ok" : exit_code == node_exit::in_fallback ? "fallback" : "failed", numbers);
  return exit_code;
}

void node_runtime::impl::stop_parts() {
  auto leave = [](const auto& handle) {
    if (handle)
      caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  };
  leave(bridge_);                                   // 14
  leave(orchestrator_);
  cluster_gate_.reset();                            // 13: its thread ends before the actor system
  leave(cluster_agent_);
  for (auto& g : groups_)                           // 12
    leave(g);
  worker_gate_.reset();                             // 11
  leave(commander_);                                // 10
  leave(global_store_);
  leave(forwarder_);                                // 9
  leave(census_);
  leave(health_);
  leave(deposit_);
  // Handles let go: a detached actor's thread waits for its last handle to
  // go, and none is used once the actor system is gone.
  bridge_ = nullptr;
  orchestrator_ = nullptr;
  cluster_agent_ = nullptr;
  groups_.clear();
  commander_ = nullptr;
  global_store_ = nullptr;
  forwarder_ = nullptr;
  census_ = nullptr;
  health_ = nullptr;
  deposit_ = nullptr;
  if (census_of_deposit_.joinable())
    census_of_deposit_.join();
}

}  // namespace troupe
