#include "transport/node_main.hpp"

#include <troupe/version.hpp>
#include "actors/log_format.hpp"
#include "actors/worker_process.hpp"
#include "config/profile.hpp"
#include "config/recipe.hpp"
#include "config/recipe_reference.hpp"
#include "transport/census_cli.hpp"
#include "transport/node_runtime.hpp"
#include "transport/worker_pipe_server.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <pthread.h>

namespace troupe {

namespace {

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

// Flags are --set entries that come before the user's own --set arguments;
// --app NAME (the default group's user type) comes right before them too.
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
  if (!f.app.empty())
    src.sets.push_back("group.default.user_type=" + f.app);
  for (auto& s : f.sets)
    src.sets.push_back(s);
  return src;
}

// `troupe node`: the recipe, the logs, then the node's runtime
// (transport/node_runtime.hpp) started, run until SIGTERM or SIGINT (SIGHUP
// reloads the TLS pair and the active profile), and stopped.
int run_node(const node_flags& flags, const app_types& types) {
  // Signals are taken by this thread alone (sigwait below): block them before
  // any other thread exists (the orchestration log's writer is one) so every
  // thread inherits the mask; else a SIGINT can land on another thread and kill
  // the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reloads the TLS pair (docs/tls.md) and the active profile (docs/config.md)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto src = sources_of(flags);
  config::recipe recipe;
  try {
    if (!src.file.empty())  // read once: a running node recomposes from the recipe it started with
      src.file_text = config::read_recipe_file(src.file);
    recipe = config::load_recipe(src);
    // The profile named at the start, composed between the recipe and the environment.
    if (auto& o = recipe.orchestration; !o.profile_name.empty()) {
      src.profile = config::read_profile(o.profiles_path, o.profile_name);
      auto problems = config::compose_recipe(src, recipe);
      if (!problems.empty())
        return usage_error(std::string(problems.front().what()) + " (profile \"" + o.profile_name + "\" of " +
                           o.profiles_path +
                           (problems.size() > 1 ? "; and " + std::to_string(problems.size() - 1) + " more)" : ")"));
    }
  } catch (const config::recipe_error& e) {
    return usage_error(e.what());
  }
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

  node_runtime node{std::move(recipe), src, types};
  if (int code = node.start())
    return code;
  int sig = 0;
  for (sigwait(&signals, &sig); sig == SIGHUP; sigwait(&signals, &sig)) {
    node.reload_tls();
    node.reload_profile();
  }
  int exit_code = node.stop(sig == SIGINT ? "SIGINT" : "SIGTERM");
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
  auto* reference = app.add_subcommand("config-reference",
                                       "print every recipe key's type, default, range and whether it is hot, "
                                       "from the schema (docs/config.md \"Reference\")");
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
  if (reference->parsed()) {
    std::cout << config::reference_markdown();
    return 0;
  }
  if (worker->parsed())
    return run_worker_process(wflags, types, [](caf::actor_system& sys, node_context_ptr ctx, std::vector<int> fds) {
      return std::make_shared<worker_pipe_server>(sys, std::move(ctx), std::move(fds));
    });
  std::cout << app.help();
  return 0;
}

}  // namespace troupe
