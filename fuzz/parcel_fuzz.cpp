// libFuzzer target: the parcel decoder, store::decode (store/parcel.hpp), and
// store::unpack of the payloads troupe reads back from parcels: a
// connection_record (store/deposit.hpp) and the samples' states
// (notes_state, tally_state).
//
// The input (tests/fuzz/parcel/, written by fuzz/parcel_seeds.cpp) is used
//  1. as a whole parcel: decode(); a codec_error is the expected answer to bad
//     bytes. A parcel that decodes re-encodes to a parcel that decodes equal.
//  2. as a payload: unpack() as each payload type; codec_error expected.
//     (A fuzzed parcel rarely carries the right checksum, so the payload
//     decoders are also driven directly.)
//  3. as the payload of a parcel encode() makes: it must decode back equal.
// Any other exception escapes (abort: a finding), as does a crash.

#include "samples/notes/notes.hpp"
#include "samples/tally/tally.hpp"
#include "store/deposit.hpp"
#include "store/parcel.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using namespace troupe;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "parcel_fuzz: invariant broken: %s\n", what);
  std::abort();
}

bool same(const store::parcel& a, const store::parcel& b) {
  return a.generation == b.generation && a.writer_node == b.writer_node && a.writer_worker == b.writer_worker
         && a.cause == b.cause && a.payload == b.payload;
}

template <class T>
void unpack_as(const char* data, std::size_t size) {
  T out;
  try {
    store::unpack(data, size, out);
    // What decoded encodes again and decodes to the same bytes.
    auto again = store::pack(out);
    T back;
    store::unpack(again, back);
    if (store::pack(back) != again)
      finding("an unpacked state does not round-trip");
  } catch (const store::codec_error&) {
    // Expected for bytes of another shape.
  }
}

void unpack_payloads(const char* data, std::size_t size) {
  unpack_as<store::connection_record>(data, size);
  unpack_as<notes_sample::notes_state>(data, size);
  unpack_as<tally_sample::tally_state>(data, size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const char* data = reinterpret_cast<const char*>(bytes);

  try {
    auto p = store::decode(data, size);
    auto again = store::decode(store::encode(p));
    if (!same(p, again))
      finding("a decoded parcel does not re-encode to itself");
    unpack_payloads(p.payload.data(), p.payload.size());
  } catch (const store::codec_error&) {
    // Expected for bad bytes.
  }

  unpack_payloads(data, size);

  store::parcel made;
  made.generation = size;
  made.writer_node = "node-1";
  made.writer_worker = "default/0";
  made.cause = static_cast<store::parcel_cause>(size % 4);
  made.payload.assign(data, data + size);
  try {
    if (!same(store::decode(store::encode(made)), made))
      finding("an encoded parcel decodes differently");
  } catch (const store::codec_error& e) {
    std::fprintf(stderr, "parcel_fuzz: an encoded parcel does not decode: %s\n", e.what());
    std::abort();
  }
  return 0;
}
