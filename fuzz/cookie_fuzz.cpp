// libFuzzer target: the Cookie header parser the front reads the connection id
// with, http_framing::cookie_value (transport/http_framing.hpp).
//
// Input (tests/fuzz/cookie/): "NAME\nCOOKIE-HEADER-VALUE". The value is looked
// up under NAME and under the front's own cookie name, troupe_cid.
// Checked beyond "no crash, no sanitizer report": the value found is a piece
// of the header (a view into it, no copy), holds no ';' (the pair separator),
// and the header really has "NAME=" right before it.

#include "transport/http_framing.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "cookie_fuzz: invariant broken: %s\n", what);
  std::abort();
}

void check(std::string_view header, std::string_view name) {
  auto value = troupe::http_framing::cookie_value(header, name);
  if (value.empty())
    return;
  if (value.data() < header.data() || value.data() + value.size() > header.data() + header.size())
    finding("the value is not a piece of the header");
  if (value.find(';') != std::string_view::npos)
    finding("the value spans a ';'");
  auto at = static_cast<std::size_t>(value.data() - header.data());
  if (at < name.size() + 1 || header.substr(at - name.size() - 1, name.size() + 1) != std::string(name) + "=")
    finding("the value does not follow NAME=");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto eol = input.find('\n');
  std::string_view name = input.substr(0, eol);
  std::string_view header = eol == std::string_view::npos ? input : input.substr(eol + 1);
  check(header, name);
  check(header, "troupe_cid");
  check(input, "troupe_cid");
  return 0;
}
