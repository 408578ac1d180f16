// libFuzzer target: the parser of the messages a census console sends on its
// live WebSocket, parse_console_message (transport/console_protocol.hpp):
// {"token": "..."} and {"view": {...}}.
//
// Input (tests/fuzz/console_message/): one text message.
// Checked beyond "no crash, no sanitizer report" (it must never throw: an
// exception escaping aborts): a view is clamped as documented (limit 1 to
// console_max_rows, a kind, console set).

#include "transport/console_protocol.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "console_message_fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = troupe::parse_console_message(text);
  if (m.what == troupe::console_message::kind::view) {
    if (m.view.limit < 1 || m.view.limit > troupe::console_max_rows)
      finding("a view limit outside 1..console_max_rows");
    if (m.view.kind.empty())
      finding("a view without a kind");
    if (!m.view.console)
      finding("a console view not marked console");
  } else if (m.what != troupe::console_message::kind::token && !m.token.empty()) {
    finding("a token outside a token message");
  }
  return 0;
}
