#pragma once
/// \file
/// (Internal to actors/.) A worker process's slot: what it keeps and how it
/// supervises its child (actors/worker_process.hpp). worker_process.cpp holds the
/// slot's behaviour, the messages it answers with these.

#include "actors/census.hpp"
#include "actors/errors.hpp"
#include "actors/group.hpp"
#include "actors/worker_pipes.hpp"
#include "actors/worker_spawn.hpp"
#include "config/group_settings.hpp"
#include "config/limits_settings.hpp"
#include "config/node_settings.hpp"
#include "gate/token_table.hpp"
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <csignal>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>
#include "actors/worker_process.hpp"

namespace troupe::worker_slots {


using steady = std::chrono::steady_clock;

// A child that has not handed over its worker this long after its start is
// killed (and counts as a failed start): twice stuck_timeout_seconds, at least this.
constexpr auto min_start_timeout = std::chrono::seconds(10);
// A child whose worker is gone (down) but whose process lingers is killed after this.
constexpr auto linger_timeout = std::chrono::seconds(2);
// At node shutdown, a child that does not leave this long after its worker
// was told to stop is killed.
constexpr auto stop_timeout = std::chrono::seconds(5);
// A process that ends sooner than this after its start is started again only after as long.
constexpr auto young_death = std::chrono::seconds(1);

// -- the slot -----------------------------------------------------------------------------

// One message relayed to the child: sent now, or held until a child is up.
struct relayed {
  std::function<void(std::uint64_t id)> send;  // makes the request to the current child
  std::function<void(caf::error)> fail;        // answers the requester with an error
  bool retry = false;                          // sent again to a replacement when the child dies with it in flight
  steady::time_point held_until;
};
using relayed_ptr = std::shared_ptr<relayed>;

// The slot's own timers: its periodic tick (reap, heartbeat, expiry of what
// it holds) and a delayed restart.
enum class slot_timer : std::uint8_t { tick, restart };

// The slot's whole interface: what its child and the node send it, and its
// own timers (private: no other actor can send them).
using slot_actor = worker_process_handle::extend<caf::reacts_to<tick_atom, slot_timer>>;

enum class slot_phase : std::uint8_t {
  starting,  // a process is starting (or the last one is being reaped): messages are held
  open,      // the child's worker is up: messages are relayed
  parked,    // permanent failure: everything is refused
};

struct slot_state {
  static inline const char* name = "troupe.worker_process";

  slot_state() = default;
  slot_state(const slot_state&) = delete;
  slot_state& operator=(const slot_state&) = delete;
  ~slot_state() { close_pipe_ends(pipe_ends); }  // a child that never came: its ends were never published

  slot_actor::stateful_pointer<slot_state> self = nullptr;
  std::optional<actor_gauge> gauge;  // troupe_actors{kind="worker"}: the slot stands for its worker in the node
  worker_spec spec;
  config::group_settings settings;
  group_handle group;
  group_counters* counters = nullptr;
  std::optional<worker_state> shown;  // what troupe_workers counts this slot as

  slot_phase phase = slot_phase::starting;
  // The process (-1: none); shared with the functor that kills it if the slot ends first.
  std::shared_ptr<pid_t> process = std::make_shared<pid_t>(-1);
  pid_t& pid = *process;
  // The token the worker gate expects from its child (shared with that functor, which drops it).
  std::shared_ptr<std::string> token = std::make_shared<std::string>();
  worker_handle child;
  std::uint64_t generation = 0;  // of the child: stale answers are recognised
  steady::time_point started_at, lost_at;
  steady::duration last_start = std::chrono::seconds(1);  // how long its last process took to hand its worker over
  bool child_lost = false;    // its worker is down; the process is being reaped
  bool child_stopped = false; // its worker stopped normally (drained): the slot stops too
  // A drain was relayed to its child: an exit with code 0 is that drain's end even when the
  // worker's down message arrives as a lost link (the process closed its socket first).
  bool draining = false;
  bool killed = false;        // we sent SIGKILL (stuck, lingering, or a failed start)

