#include "registry/proc_stats.hpp"

#include <array>
#include <cerrno>
#include <cctype>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace troupe::registry {

namespace {

using proc_text = std::array<char, 16384>;  // /proc/self/status and /proc/meminfo: ~1.5 KiB

// Read into the stack, not an ifstream: its 8 KiB heap buffer, once a beat,
// makes malloc consolidate every free chunk of a node with 100,000 users.
std::optional<std::string_view> read_proc(const char* path, proc_text& text) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return std::nullopt;
  std::size_t size = 0;
  while (size < text.size()) {
    ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return std::string_view(text.data(), size);
}

std::optional<std::uint64_t> field_of_file(const char* path, std::string_view field) {
  proc_text text;
  auto read = read_proc(path, text);
  return read ? proc_kb_field(*read, field) : std::nullopt;
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

std::optional<double> machine_memory_used_percent(std::string_view meminfo) {
  auto total = proc_kb_field(meminfo, "MemTotal");
  auto available = proc_kb_field(meminfo, "MemAvailable");
  if (!total || !available || *total == 0 || *available > *total)
    return std::nullopt;
  return 100.0 * static_cast<double>(*total - *available) / static_cast<double>(*total);
}

std::optional<double> machine_memory_used_percent() {
  proc_text text;
  auto read = read_proc("/proc/meminfo", text);
  return read ? machine_memory_used_percent(*read) : std::nullopt;
}

}  // namespace troupe::registry
