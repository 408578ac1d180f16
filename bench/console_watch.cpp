// console_watch: what the console costs a node, without a browser's own CPU in the
// way. It opens /_troupe/console/live like the console page (token, then a view of
// 50 users with one opened), and reads every message the node sends (a full
// snapshot, then a patch every second) until SIGTERM/SIGINT or --seconds pass; it
// prints how many messages and bytes it received.
//
//   console_watch PORT TOKEN [SECONDS]
#include "../tests/support/ws_client.hpp"

#include <nlohmann/json.hpp>

#include <csignal>
#include <iostream>

namespace {
volatile std::sig_atomic_t stop = 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: console_watch PORT TOKEN [SECONDS]\n";
    return 2;
  }
  std::signal(SIGTERM, [](int) { stop = 1; });
  std::signal(SIGINT, [](int) { stop = 1; });
  auto port = static_cast<std::uint16_t>(std::stoi(argv[1]));
  int seconds = argc > 3 ? std::stoi(argv[3]) : 0;
  try {
    troupe::test::ws_client ws(port, "/_troupe/console/live");
    ws.send(nlohmann::json{{"token", argv[2]}}.dump());
    ws.send(nlohmann::json{{"view", {{"kind", "user"}, {"limit", 50}, {"offset", 0}}}}.dump());
    auto t0 = std::chrono::steady_clock::now();
    std::size_t messages = 0, bytes = 0;
    while (!stop && (seconds == 0 || std::chrono::steady_clock::now() - t0 < std::chrono::seconds(seconds))) {
      auto m = ws.read(std::chrono::milliseconds(1500));
      if (!m) {
        if (ws.close_code())
          break;
        continue;
      }
      ++messages;
      bytes += m->size();
    }
    std::cout << "console_watch: " << messages << " messages, " << bytes << " bytes" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "console_watch: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
