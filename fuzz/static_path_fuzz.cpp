// libFuzzer target: the static-file path resolver, static_relative_path
// (transport/static_files.hpp), which decides what file a URL path under a
// [[static]] mount may name.
//
// Input (tests/fuzz/static_path/): the URL path after the mount's prefix, as
// a client sends it (percent-encoded). Checked beyond "no crash, no sanitizer
// report": a path it accepts is relative, has no empty, "." or ".." segment and
// no hidden name, and holds no NUL, control character or backslash — nothing
// joined to a root can leave it.

#include "transport/static_files.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void finding(const char* what, std::string_view path) {
  std::fprintf(stderr, "static_path_fuzz: invariant broken: %s in \"%.*s\"\n", what, static_cast<int>(path.size()),
               path.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  auto rel = troupe::static_relative_path(rest);
  if (!rel)
    return 0;
  std::string_view p = *rel;
  if (!p.empty() && p.front() == '/')
    finding("an absolute path", p);
  for (unsigned char c : p)
    if (c < 0x20 || c == 0x7f || c == '\\')
      finding("a control character or a backslash", p);
  while (!p.empty()) {
    auto slash = p.find('/');
    auto seg = p.substr(0, slash);
    if (seg.empty())
      finding("an empty segment", *rel);
    if (seg.front() == '.')
      finding("a dot segment or a hidden name", *rel);
    if (slash == std::string_view::npos)
      break;
    p.remove_prefix(slash + 1);
  }
  return 0;
}
