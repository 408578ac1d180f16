#pragma once
/// \file
/// Identities of the tree: connection ids, user names, page ids, and how
/// they may appear in logs.

#include <openssl/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::registry {

/// Characters of a minted connection id: URL-safe base64 (no padding) of 24
/// bytes, 16 random bytes followed by the first 8 bytes of their HMAC.
inline constexpr std::size_t cid_length = 32;

/// True for a string of the shape of a minted connection id (length and
/// alphabet). Says nothing of who minted it: cid_signer::verify() does.
bool valid_cid(std::string_view cid) noexcept;

/// `n` bytes as lowercase hex digits, two a byte.
std::string hex_of(const unsigned char* data, std::size_t n);

/// Mints and verifies connection ids under one secret. An id is 16 bytes from
/// OpenSSL's CSPRNG (128 bits) and the first 8 bytes of HMAC-SHA256(secret,
/// those 16 bytes): a node accepts only ids minted under its secret, so every
/// member that shares the secret accepts the others' ids and nobody else can
/// make one. Immutable once built: safe to share between threads.
class cid_signer {
public:
  /// A signer keyed by `secret` (its bytes); throws std::invalid_argument if it
  /// is empty, std::runtime_error if OpenSSL cannot make the HMAC.
  explicit cid_signer(const std::string& secret);

  /// A signer keyed by a fresh random 32-byte secret (for tests and tools: its
  /// ids die with it). Throws std::runtime_error only if the CSPRNG fails.
  static cid_signer with_random_secret();

  /// A new connection id. Throws std::runtime_error only if the CSPRNG fails.
  std::string mint() const;

  /// True when `cid` is an id minted under this secret (constant-time comparison of the tag).
  bool verify(std::string_view cid) const noexcept;

private:
  // HMAC-SHA256 keyed once; each tag works on a copy (keying costs more than tagging).
  std::shared_ptr<const EVP_MAC_CTX> keyed_;
  std::uint64_t number_ = 0;  // this signer's (and its copies'): whose working copy a thread holds
};

/// Bytes of a generated cookie secret.
inline constexpr std::size_t generated_secret_bytes = 32;

/// A fresh random secret of generated_secret_bytes bytes (OpenSSL's CSPRNG).
std::string generate_secret();

/// The secret stored at `path` as load_or_create_secret writes it; nullopt
/// when there is no such file. Throws like load_or_create_secret.
std::optional<std::string> read_secret(const std::string& path);

/// The secret stored at `path` (64 hex digits, optionally followed by a
/// newline; the secret is the 32 bytes they encode); when there is no such
/// file, a random one is made there first: mode 0600, written atomically (a
/// temp file, fsync, a rename that never replaces a file another process made
/// meanwhile, then the directory fsynced). Throws std::runtime_error naming
/// the problem when the file cannot be read or written or is malformed; the
/// text never contains the secret.
std::string load_or_create_secret(const std::string& path);

/// Writes `secret` to `path` as load_or_create_secret does (0600, atomically)
/// unless a file is there already (false). Throws std::runtime_error on I/O errors.
bool store_secret_if_absent(const std::string& path, const std::string& secret);

/// True for a login name: 1–64 chars of [A-Za-z0-9_.@-], not starting with "guest_".
bool valid_user_name(std::string_view name) noexcept;

/// True for a page id (X-Troupe-Page): 1–64 chars of [A-Za-z0-9_.-].
bool valid_page_id(std::string_view page) noexcept;

/// The guest user of a connection: "guest_<cid>".
std::string guest_name(std::string_view cid);

/// True when `user` is a guest name.
bool is_guest(std::string_view user) noexcept;

/// A connection id or guest name as it may appear in a log line or the census:
/// connection ids are bearer secrets, so only a short prefix is kept
/// ("Qx3f…", "guest_Qx3f…"). Other names pass unchanged.
std::string redact(std::string_view name_or_cid);

}  // namespace troupe::registry
