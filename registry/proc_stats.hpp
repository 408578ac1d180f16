#pragma once
/// \file
/// What a worker reads of its process and machine for memory admission
/// (docs/SUPERVISION.md "Admission"): Linux /proc, read on demand. Each read
/// opens and parses one small file (tens of microseconds): a worker reads them
/// once a second at most, never per request.

#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe::registry {

/// The value in bytes of a "Name:   1234 kB" line of a /proc status-like text
/// (`field` without the colon, e.g. "VmRSS"); nullopt if absent or malformed.
std::optional<std::uint64_t> proc_kb_field(std::string_view text, std::string_view field);

/// This process's resident memory (/proc/self/status VmRSS); nullopt when unreadable.
std::optional<std::uint64_t> rss_bytes();

/// The machine's memory (/proc/meminfo MemTotal); nullopt when unreadable.
std::optional<std::uint64_t> mem_total_bytes();

/// The share of the machine's memory in use, (MemTotal − MemAvailable) /
/// MemTotal in percent, from a /proc/meminfo text; nullopt when either line
/// is missing or they make no sense.
std::optional<double> machine_memory_used_percent(std::string_view meminfo);
/// The same, read from /proc/meminfo now.
std::optional<double> machine_memory_used_percent();

}  // namespace troupe::registry
