#include "registry/proc_stats.hpp"

#include <cctype>
#include <fstream>
#include <iterator>
#include <string>

namespace troupe::registry {

namespace {

std::optional<std::uint64_t> field_of_file(const char* path, std::string_view field) {
  std::ifstream in(path);
  if (!in)
    return std::nullopt;
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return proc_kb_field(text, field);
}

}  // namespace

std::optional<std::uint64_t> proc_kb_field(std::string_view text, std::string_view field) {
  std::size_t at = 0;
  while (at < text.size()) {
    auto eol = text.find('\n', at);
    auto line = text.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
    at = eol == std::string_view::npos ? text.size() : eol + 1;
    if (line.size() <= field.size() || line.substr(0, field.size()) != field || line[field.size()] != ':')
      continue;
    auto rest = line.substr(field.size() + 1);
    std::size_t i = 0;
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t'))
      ++i;
    if (i == rest.size() || !std::isdigit(static_cast<unsigned char>(rest[i])))
      return std::nullopt;
    std::uint64_t kb = 0;
    for (; i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])); ++i) {
      if (kb > (UINT64_MAX >> 10) / 10)
        return std::nullopt;  // no machine has that much
      kb = kb * 10 + static_cast<std::uint64_t>(rest[i] - '0');
    }
    while (i < rest.size() && rest[i] == ' ')
      ++i;
    if (rest.substr(i, 2) != "kB")
      return std::nullopt;
    return kb << 10;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> rss_bytes() { return field_of_file("/proc/self/status", "VmRSS"); }

std::optional<std::uint64_t> mem_total_bytes() { return field_of_file("/proc/meminfo", "MemTotal"); }

}  // namespace troupe::registry
