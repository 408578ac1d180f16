// eventually(condition, deadline): the tests' one way to wait for something the
// system under test does on its own time. It polls `condition` (a callable returning
// bool: a metric, an admin endpoint, a log line, an actor's answer, a socket) until it
// holds or `deadline` has passed, and says which. A test waits for the server's own
// signal this way, never for a guessed number of milliseconds.
//
//   ASSERT_TRUE(eventually([&] { return metric(port, "troupe_http_inflight") >= 1; }, 3s));
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace troupe::test {

// Polls `condition` every `every` until it holds (true) or `deadline` has passed
// (false; the condition is asked one last time at the deadline).
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds deadline = std::chrono::seconds(10),
                std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    if (condition())
      return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until)
      return false;
    // Not an order between events: the pace of the polling.
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(every, until - now));
  }
}

}  // namespace troupe::test