  // Its child's pipes (actors/worker_pipes.hpp): the node's ends until its worker is up,
  // then published under the child's node id (shared with the functor that withdraws them).
  std::vector<int> pipe_ends;
  std::shared_ptr<caf::node_id> piped = std::make_shared<caf::node_id>();

  std::deque<relayed_ptr> held;
  std::unordered_map<std::uint64_t, relayed_ptr> in_flight;
  std::uint64_t next_id = 0;

  caf::timespan heartbeat_every{};
  steady::duration start_timeout{};
  steady::time_point next_heartbeat;
  bool heartbeat_pending = false;
  worker_vitals vitals;  // the child's last answer (counted into the node's metrics)

  std::optional<std::pair<bool, std::uint32_t>> degraded;  // the group's last word, for every new child
  std::optional<group_tuning> tuning;                      // the settings applied since the start, for every new child
  std::optional<caf::error> stopping;                      // the node stops: the reason, once the child is gone
  steady::time_point stop_deadline;
  std::uint32_t restarts = 0;
  bool restart_due = false;  // a delayed restart is on its way
  bool replacing = false;    // its child asked to be replaced (memory occupancy): the next exit starts a fresh one

  void show(worker_state s) {
    if (!counters)
      return;
    if (shown)
      counters->workers[static_cast<std::size_t>(*shown)].fetch_sub(1, std::memory_order_relaxed);
    counters->workers[static_cast<std::size_t>(s)].fetch_add(1, std::memory_order_relaxed);
    shown = s;
  }

  void unshow() {
    if (counters && shown)
      counters->workers[static_cast<std::size_t>(*shown)].fetch_sub(1, std::memory_order_relaxed);
    shown.reset();
  }

  // The expected token goes (the child came, or will not).
  void forget_token() {
    if (token->empty())
      return;
    spec.ctx->worker_tokens->drop(*token);
    OPENSSL_cleanse(token->data(), token->size());
    token->clear();
  }

  // Starts a child process; on failure it counts as an exit (restart asked).
  void start_child() {
    phase = slot_phase::starting;
    show(worker_state::starting);
    child_lost = child_stopped = killed = draining = false;
    forget_token();
    *token = gate::token_table::make_token();
    spec.ctx->worker_tokens->expect(*token, gate::publish_of(self->system(), caf::actor_cast<worker_process_handle>(self)));
    std::vector<int> child_ends = make_pipes();
    auto started = start_worker_child(spec.ctx->worker_boot, *token, spec.ctx->worker_gate_port, spec.name, child_ends);
    close_pipe_ends(child_ends);
    started_at = steady::now();
    ++generation;
    pid = started.pid;
    if (pid <= 0) {
      spdlog::error("worker {}: {}", spec.name, started.error);
      drop_pipes();
      forget_token();
      exited(-1);
      return;
    }
    spdlog::info("worker {}: process {} started", spec.name, pid);
  }

  // One pipe per io thread of the front (transport/worker_pipe.hpp): the
  // child's ends, the node's kept until its worker is up. None when the
  // system refuses: its users' requests then take the forwarder.
  std::vector<int> make_pipes() {
    drop_pipes();
    if (!spec.ctx->worker_pipes)
      return {};
    std::string error;
    auto ends = make_worker_pipes(static_cast<std::size_t>(std::max(1, spec.ctx->node().io_threads)), error);
    if (!ends) {
      spdlog::warn("worker {}: {}; its requests take the forwarder", spec.name, error);
      return {};
    }
    pipe_ends = std::move(ends->node);
    return std::move(ends->child);
  }

  void drop_pipes() {
    close_pipe_ends(pipe_ends);
    if (*piped && spec.ctx->worker_pipes)
      spec.ctx->worker_pipes->withdraw(*piped);
    *piped = caf::node_id{};
  }

