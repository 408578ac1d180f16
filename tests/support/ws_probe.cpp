// ws_probe: a WebSocket client for shell tests (tests/integration/install_test.sh
// talks to examples/chat with it; curl speaks no WebSocket here). It opens one
// socket, prints "open", sends each --send message, then prints each message it
// reads, one a line, until it has read --read of them. Every wait is bounded
// (--timeout-ms). Exit 0 when all were read; 1 otherwise, after a line saying
// why ("closed CODE REASON", "timeout", or the error).
//   ws_probe --port P --target /rooms/lobby/socket [--cookie C] [--protocol chat.v1]
//            [--send TEXT]... [--read N] [--timeout-ms MS]
#include "ws_client.hpp"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using troupe::test::ws_client;
  std::uint16_t port = 0;
  std::string target = "/";
  troupe::test::headers_t headers;
  std::vector<std::string> sends;
  int reads = 0;
  std::chrono::milliseconds timeout{10000};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--port")
      port = static_cast<std::uint16_t>(std::stoi(value));
    else if (flag == "--target")
      target = value;
    else if (flag == "--cookie")
      headers.push_back({"Cookie", value});
    else if (flag == "--protocol")
      headers.push_back({"Sec-WebSocket-Protocol", value});
    else if (flag == "--send")
      sends.push_back(value);
    else if (flag == "--read")
      reads = std::stoi(value);
    else if (flag == "--timeout-ms")
      timeout = std::chrono::milliseconds(std::stoi(value));
    else {
      std::cerr << "ws_probe: unknown flag " << flag << "\n";
      return 2;
    }
  }
  try {
    ws_client ws(port, target, headers, timeout);
    std::cout << "open" << std::endl;
    for (auto& text : sends)
      ws.send(text, timeout);
    for (int i = 0; i < reads; ++i) {
      auto message = ws.read(timeout);
      if (!message) {
        std::cout << (ws.open() ? std::string("timeout")
                                : "closed " + std::to_string(ws.close_code()) + " " + ws.close_reason() + " (" + ws.error_text() + ")")
                  << std::endl;
        return 1;
      }
      std::cout << *message << std::endl;
    }
    ws.close(1000, timeout);
  } catch (const std::exception& e) {
    std::cout << "error " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
