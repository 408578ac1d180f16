#pragma once
/// \file
/// The gate's handshake: what a connection to a troupe port must show before
/// CAF's middleman reads a byte of it (docs/CLUSTER.md "The gate"). The two
/// ports are a node's worker gate (its worker processes, on loopback) and a
/// cluster member's port (the other members).
///
///     server → client   "TRPGATE1" kind nonce           41 bytes (kind: 'W' or 'C', nonce: 32 random bytes)
///     client → server   "TRPJOIN1" mac                  40 bytes (mac: HMAC-SHA256(key, "troupe gate 1" kind nonce))
///     server → client   'K' (accepted) or 'R' (refused)  1 byte
///
/// then CAF's own handshake on the same socket (in TLS first, for a member
/// port with node-to-node TLS). Fixed sizes: nothing past the 40 bytes is
/// read before the verdict, and a fresh nonce per connection makes a recorded
/// answer worthless (no replay). The key of the worker gate is the token its
/// node gave one worker process (one use); the cluster's is derived from the
/// cookie secret every member shares (cluster_key). A plain module: unit
/// tests drive it without sockets.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::gate {

/// Which gate a connection talks to: the answer binds it, so a worker's token
/// opens no cluster port and a member's key no worker gate.
enum class kind : char { worker = 'W', cluster = 'C' };

inline constexpr std::size_t nonce_size = 32;
inline constexpr std::size_t mac_size = 32;
inline constexpr std::string_view challenge_magic = "TRPGATE1";
inline constexpr std::string_view answer_magic = "TRPJOIN1";
inline constexpr std::size_t challenge_size = challenge_magic.size() + 1 + nonce_size;
inline constexpr std::size_t answer_size = answer_magic.size() + mac_size;
inline constexpr char accepted = 'K';
inline constexpr char refused = 'R';

using nonce = std::array<unsigned char, nonce_size>;
using mac = std::array<unsigned char, mac_size>;

/// 32 bytes from OpenSSL's CSPRNG (throws std::runtime_error if it fails).
nonce make_nonce();

/// The server's first bytes.
std::string encode_challenge(kind k, const nonce& n);

/// The nonce of a challenge of kind `k`; nullopt when `bytes` is not one (another kind, not a troupe gate).
std::optional<nonce> parse_challenge(std::string_view bytes, kind k);

/// The answer to nonce `n` of a gate of kind `k`, under `key`.
mac sign(std::string_view key, kind k, const nonce& n);

/// The client's answer bytes.
std::string encode_answer(const mac& m);

/// The mac of an answer; nullopt when `bytes` is not one (garbage).
std::optional<mac> parse_answer(std::string_view bytes);

/// Constant-time comparison.
bool same(const mac& a, const mac& b) noexcept;

/// The cluster gate's key: HMAC-SHA256(cookie secret, "troupe cluster gate 1"),
/// so the secret itself never serves two purposes.
std::string cluster_key(std::string_view cookie_secret);

}  // namespace troupe::gate
