// forward_bench: a request forwarded to the user's node (through the front's
// forwarder, transport/forwarder.hpp) against a raw CAF remote request between
// the same two processes, in one run (issue 11, "Measured").
//
//   forward_bench [--requests N] [--rounds R] [--warmup W]
//
// The process forks a serving node first (before any thread exists): an actor
// system with CAF's middleman publishing, on 127.0.0.1, an actor that answers
// (http_atom, http_request) -> http_response at once, as a user actor's remote
// interface does. The parent, with the node's scheduler settings (one actor
// thread, policy sharing), connects to it and times sequential round trips from a
// thread outside the scheduler, as the front's io thread is:
//   raw:       a scoped_actor's request(target, http_request).receive(...)
//   forwarded: anon_send(forwarder, http_atom, target, slot), waiting for slot->deliver
// Both carry the same request (a front's typical GET, with its headers). The two
// kinds alternate in R rounds (ABBA order) so that drift hits both alike; p50/p99
// of each and the ratio of the p50s are printed (a Markdown table, then one JSON line).
// Exit code 1 when any request is not answered 200.
#include "actors/messages.hpp"
#include "actors/node_context.hpp"
#include "actors/user.hpp"
#include "transport/forwarder.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

using namespace troupe;
using steady = std::chrono::steady_clock;

namespace {

struct options {
  int requests = 4000;  // per kind
  int rounds = 8;
  int warmup = 300;     // per kind, untimed
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (v < 1) {
      std::cerr << "forward_bench: " << a << " needs a positive number\n";
      std::exit(2);
    }
    if (a == "--requests")
      o.requests = v;
    else if (a == "--rounds")
      o.rounds = v;
    else if (a == "--warmup")
      o.warmup = v;
    else {
      std::cerr << "usage: forward_bench [--requests N] [--rounds R] [--warmup W]\n";
      std::exit(2);
    }
  }
  if (argc % 2 == 0) {
    std::cerr << "usage: forward_bench [--requests N] [--rounds R] [--warmup W]\n";
    std::exit(2);
  }
  return o;
}

void node_settings(caf::actor_system_config& cfg) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 1);  // the node's defaults (node.actor_threads, node.actor_scheduler)
  cfg.set("scheduler.policy", caf::atom("sharing"));
}

// The serving node: publishes the answering actor, writes its port to `out`,
// and lives until its parent closes `in`.
[[noreturn]] void serve(int out, int in) {
  caf::actor_system_config cfg;
  node_settings(cfg);
  caf::actor_system sys{cfg};
  auto actor = sys.spawn([]() -> caf::behavior {
    return {[](http_atom, http_request& req) {
      http_response r;
      r.body = "{\"count\":" + std::to_string(req.path.size()) + "}";
      return r;
    }};
  });
  auto port = sys.middleman().publish(actor, 0, "127.0.0.1", true);
  std::uint16_t p = port ? *port : 0;
  if (write(out, &p, sizeof(p)) != sizeof(p))
    std::_Exit(1);
  char c;
  while (read(in, &c, 1) > 0) {
  }
  std::_Exit(0);
}

http_request typical_request() {
  http_request r;
  r.method = "GET";
  r.path = "/api/counter";
  r.cid = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6.q7R8s9T0";
  r.headers = {{"Host", "127.0.0.1:8080"},
               {"User-Agent", "wrk"},
               {"Accept", "*/*"},
               {"Cookie", "troupe_cid=A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6.q7R8s9T0"},
               {"Connection", "keep-alive"}};
  r.deadline_ms = 0;
  return r;
}

// One forwarded request's slot: the waiting thread sleeps until deliver (or drop).
struct waiter {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  int status = 0;
};

