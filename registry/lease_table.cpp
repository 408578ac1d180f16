#include "registry/lease_table.hpp"

namespace troupe::registry {

const char* to_string(lease_refusal r) noexcept {
  switch (r) {
    case lease_refusal::none: return "none";
    case lease_refusal::invalid_key: return "invalid_key";
    case lease_refusal::value_too_big: return "value_too_big";
    case lease_refusal::invalid_ttl: return "invalid_ttl";
    case lease_refusal::queue_full: return "queue_full";
    case lease_refusal::wait_expired: return "wait_expired";
    case lease_refusal::lease_expired: return "lease_expired";
    case lease_refusal::key_leased: return "key_leased";
    case lease_refusal::no_such_key: return "no_such_key";
    case lease_refusal::not_durable: return "not_durable";
    case lease_refusal::durability_unknown: return "durability_unknown";
  }
  return "unknown";
}

bool valid_utf8(const std::string& s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || c == 0 || i + len > s.size())
      return false;
    std::uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2)
        return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // no overlong forms, no surrogates, nothing past U+10FFFF
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)
        || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += len;
  }
  return true;
}

}  // namespace troupe::registry
