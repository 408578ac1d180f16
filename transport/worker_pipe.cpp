#include "transport/worker_pipe.hpp"

#include "actors/node_context.hpp"
#include "actors/worker_pipes.hpp"
#include "config/limits_settings.hpp"
#include "transport/worker_pipe_wire.hpp"

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <unistd.h>
#include <utility>
#include <vector>

namespace troupe {

namespace net = boost::asio;

namespace {

thread_local worker_pipes_here* pipes_of_this_thread = nullptr;

}  // namespace

// One io thread's pipe to one worker process: do_x/on_x pairs, one write in
// flight carrying every request queued while the last one was out.
class worker_pipes_here::pipe : public std::enable_shared_from_this<pipe> {
public:
  pipe(net::io_context& ioc, int fd, node_context& ctx)
    : socket_(ioc), ctx_(ctx), max_frame_(ctx.limits().worker_pipe_frame_bytes), reader_(max_frame_),
      retry_after_(static_cast<std::uint32_t>(std::max(1.0, ctx.limits().hold_seconds))) {
    boost::system::error_code ec;
    socket_.assign(net::local::stream_protocol{}, fd, ec);
    if (ec) {
      ::close(fd);
      open_ = false;
    }
  }

  bool open() const noexcept { return open_; }

  void start() {
    if (open_)
      do_read();
  }

