#include "transport/worker_pipe_wire.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <cstring>

namespace troupe {

namespace {

constexpr std::size_t min_read_room = 64 * 1024;

void put_header(std::vector<char>& out, std::size_t at, pipe_kind kind, std::uint64_t id) {
  auto size = static_cast<std::uint32_t>(out.size() - at - 4);
  std::memcpy(out.data() + at, &size, 4);
  out[at + 4] = static_cast<char>(kind);
  std::memcpy(out.data() + at + 5, &id, 8);
}

// Reserves a header at the end of `out`: its offset.
std::size_t open_frame(std::vector<char>& out) {
  auto at = out.size();
  out.resize(at + pipe_header_bytes);
  return at;
}

// Closes the frame opened at `at`, or takes it back when it is past `max_frame` (or failed).
bool close_frame(std::vector<char>& out, std::size_t at, pipe_kind kind, std::uint64_t id, bool ok,
                 std::size_t max_frame) {
  if (!ok || out.size() - at > max_frame) {
    out.resize(at);
    return false;
  }
  put_header(out, at, kind, id);
  return true;
}

}  // namespace

bool pipes_carry(const http_request& req) noexcept {
  return !req.channel && !req.upload_from && req.socket == socket_event::none && !req.answer_to;
}

bool put_request(std::vector<char>& out, std::uint64_t id, std::uint64_t target, const http_request& req,
                 std::size_t max_frame) {
  auto at = open_frame(out);
  caf::binary_serializer sink{nullptr, out};
  auto& r = const_cast<http_request&>(req);  // the serializer only reads
  auto err = sink(target, r.method, r.path, r.query, r.body, r.cid, r.page, r.headers, r.deadline_ms, r.client);
  return close_frame(out, at, pipe_kind::request, id, !err, max_frame);
}

bool put_answer(std::vector<char>& out, std::uint64_t id, const http_response& r, std::size_t max_frame) {
  auto at = open_frame(out);
  caf::binary_serializer sink{nullptr, out};
  auto err = sink(const_cast<http_response&>(r));
  return close_frame(out, at, pipe_kind::answer, id, !err, max_frame);
}

void put_extend(std::vector<char>& out, std::uint64_t id, std::chrono::milliseconds wait) {
  auto at = open_frame(out);
  auto ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, wait.count()));
  out.resize(at + pipe_header_bytes + 8);
  std::memcpy(out.data() + at + pipe_header_bytes, &ms, 8);
  put_header(out, at, pipe_kind::extend, id);
}

void put_dropped(std::vector<char>& out, std::uint64_t id) {
  put_header(out, open_frame(out), pipe_kind::dropped, id);
}

bool get_request(const pipe_frame& f, std::uint64_t& target, http_request& r) {
  caf::binary_deserializer source{static_cast<caf::execution_unit*>(nullptr), f.payload, f.size};
  auto err = source(target, r.method, r.path, r.query, r.body, r.cid, r.page, r.headers, r.deadline_ms, r.client);
  return !err && source.remaining() == 0;
}

bool get_answer(const pipe_frame& f, http_response& r) {
  caf::binary_deserializer source{static_cast<caf::execution_unit*>(nullptr), f.payload, f.size};
  auto err = source(r);
  return !err && source.remaining() == 0;
}

bool get_extend(const pipe_frame& f, std::chrono::milliseconds& wait) {
  if (f.size != 8)
    return false;
  std::uint64_t ms = 0;
  std::memcpy(&ms, f.payload, 8);
  wait = std::chrono::milliseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(ms, INT64_MAX)));
  return true;
}

pipe_reader::pipe_reader(std::size_t max_frame) : max_frame_(max_frame), buf_(min_read_room) {}

char* pipe_reader::space() {
  if (begin_ == end_)
    begin_ = end_ = 0;
  // The frame begun, whole, and room to read after it: move it to the front, grow if it needs to.
  std::size_t need = min_read_room;
  if (end_ - begin_ >= 4) {
    std::uint32_t size = 0;
    std::memcpy(&size, buf_.data() + begin_, 4);
    if (size <= max_frame_)
      need = std::max<std::size_t>(need, 4 + size - (end_ - begin_));
  }
  if (buf_.size() - end_ < need) {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < need)
      buf_.resize(end_ + need);
  }
  return buf_.data() + end_;
}

std::optional<pipe_frame> pipe_reader::next(std::string& error) {
  auto have = end_ - begin_;
  if (have < 4)
    return std::nullopt;
  std::uint32_t size = 0;
  std::memcpy(&size, buf_.data() + begin_, 4);
  if (size > max_frame_ || size < pipe_header_bytes - 4) {
    error = "a frame of " + std::to_string(size) + " bytes (limits.worker_pipe_frame_bytes = " +
            std::to_string(max_frame_) + ")";
    return std::nullopt;
  }
  if (have < 4 + std::size_t{size})
    return std::nullopt;
  const char* at = buf_.data() + begin_;
  pipe_frame f;
  auto kind = static_cast<std::uint8_t>(at[4]);
  if (kind < 1 || kind > 4) {
    error = "a frame of unknown kind " + std::to_string(kind);
    return std::nullopt;
  }
  f.kind = static_cast<pipe_kind>(kind);
  std::memcpy(&f.id, at + 5, 8);
  f.payload = at + pipe_header_bytes;
  f.size = 4 + std::size_t{size} - pipe_header_bytes;
  begin_ += 4 + std::size_t{size};
  return f;
}

}  // namespace troupe
