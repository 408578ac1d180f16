#include "store/deposit.hpp"

#include "store/filesystem_deposit.hpp"

#include <stdexcept>
#include <string>

namespace troupe::store {
using fs_deposit::hex_digits;
using fs_deposit::is_kept;
using fs_deposit::locate;

void check_key(std::string_view key) {
  if (key.empty())
    throw std::invalid_argument("deposit key is empty");
  if (key.size() > max_key_bytes)
    throw std::invalid_argument("deposit key is over " + std::to_string(max_key_bytes) + " bytes");
}

std::int64_t now_unix_ms() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string escape_key(std::string_view key) {
  check_key(key);
  std::string out;
  out.reserve(key.size());
  for (char ch : key) {
    auto c = static_cast<unsigned char>(ch);
    if (is_kept(c)) {
      out += ch;
    } else {
      out += '%';
      out += hex_digits[c >> 4];
      out += hex_digits[c & 0xf];
    }
  }
  return out;
}

std::optional<std::string> unescape_key(std::string_view escaped) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '%') {
      out += escaped[i];
      continue;
    }
    if (i + 2 >= escaped.size() || hex(escaped[i + 1]) < 0 || hex(escaped[i + 2]) < 0)
      return std::nullopt;
    out += static_cast<char>(hex(escaped[i + 1]) * 16 + hex(escaped[i + 2]));
    i += 2;
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

std::string filesystem_parcel_path(const std::string& dir, parcel_kind kind, std::string_view key) {
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/')
    root.pop_back();
  return locate(root + (kind == parcel_kind::user ? "/users" : "/connections"), key).path;
}

std::unique_ptr<deposit> make_filesystem_deposit(const std::string& dir) {
  return std::make_unique<fs_deposit::filesystem_deposit>(dir);
}

}  // namespace troupe::store