  // Whom its child works for (asked once it passed the gate, which took its token).
  worker_hello hello() {
    forget_token();
    return worker_hello{spec.commander, spec.global_store, spec.deposit, spec.ctx->census,
                        spec.ctx->node_name, spec.name, spec.group, generation};
  }

  // The child of generation `gen` handed its worker over.
  void on_ready(std::uint64_t gen, worker_handle w) {
    if (phase != slot_phase::starting || child || gen != generation || !w) {
      if (w)  // a stale child (we gave up on it): it must not serve
        caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
      return;
    }
    child = std::move(w);
    if (!pipe_ends.empty() && spec.ctx->worker_pipes) {
      *piped = child.node();
      spec.ctx->worker_pipes->publish(*piped, std::exchange(pipe_ends, {}));
    }
    last_start = steady::now() - started_at;
    self->monitor(child);  // a closed connection (kill -9, abort) comes as its down message at once
    phase = slot_phase::open;
    show(worker_state::open);
    vitals = worker_vitals{};  // a new process counts from zero
    heartbeat_pending = false;
    next_heartbeat = steady::now();
    spdlog::info("worker {}: process {} serves", spec.name, pid);
    if (degraded)
      self->send(child, degraded_atom::value, degraded->first, degraded->second);
    if (tuning)
      self->send(child, tune_atom::value, *tuning);
    if (stopping) {
      caf::anon_send_exit(child, caf::exit_reason::user_shutdown);
      return;
    }
    auto waiting = std::move(held);
    held.clear();
    for (auto& r : waiting)
      dispatch(r);
  }

  void dispatch(const relayed_ptr& r) {
    if (phase == slot_phase::parked)
      return r->fail(parked_error());
    if (phase == slot_phase::open && child) {
      auto id = ++next_id;
      in_flight.emplace(id, r);
      r->send(id);
      return;
    }
    if (held.size() >= spec.ctx->limits().max_inflight)
      return r->fail(not_back_error());
    r->held_until = steady::now() + std::chrono::duration_cast<steady::duration>(
                                      std::chrono::duration<double>(spec.ctx->limits().hold_seconds));
    held.push_back(r);
  }

  // 503 without Retry-After: retrying will not help until the node restarts.
  caf::error parked_error() const {
    if (degraded && degraded->first)  // parked by its degraded group until the recovery
      return make_refusal(errc::group_degraded, "group " + spec.group + " is degraded: its requests are refused",
                          degraded->second);
    return make_refusal(errc::unavailable, "worker " + spec.name + " failed permanently; its slot is parked", 0);
  }

  // 503 with a Retry-After of the time its last process took to start (at least 1 s).
  caf::error not_back_error() const {
    auto seconds = std::chrono::duration<double>(last_start).count();
    return make_refusal(errc::unavailable, "worker " + spec.name + " is being replaced, retry",
                        static_cast<std::uint32_t>(std::max(1.0, std::ceil(seconds))));
  }

  // Relays one request to the child (now or once it is up); `retry`: sent
  // again to a replacement if the child dies with it in flight.
  template <class... Rs, class... Ts>
  caf::typed_response_promise<Rs...> relay(bool retry, caf::duration timeout, Ts... xs) {
    auto rp = self->template make_response_promise<Rs...>();
    auto r = std::make_shared<relayed>();
    r->retry = retry;
    r->fail = [rp](caf::error err) mutable { rp.deliver(std::move(err)); };
    r->send = [this, rp, timeout, xs...](std::uint64_t id) mutable {
      self->request(child, timeout, xs...)
        .then(
          [this, id, rp](Rs&... rs) mutable {
            if (in_flight.erase(id))
              rp.deliver(std::move(rs)...);
          },
          [this, id, rp](caf::error& err) mutable {
            if (in_flight.erase(id))
              rp.deliver(std::move(err));
          });
    };
    dispatch(r);
    return rp;
  }

  template <class... Ts>
  void tell(Ts&&... xs) {
    if (phase == slot_phase::open && child)
      self->send(child, std::forward<Ts>(xs)...);
  }

