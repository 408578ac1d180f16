#include "registry/url.hpp"

#include <algorithm>
#include <cctype>

namespace troupe::registry {

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space, bad_escape on_bad) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      int hi = i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        if (on_bad == bad_escape::refuse)
          return std::nullopt;
        out.push_back(c);  // kept literally; what follows it is read as ordinary text
        continue;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(plus_is_space && c == '+' ? ' ' : c);
    }
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto piece = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (piece.empty())
      continue;
    auto eq = piece.find('=');
    auto name = percent_decode(piece.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : piece.substr(eq + 1), true);
    if (!name || !value)
      return std::nullopt;
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

bool is_http_token(std::string_view s) noexcept {
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
  });
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::string_view utf8_prefix(std::string_view s, std::size_t max_bytes) noexcept {
  if (s.size() <= max_bytes)
    return s;
  auto n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)  // s[n] continues a character
    --n;
  return s.substr(0, n);
}

}  // namespace troupe::registry
