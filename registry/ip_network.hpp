#pragma once
/// \file
/// IP networks (CIDR) and the client address of a request that came through
/// trusted proxies (`node.trusted_proxies`, docs/http.md "The client's address").

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::registry {

/// An IPv4 or IPv6 network: "10.0.0.0/8", "2001:db8::/32"; a bare address is
/// the network of that address alone (/32, /128).
struct ip_network {
  bool v6 = false;
  std::array<unsigned char, 16> bytes{};  ///< 4 used for IPv4
  unsigned prefix = 0;                    ///< bits
};

/// Parses a network; nullopt when `text` is none (bits set past the prefix are
/// allowed and ignored: "10.1.2.3/8" is 10.0.0.0/8).
std::optional<ip_network> parse_network(std::string_view text);

/// Whether `address` (text, IPv4 or IPv6; an IPv4-mapped IPv6 address counts as
/// its IPv4 address) is in `net`. False for anything that is not an address.
bool contains(const ip_network& net, std::string_view address);

/// Whether `address` is in any of `nets`.
bool in_any(const std::vector<ip_network>& nets, std::string_view address);

/// The address a request comes from. `peer` is the socket's; when it is in
/// `trusted`, the proxies' headers say who came before it: the `for=` values of
/// `forwarded` (RFC 7239; all the request's Forwarded lines joined by commas) if
/// there is one, else `x_forwarded_for`, read from the right, each trusted proxy
/// skipped; the first address that is not one is the client (the left-most when
/// all are). A value that is not an IP address ("unknown", an obfuscated name,
/// garbage) ends the walk at the last trusted hop. From a peer that is not a trusted
/// proxy the headers are ignored (anybody can write them).
std::string client_address(const std::string& peer, const std::vector<ip_network>& trusted,
                           std::string_view forwarded, std::string_view x_forwarded_for);

}  // namespace troupe::registry
