#pragma once
/// \file
/// Internal to <troupe/codec.hpp>: a msgpack stream appending to a byte vector.
/// Nothing here is promised to an application; it may change in any release.

#include <cstddef>
#include <vector>

namespace troupe::store::detail {

/// Encoding goes straight into the result: msgpack::sbuffer would start with an
/// 8 KiB block (malloc, and a copy into the result) for every encode.
struct bytes_sink {
  std::vector<char>& out;
  void write(const char* data, std::size_t size) { out.insert(out.end(), data, data + size); }
};

}  // namespace troupe::store::detail
