#pragma once
/// \file
/// Streamed request bodies (docs/http.md "Streamed uploads"): the messages
/// between a user actor reading a body and the front-side source that reads
/// it from the socket (transport/upload_source.hpp). They may cross nodes: the
/// user may live on another member than the front holding the socket.
///
/// Credit: the source reads nothing until its reader asks, and then at most
/// what was asked; the reader asks again only once its handler has taken the
/// piece. So a body in flight holds at most one piece in memory.

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

namespace caf {
class actor_system_config;
}

namespace troupe {

using upload_atom = caf::atom_constant<caf::atom("upload")>;

/// Source → reader: the next piece of the body, its end, or why it broke.
struct upload_piece {
  std::uint64_t id = 0;  ///< the upload's number in its reader
  std::string bytes;     ///< body bytes (may be empty with `last` or `aborted`)
  bool last = false;     ///< the body is complete after these bytes
  std::string aborted;   ///< not empty: the body broke (the client went away, a limit), and why
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, upload_piece& x) {
  return f(caf::meta::type_name("troupe.upload_piece"), x.id, x.bytes, x.last, x.aborted);
}

/// The reader as the source sees it: a part of user_handle, which converts to it.
using upload_reader_handle = caf::typed_actor<caf::reacts_to<upload_atom, upload_piece>>;

/// The source as the reader sees it: `(upload_atom, reader, id, credit)` reads
/// on, at most `credit` bytes, sent to `reader` as upload `id`; credit 0: the
/// reader is done with the body (what is left of it is not read).
using upload_source_handle =
  caf::typed_actor<caf::reacts_to<upload_atom, upload_reader_handle, std::uint64_t, std::uint64_t>>;

/// Registers the upload messages with `cfg` (called by register_types).
void register_upload_types(caf::actor_system_config& cfg);

}  // namespace troupe
