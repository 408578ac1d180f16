// The child side of a worker process (`troupe worker`): its bootstrap, its
// passage through the node's worker gate, its worker handed to its slot
// (actors/worker_process.hpp; the node side is worker_process.cpp).
#include "actors/worker_process.hpp"

#include "actors/census.hpp"
#include "actors/log_format.hpp"
#include "actors/worker_pipes.hpp"
#include "actors/worker_spawn.hpp"
#include "config/recipe.hpp"
#include "gate/dial.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace troupe {

namespace {

// What a bootstrap may weigh: a recipe's sets and environment, with room to spare.
constexpr std::size_t max_bootstrap_bytes = 4u << 20;
// A child dials its node's gate within this.
constexpr auto gate_timeout = std::chrono::seconds(10);

void setup_child_logging(const std::string& level, const std::string& worker, const std::string& format) {
  spdlog::drop("troupe");  // set again once the worker's name is known
  auto logger = spdlog::stderr_color_mt("troupe");
  logger->set_formatter(log_formatter(format, worker + " " + std::to_string(::getpid())));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::warn);
}

}  // namespace

std::string encode_bootstrap(const worker_bootstrap& b) {
  auto hex = [](const std::string& bytes) {
    return registry::hex_of(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  };
  nlohmann::json j{{"token", hex(b.token)},
                   {"cookie_secret", hex(b.cookie_secret)},
                   {"config_file", b.config_file},
                   {"config_text", b.config_text},
                   {"env", b.env},
                   {"sets", b.sets},
                   {"profile", b.profile},
                   {"pipes", b.pipes}};
  return j.dump();
}

worker_bootstrap decode_bootstrap(const std::string& text) {
  auto unhex = [](const std::string& hex) {
    if (hex.size() % 2)
      throw std::invalid_argument("odd hex digits");
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2)
      out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
  };
  try {
    auto j = nlohmann::json::parse(text);
    worker_bootstrap b;
    b.token = unhex(j.at("token").get<std::string>());
    b.cookie_secret = unhex(j.at("cookie_secret").get<std::string>());
    b.config_file = j.at("config_file").get<std::string>();
    b.config_text = j.value("config_text", "");
    b.env = j.at("env").get<std::vector<std::pair<std::string, std::string>>>();
    b.sets = j.at("sets").get<std::vector<std::string>>();
    b.pipes = j.value("pipes", 0u);
    b.profile = j.value("profile", std::vector<std::pair<std::string, std::string>>{});
    return b;
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::invalid_argument(e.what());
  }
}

namespace {

// Reads (and closes) the bootstrap descriptor: its text, or throws std::runtime_error.
std::string read_bootstrap(int fd) {
  std::string text;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error(std::string("cannot read descriptor ") + std::to_string(fd) + ": " + std::strerror(e));
    }
    if (n == 0)
      break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bootstrap_bytes) {
      ::close(fd);
      throw std::runtime_error("more than " + std::to_string(max_bootstrap_bytes) + " bytes");
    }
  }
  ::close(fd);
  OPENSSL_cleanse(buf, sizeof buf);
  return text;
}

// An error's own words (a gate's refusal says what it means).
std::string words_of(const caf::error& err) {
  if (err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  return caf::to_string(err);
}

// The pipes the node passed (worker_spawn.hpp): descriptors worker_pipe_fd..,
// each checked to be a socket (anything else is closed and not served).
std::vector<int> inherited_pipes(std::uint32_t count) {
  constexpr std::uint32_t max_pipes = 64;  // node.io_threads' bound
  std::vector<int> fds;
  for (std::uint32_t i = 0; i < std::min(count, max_pipes); ++i) {
    int fd = worker_pipe_fd + static_cast<int>(i);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      fds.push_back(fd);
    } else {
      spdlog::error("worker pipe {}: not a socket; its requests come through the middleman", fd);
      ::close(fd);
    }
  }
  return fds;
}

}  // namespace

