// libFuzzer target: the front's HTTP/1.1 request framing — Beast's parser as
// the front configures it plus troupe's own refusals (smuggling: any
// Transfer-Encoding but chunked, CL with TE, repeated framing headers …) —
// through http_framing::parse_stream (transport/http_framing.hpp), the bytes of
// one connection, requests pipelined.
//
// Input (tests/fuzz/http_framing/): raw bytes as a client sends them. Each
// input is framed under two sets of limits: the defaults (1 MiB body, 16 KiB
// head) and small ones (64 B body, 256 B head) that the fuzzer reaches easily.
// Checked beyond "no crash, no sanitizer report":
//  - a refusal is 400, 413 or 431;
//  - framing does not depend on where the bytes are cut: a prefix never holds
//    more requests than the whole, and a prefix refused means the whole is
//    refused the same way after the same requests (a client could otherwise
//    choose the framing by timing its segments).

#include "transport/http_framing.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

using troupe::http_framing::parse_limits;
using troupe::http_framing::parse_stream;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "http_framing_fuzz: invariant broken: %s\n", what);
  std::abort();
}

void frame(std::string_view bytes, const parse_limits& limits) {
  auto whole = parse_stream(bytes, limits);
  auto s = whole.refused_with;
  if (s != 0 && s != 400 && s != 413 && s != 431)
    finding("a refusal that is not 400, 413 or 431");
  auto prefix = parse_stream(bytes.substr(0, bytes.size() / 2), limits);
  if (prefix.requests > whole.requests)
    finding("a prefix holds more requests than the whole");
  if (prefix.refused_with != 0 && (prefix.refused_with != whole.refused_with || prefix.requests != whole.requests))
    finding("a prefix is refused but the whole is framed differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  frame(bytes, parse_limits{1048576, 16384});
  frame(bytes, parse_limits{64, 256});
  return 0;
}
