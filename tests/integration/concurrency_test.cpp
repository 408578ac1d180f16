// Stickiness under concurrency: one user is one actor with one mailbox, so every user's
// counter is exact however the requests of many users (and of one user over several
// connections) interleave; a sleeping user does not hold anybody else up.
#include "../support/test_support.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace concurrency_test_file {

using namespace troupe::test;
using nlohmann::json;

namespace {
const std::string concurrency_token = "concurrency-admin-" + random_token(16);
headers_t concurrency_bearer() { return {{"Authorization", "Bearer " + concurrency_token}}; }

class Concurrency : public shared_node_test<Concurrency> {
public:
  static std::vector<std::string> args() { return {"--admin-token", concurrency_token}; }
};

// Requests handed to a user actor and not answered yet (the node's own gauge).
double inflight(uint16_t port) { return metric(port, concurrency_bearer(), "troupe_http_inflight"); }
}  // namespace

TEST_F(Concurrency, TwoHundredUsersTimesTwentyRequests) {
  constexpr int users = 200, rounds = 20, threads = 32;
  std::vector<http_client> clients;
  clients.reserve(users);
  for (int u = 0; u < users; ++u)
    clients.emplace_back(port());

  // replies[u] = the counts user u saw, in order.
  std::vector<std::vector<long long>> replies(users);
  std::vector<std::string> errors(users);
  std::atomic<int> transport_failures{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      // Round-robin over this thread's users: the users' requests interleave.
      for (int r = 0; r < rounds; ++r) {
        for (int u = t; u < users; u += threads) {
          if (!errors[u].empty())
            continue;
          try {
            auto resp = clients[u].post("/api/counter/incr", {}, {}, std::chrono::seconds(15));
            if (resp.status != 200) {
              errors[u] = "round " + std::to_string(r) + ": " + resp.describe();
              continue;
            }
            replies[u].push_back(resp.json().at("count").get<long long>());
          } catch (const std::exception& e) {
            ++transport_failures;
            errors[u] = "round " + std::to_string(r) + ": " + e.what();
          }
        }
      }
    });
  }
  for (auto& th : pool)
    th.join();
  auto took = ms_since(t0);
  std::cerr << "[ stats    ] " << users * rounds << " requests in " << took << " ms\n";

  int bad = 0;
  for (int u = 0; u < users; ++u) {
    if (!errors[u].empty()) {
      if (++bad <= 5)
        ADD_FAILURE() << "user " << u << ": " << errors[u];
      continue;
    }
    std::vector<long long> expected(rounds);
    for (int i = 0; i < rounds; ++i)
      expected[i] = i + 1;
    if (replies[u] != expected && ++bad <= 5) {
      std::string got;
      for (auto v : replies[u])
        got += std::to_string(v) + " ";
      ADD_FAILURE() << "user " << u << " saw counts [" << got << "], expected 1..20";
    }
  }
  EXPECT_EQ(bad, 0) << "users with a wrong sequence or an error (transport failures: "
                    << transport_failures << ")";

  // Final values, and every user kept one identity (no cookie re-minted).
  int wrong_final = 0;
  for (int u = 0; u < users; ++u) {
    auto r = clients[u].get("/api/counter");
    if (r.status != 200 || r.json().value("count", -1) != rounds || r.has("Set-Cookie")) {
      if (++wrong_final <= 5)
        ADD_FAILURE() << "user " << u << " final: " << r.describe();
    }
  }
  EXPECT_EQ(wrong_final, 0);
}

