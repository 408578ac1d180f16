#include "store/parcel.hpp"

namespace troupe::store {

namespace {

// Format 1 as it sits on the wire (read only).
struct wire_parcel_v1 {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::uint64_t generation = 0;
  std::string writer_node;
  std::string writer_worker;
  std::uint8_t cause = 0;
  std::uint64_t sum = 0;
  msgpack::type::raw_ref payload;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, sum, payload);
};

// Format 2: the header fields the checksum covers, in wire order.
struct wire_header_v2 {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::uint64_t generation = 0;
  std::string_view writer_node;
  std::string_view writer_worker;
  std::uint8_t cause = 0;
  std::string_view owner;
  std::uint32_t state_version = 0;
  std::uint64_t owner_epoch = 0;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, owner, state_version, owner_epoch);
};

// Format 2 as it sits on the wire.
struct wire_parcel_v2 {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::uint64_t generation = 0;
  std::string writer_node;
  std::string writer_worker;
  std::uint8_t cause = 0;
  std::string owner;
  std::uint32_t state_version = 0;
  std::uint64_t owner_epoch = 0;
  std::uint64_t sum = 0;
  msgpack::type::raw_ref payload;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, owner, state_version, owner_epoch,
                 sum, payload);
};

// Format 3: format 2's header and the writer's group.
struct wire_header_v3 {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::uint64_t generation = 0;
  std::string_view writer_node;
  std::string_view writer_worker;
  std::uint8_t cause = 0;
  std::string_view owner;
  std::uint32_t state_version = 0;
  std::uint64_t owner_epoch = 0;
  std::string_view group;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, owner, state_version, owner_epoch,
                 group);
};

struct wire_parcel_v3 {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::uint64_t generation = 0;
  std::string writer_node;
  std::string writer_worker;
  std::uint8_t cause = 0;
  std::string owner;
  std::uint32_t state_version = 0;
  std::uint64_t owner_epoch = 0;
  std::string group;
  std::uint64_t sum = 0;
  msgpack::type::raw_ref payload;
  MSGPACK_DEFINE(magic, version, generation, writer_node, writer_worker, cause, owner, state_version, owner_epoch,
                 group, sum, payload);
};

// The header's encoding is summed as it is written (FNV-1a: a chained seed is a concatenation).
struct checksum_sink {
  std::uint64_t sum;
  void write(const char* data, std::size_t size) { sum = checksum(data, size, sum); }
};

template <class Header>
std::uint64_t sum_of(const Header& h, const char* payload, std::size_t size) {
  checksum_sink header{checksum_seed};
  msgpack::pack(header, h);
  return checksum(payload, size, header.sum);
}

std::uint64_t sum_v2(const wire_header_v2& h, const char* payload, std::size_t size) {
  return sum_of(h, payload, size);
}

[[noreturn]] void undecodable(const std::exception& e) {
  throw codec_error(std::string("parcel does not decode: ") + e.what());
}

void check_cause(std::uint8_t cause) {
  if (cause > static_cast<std::uint8_t>(parcel_cause::quit))
    throw codec_error("unknown parcel cause " + std::to_string(cause));
}

// Reads the msgpack header of a parcel field by field (only the types encode() writes).
struct header_cursor {
  const unsigned char* at;
  const unsigned char* end;
  bool truncated = false;

  bool need(std::size_t n) {
    if (static_cast<std::size_t>(end - at) >= n)
      return true;
    truncated = true;
    return false;
  }
  std::optional<std::uint64_t> big_endian(std::size_t n) {
    if (!need(n))
      return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v = (v << 8) | at[i];
    at += n;
    return v;
  }
  std::optional<std::uint64_t> array_size() {
    if (!need(1))
      return std::nullopt;
    unsigned char t = *at++;
    if ((t & 0xf0) == 0x90)
      return t & 0x0f;
    if (t == 0xdc)
      return big_endian(2);
    if (t == 0xdd)
      return big_endian(4);
    return std::nullopt;
  }
  std::optional<std::uint64_t> uint() {
    if (!need(1))
      return std::nullopt;
    unsigned char t = *at++;
    if (t <= 0x7f)
      return t;
    switch (t) {
      case 0xcc: return big_endian(1);
      case 0xcd: return big_endian(2);
      case 0xce: return big_endian(4);
      case 0xcf: return big_endian(8);
      default: return std::nullopt;
    }
  }
  bool skip_str() {
    if (!need(1))
      return false;
    unsigned char t = *at++;
    std::optional<std::uint64_t> n;
    if ((t & 0xe0) == 0xa0)
      n = t & 0x1f;
    else if (t == 0xd9)
      n = big_endian(1);
    else if (t == 0xda)
      n = big_endian(2);
    else if (t == 0xdb)
      n = big_endian(4);
    if (!n || !need(*n))
      return false;
    at += *n;
    return true;
  }
};

}  // namespace

std::optional<std::uint64_t> peek_owner_epoch(const char* data, std::size_t size, bool* truncated) noexcept {
  header_cursor c{reinterpret_cast<const unsigned char*>(data), reinterpret_cast<const unsigned char*>(data) + size};
  auto done = [&](std::optional<std::uint64_t> v) {
    if (truncated)
      *truncated = !v && c.truncated;
    return v;
  };
  auto n = c.array_size();
  auto magic = n ? c.uint() : std::nullopt;
  auto version = magic ? c.uint() : std::nullopt;
  if (!version || *magic != parcel::magic)
    return done(std::nullopt);
  if (*version == 1)
    return done(*n == 8 ? std::optional<std::uint64_t>(0) : std::nullopt);
  if (!((*version == 2 && *n == 11) || (*version == 3 && *n == 12)))
    return done(std::nullopt);
  // generation, writer_node, writer_worker, cause, owner, state_version, owner_epoch
  if (!c.uint() || !c.skip_str() || !c.skip_str() || !c.uint() || !c.skip_str() || !c.uint())
    return done(std::nullopt);
  return done(c.uint());
}

