// read_pipe: the loop that keeps a child's output pipe drained (so the child never
// blocks on a full pipe), shared by node_process and the chromium driver.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

namespace troupe::test {

// Reads `fd` until EOF or an error, or until `stop` is set and nothing is pending,
// handing every chunk to sink(data, size). Runs on the calling thread.
template <class Sink>
void read_pipe(int fd, const std::atomic<bool>& stop, Sink&& sink) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, 100);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (n == 0 && stop))
      return;
    if (n == 0)
      continue;
    char buf[8192];
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return;
    sink(buf, static_cast<std::size_t>(r));
  }
}

}  // namespace troupe::test
