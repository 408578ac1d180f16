#include "store/parcel.hpp"

namespace troupe::store {

namespace {

// The header as it sits on the wire: a positional msgpack array.
struct wire_parcel {
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

}  // namespace

const char* to_string(parcel_cause cause) noexcept {
  switch (cause) {
    case parcel_cause::freeze: return "freeze";
    case parcel_cause::login: return "login";
    case parcel_cause::checkpoint: return "checkpoint";
    case parcel_cause::quit: return "quit";
  }
  return "unknown";
}

std::uint64_t checksum(const char* data, std::size_t size) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

bytes encode(const parcel& p) {
  wire_parcel w;
  w.magic = parcel::magic;
  w.version = parcel::format_version;
  w.generation = p.generation;
  w.writer_node = p.writer_node;
  w.writer_worker = p.writer_worker;
  w.cause = static_cast<std::uint8_t>(p.cause);
  w.sum = checksum(p.payload.data(), p.payload.size());
  w.payload = msgpack::type::raw_ref(p.payload.data(), static_cast<std::uint32_t>(p.payload.size()));
  return pack(w);
}

parcel decode(const char* data, std::size_t size) {
  wire_parcel w;
  msgpack::object_handle handle;
  try {
    handle = msgpack::unpack(data, size, nullptr, nullptr, unpack_limits_for(size));
    handle.get().convert(w);
  } catch (const std::exception& e) {
    throw codec_error(std::string("parcel does not decode: ") + e.what());
  }
  if (w.magic != parcel::magic)
    throw codec_error("not a parcel (bad magic)");
  if (w.version != parcel::format_version)
    throw codec_error("unknown parcel format version " + std::to_string(w.version));
  if (w.cause > static_cast<std::uint8_t>(parcel_cause::quit))
    throw codec_error("unknown parcel cause " + std::to_string(w.cause));
  if (checksum(w.payload.ptr, w.payload.size) != w.sum)
    throw codec_error("parcel checksum mismatch");
  parcel p;
  p.generation = w.generation;
  p.writer_node = std::move(w.writer_node);
  p.writer_worker = std::move(w.writer_worker);
  p.cause = static_cast<parcel_cause>(w.cause);
  p.payload.assign(w.payload.ptr, w.payload.ptr + w.payload.size);
  return p;
}

}  // namespace troupe::store