const char* to_string(parcel_cause cause) noexcept {
  switch (cause) {
    case parcel_cause::freeze: return "freeze";
    case parcel_cause::login: return "login";
    case parcel_cause::checkpoint: return "checkpoint";
    case parcel_cause::quit: return "quit";
  }
  return "unknown";
}

std::uint64_t checksum(const char* data, std::size_t size, std::uint64_t seed) noexcept {
  std::uint64_t h = seed;
  for (std::size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

bytes encode(const parcel& p) {
  return encode(p, p.owner);
}

bytes encode(const parcel& p, std::string_view owner) {
  wire_header_v3 h;
  h.magic = parcel::magic;
  h.version = parcel::format_version;
  h.generation = p.generation;
  h.writer_node = p.writer_node;
  h.writer_worker = p.writer_worker;
  h.cause = static_cast<std::uint8_t>(p.cause);
  h.owner = owner;
  h.state_version = p.state_version;
  h.owner_epoch = p.owner_epoch;
  h.group = p.group;
  const std::uint64_t sum = sum_of(h, p.payload.data(), p.payload.size());
  bytes out;
  out.reserve(p.payload.size() + 128 + h.writer_node.size() + h.writer_worker.size() + h.owner.size() + h.group.size());
  detail::bytes_sink sink{out};
  msgpack::packer<detail::bytes_sink> pk(sink);
  pk.pack_array(12);
  pk.pack(h.magic);
  pk.pack(h.version);
  pk.pack(h.generation);
  pk.pack(h.writer_node);
  pk.pack(h.writer_worker);
  pk.pack(h.cause);
  pk.pack(h.owner);
  pk.pack(h.state_version);
  pk.pack(h.owner_epoch);
  pk.pack(h.group);
  pk.pack(sum);
  pk.pack(msgpack::type::raw_ref(p.payload.data(), static_cast<std::uint32_t>(p.payload.size())));
  return out;
}

parcel decode(const char* data, std::size_t size) {
  msgpack::object_handle handle;
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  try {
    handle = msgpack::unpack(data, size, nullptr, nullptr, unpack_limits_for(size));
    const auto& o = handle.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size < 2)
      throw codec_error("not a parcel (not a header array)");
    magic = o.via.array.ptr[0].as<std::uint32_t>();
    if (magic == parcel::magic)
      version = o.via.array.ptr[1].as<std::uint16_t>();
  } catch (const codec_error&) {
    throw;
  } catch (const std::exception& e) {
    undecodable(e);
  }
  if (magic != parcel::magic)
    throw codec_error("not a parcel (bad magic)");
  parcel p;
  if (version == 1) {
    wire_parcel_v1 w;
    try {
      handle.get().convert(w);
    } catch (const std::exception& e) {
      undecodable(e);
    }
    check_cause(w.cause);
    if (checksum(w.payload.ptr, w.payload.size) != w.sum)
      throw codec_error("parcel checksum mismatch");
    p.generation = w.generation;
    p.writer_node = std::move(w.writer_node);
    p.writer_worker = std::move(w.writer_worker);
    p.cause = static_cast<parcel_cause>(w.cause);
    p.payload.assign(w.payload.ptr, w.payload.ptr + w.payload.size);
    return p;
  }
  if (version == 3) {
    wire_parcel_v3 w;
    try {
      handle.get().convert(w);
    } catch (const std::exception& e) {
      undecodable(e);
    }
    wire_header_v3 h{w.magic, w.version, w.generation, w.writer_node, w.writer_worker, w.cause,
                     w.owner, w.state_version, w.owner_epoch, w.group};
    if (sum_of(h, w.payload.ptr, w.payload.size) != w.sum)
      throw codec_error("parcel checksum mismatch");
    check_cause(w.cause);
    p.generation = w.generation;
    p.writer_node = std::move(w.writer_node);
    p.writer_worker = std::move(w.writer_worker);
    p.cause = static_cast<parcel_cause>(w.cause);
    p.owner = std::move(w.owner);
    p.state_version = w.state_version;
    p.owner_epoch = w.owner_epoch;
    p.group = std::move(w.group);
    p.payload.assign(w.payload.ptr, w.payload.ptr + w.payload.size);
    return p;
  }
  if (version != 2)
    throw codec_error("unknown parcel format version " + std::to_string(version));
  wire_parcel_v2 w;
  try {
    handle.get().convert(w);
  } catch (const std::exception& e) {
    undecodable(e);
  }
  wire_header_v2 h{w.magic, w.version, w.generation, w.writer_node, w.writer_worker, w.cause,
                   w.owner, w.state_version, w.owner_epoch};
  if (sum_v2(h, w.payload.ptr, w.payload.size) != w.sum)
    throw codec_error("parcel checksum mismatch");
  check_cause(w.cause);
  p.generation = w.generation;
  p.writer_node = std::move(w.writer_node);
  p.writer_worker = std::move(w.writer_worker);
  p.cause = static_cast<parcel_cause>(w.cause);
  p.owner = std::move(w.owner);
  p.state_version = w.state_version;
  p.owner_epoch = w.owner_epoch;
  p.payload.assign(w.payload.ptr, w.payload.ptr + w.payload.size);
  return p;
}

}  // namespace troupe::store