class bench_slot final : public reply_slot {
public:
  bench_slot(const http_request& req, waiter& w) : req_(req), w_(w) {}
  ~bench_slot() override {
    if (!delivered_)
      finish(0);
  }
  const http_request& request() const override { return req_; }
  void deliver(http_response&& r) override {
    delivered_ = true;
    finish(r.status);
  }

private:
  void finish(int status) {
    std::lock_guard<std::mutex> guard{w_.mutex};
    w_.done = true;
    w_.status = status;
    w_.cv.notify_one();
  }
  const http_request& req_;
  waiter& w_;
  bool delivered_ = false;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  auto opt = parse(argc, argv);
  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0)
    return 1;
  pid_t child = fork();
  if (child == 0) {
    close(to_parent[0]);
    close(to_child[1]);
    serve(to_parent[1], to_child[0]);
  }
  close(to_parent[1]);
  close(to_child[0]);
  std::uint16_t port = 0;
  if (read(to_parent[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
    std::cerr << "forward_bench: the serving node did not start\n";
    return 1;
  }
  int failures = 0;
  std::vector<double> raw_us, forwarded_us;
  {
    caf::actor_system_config cfg;
    node_settings(cfg);
    caf::actor_system sys{cfg};
    auto remote = sys.middleman().remote_actor("127.0.0.1", port);
    if (!remote) {
      std::cerr << "forward_bench: remote_actor: " << sys.render(remote.error()) << "\n";
      kill(child, SIGKILL);
      return 1;
    }
    auto target = caf::actor_cast<user_handle>(*remote);  // it answers a user's (http_atom, http_request)
    auto ctx = std::make_shared<node_context>();
    auto forwarder = spawn_forwarder(sys, ctx);
    const auto req = typical_request();
    caf::scoped_actor self{sys};
    auto raw_once = [&]() {
      int status = 0;
      self->request(target, std::chrono::seconds(10), http_atom::value, req)
        .receive([&](http_response& r) { status = r.status; }, [&](caf::error&) { status = 0; });
      return status;
    };
    waiter w;
    auto forwarded_once = [&]() {
      {
        std::lock_guard<std::mutex> guard{w.mutex};
        w.done = false;
      }
      caf::anon_send(forwarder, http_atom::value, target, local_reply{std::make_shared<bench_slot>(req, w)});
      std::unique_lock<std::mutex> lock{w.mutex};
      w.cv.wait(lock, [&] { return w.done; });
      return w.status;
    };
    auto timed = [&](auto& once, std::vector<double>& out, int n) {
      for (int i = 0; i < n; ++i) {
        auto t0 = steady::now();
        if (once() != 200)
          ++failures;
        out.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
      }
    };
    std::vector<double> ignored;
    timed(raw_once, ignored, opt.warmup);
    timed(forwarded_once, ignored, opt.warmup);
    failures = 0;
    int per_round = std::max(1, opt.requests / opt.rounds);
    for (int r = 0; r < opt.rounds; ++r) {
      if (r % 4 == 0 || r % 4 == 3) {  // ABBA
        timed(raw_once, raw_us, per_round);
        timed(forwarded_once, forwarded_us, per_round);
      } else {
        timed(forwarded_once, forwarded_us, per_round);
        timed(raw_once, raw_us, per_round);
      }
    }
    caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
    if (ctx->metrics.forwarded.answered.load() < static_cast<std::uint64_t>(forwarded_us.size()))
      ++failures;
  }
  close(to_child[1]);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto raw50 = percentile(raw_us, 0.5), raw99 = percentile(raw_us, 0.99);
  auto fw50 = percentile(forwarded_us, 0.5), fw99 = percentile(forwarded_us, 0.99);
  std::printf("| path | requests | p50 (µs) | p99 (µs) |\n| --- | --- | --- | --- |\n");
  std::printf("| raw CAF remote request | %zu | %.1f | %.1f |\n", raw_us.size(), raw50, raw99);
  std::printf("| forwarded (forwarder + slot) | %zu | %.1f | %.1f |\n", forwarded_us.size(), fw50, fw99);
  std::printf("\np50 ratio forwarded/raw: %.3f (goal <= 1.2); p99 ratio: %.3f; failures: %d\n", fw50 / raw50,
              fw99 / raw99, failures);
  std::printf("{\"raw_p50_us\":%.1f,\"raw_p99_us\":%.1f,\"forwarded_p50_us\":%.1f,\"forwarded_p99_us\":%.1f,"
              "\"p50_ratio\":%.3f,\"requests_per_kind\":%zu,\"failures\":%d}\n",
              raw50, raw99, fw50, fw99, fw50 / raw50, raw_us.size(), failures);
  return failures == 0 ? 0 : 1;
}