TEST_F(Concurrency, OneUserOverManyConnectionsLosesNothing) {
  // Several TCP connections carrying the same cookie hammer one user at once: the user's
  // mailbox serialises them, so the counts handed out are exactly 1..N, each once.
  constexpr int users = 10, conns = 4, per_conn = 10;
  std::vector<std::string> cids;
  for (int u = 0; u < users; ++u) {
    http_client c(port());
    auto r = c.get("/api/whoami");
    ASSERT_STATUS(r, 200);
    ASSERT_TRUE(c.cookie());
    cids.push_back(*c.cookie());
  }
  std::mutex mu;
  std::vector<std::multiset<long long>> seen(users);
  std::vector<std::string> errors;
  std::vector<std::thread> pool;
  for (int u = 0; u < users; ++u) {
    for (int k = 0; k < conns; ++k) {
      pool.emplace_back([&, u] {
        http_client c(port());
        c.set_cookie(cids[u]);
        long long last = 0;
        for (int i = 0; i < per_conn; ++i) {
          try {
            auto r = c.post("/api/counter/incr", {}, {}, std::chrono::seconds(15));
            std::lock_guard<std::mutex> lk(mu);
            if (r.status != 200) {
              errors.push_back(r.describe());
              continue;
            }
            long long v = r.json().at("count").get<long long>();
            if (v <= last)
              errors.push_back("user " + std::to_string(u) + ": count went from " +
                               std::to_string(last) + " to " + std::to_string(v) +
                               " on one connection");
            last = v;
            seen[u].insert(v);
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lk(mu);
            errors.push_back(e.what());
          }
        }
      });
    }
  }
  for (auto& th : pool)
    th.join();
  for (size_t i = 0; i < errors.size() && i < 5; ++i)
    ADD_FAILURE() << errors[i];
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors";
  const int total = conns * per_conn;
  for (int u = 0; u < users; ++u) {
    std::multiset<long long> expected;
    for (int i = 1; i <= total; ++i)
      expected.insert(i);
    EXPECT_EQ(seen[u], expected) << "user " << u << ": counts handed out are not exactly 1.."
                                 << total;
    http_client c(port());
    c.set_cookie(cids[u]);
    EXPECT_EQ(count_of(c.get("/api/counter")), total) << "user " << u;
  }
}

TEST_F(Concurrency, ASleepingUserDoesNotBlockOthers) {
  http_client a(port()), b(port());
  ASSERT_STATUS(a.get("/api/whoami"), 200);
  ASSERT_STATUS(b.get("/api/whoami"), 200);
  ASSERT_NE(*a.cookie(), *b.cookie());

  auto t0 = std::chrono::steady_clock::now();
  auto sleeper = std::async(std::launch::async, [&] {
    auto r = a.post_json("/api/sleep", {{"ms", 1500}}, {}, std::chrono::seconds(10));
    return std::make_pair(r, ms_since(t0));
  });
  // A's sleep is in his actor (the node counts it in flight) before B asks.
  ASSERT_TRUE(eventually([&] { return inflight(port()) >= 1; }, std::chrono::seconds(5)));
  for (int i = 1; i <= 10; ++i)
    ASSERT_EQ(count_of(b.post("/api/counter/incr", {}, {}, std::chrono::seconds(5))), i);
  auto b_done = ms_since(t0);
  // B's ten requests were all answered while A's sleep was still in flight.
  const bool a_still_asleep = sleeper.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  auto [ra, a_done] = sleeper.get();
  ASSERT_STATUS(ra, 200);
  EXPECT_EQ(ra.json().value("slept", -1), 1500);
  EXPECT_GE(a_done, 1450);
  EXPECT_TRUE(a_still_asleep) << "user B's 10 requests were held up behind A's sleep (B done at " << b_done
                              << " ms, A at " << a_done << " ms)";
  EXPECT_LT(b_done, a_done);
}

TEST_F(Concurrency, AUsersLaterRequestsWaitTheirTurn) {
  // The same user's request behind a sleep is served after it (one mailbox), and is
  // not lost.
  http_client a(port());
  ASSERT_STATUS(a.get("/api/whoami"), 200);
  http_client a2(port());
  a2.set_cookie(*a.cookie());
  auto t0 = std::chrono::steady_clock::now();
  auto sleeper = std::async(std::launch::async, [&] {
    return a.post_json("/api/sleep", {{"ms", 800}}, {}, std::chrono::seconds(10));
  });
  // The sleep is in his mailbox (in flight) before his second request is sent.
  ASSERT_TRUE(eventually([&] { return inflight(port()) >= 1; }, std::chrono::seconds(5)));
  auto r = a2.post("/api/counter/incr", {}, {}, std::chrono::seconds(10));
  auto took = ms_since(t0);
  EXPECT_EQ(count_of(r), 1);
  EXPECT_GE(took, 750) << "the user's second request overtook its sleep";  // a lower bound: the mechanism
  ASSERT_STATUS(sleeper.get(), 200);
}

}  // namespace concurrency_test_file
