#pragma once
/// \file
/// A parcel: one user's store (or one connection's state) as bytes with a
/// verifiable header. Parcels are what login carries between users and what
/// the deposit holds on disk.

#include "store/codec.hpp"

#include <cstdint>
#include <string>

namespace troupe::store {

/// Why a parcel was written.
enum class parcel_cause : std::uint8_t { freeze = 0, login = 1, checkpoint = 2, quit = 3 };

/// "freeze", "login", …
const char* to_string(parcel_cause cause) noexcept;

/// A decoded, verified parcel.
struct parcel {
  static constexpr std::uint32_t magic = 0x54525050;  ///< "TRPP"
  static constexpr std::uint16_t format_version = 1;

  std::uint64_t generation = 0;  ///< grows with every write of the same owner
  std::string writer_node;
  std::string writer_worker;
  parcel_cause cause = parcel_cause::freeze;
  bytes payload;                 ///< the application's msgpack-encoded state
  std::uint32_t state_version = 0;  ///< the State version of the payload (0: from before versions)
};

/// Encodes header + payload + checksum.
bytes encode(const parcel& p);

/// Decodes and verifies; throws codec_error saying what is wrong (bad magic,
/// unknown format version, checksum mismatch, truncated).
parcel decode(const char* data, std::size_t size);
inline parcel decode(const bytes& data) {
  return decode(data.data(), data.size());
}

/// 64-bit FNV-1a of `data`: the parcel checksum (corruption, not tampering).
std::uint64_t checksum(const char* data, std::size_t size) noexcept;

}  // namespace troupe::store