int run_worker_process(const worker_process_flags& flags, const app_types& types,
                       const worker_pipe_serving& serve_pipes) {
  // Dies with the node's thread that started it (a scheduler thread, which
  // lives as long as the node's actors); and exits if the node is gone already.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  worker_bootstrap boot;
  if (flags.bootstrap_fd >= 0) {
    try {
      auto text = read_bootstrap(flags.bootstrap_fd);
      boot = decode_bootstrap(text);
      OPENSSL_cleanse(text.data(), text.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe worker: its bootstrap (--bootstrap-fd) is unreadable: %s\n", e.what());
      return 2;
    }
  }
  auto port_at = flags.parent.rfind(':');
  if (port_at == std::string::npos) {
    std::fprintf(stderr, "troupe worker: --parent must be HOST:PORT\n");
    return 2;
  }
  auto host = flags.parent.substr(0, port_at);
  auto port = static_cast<std::uint16_t>(std::stoi(flags.parent.substr(port_at + 1)));
  // The gate first: a process its node did not start (no token, a guessed or
  // a used one) is told so here, and its node logs the refusal.
  auto connection = gate::dial(host, port, gate::kind::worker, boot.token, gate_timeout);
  OPENSSL_cleanse(boot.token.data(), boot.token.size());
  if (!connection) {
    std::fprintf(stderr, "troupe worker: %s\n", words_of(connection.error()).c_str());
    return 1;
  }
  if (flags.parent_pid > 0 && ::getppid() != static_cast<pid_t>(flags.parent_pid)) {  // its node died meanwhile
    ::close(*connection);
    std::fprintf(stderr, "troupe worker: its node (pid %ld) is gone\n", flags.parent_pid);
    return 1;
  }
  auto ctx = std::make_shared<node_context>();
  try {
    config::recipe_sources src;
    src.file = boot.config_file;
    if (!src.file.empty())  // the recipe its node started with, even if the file changed since
      src.file_text = boot.config_text;
    src.env = boot.env;
    src.sets = boot.sets;
    src.profile = boot.profile;
    ctx->recipe() = config::load_recipe(src);
    if (boot.cookie_secret.empty())
      throw std::invalid_argument("its bootstrap holds no cookie secret");
    ctx->cids = std::make_shared<const registry::cid_signer>(boot.cookie_secret);  // the connection ids' key, as the node has it
    OPENSSL_cleanse(boot.cookie_secret.data(), boot.cookie_secret.size());
  } catch (const std::exception& e) {
    ::close(*connection);
    std::fprintf(stderr, "troupe worker: %s\n", e.what());
    return 2;
  }
  setup_child_logging(ctx->node().log_level, "worker", ctx->recipe().log.format);
  ctx->apps = types;
  for (auto& g : ctx->recipe().groups)
    ctx->metrics.add_group(g.name);
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.enable-automatic-connections", false);
  cfg.set("scheduler.max-threads", ctx->node().actor_threads);
  cfg.set("scheduler.policy", caf::atom_from_string(ctx->node().actor_scheduler));
  caf::actor_system sys{cfg};
  int code = 0;
  {
    caf::scoped_actor self{sys};
    // Through the gate, CAF's handshake reaches this child's slot.
    worker_process_handle slot;
    auto scribe = gate::make_scribe(sys, *connection, false, false);
    self->request(gate::basp_broker(sys), gate_timeout, caf::connect_atom::value, std::move(scribe), port)
      .receive(
        [&](caf::node_id&, caf::strong_actor_ptr& actor, std::set<std::string>& interface) {
          if (actor && sys.assignable<worker_process_handle>(interface))
            slot = caf::actor_cast<worker_process_handle>(actor);
        },
        [&](caf::error& err) { spdlog::critical("the node's worker gate let this worker through, then: {}", sys.render(err)); });
    if (!slot) {
      spdlog::critical("the node's worker gate did not lead to a worker slot");
      return 1;
    }
    worker_hello hello;
    bool greeted = false;
    self->request(slot, gate_timeout, hello_atom::value)
      .receive([&](worker_hello& h) { hello = std::move(h); greeted = true; },
               [&](caf::error& err) { spdlog::critical("its slot did not say whom it works for: {}", sys.render(err)); });
    if (!greeted)
      return 1;
    setup_child_logging(ctx->node().log_level, hello.worker, ctx->recipe().log.format);
    ctx->node_name = hello.node_name;
    ctx->census = hello.census;
    // Its pipes are served before its worker starts (whose heartbeat asks them
    // for a stuck handler) and before its slot learns of it (the node sends on them from then on).
    std::shared_ptr<worker_pipe_service> pipes;
    if (auto fds = inherited_pipes(boot.pipes); !fds.empty()) {
      if (serve_pipes)
        pipes = serve_pipes(sys, ctx, std::move(fds));
      else
        close_pipe_ends(fds);
    }
    ctx->pipe_service = pipes;
    // Its admission reports and replacement requests go to its slot, which speaks for it to the group.
    auto worker = spawn_worker(sys, worker_spec{hello.worker, hello.group, hello.commander, hello.global_store,
                                                hello.deposit, ctx, slot});
    self->monitor(worker);
    self->monitor(slot);
    self->send(slot, ready_atom::value, hello.generation, worker);
    bool worker_gone = false;
    while (!worker_gone) {
      self->receive([&](caf::down_msg& dm) {
        if (dm.source == worker.address()) {
          worker_gone = true;
          if (dm.reason && dm.reason != caf::exit_reason::user_shutdown)
            code = 1;
        } else {  // the node (its slot) is gone: the worker goes too
          caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
        }
      });
    }
    pipes.reset();
  }
  spdlog::shutdown();
  return code;
}

}  // namespace troupe