  // The child's worker is down (its process died, or it stopped).
  void on_down(const caf::down_msg& dm) {
    if (!child || dm.source != child.address())
      return;
    lose_child(!dm.reason);
    if (dm.reason && !stopping && !draining)
      spdlog::error("worker {}: process {} lost ({})", spec.name, pid, self->system().render(dm.reason));
    on_tick();  // a killed process is usually reapable already: no need to wait for the next tick
  }

  void lose_child(bool stopped_normally) {
    child = nullptr;
    drop_pipes();  // the io threads' pipes to it see their end anyway: this stops new ones
    child_lost = true;
    child_stopped = stopped_normally;
    lost_at = steady::now();
    if (phase == slot_phase::open)
      phase = slot_phase::starting;
    show(worker_state::starting);
    heartbeat_pending = false;
    ++generation;
    // Its users are gone with it.
    spec.ctx->metrics.actors[static_cast<std::size_t>(actor_kind::user)].fetch_sub(
      static_cast<std::int64_t>(vitals.users), std::memory_order_relaxed);
    vitals.users = 0;
    // What was in flight: an attach goes to the replacement; the rest fails now
    // (CAF would let it wait out its timeout).
    auto flying = std::move(in_flight);
    in_flight.clear();
    for (auto& [id, r] : flying) {
      if (r->retry && !stopped_normally && !stopping)
        dispatch(r);
      else
        r->fail(make_error(errc::unavailable, "worker " + spec.name + "'s process is gone"));
    }
  }

  // Adds what the child counted since its last answer to the node's metrics.
  void count(const worker_vitals& v) {
    auto& m = spec.ctx->metrics;
    auto grow = [](std::atomic<std::uint64_t>& into, std::uint64_t now, std::uint64_t before) {
      if (now > before)
        into.fetch_add(now - before, std::memory_order_relaxed);
    };
    grow(m.user_restarts, v.user_restarts, vitals.user_restarts);
    grow(m.user_freezes, v.user_freezes, vitals.user_freezes);
    grow(m.user_wakes, v.user_wakes, vitals.user_wakes);
    grow(m.handler_failures, v.handler_failures, vitals.handler_failures);
    m.actors[static_cast<std::size_t>(actor_kind::user)].fetch_add(
      static_cast<std::int64_t>(v.users) - static_cast<std::int64_t>(vitals.users), std::memory_order_relaxed);
    vitals = v;
  }

  void kill_child(const char* why) {
    if (pid <= 0 || killed)
      return;
    spdlog::error("worker {}: process {} {}; killed", spec.name, pid, why);
    ::kill(pid, SIGKILL);
    killed = true;
    if (spec.ctx->census)
      self->send(caf::actor_cast<census_handle>(spec.ctx->census), log_atom::value,
                 orchestration_entry{"node", "", "worker_kill", "worker:" + spec.name, "ok",
                                     "{\"pid\":" + std::to_string(pid) + "}", why});
  }

  // Every tick: reap, heartbeat, expire what is held too long.
  void on_tick() {
    auto now = steady::now();
    if (pid > 0) {
      int status = 0;
      auto r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) {
        std::int32_t code = -1;  // killed, signalled, or not ours to reap
        if (r == pid && WIFEXITED(status))
          code = WEXITSTATUS(status);
        else if (r == pid && WIFSIGNALED(status) && !killed)
          spdlog::error("worker {}: process {} died of signal {}", spec.name, pid, WTERMSIG(status));
        pid = -1;
        return exited(code);
      }
    }
    if (pid > 0) {
      if (stopping && now > stop_deadline)
        kill_child("did not stop in time");
      else if (child_lost && now - lost_at > linger_timeout)
        kill_child("lingers without its worker");
      else if (phase == slot_phase::starting && !child && !child_lost && now - started_at > start_timeout) {
        forget_token();
        kill_child("did not hand its worker over in time");
      }
    }
    while (!held.empty() && held.front()->held_until <= now) {
      auto r = std::move(held.front());
      held.pop_front();
      r->fail(not_back_error());
    }
    if (phase == slot_phase::open && child && !heartbeat_pending && now >= next_heartbeat && !stopping)
      heartbeat();
  }

