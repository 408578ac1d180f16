#pragma once
/// \file
/// A parcel: one user's store (or one connection's state) as bytes with a
/// verifiable header. Parcels are what login carries between users and what
/// the deposit holds on disk.
///
/// Wire format (a positional msgpack array), format version 3:
///
///     [magic, 3, generation, writer_node, writer_worker, cause,
///      owner, state_version, owner_epoch, group, checksum, payload]
///
/// `checksum` is the 64-bit FNV-1a of the msgpack encoding of the ten header
/// fields before it, continued over the payload bytes: editing any header field
/// (the owner above all) or the payload fails verification.
/// Format version 2 (the same without `group`, nine header fields) is still
/// read: group "" (unknown: the default group).
/// Format version 1 (`[magic, 1, generation, writer_node, writer_worker, cause,
/// checksum of the payload only, payload]`) is still read: owner "" (unknown),
/// state_version 0, owner_epoch 0.

#include "store/codec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::store {

/// Why a parcel was written.
enum class parcel_cause : std::uint8_t { freeze = 0, login = 1, checkpoint = 2, quit = 3 };

/// "freeze", "login", …
const char* to_string(parcel_cause cause) noexcept;

/// A decoded, verified parcel.
struct parcel {
  static constexpr std::uint32_t magic = 0x54525050;  ///< "TRPP"
  static constexpr std::uint16_t format_version = 3;  ///< what encode() writes; decode() also reads 1 and 2

  std::uint64_t generation = 0;  ///< grows with every write of the same owner
  std::string writer_node;
  std::string writer_worker;
  parcel_cause cause = parcel_cause::freeze;
  /// Whose it is: the key it was written under (a user name, or a connection id
  /// for connection parcels). "" = unknown (a format 1 parcel). The deposit
  /// fills it in on put when left empty and checks it on every read.
  std::string owner;
  /// The actor type's declared version of the payload's state; 0 = undeclared.
  std::uint32_t state_version = 0;
  /// The owner epoch of the placement that wrote it (fencing, docs/deposit.md
  /// "Fencing"): the deposit refuses a user parcel older than the user's
  /// current epoch. 0 = none (a format 1 parcel, or a writer that does not
  /// take part): older than every other epoch.
  std::uint64_t owner_epoch = 0;
  /// The [[group]] its writer lived in: where the user wakes (a user with a
  /// past stays in his group). "" = unknown (formats 1 and 2): the default group.
  std::string group;
  bytes payload;                 ///< the application's msgpack-encoded state
};

/// Encodes header + payload + checksum (format version 3).
bytes encode(const parcel& p);

/// Encodes `p` as if its owner were `owner` (saves copying the payload when
/// only the owner differs: the deposit's put).
bytes encode(const parcel& p, std::string_view owner);

/// Decodes and verifies (format 1, 2 or 3); throws codec_error saying what is
/// wrong (bad magic, unknown format version, checksum mismatch, truncated).
parcel decode(const char* data, std::size_t size);
inline parcel decode(const bytes& data) {
  return decode(data.data(), data.size());
}

/// The owner_epoch in the header of an encoded parcel, read from a prefix of
/// it without verifying the checksum (the deposit's fencing check reads only
/// the header of the parcel in place). 0 for a format 1 parcel. nullopt when
/// `data` is not the start of a parcel of a known format; `*truncated` (if
/// given) is set when more bytes might make it one.
std::optional<std::uint64_t> peek_owner_epoch(const char* data, std::size_t size, bool* truncated = nullptr) noexcept;

/// The FNV-1a offset basis: checksum's seed for a first piece.
inline constexpr std::uint64_t checksum_seed = 1469598103934665603ull;
/// 64-bit FNV-1a of `data` (continuing from `seed`: checksum(b, checksum(a)) is
/// the checksum of a then b): the parcel checksum (corruption, not tampering).
std::uint64_t checksum(const char* data, std::size_t size, std::uint64_t seed = checksum_seed) noexcept;

}  // namespace troupe::store
