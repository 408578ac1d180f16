#pragma once
/// \file
/// msgpack encoding of application state: what a user's store becomes when it
/// is carried (login), frozen (deposit) or sent to another node.

#include <troupe/detail/bytes_sink.hpp>

#include <msgpack.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::store {

/// Raw bytes of an encoded value.
using bytes = std::vector<char>;

/// Bytes that do not decode as the expected type.
class codec_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Encodes any msgpack-serializable value.
template <class T>
bytes pack(const T& value) {
  bytes out;
  detail::bytes_sink sink{out};
  msgpack::pack(sink, value);
  return out;
}

/// msgpack limits for decoding `size` bytes: no array or map may claim more
/// elements than the bytes could hold (each element takes at least one byte).
/// msgpack allocates a container's elements as soon as it reads its length, so
/// without this a corrupt 5-byte length asks for up to 64 GiB at once.
inline msgpack::unpack_limit unpack_limits_for(std::size_t size) {
  return msgpack::unpack_limit(/*array=*/size, /*map=*/size / 2);
}

/// Decodes `data` into `out`; throws codec_error (and leaves `out` untouched)
/// when the bytes are truncated or of another shape.
template <class T>
void unpack(const char* data, std::size_t size, T& out) {
  try {
    auto handle = msgpack::unpack(data, size, nullptr, nullptr, unpack_limits_for(size));
    T tmp;
    handle.get().convert(tmp);
    out = std::move(tmp);
  } catch (const std::exception& e) {
    throw codec_error(std::string("cannot decode state: ") + e.what());
  }
}

template <class T>
void unpack(const bytes& data, T& out) {
  unpack(data.data(), data.size(), out);
}

}  // namespace troupe::store
