#pragma once
/// \file
/// A name kept in 40 bytes with no allocation when it has at most 39
/// characters: connection ids (32) and guest names (38) fit. The tables that
/// hold one entry per user (placement index, route cache, worker records)
/// key by it: a std::string of that length costs 32 bytes plus a 48-byte heap
/// chunk, so 80 bytes per copy; this is half. Longer names (login names up
/// to 64) go to the heap as a std::string's would. A plain value type.

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace troupe::registry {

class short_name {
public:
  /// Characters kept inline; a longer name is allocated.
  static constexpr std::size_t inline_capacity = 39;

  short_name() noexcept { bytes_[tag_at] = 0; }
  short_name(std::string_view s) { init(s); }  // NOLINT: converts like a string does
  short_name(const std::string& s) : short_name(std::string_view(s)) {}
  short_name(const char* s) : short_name(std::string_view(s)) {}
  short_name(const short_name& o) { init(o.view()); }
  short_name(short_name&& o) noexcept {
    std::memcpy(bytes_, o.bytes_, sizeof bytes_);
    o.bytes_[tag_at] = 0;
  }
  short_name& operator=(const short_name& o) {
    if (this != &o) {
      short_name copy(o);
      swap(copy);
    }
    return *this;
  }
  short_name& operator=(short_name&& o) noexcept {
    if (this != &o) {
      release();
      std::memcpy(bytes_, o.bytes_, sizeof bytes_);
      o.bytes_[tag_at] = 0;
    }
    return *this;
  }
  ~short_name() { release(); }

  std::string_view view() const noexcept {
    if (!on_heap())
      return {bytes_, static_cast<unsigned char>(bytes_[tag_at])};
    return {heap_ptr(), heap_size()};
  }
  operator std::string_view() const noexcept { return view(); }  // NOLINT
  operator std::string() const { return str(); }                  // NOLINT: where a std::string is wanted
  std::string str() const { return std::string(view()); }
  std::size_t size() const noexcept { return view().size(); }
  bool empty() const noexcept { return size() == 0; }
  /// True when the name lives in the object itself (no allocation).
  bool is_inline() const noexcept { return !on_heap(); }

  void swap(short_name& o) noexcept {
    char tmp[sizeof bytes_];
    std::memcpy(tmp, bytes_, sizeof bytes_);
    std::memcpy(bytes_, o.bytes_, sizeof bytes_);
    std::memcpy(o.bytes_, tmp, sizeof bytes_);
  }

  friend bool operator==(const short_name& a, const short_name& b) noexcept { return a.view() == b.view(); }
  friend bool operator!=(const short_name& a, const short_name& b) noexcept { return !(a == b); }
  friend bool operator<(const short_name& a, const short_name& b) noexcept { return a.view() < b.view(); }

private:
  static constexpr std::size_t tag_at = inline_capacity;  // inline: the length; heap: heap_tag
  static constexpr unsigned char heap_tag = 0xff;

  bool on_heap() const noexcept { return static_cast<unsigned char>(bytes_[tag_at]) == heap_tag; }
  char* heap_ptr() const noexcept {
    char* p;
    std::memcpy(&p, bytes_, sizeof p);
    return p;
  }
  std::size_t heap_size() const noexcept {
    std::size_t n;
    std::memcpy(&n, bytes_ + sizeof(char*), sizeof n);
    return n;
  }
  void init(std::string_view s) {
    if (s.size() <= inline_capacity) {
      if (!s.empty())
        std::memcpy(bytes_, s.data(), s.size());
      bytes_[tag_at] = static_cast<char>(s.size());
      return;
    }
    char* p = new char[s.size()];
    std::memcpy(p, s.data(), s.size());
    std::size_t n = s.size();
    std::memcpy(bytes_, &p, sizeof p);
    std::memcpy(bytes_ + sizeof p, &n, sizeof n);
    bytes_[tag_at] = static_cast<char>(heap_tag);
  }
  void release() noexcept {
    if (on_heap())
      delete[] heap_ptr();
    bytes_[tag_at] = 0;
  }

  alignas(8) char bytes_[inline_capacity + 1];
};

static_assert(sizeof(short_name) == 40);

/// Hash of a short_name: the hash of its characters (as std::string's), so
/// lookups by a std::string or a string_view hash the same.
struct short_name_hash {
  std::size_t operator()(const short_name& n) const noexcept { return std::hash<std::string_view>{}(n.view()); }
};

}  // namespace troupe::registry
