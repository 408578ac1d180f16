#include "actors/stream_book.hpp"

namespace troupe {

std::optional<std::uint64_t> stream_book::open(stream_format format, stream_handlers handlers, clock::time_point now,
                                               clock::time_point stale_before, std::size_t max) {
  for (auto it = streams_.begin(); it != streams_.end();)
    it = (!it->second.sink && it->second.since < stale_before) ? streams_.erase(it) : std::next(it);
  if (streams_.size() >= max)
    return std::nullopt;
  auto id = ++stream_seq_;
  entry e;
  e.format = format;
  e.handlers = std::move(handlers);
  e.since = now;
  streams_.emplace(id, std::move(e));
  return id;
}

stream_book::entry* stream_book::find(std::uint64_t id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : &it->second;
}

const stream_book::entry* stream_book::find(std::uint64_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : &it->second;
}

std::optional<std::uint64_t> stream_book::find_by_sink(const caf::actor_addr& sink) const {
  for (auto& [id, e] : streams_)
    if (e.sink && e.sink.address() == sink)
      return id;
  return std::nullopt;
}

std::optional<std::uint64_t> stream_book::add_timer(std::function<void()> fn, std::size_t max) {
  if (timers_.size() >= max)
    return std::nullopt;
  auto id = ++timer_seq_;
  timers_.emplace(id, std::move(fn));
  return id;
}

std::optional<std::function<void()>> stream_book::take_timer(std::uint64_t id) {
  auto it = timers_.find(id);
  if (it == timers_.end())
    return std::nullopt;
  auto fn = std::move(it->second);
  timers_.erase(it);
  return fn;
}

}  // namespace troupe
