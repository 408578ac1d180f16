#pragma once
/// \file
/// (Internal to transport/.) The frames on a worker process's pipe
/// (transport/worker_pipe.hpp): `u32 size` of what follows, `u8 kind`,
/// `u64 id` (the request's number on its pipe), then the payload. Both ends
/// are the same executable on the same host: integers in host order, the
/// payloads in CAF's binary format. Only plain requests take a pipe, so a
/// request frame carries no actor handle.
///
/// | kind | way | payload |
/// |---|---|---|
/// | request | node → child | the target user actor's id, the request's plain fields |
/// | answer | child → node | the http_response |
/// | extend | child → node | the deferred answer's wait, ms |
/// | dropped | child → node | none: the actor died with the request unanswered |

#include "actors/messages.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

enum class pipe_kind : std::uint8_t { request = 1, answer = 2, extend = 3, dropped = 4 };

/// The bytes before a frame's payload.
inline constexpr std::size_t pipe_header_bytes = 4 + 1 + 8;

/// Whether a request may take a pipe: no channel socket, no streamed body, no
/// app WebSocket (those carry actor handles, which only CAF's middleman can
/// carry across processes).
bool pipes_carry(const http_request& req) noexcept;

/// Appends one frame to `out`. put_request and put_answer return false (and
/// leave `out` as it was) when the frame would exceed `max_frame` bytes.
bool put_request(std::vector<char>& out, std::uint64_t id, std::uint64_t target, const http_request& req,
                 std::size_t max_frame);
bool put_answer(std::vector<char>& out, std::uint64_t id, const http_response& r, std::size_t max_frame);
void put_extend(std::vector<char>& out, std::uint64_t id, std::chrono::milliseconds wait);
void put_dropped(std::vector<char>& out, std::uint64_t id);

/// One frame as read: its payload points into the reader's buffer (valid until the next read).
struct pipe_frame {
  pipe_kind kind = pipe_kind::request;
  std::uint64_t id = 0;
  const char* payload = nullptr;
  std::size_t size = 0;
};

/// Decodes a frame's payload; false when it is not one of its kind.
bool get_request(const pipe_frame& f, std::uint64_t& target, http_request& req);
bool get_answer(const pipe_frame& f, http_response& r);
bool get_extend(const pipe_frame& f, std::chrono::milliseconds& wait);

/// Cuts what a pipe's reads bring into frames: every read goes into
/// prepare(), and next() gives the frames it completed.
class pipe_reader {
public:
  /// `max_frame`: a frame announcing more than this is an error (limits.worker_pipe_frame_bytes).
  explicit pipe_reader(std::size_t max_frame);

  /// Room for the next read (at least 64 KiB, or what the frame begun needs).
  char* space();
  std::size_t space_size() const noexcept { return buf_.size() - end_; }
  /// `n` bytes were read into space().
  void commit(std::size_t n) noexcept { end_ += n; }

  /// The next complete frame, or nullopt (read more). Sets `error` on a frame
  /// past the limit or of an unknown kind: the pipe is then unusable.
  std::optional<pipe_frame> next(std::string& error);

private:
  std::size_t max_frame_;
  std::vector<char> buf_;
  std::size_t begin_ = 0;  // the first byte not consumed
  std::size_t end_ = 0;    // past the last byte read
};

}  // namespace troupe