  bool send(std::uint64_t target, local_reply& slot) {
    auto& m = ctx_.metrics.piped;
    if (static_cast<std::uint64_t>(m.pending.fetch_add(1, std::memory_order_relaxed)) >=
        ctx_.limits().max_forwarded_requests) {
      m.pending.fetch_sub(1, std::memory_order_relaxed);
      m.refused.fetch_add(1, std::memory_order_relaxed);
      slot->deliver(error_response(
        503, "too many requests in flight to worker processes (limits.max_forwarded_requests), retry", retry_after_));
      return true;
    }
    auto id = ++next_id_;
    if (!put_request(out_, id, target, slot->request(), max_frame_)) {
      m.pending.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    pending_.emplace(id, std::move(slot));
    if (!flushing_) {  // after the handlers ready now: the requests they bring go in the same write
      flushing_ = true;
      net::post(socket_.get_executor(), [self = shared_from_this()] { self->do_write(); });
    }
    return true;
  }

  // The pipe ends: everything in flight on it is released undelivered (the front re-resolves).
  void close(const char* why) {
    if (!open_)
      return;
    open_ = false;
    boost::system::error_code ignored;
    socket_.close(ignored);
    auto flying = std::exchange(pending_, {});
    auto& m = ctx_.metrics.piped;
    m.pending.fetch_sub(static_cast<std::int64_t>(flying.size()), std::memory_order_relaxed);
    m.released.fetch_add(flying.size(), std::memory_order_relaxed);
    if (!flying.empty() || why)
      spdlog::debug("worker pipe: closed{}{} with {} request(s) in flight", why ? ": " : "", why ? why : "",
                    flying.size());
  }

private:
  void do_write() {
    if (!open_ || out_.empty()) {
      flushing_ = false;
      return;
    }
    std::swap(out_, writing_);
    ctx_.metrics.piped.writes.fetch_add(1, std::memory_order_relaxed);
    net::async_write(socket_, net::buffer(writing_),
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(const boost::system::error_code& ec) {
    writing_.clear();
    if (ec)
      return close(ec == net::error::operation_aborted ? nullptr : "its write failed");
    do_write();
  }

  void do_read() {
    socket_.async_read_some(net::buffer(reader_.space(), reader_.space_size()),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                              self->on_read(ec, n);
                            });
  }

  void on_read(const boost::system::error_code& ec, std::size_t n) {
    if (ec)  // end of file: its process is gone
      return close(nullptr);
    reader_.commit(n);
    std::string error;
    while (auto f = reader_.next(error))
      if (!on_frame(*f))
        return close("a frame that is not an answer");
    if (!error.empty()) {
      spdlog::error("worker pipe: {}; closed (its requests fail as if its process had died)", error);
      return close(nullptr);
    }
    do_read();
  }

  bool on_frame(const pipe_frame& f) {
    auto i = pending_.find(f.id);
    switch (f.kind) {
      case pipe_kind::answer: {
        http_response r;
        if (!get_answer(f, r))
          return false;
        if (i == pending_.end())
          return true;
        auto slot = std::move(i->second);
        pending_.erase(i);
        auto& m = ctx_.metrics.piped;
        m.pending.fetch_sub(1, std::memory_order_relaxed);
        m.answered.fetch_add(1, std::memory_order_relaxed);
        slot->deliver(std::move(r));
        return true;
      }
      case pipe_kind::extend: {
        std::chrono::milliseconds wait{};
        if (!get_extend(f, wait))
          return false;
        if (i != pending_.end())
          i->second->extend(wait);
        return true;
      }
      case pipe_kind::dropped:
        if (i != pending_.end()) {
          auto slot = std::move(i->second);  // destroyed undelivered below: the front's on_dropped
          pending_.erase(i);
          auto& m = ctx_.metrics.piped;
          m.pending.fetch_sub(1, std::memory_order_relaxed);
          m.released.fetch_add(1, std::memory_order_relaxed);
        }
        return true;
      case pipe_kind::request:
        return false;
    }
    return false;
  }

  net::local::stream_protocol::socket socket_;
  node_context& ctx_;
  std::size_t max_frame_;
  pipe_reader reader_;
  std::uint32_t retry_after_;
  std::unordered_map<std::uint64_t, local_reply> pending_;
  std::vector<char> out_, writing_;
  std::uint64_t next_id_ = 0;
  bool flushing_ = false;  // a write is posted or in flight
  bool open_ = true;
};

worker_pipes_here::worker_pipes_here(net::io_context& ioc, node_context& ctx, std::size_t index)
  : ioc_(ioc), ctx_(ctx), directory_(*ctx.worker_pipes), index_(index) {}

worker_pipes_here::~worker_pipes_here() {
  if (pipes_of_this_thread == this)
    pipes_of_this_thread = nullptr;
  for (auto& [node, p] : pipes_)
    p->close(nullptr);
}

worker_pipes_here* worker_pipes_here::current() noexcept { return pipes_of_this_thread; }

void worker_pipes_here::install() noexcept { pipes_of_this_thread = this; }

std::size_t worker_pipes_here::open_pipes() const {
  return static_cast<std::size_t>(std::count_if(pipes_.begin(), pipes_.end(), [](auto& p) { return p.second->open(); }));
}

std::shared_ptr<worker_pipes_here::pipe> worker_pipes_here::find(const caf::node_id& node) {
  auto i = pipes_.find(node);
  if (i != pipes_.end() && i->second->open())
    return i->second;
  auto version = directory_.version();
  if (version == seen_version_)  // nothing published or withdrawn since this thread last looked
    return nullptr;
  seen_version_ = version;
  for (auto p = pipes_.begin(); p != pipes_.end();) {  // the ended ones and the withdrawn ones go
    if (!p->second->open() || !directory_.serves(p->first)) {
      p->second->close(nullptr);
      p = pipes_.erase(p);
    } else {
      ++p;
    }
  }
  for (auto& [child, fd] : directory_.take_all(index_)) {  // every new one: a miss below is then a true one
    auto fresh = std::make_shared<pipe>(ioc_, fd, ctx_);
    if (!fresh->open())
      continue;
    fresh->start();
    pipes_[child] = std::move(fresh);
  }
  i = pipes_.find(node);
  return i != pipes_.end() ? i->second : nullptr;
}

bool worker_pipes_here::send(const user_handle& target, local_reply& slot) {
  auto p = find(target.node());
  return p && p->send(target.id(), slot);
}

}  // namespace troupe
