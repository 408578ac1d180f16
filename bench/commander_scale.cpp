// commander_scale: the commander at scale (issue 28, "The commander at scale";
// docs/SCALING.md), measured on the plain class that holds its placements
// (registry::placement_index) with simulated members, so that 1,000,000 live
// users fit on a 2-core machine:
//
//   commander_scale [--users N]... [--members M] [--workers W]
//
// For each N (default 100,000 and 1,000,000), M members × W workers each (3 × 8):
//   placements/s    N first visits, as the commander serves them: the connection
//                   bound to its guest, the guest placed on the least loaded worker
//                   that admits, an owner epoch recorded;
//   bytes per user  the process's resident memory grown by those N users (one
//                   connection each), divided by N;
//   takeover        what a new commander does with the members' worker scans:
//                   every worker's user names through CAF's binary format (out and
//                   back in, as they cross the network) and each user placed where
//                   he lives (place_at) with his connection bound; its time is how
//                   long placements wait in a takeover, against limits.hold_seconds (5 s).
// One run, figures printed as Markdown rows (bench/RESULTS.md).
#include "registry/ids.hpp"
#include "registry/placement_index.hpp"
#include "registry/proc_stats.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;
using troupe::registry::placement_index;

double seconds_since(steady::time_point t0) { return std::chrono::duration<double>(steady::now() - t0).count(); }

// A connection id shaped as the front mints them: 32 characters of base64url.
std::string cid_of(std::size_t i) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out(32, 'A');
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + 0x1234567;
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k] = alphabet[x & 63];
    x = (x >> 6) | (x << 58);
    if (k % 10 == 9)
      x ^= i + k;
  }
  return out;
}

struct figures {
  std::size_t users = 0;
  double placements_per_s = 0;
  double bytes_per_user = 0;
  double scan_ms = 0;       // the names out and back in through CAF's binary format
  std::size_t scan_bytes = 0;
  double rebuild_ms = 0;    // place_at and bind for every user
};

figures measure(caf::actor_system& sys, std::size_t n, std::size_t members, std::size_t workers) {
  figures f;
  f.users = n;
  const std::size_t slots = members * workers;
  std::vector<std::string> cids(n);
  for (std::size_t i = 0; i < n; ++i)
    cids[i] = cid_of(i);
  auto rss_before = troupe::registry::rss_bytes().value_or(0);
  std::vector<std::vector<std::string>> hosted(slots);  // what each worker's scan will tell
  {
    placement_index index(slots, "default");
    auto t0 = steady::now();
    auto now = placement_index::clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      auto guest = troupe::registry::guest_name(cids[i]);
      index.bind(cids[i], guest);
      auto slot = index.place(guest, (std::uint64_t{7} << 32) + i, "default", now);
      if (!slot) {
        std::fprintf(stderr, "commander_scale: no slot for user %zu\n", i);
        std::exit(1);
      }
      hosted[*slot].push_back(std::move(guest));
    }
    f.placements_per_s = static_cast<double>(n) / seconds_since(t0);
    auto rss_after = troupe::registry::rss_bytes().value_or(0);
    // The names kept for the scans below are counted out: they are the members', not the commander's.
    std::size_t names = 0;
    for (auto& h : hosted)
      for (auto& s : h)
        names += sizeof(std::string) + (s.size() >= 16 ? s.capacity() + 1 : 0);
    f.bytes_per_user = (static_cast<double>(rss_after) - static_cast<double>(rss_before) - static_cast<double>(names)) /
                       static_cast<double>(n);
  }
  // A takeover: every worker's users through the wire format, then the new index.
  auto t0 = steady::now();
  std::vector<std::vector<std::string>> received(slots);
  for (std::size_t s = 0; s < slots; ++s) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    if (auto err = sink(hosted[s])) {
      std::fprintf(stderr, "commander_scale: serialize: %s\n", sys.render(err).c_str());
      std::exit(1);
    }
    f.scan_bytes += buf.size();
    caf::binary_deserializer source{sys, buf};
    if (auto err = source(received[s])) {
      std::fprintf(stderr, "commander_scale: deserialize: %s\n", sys.render(err).c_str());
      std::exit(1);
    }
  }
  f.scan_ms = seconds_since(t0) * 1000;
  t0 = steady::now();
  placement_index next(slots, "default");
  std::size_t placed = 0;
  for (std::size_t s = 0; s < slots; ++s)
    for (auto& user : received[s]) {
      placed += next.place_at(user, s, 0);
      next.bind(user.substr(6), user);  // guest_<cid>: his connection
    }
  f.rebuild_ms = seconds_since(t0) * 1000;
  if (placed != n) {
    std::fprintf(stderr, "commander_scale: the takeover placed %zu of %zu users\n", placed, n);
    std::exit(1);
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> counts;
  std::size_t members = 3, workers = 8;
  for (int i = 1; i < argc; ++i) {
    auto is = [&](const char* flag) { return std::strcmp(argv[i], flag) == 0 && i + 1 < argc; };
    if (is("--users"))
      counts.push_back(std::strtoull(argv[++i], nullptr, 10));
    else if (is("--members"))
      members = std::strtoull(argv[++i], nullptr, 10);
    else if (is("--workers"))
      workers = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: commander_scale [--users N]... [--members M] [--workers W]\n");
      return 2;
    }
  }
  if (counts.empty())
    counts = {100000, 1000000};
  if (members == 0 || workers == 0)
    return 2;
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system sys{cfg};
  std::printf("| live users | placements/s | bytes per user (one connection) | scans through the wire | scan bytes | "
              "index rebuilt | takeover total |\n|---|---|---|---|---|---|---|\n");
  for (auto n : counts) {
    auto f = measure(sys, n, members, workers);
    std::printf("| %zu | %.0f | %.0f | %.0f ms | %zu | %.0f ms | %.0f ms |\n", f.users, f.placements_per_s,
                f.bytes_per_user, f.scan_ms, f.scan_bytes, f.rebuild_ms, f.scan_ms + f.rebuild_ms);
    std::fflush(stdout);
  }
  return 0;
}
