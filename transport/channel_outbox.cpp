#include "transport/channel_outbox.hpp"

#include "config/channel_settings.hpp"

namespace troupe {

channel_outbox::offer_result channel_outbox::offer(ws_frame frame, std::size_t* dropped) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (dropped)
    *dropped = 0;
  if (closed_)
    return offer_result::closed;
  if (frame.data.size() > limits_.max_bytes)
    return offer_result::too_big;
  auto full = [&] { return frames_.size() + 1 > limits_.max_frames || bytes_ + frame.data.size() > limits_.max_bytes; };
  if (full()) {
    if (limits_.overflow == policy::close) {
      overflowed_ = closed_ = true;
      frames_.clear();
      bytes_ = 0;
      return offer_result::overflow;
    }
    while (!frames_.empty() && full()) {
      bytes_ -= frames_.front().data.size();
      frames_.pop_front();
      if (dropped)
        ++*dropped;
    }
  }
  bytes_ += frame.data.size();
  frames_.push_back(std::move(frame));
  return offer_result::queued;
}

std::optional<ws_frame> channel_outbox::take() {
  std::lock_guard<std::mutex> guard{mutex_};
  if (closed_ || frames_.empty())
    return std::nullopt;
  auto f = std::move(frames_.front());
  frames_.pop_front();
  bytes_ -= f.data.size();
  return f;
}

void channel_outbox::close() {
  std::lock_guard<std::mutex> guard{mutex_};
  closed_ = true;
  frames_.clear();
  bytes_ = 0;
}

bool channel_outbox::closed() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return closed_;
}

bool channel_outbox::overflowed() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return overflowed_;
}

std::size_t channel_outbox::size() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return frames_.size();
}

std::size_t channel_outbox::bytes() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return bytes_;
}

channel_outbox::limits outbox_limits(const config::channel_settings& c) {
  channel_outbox::limits l;
  l.max_frames = c.max_queued_frames;
  l.max_bytes = c.max_queued_bytes;
  l.overflow = c.overflow == "drop_oldest" ? channel_outbox::policy::drop_oldest : channel_outbox::policy::close;
  return l;
}

}  // namespace troupe
