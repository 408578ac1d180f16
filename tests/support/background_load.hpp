// background_load: threads that load the system under test until the test stops
// them. Its destructor stops and joins them, so an ASSERT that fails while they run
// reports its message instead of ending the test binary with std::terminate (a
// joinable std::thread destroyed), which loses gtest's buffered output too.
//
//   background_load load;
//   load.run([&](const std::atomic<bool>& stopping) { while (!stopping) c.post("/x"); });
//   ASSERT_TRUE(eventually(...));
//   load.stop();
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace troupe::test {

class background_load {
public:
  background_load() = default;
  background_load(const background_load&) = delete;
  background_load& operator=(const background_load&) = delete;
  ~background_load() { stop(); }

  // Starts `body(stopping)` on a thread of its own; `body` returns once `stopping` holds.
  void run(std::function<void(const std::atomic<bool>&)> body) {
    threads_.emplace_back([this, body = std::move(body)] { body(stopping_); });
  }

  // Asks every thread to stop and waits for them.
  void stop() {
    stopping_ = true;
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
  }

private:
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

}  // namespace troupe::test