  void heartbeat() {
    heartbeat_pending = true;
    next_heartbeat = steady::now() + heartbeat_every;
    auto gen = generation;
    auto stuck = node_context::to_duration(settings.stuck_timeout_seconds);
    self->request(child, stuck, heartbeat_atom::value)
      .then(
        [this, gen](worker_vitals& v) {
          if (gen != generation)
            return;
          heartbeat_pending = false;
          count(v);
          // Its actor threads answer, but its pipes' thread is stuck in one handler (transport/worker_pipe_server.hpp).
          if (static_cast<double>(v.handler_running_ms) >= settings.stuck_timeout_seconds * 1000)
            kill_child(("has been running one handler on its pipes' thread for " +
                        std::to_string(v.handler_running_ms / 1000) + " s")
                         .c_str());
        },
        [this, gen](caf::error& err) {
          if (gen != generation)
            return;
          heartbeat_pending = false;
          if (err == caf::sec::request_timeout)
            kill_child(("did not answer its heartbeat for " + std::to_string(settings.stuck_timeout_seconds) + " s")
                         .c_str());
        });
  }

  // The process is reaped with `code` (-1: killed or signalled).
  void exited(std::int32_t code) {
    if (child)  // its down message is still on the way
      lose_child(false);
    child_lost = false;
    if (stopping) {
      unshow();
      return self->quit(*stopping);
    }
    if (child_stopped || (draining && code == 0)) {  // drained: it stopped normally; the group does not replace it
      spdlog::info("worker {}: its process stopped (code {})", spec.name, code);
      fail_held("worker " + spec.name + " stopped");
      unshow();
      return self->quit();
    }
    if (replacing) {  // past its memory occupancy, its users frozen: a fresh process, no failure
      replacing = false;
      spdlog::info("worker {}: its process was replaced (memory occupancy; exit code {})", spec.name, code);
      return start_child();
    }
    spdlog::error("worker {}: process ended (exit code {}); asking group {} whether to start it again", spec.name,
                  code, spec.group);
    auto gen = generation;
    self->request(group, spec.ctx->request_timeout(), restart_atom::value, spec.name, code)
      .then(
        [this, gen](bool restart) {
          if (gen != generation || stopping || pid > 0)
            return;
          if (!restart)
            return park();
          ++restarts;  // the group counts troupe_worker_restarts_total (it judges the restart intensity)
          // A process that died young (it cannot start) is not started again
          // in a tight loop: it waits a moment first.
          if (steady::now() - started_at < young_death) {
            restart_due = true;
            self->delayed_send(self, young_death, tick_atom::value, slot_timer::restart);
            return;
          }
          start_child();
        },
        [this](caf::error& err) {
          spdlog::error("worker {}: its group did not answer ({}); the slot stops", spec.name,
                        self->system().render(err));
          fail_held("worker " + spec.name + " stopped");
          unshow();
          self->quit(err);
        });
  }

  void park() {
    phase = slot_phase::parked;
    show(worker_state::parked);
    fail_held("");
  }

  void fail_held(const std::string& text) {
    auto waiting = std::move(held);
    held.clear();
    for (auto& r : waiting)
      r->fail(text.empty() ? parked_error() : make_error(errc::unavailable, text));
  }

  // The node stops (the group's exit reached this slot): the child's worker is
  // told to stop (its users were frozen by the soft quit), the process reaped.
  void stop(caf::error reason) {
    if (stopping)
      return;
    stopping = std::move(reason);
    stop_deadline = steady::now() + stop_timeout;
    fail_held("the node stops");
    if (child)
      caf::anon_send_exit(child, caf::exit_reason::user_shutdown);
    if (pid <= 0) {
      unshow();
      self->quit(*stopping);
    }
  }
};

}  // namespace troupe::worker_slots
