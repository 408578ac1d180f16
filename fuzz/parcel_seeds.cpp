// Writes the parcel seed corpus (tests/fuzz/parcel/) with the real encoder:
// parcels as the deposit holds them (a notes user, a tally user, a connection
// record) and their bare payloads. Not part of fuzz_all; run by hand:
//   cmake --build build-fuzz --target parcel_seeds && build-fuzz/bin/parcel_seeds tests/fuzz/parcel
#include "samples/notes/notes.hpp"
#include "samples/tally/tally.hpp"
#include "store/deposit.hpp"
#include "store/parcel.hpp"

#include <fstream>
#include <iostream>
#include <string>

namespace {

void write(const std::string& dir, const std::string& name, const troupe::store::bytes& data) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out)
    throw std::runtime_error("cannot write " + dir + "/" + name);
}

troupe::store::parcel parcel_of(troupe::store::bytes payload, troupe::store::parcel_cause cause, std::uint64_t gen) {
  troupe::store::parcel p;
  p.generation = gen;
  p.writer_node = "node-1";
  p.writer_worker = "default/0";
  p.cause = cause;
  p.payload = std::move(payload);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: parcel_seeds DIR\n";
    return 2;
  }
  using namespace troupe::store;
  std::string dir = argv[1];
  notes_sample::notes_state notes{3, {"hello", "wörld", std::string(40, 'x')}};
  tally_sample::tally_state tally{{{"apples", 3}, {"pears", -2}}};
  connection_record conn{"c0ffee00c0ffee00", "alice", {"p1", "p2"}};
  write(dir, "notes_state.msgpack", pack(notes));
  write(dir, "tally_state.msgpack", pack(tally));
  write(dir, "connection_record.msgpack", pack(conn));
  write(dir, "notes_user.parcel", encode(parcel_of(pack(notes), parcel_cause::freeze, 7)));
  write(dir, "tally_user.parcel", encode(parcel_of(pack(tally), parcel_cause::checkpoint, 1)));
  write(dir, "connection.parcel", encode(parcel_of(pack(conn), parcel_cause::login, 2)));
  write(dir, "empty_payload.parcel", encode(parcel_of({}, parcel_cause::quit, 0)));
  // Format 3 with every header field set: a user of group "staff".
  auto staff = parcel_of(pack(notes_sample::notes_state{3, {"hello", "staff"}}), parcel_cause::freeze, 4);
  staff.writer_worker = "staff-w1";
  staff.owner = "staff_ann";
  staff.state_version = 1;
  staff.owner_epoch = 4294967297ull;
  staff.group = "staff";
  write(dir, "notes_user_v3_group.parcel", encode(staff));
  return 0;
}
