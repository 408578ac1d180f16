#pragma once
/// \file
/// Streaming responses (SSE, NDJSON) between a user actor and the front
/// (docs/streaming.md): the messages of the data path, which may cross nodes
/// (the user may live on another node than the front holding the socket), and
/// the plain classes both ends are built on — the frame encoders and the
/// writer's credit window.
///
/// The data path: the user's writer sends `stream_chunk`s (one framed event
/// each) to the front-side sink actor of the stream (transport/stream_sink.hpp);
/// the sink queues them (bounded), writes them one batch at a time, and grants
/// the written bytes back as credit (`stream_event::kind::credit`). A writer
/// never has more than its window of bytes unacknowledged, so a slow reader
/// makes the writer run out of credit — the actor is told — instead of making
/// any queue grow.

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace caf {
class actor_system_config;
}

namespace troupe {

/// A stream's data or control message (CAF has its own "stream" atom: not that one).
using stream_msg_atom = caf::atom_constant<caf::atom("tstream")>;

/// The wire format of a stream.
enum class stream_format : std::uint8_t { sse = 0, ndjson = 1 };

/// The Content-Type of `f`'s responses.
const char* content_type_of(stream_format f) noexcept;

/// Writer → sink: one framed event (or the end of the stream).
struct stream_chunk {
  std::uint64_t id = 0;  ///< the stream (unique within its user actor)
  std::string data;      ///< framed bytes (an SSE event, an NDJSON line); may be empty with `last`
  bool last = false;     ///< the writer closed the stream: end it once `data` is written
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stream_chunk& x) {
  return f(caf::meta::type_name("troupe.stream_chunk"), x.id, x.data, x.last);
}

/// A stream's sink as its writer sees it: a part of stream_sink_handle
/// (transport/stream_sink.hpp, above actors/), which converts to it implicitly.
using stream_sink_for_writers = caf::typed_actor<caf::reacts_to<stream_msg_atom, stream_chunk>>;

/// Sink (or front) → writer: what happened to the stream.
struct stream_event {
  enum class kind : std::uint8_t {
    open = 0,    ///< the response head is going out: `sink` takes the chunks, `bytes` is the initial credit
    credit = 1,  ///< `bytes` more were written to the client: that much more may be sent
    gone = 2,    ///< the client disconnected, or the front refused or cut the stream: write no more
    slow = 3,    ///< internal to the writer's actor: its credit ran out (the notice is delivered as a message)
  };
  std::uint64_t id = 0;
  std::uint8_t what = 0;  ///< a kind
  stream_sink_for_writers sink;  ///< open: the sink actor
  std::uint64_t bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stream_event& x) {
  return f(caf::meta::type_name("troupe.stream_event"), x.id, x.what, x.sink, x.bytes);
}

/// A stream's writer as its sink sees it: a part of user_handle (actors/user.hpp),
/// which converts to it implicitly.
using stream_writer_for_sinks = caf::typed_actor<caf::reacts_to<stream_msg_atom, stream_event>>;

/// Registers the stream messages with `cfg` (called by register_types).
void register_stream_types(caf::actor_system_config& cfg);

namespace streaming {

/// One SSE event: `event: name` and `id: id` lines when given, one `data:`
/// line per line of `data` ("\r\n", "\r" and "\n" all split), then a blank
/// line. Line breaks in `name` or `id` would forge fields: they are replaced by spaces.
std::string sse_event(std::string_view data, std::string_view name = {}, std::string_view id = {});

/// An SSE comment line (`: text`), ignored by clients; keeps idle proxies from cutting the stream.
std::string sse_comment(std::string_view text);

/// One NDJSON line: `value` serialized compactly (no raw line break can
/// occur in it: JSON escapes them) and "\n". Invalid UTF-8 is replaced.
std::string ndjson_line(const nlohmann::json& value);

/// The writer's side of the credit protocol: how many bytes it may still send
/// before the sink has written what it sent already. Plain class (one per
/// stream, in the user actor).
class credit_window {
public:
  /// Starts with `initial` bytes of credit (the sink's window).
  explicit credit_window(std::uint64_t initial = 0) noexcept : available_(initial) {}

  /// Takes `n` bytes if that much credit is left; otherwise takes nothing,
  /// turns slow and returns false (the caller tells the actor once: became_slow()).
  bool take(std::uint64_t n) noexcept;
  /// The sink wrote `n` more bytes. True when this ends a slow spell — the
  /// credit covers the write that was refused — (the caller tells the actor it may write again).
  bool grant(std::uint64_t n) noexcept;

  std::uint64_t available() const noexcept { return available_; }
  bool slow() const noexcept { return slow_; }
  /// True once per slow spell, right after the take() that began it.
  bool became_slow() noexcept { return std::exchange(fresh_slow_, false); }

private:
  std::uint64_t available_;
  bool slow_ = false;
  bool fresh_slow_ = false;
  std::uint64_t wanted_ = 0;  // the refused write's size
};

}  // namespace streaming

}  // namespace troupe
