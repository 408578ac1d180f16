#pragma once
/// \file
/// Identities of the tree: connection ids, user names, page ids, and how
/// they may appear in logs.

#include <string>
#include <string_view>

namespace troupe::registry {

/// Characters of a minted connection id (URL-safe base64 of 18 random bytes).
inline constexpr std::size_t cid_length = 24;

/// A new connection id: 144 bits from OpenSSL's CSPRNG, URL-safe base64, no padding.
/// Throws std::runtime_error only if the CSPRNG itself fails.
std::string mint_cid();

/// True for a string mint_cid() could have produced (length and alphabet);
/// anything else in a cookie is treated as no cookie at all.
bool valid_cid(std::string_view cid) noexcept;

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
