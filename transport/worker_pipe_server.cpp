#include "transport/worker_pipe_server.hpp"

#include "actors/user.hpp"
#include "config/limits_settings.hpp"
#include "config/node_settings.hpp"
#include "transport/worker_pipe_wire.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <spdlog/spdlog.h>

#include <mutex>
#include <unistd.h>
#include <utility>

namespace troupe {

namespace net = boost::asio;

namespace {

// Messages one inline resume of a user actor may handle (as the front's io threads).
constexpr std::size_t pipe_inline_throughput = 8;

// One pipe of this process: read on the io thread; answered from any thread
// (an actor that was busy answers from a scheduler thread), so what is to be
// written is guarded by a mutex; one write in flight.
class pipe_end : public std::enable_shared_from_this<pipe_end> {
public:
  pipe_end(net::io_context& ioc, int fd, caf::actor_system& sys, const node_context& ctx)
    : socket_(ioc), sys_(sys), max_frame_(ctx.limits().worker_pipe_frame_bytes), reader_(max_frame_) {
    boost::system::error_code ec;
    socket_.assign(net::local::stream_protocol{}, fd, ec);
    if (ec) {
      ::close(fd);
      spdlog::error("worker pipe {}: {}", fd, ec.message());
    }
  }

  void start() {
    if (socket_.is_open())
      do_read();
  }

  void answer(std::uint64_t id, const http_response& r) {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!put_answer(out_, id, r, max_frame_))
      put_answer(out_, id, error_response(502, "the answer is larger than limits.worker_pipe_frame_bytes"), max_frame_);
    schedule_write();
  }

  void extend(std::uint64_t id, std::chrono::milliseconds wait) {
    std::lock_guard<std::mutex> guard{mutex_};
    put_extend(out_, id, wait);
    schedule_write();
  }

  void dropped(std::uint64_t id) {
    std::lock_guard<std::mutex> guard{mutex_};
    put_dropped(out_, id);
    schedule_write();
  }

private:
  // The front's side of one request, in this process.
  class reply final : public reply_slot {
  public:
    reply(std::weak_ptr<pipe_end> pipe, std::uint64_t id, http_request&& req)
      : pipe_(std::move(pipe)), id_(id), req_(std::move(req)) {}
    const http_request& request() const override { return req_; }
    void deliver(http_response&& r) override {
      answered_ = true;
      if (auto p = pipe_.lock())
        p->answer(id_, r);
    }
    void extend(std::chrono::milliseconds wait) override {
      if (auto p = pipe_.lock())
        p->extend(id_, wait);
    }
    ~reply() override {
      if (!answered_)
        if (auto p = pipe_.lock())
          p->dropped(id_);
    }

  private:
    std::weak_ptr<pipe_end> pipe_;
    std::uint64_t id_;
    http_request req_;
    bool answered_ = false;
  };

  // Under mutex_.
  void schedule_write() {
    if (writing_now_)
      return;
    writing_now_ = true;
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->do_write(); });
  }

  void do_write() {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (!socket_.is_open())
        out_.clear();  // nobody reads them any more: answers to a closed pipe are not kept
      if (out_.empty()) {
        writing_now_ = false;
        return;
      }
      std::swap(out_, writing_);
    }
    net::async_write(socket_, net::buffer(writing_),
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                       self->writing_.clear();
                       if (ec)  // the node is gone: this process ends with it (its slot's down message)
                         return self->close();
                       self->do_write();
                     });
  }

  void do_read() {
    socket_.async_read_some(net::buffer(reader_.space(), reader_.space_size()),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                              self->on_read(ec, n);
                            });
  }

  void on_read(const boost::system::error_code& ec, std::size_t n) {
    if (ec)
      return close();
    reader_.commit(n);
    std::string error;
    while (auto f = reader_.next(error)) {
      if (f->kind != pipe_kind::request || !serve(*f)) {
        spdlog::error("worker pipe: a frame that is not a request; closed");
        return close();
      }
    }
    if (!error.empty()) {
      spdlog::error("worker pipe: {}; closed", error);
      return close();
    }
    do_read();
  }

  bool serve(const pipe_frame& f) {
    std::uint64_t target = 0;
    http_request req;
    if (!get_request(f, target, req))
      return false;
    auto actor = sys_.registry().get(static_cast<caf::actor_id>(target));
    if (!actor) {  // it ended since the node resolved it: nobody ran the request
      http_response not_here;
      not_here.status = 503;
      not_here.route = route_note::not_here;
      answer(f.id, not_here);
      return true;
    }
    auto slot = std::make_shared<reply>(weak_from_this(), f.id, std::move(req));
    send_here(caf::actor_cast<user_handle>(std::move(actor)), http_atom::value, local_reply{std::move(slot)});
    return true;
  }

  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  net::local::stream_protocol::socket socket_;
  caf::actor_system& sys_;
  std::size_t max_frame_;
  pipe_reader reader_;
  std::mutex mutex_;
  std::vector<char> out_;  // guarded by mutex_
  bool writing_now_ = false;  // guarded by mutex_: a write is posted or in flight
  std::vector<char> writing_;
};

}  // namespace

worker_pipe_server::worker_pipe_server(caf::actor_system& sys, node_context_ptr ctx, std::vector<int> fds)
  : unit_(sys, pipe_inline_throughput, node_context::timer_millis(ctx->limits().shard_stall_ms / 1000.0),
          [this, stall = ctx->limits().shard_stall_ms](std::chrono::milliseconds took) {
            stall_log_("worker pipe: a handler ran {} ms on the pipes' thread (limits.shard_stall_ms = {}): the "
                       "other requests on them waited as long", took.count(), stall);
          }),
    ioc_(std::make_unique<net::io_context>(1)) {
  std::vector<std::shared_ptr<pipe_end>> pipes;
  for (int fd : fds)
    pipes.push_back(std::make_shared<pipe_end>(*ioc_, fd, sys, *ctx));
  thread_ = std::thread([this, pipes = std::move(pipes), inline_handlers = ctx->node().inline_handlers] {
    if (inline_handlers)  // else every request goes to the process's actor threads
      unit_.install();
    for (auto& p : pipes)
      p->start();
    auto work = net::make_work_guard(*ioc_);
    ioc_->run();
  });
}

worker_pipe_server::~worker_pipe_server() {
  ioc_->stop();
  if (thread_.joinable())
    thread_.join();
}

std::chrono::milliseconds worker_pipe_server::handler_running() const noexcept {
  auto since = unit_.busy_since_ns();
  if (since == 0)
    return std::chrono::milliseconds(0);
  auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(inline_unit::clock::now().time_since_epoch()).count();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(std::max<std::int64_t>(0, now - since)));
}

}  // namespace troupe
