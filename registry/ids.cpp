#include "registry/ids.hpp"

#include <openssl/rand.h>

#include <array>
#include <stdexcept>

namespace troupe::registry {

namespace {

constexpr std::string_view guest_prefix = "guest_";
constexpr char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

bool is_b64url(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
         || c == '_';
}

template <class Pred>
bool all_of(std::string_view s, Pred pred) noexcept {
  for (char c : s)
    if (!pred(c))
      return false;
  return true;
}

}  // namespace

std::string mint_cid() {
  std::array<unsigned char, cid_length * 3 / 4> raw{};  // 18 bytes = 144 bits
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
    throw std::runtime_error("OpenSSL RAND_bytes failed");
  std::string out;
  out.reserve(cid_length);
  for (std::size_t i = 0; i < raw.size(); i += 3) {
    unsigned v = (raw[i] << 16) | (raw[i + 1] << 8) | raw[i + 2];
    out += b64url[(v >> 18) & 63];
    out += b64url[(v >> 12) & 63];
    out += b64url[(v >> 6) & 63];
    out += b64url[v & 63];
  }
  return out;
}

bool valid_cid(std::string_view cid) noexcept {
  return cid.size() == cid_length && all_of(cid, is_b64url);
}

bool valid_user_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64 || is_guest(name))
    return false;
  return all_of(name, [](char c) { return is_b64url(c) || c == '.' || c == '@'; });
}

bool valid_page_id(std::string_view page) noexcept {
  return !page.empty() && page.size() <= 64
         && all_of(page, [](char c) { return is_b64url(c) || c == '.'; });
}

std::string guest_name(std::string_view cid) {
  std::string out(guest_prefix);
  out += cid;
  return out;
}

bool is_guest(std::string_view user) noexcept {
  return user.substr(0, guest_prefix.size()) == guest_prefix;
}

std::string redact(std::string_view s) {
  constexpr std::size_t keep = 4;
  if (is_guest(s))
    return std::string(guest_prefix) + redact(s.substr(guest_prefix.size()));
  if (valid_cid(s))
    return std::string(s.substr(0, keep)) + "\xE2\x80\xA6";  // "…"
  return std::string(s);
}

}  // namespace troupe::registry
