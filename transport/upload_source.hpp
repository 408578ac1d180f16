#pragma once
/// \file
/// (Internal to transport/.) The front side of one streamed request body
/// (docs/http.md "Streamed uploads"): a small actor per body in flight, on the
/// node whose front holds the socket. Its reader (the user actor, maybe on
/// another node) grants it credit; it asks its HTTP session to read within
/// it, a piece at a time, and sends what was read to the reader. Nothing is
/// read that was not granted: the reader grants two pieces at first and each
/// piece back once it has taken it, so at most two are held per upload (one
/// read while the reader takes the other). It
/// watches its reader: gone, the session stops reading (and closes the
/// connection once answered).

#include "actors/upload.hpp"

#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>

namespace caf {
class actor_system;
}

namespace troupe {

/// The HTTP session as its source sees it (local only; calls are posted onto the session's strand).
class upload_port {
public:
  virtual ~upload_port() = default;
  /// Reads at most `max` more body bytes; the session sends them to the source as an upload_piece.
  virtual void read(std::uint64_t max) = 0;
  /// The reader is done with the body (answered, failed or gone): nothing more is read.
  virtual void stop() = 0;
};

/// The source's typed interface: its reader's side, and its session's (the pieces read).
using upload_source_actor = upload_source_handle::extend<caf::reacts_to<upload_atom, upload_piece>>;

/// Spawns the source of one body read by `port`'s session. It ends after the
/// last piece, an aborted one, its reader's stop or its reader's end.
upload_source_actor spawn_upload_source(caf::actor_system& sys, std::shared_ptr<upload_port> port);

}  // namespace troupe
