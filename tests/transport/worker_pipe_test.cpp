// The worker pipes (issue 26, transport/worker_pipe.hpp): the frames, cut
// anywhere; and both ends in one process — the node's on an io thread of its
// own, the worker process's side (worker_pipe_server) over a socket pair —
// with a user actor behind them: answers, batching, a deferred answer, an
// actor that is gone or drops the request, a pipe that ends, what breaks the
// protocol, and each limit.
#include "transport/worker_pipe.hpp"
#include "transport/worker_pipe_server.hpp"
#include "transport/worker_pipe_wire.hpp"
#include "../support/eventually.hpp"

#include "actors/node_context.hpp"
#include "actors/worker_pipes.hpp"
#include "config/limits_settings.hpp"
#include "config/recipe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <future>
#include <mutex>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace worker_pipe_test_file {

using namespace troupe;
using troupe::test::eventually;
using namespace std::chrono_literals;
namespace net = boost::asio;

namespace {

http_request sample_request() {
  http_request r;
  r.method = "POST";
  r.path = "/api/notes";
  r.query = "a=1&b=2";
  r.body = std::string(1000, 'x') + "\n\0end";
  r.cid = "cid-123";
  r.page = "page-9";
  r.headers = {{"Content-Type", "application/json"}, {"X-Empty", ""}};
  r.deadline_ms = 1234567890123;
  r.client = "10.1.2.3";
  return r;
}

// Every frame of `bytes`, fed to a reader `step` bytes at a time.
std::vector<std::pair<pipe_kind, std::uint64_t>> read_all(const std::vector<char>& bytes, std::size_t step,
                                                           std::vector<std::string>* payloads = nullptr) {
  pipe_reader reader(1 << 20);
  std::vector<std::pair<pipe_kind, std::uint64_t>> out;
  std::string error;
  for (std::size_t at = 0; at < bytes.size();) {
    auto n = std::min({step, bytes.size() - at, reader.space_size()});
    std::memcpy(reader.space(), bytes.data() + at, n);
    reader.commit(n);
    at += n;
    while (auto f = reader.next(error)) {
      out.emplace_back(f->kind, f->id);
      if (payloads)
        payloads->emplace_back(f->payload, f->size);
    }
    EXPECT_EQ(error, "");
  }
  return out;
}

}  // namespace

TEST(worker_pipe_wire, a_request_and_an_answer_cross_whole) {
  std::vector<char> out;
  auto req = sample_request();
  ASSERT_TRUE(put_request(out, 7, 42, req, 1 << 20));
  http_response ans;
  ans.status = 201;
  ans.body = "{\"ok\":true}";
  ans.content_type = "text/plain";
  ans.route = route_note::changed;
  ans.retry_after = 3;
  ans.set_cid = "new-cid";
  ans.stream_id = 9;
  ans.route_key = "POST /api/notes";
  ans.headers = {{"Set-Cookie", "a=b"}};
  ASSERT_TRUE(put_answer(out, 8, ans, 1 << 20));
  put_extend(out, 9, 2500ms);
  put_dropped(out, 10);

  pipe_reader reader(1 << 20);
  std::memcpy(reader.space(), out.data(), out.size());
  reader.commit(out.size());
  std::string error;
  auto f1 = reader.next(error);
  ASSERT_TRUE(f1);
  EXPECT_EQ(f1->kind, pipe_kind::request);
  EXPECT_EQ(f1->id, 7u);
  std::uint64_t target = 0;
  http_request back;
  ASSERT_TRUE(get_request(*f1, target, back));
  EXPECT_EQ(target, 42u);
  EXPECT_EQ(back.method, req.method);
  EXPECT_EQ(back.path, req.path);
  EXPECT_EQ(back.query, req.query);
  EXPECT_EQ(back.body, req.body);
  EXPECT_EQ(back.cid, req.cid);
  EXPECT_EQ(back.page, req.page);
  ASSERT_EQ(back.headers.size(), 2u);
  EXPECT_EQ(back.headers[0].name, "Content-Type");
  EXPECT_EQ(back.headers[1].value, "");
  EXPECT_EQ(back.deadline_ms, req.deadline_ms);
  EXPECT_EQ(back.client, req.client);

  auto f2 = reader.next(error);
  ASSERT_TRUE(f2);
  EXPECT_EQ(f2->kind, pipe_kind::answer);
  http_response ans_back;
  ASSERT_TRUE(get_answer(*f2, ans_back));
  EXPECT_EQ(ans_back.status, 201);
  EXPECT_EQ(ans_back.body, ans.body);
  EXPECT_EQ(ans_back.content_type, "text/plain");
  EXPECT_EQ(ans_back.route, route_note::changed);
  EXPECT_EQ(ans_back.retry_after, 3u);
  EXPECT_EQ(ans_back.set_cid, "new-cid");
  EXPECT_EQ(ans_back.stream_id, 9u);
  EXPECT_EQ(ans_back.route_key, "POST /api/notes");
  ASSERT_EQ(ans_back.headers.size(), 1u);

  auto f3 = reader.next(error);
  ASSERT_TRUE(f3);
  std::chrono::milliseconds wait{};
  ASSERT_TRUE(get_extend(*f3, wait));
  EXPECT_EQ(wait, 2500ms);
  auto f4 = reader.next(error);
  ASSERT_TRUE(f4);
  EXPECT_EQ(f4->kind, pipe_kind::dropped);
  EXPECT_EQ(f4->id, 10u);
  EXPECT_FALSE(reader.next(error));
  EXPECT_EQ(error, "");
  // A payload of the wrong kind is refused.
  EXPECT_FALSE(get_answer(*f1, ans_back));
  EXPECT_FALSE(get_extend(*f1, wait));
}

TEST(worker_pipe_wire, frames_cut_anywhere_are_read_the_same) {
  std::vector<char> out;
  for (std::uint64_t id = 1; id <= 20; ++id) {
    auto req = sample_request();
    req.body = std::string(id * 997, 'b');
    ASSERT_TRUE(put_request(out, id, id, req, 1 << 20));
    put_dropped(out, 100 + id);
  }
  std::vector<std::string> whole_payloads;
  auto whole = read_all(out, out.size(), &whole_payloads);
  ASSERT_EQ(whole.size(), 40u);
  for (std::size_t step : {1, 2, 3, 7, 13, 4096, 65536}) {
    std::vector<std::string> payloads;
    EXPECT_EQ(read_all(out, step, &payloads), whole) << "step " << step;
    EXPECT_EQ(payloads, whole_payloads) << "step " << step;
  }
}

TEST(worker_pipe_wire, a_frame_past_the_limit_is_neither_written_nor_read) {
  std::vector<char> out{'k', 'e', 'p', 't'};
  auto req = sample_request();
  req.body = std::string(70000, 'z');
  EXPECT_FALSE(put_request(out, 1, 1, req, 65536));
  http_response big;
  big.body = std::string(70000, 'z');
  EXPECT_FALSE(put_answer(out, 2, big, 65536));
  EXPECT_EQ(out, (std::vector<char>{'k', 'e', 'p', 't'})) << "a refused frame leaves nothing behind";

  std::vector<char> frame;
  ASSERT_TRUE(put_request(frame, 1, 1, req, 1 << 20));
  pipe_reader reader(65536);
  std::memcpy(reader.space(), frame.data(), 64);
  reader.commit(64);
  std::string error;
  EXPECT_FALSE(reader.next(error));
  EXPECT_NE(error.find("limits.worker_pipe_frame_bytes"), std::string::npos) << error;
}

TEST(worker_pipe_wire, a_frame_of_an_unknown_kind_is_an_error) {
  std::vector<char> frame;
  put_dropped(frame, 5);
  frame[4] = 9;
  pipe_reader reader(65536);
  std::memcpy(reader.space(), frame.data(), frame.size());
  reader.commit(frame.size());
  std::string error;
  EXPECT_FALSE(reader.next(error));
  EXPECT_NE(error.find("unknown kind 9"), std::string::npos) << error;
}

TEST(worker_pipe_wire, only_plain_requests_take_a_pipe) {
  http_request plain = sample_request();
  EXPECT_TRUE(pipes_carry(plain));
  http_request socket = plain;
  socket.socket = socket_event::text;
  EXPECT_FALSE(pipes_carry(socket));
}

TEST(worker_pipe_directory, each_io_thread_takes_its_own_end_once_and_a_withdrawal_closes_the_rest) {
  std::string error;
  auto a = make_worker_pipes(2, error);
  ASSERT_TRUE(a) << error;
  for (int fd : a->node)
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  worker_pipe_directory dir;
  auto child = *caf::make_node_id(42, "0123456789012345678901234567890123456789");
  auto v0 = dir.version();
  auto node_ends = a->node;
  dir.publish(child, a->node);
  EXPECT_NE(dir.version(), v0);
  EXPECT_TRUE(dir.serves(child));
  auto first = dir.take_all(0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].first, child);
  EXPECT_EQ(first[0].second, node_ends[0]);
  EXPECT_TRUE(dir.take_all(0).empty()) << "taken once";
  auto v1 = dir.version();
  dir.withdraw(child);
  EXPECT_NE(dir.version(), v1);
  EXPECT_FALSE(dir.serves(child));
  EXPECT_EQ(::fcntl(node_ends[1], F_GETFD), -1) << "the end nobody took is closed";
  EXPECT_NE(::fcntl(node_ends[0], F_GETFD), -1) << "the taken one is its taker's";
  ::close(node_ends[0]);
  close_pipe_ends(a->child);
}

// -- both ends ---------------------------------------------------------------------------

namespace {

// What one request's slot on the node's side saw.
struct outcome {
  std::mutex mutex;
  std::optional<http_response> answer;
  std::vector<std::chrono::milliseconds> extended;
  std::atomic<bool> done{false};
  std::atomic<bool> dropped{false};
};

class recording_slot final : public reply_slot {
public:
  recording_slot(http_request req, std::shared_ptr<outcome> out) : req_(std::move(req)), out_(std::move(out)) {}
  const http_request& request() const override { return req_; }
  void deliver(http_response&& r) override {
    {
      std::lock_guard<std::mutex> guard{out_->mutex};
      out_->answer = std::move(r);
    }
    answered_ = true;
    out_->done = true;
  }
  void extend(std::chrono::milliseconds wait) override {
    std::lock_guard<std::mutex> guard{out_->mutex};
    out_->extended.push_back(wait);
  }
  ~recording_slot() override {
    if (!answered_) {
      out_->dropped = true;
      out_->done = true;
    }
  }

private:
  http_request req_;
  std::shared_ptr<outcome> out_;
  bool answered_ = false;
};

using release_atom_t = caf::atom_constant<caf::atom("release")>;

class worker_pipe_pair : public ::testing::Test {
protected:
  worker_pipe_pair() {
    register_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    sys.emplace(cfg);
    ctx = std::make_shared<node_context>();
    ctx->worker_pipes = std::make_shared<worker_pipe_directory>();
  }

  ~worker_pipe_pair() override {
    stop_node_side();
    server.reset();
    if (user)
      caf::anon_send_exit(user, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
    sys.reset();
    if (child_fd >= 0)
      ::close(child_fd);
  }

  // The user behind the pipe: answers by path (see each test).
  void spawn_user() {
    user = sys->spawn([this](caf::event_based_actor* self) -> caf::behavior {
      return {
        [this, self](http_atom, local_reply& slot) {
          const auto& q = slot->request();
          if (q.path == "/drop")
            return;  // the slot goes undelivered
          if (q.path == "/hold") {
            held.push_back(std::move(slot));
            ++holding;
            return;
          }
          if (q.path == "/defer") {
            slot->extend(5000ms);
            self->delayed_send(self, 50ms, release_atom_t::value);
            held.push_back(std::move(slot));
            return;
          }
          http_response r;
          r.status = 200;
          r.body = q.path == "/big" ? std::string(100000, 'B') : q.method + " " + q.path + " " + q.body;
          slot->deliver(std::move(r));
        },
        [this](release_atom_t) {
          for (auto& s : held) {
            http_response r;
            r.body = "released " + s->request().path;
            s->deliver(std::move(r));
          }
          held.clear();
        },
      };
    });
    sys->registry().put(user.id(), caf::actor_cast<caf::strong_actor_ptr>(user));
  }

  // The pipe: the node's end published, the child's end served (or kept raw by the test).
  void connect(bool serve_child = true) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ctx->worker_pipes->publish(sys->node(), {fds[0]});
    if (serve_child)
      server = std::make_unique<worker_pipe_server>(*sys, ctx, std::vector<int>{fds[1]});
    else
      child_fd = fds[1];
    io_thread = std::thread([this] {
      here.emplace(ioc, *ctx, 0);
      here->install();
      auto work = net::make_work_guard(ioc);
      ioc.run();
      here.reset();
    });
  }

  void stop_node_side() {
    if (!io_thread.joinable())
      return;
    ioc.stop();
    io_thread.join();
  }

  // Sends requests for `paths` on the io thread, all in one handler; their outcomes.
  std::vector<std::shared_ptr<outcome>> send(const std::vector<std::string>& paths, caf::actor target = {}) {
    if (!target)
      target = user;
    std::vector<std::shared_ptr<outcome>> outs;
    for (std::size_t i = 0; i < paths.size(); ++i)
      outs.push_back(std::make_shared<outcome>());
    std::promise<std::vector<bool>> taken;
    net::post(ioc, [&] {
      std::vector<bool> t;
      for (std::size_t i = 0; i < paths.size(); ++i) {
        http_request r;
        r.method = "POST";
        r.path = paths[i];
        r.body = std::to_string(i);
        local_reply slot = std::make_shared<recording_slot>(std::move(r), outs[i]);
        t.push_back(worker_pipes_here::current()->send(caf::actor_cast<user_handle>(target), slot));
      }
      taken.set_value(std::move(t));
    });
    for (bool t : taken.get_future().get())
      EXPECT_TRUE(t) << "the pipe took it";
    return outs;
  }

  static bool all_done(const std::vector<std::shared_ptr<outcome>>& outs) {
    return std::all_of(outs.begin(), outs.end(), [](auto& o) { return o->done.load(); });
  }

  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  node_context_ptr ctx;
  caf::actor user;
  std::vector<local_reply> held;  // the user's (his thread only)
  std::atomic<int> holding{0};    // requests he holds
  std::unique_ptr<worker_pipe_server> server;
  int child_fd = -1;
  net::io_context ioc{1};
  std::optional<worker_pipes_here> here;
  std::thread io_thread;
};

}  // namespace

TEST_F(worker_pipe_pair, requests_ready_together_go_in_one_write_and_every_answer_comes_back) {
  spawn_user();
  connect();
  std::vector<std::string> paths;
  for (int i = 0; i < 100; ++i)
    paths.push_back("/echo/" + std::to_string(i));
  auto outs = send(paths);
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  for (std::size_t i = 0; i < outs.size(); ++i) {
    ASSERT_TRUE(outs[i]->answer) << i;
    EXPECT_EQ(outs[i]->answer->body, "POST " + paths[i] + " " + std::to_string(i));
  }
  auto& m = ctx->metrics.piped;
  EXPECT_EQ(m.answered.load(), 100u);
  EXPECT_EQ(m.writes.load(), 1u) << "a hundred requests ready at once: one write";
  EXPECT_EQ(m.pending.load(), 0);
}

TEST_F(worker_pipe_pair, a_deferred_answer_extends_then_answers) {
  spawn_user();
  connect();
  auto outs = send({"/defer"});
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  ASSERT_TRUE(outs[0]->answer);
  EXPECT_EQ(outs[0]->answer->body, "released /defer");
  ASSERT_EQ(outs[0]->extended.size(), 1u);
  EXPECT_EQ(outs[0]->extended[0], 5000ms);
}

TEST_F(worker_pipe_pair, an_actor_the_process_no_longer_has_answers_not_here) {
  spawn_user();
  connect();
  auto stranger = sys->spawn([]() -> caf::behavior { return {[](int) {}}; });  // never in the registry
  auto outs = send({"/echo"}, stranger);
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  ASSERT_TRUE(outs[0]->answer);
  EXPECT_EQ(outs[0]->answer->route, route_note::not_here) << "nobody ran it: the front re-resolves it";
  caf::anon_send_exit(stranger, caf::exit_reason::user_shutdown);
}

TEST_F(worker_pipe_pair, a_request_its_actor_drops_is_released_on_the_node) {
  spawn_user();
  connect();
  auto outs = send({"/drop", "/echo"});
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  EXPECT_TRUE(outs[0]->dropped) << "released undelivered, as a dead target's";
  EXPECT_TRUE(outs[1]->answer);
  EXPECT_EQ(ctx->metrics.piped.released.load(), 1u);
}

TEST_F(worker_pipe_pair, an_answer_past_the_frame_limit_is_a_502) {
  ctx->recipe().limits.worker_pipe_frame_bytes = 65536;
  spawn_user();
  connect();
  auto outs = send({"/big", "/echo"});
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  ASSERT_TRUE(outs[0]->answer);
  EXPECT_EQ(outs[0]->answer->status, 502);
  EXPECT_NE(outs[0]->answer->body.find("limits.worker_pipe_frame_bytes"), std::string::npos);
  ASSERT_TRUE(outs[1]->answer) << "the pipe goes on";
  EXPECT_EQ(outs[1]->answer->status, 200);
}

TEST_F(worker_pipe_pair, a_request_past_the_frame_limit_is_left_to_the_forwarder) {
  ctx->recipe().limits.worker_pipe_frame_bytes = 65536;
  spawn_user();
  connect();
  std::promise<bool> taken;
  auto out = std::make_shared<outcome>();
  net::post(ioc, [&] {
    http_request r;
    r.path = "/echo";
    r.body = std::string(70000, 'x');
    local_reply slot = std::make_shared<recording_slot>(std::move(r), out);
    auto t = worker_pipes_here::current()->send(caf::actor_cast<user_handle>(user), slot);
    EXPECT_TRUE(slot) << "a request the pipe refuses stays the caller's";
    taken.set_value(t);
  });
  EXPECT_FALSE(taken.get_future().get());
  EXPECT_EQ(ctx->metrics.piped.pending.load(), 0);
}

TEST_F(worker_pipe_pair, past_max_forwarded_requests_a_request_is_answered_503_at_once) {
  ctx->recipe().limits.max_forwarded_requests = 2;
  spawn_user();
  connect();
  auto outs = send({"/hold", "/hold", "/hold"});
  ASSERT_TRUE(eventually([&] { return outs[2]->done.load(); }));
  ASSERT_TRUE(outs[2]->answer);
  EXPECT_EQ(outs[2]->answer->status, 503);
  EXPECT_GE(outs[2]->answer->retry_after, 1u);
  EXPECT_EQ(ctx->metrics.piped.refused.load(), 1u);
  EXPECT_FALSE(outs[0]->done.load());
  ASSERT_TRUE(eventually([&] { return holding.load() == 2; }));
  caf::anon_send(user, release_atom_t::value);
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  EXPECT_EQ(outs[0]->answer->body, "released /hold");
  EXPECT_EQ(ctx->metrics.piped.pending.load(), 0);
}

TEST_F(worker_pipe_pair, a_pipe_that_ends_releases_every_request_in_flight_on_it) {
  spawn_user();
  connect();
  auto outs = send({"/hold", "/hold"});
  ASSERT_TRUE(eventually([&] { return holding.load() == 2; }));
  server.reset();  // the process's side goes, as with its process
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  EXPECT_TRUE(outs[0]->dropped);
  EXPECT_TRUE(outs[1]->dropped);
  EXPECT_EQ(ctx->metrics.piped.released.load(), 2u);
  EXPECT_EQ(ctx->metrics.piped.pending.load(), 0);
  // The next request finds no pipe (the forwarder's then).
  std::promise<bool> taken;
  net::post(ioc, [&] {
    local_reply slot = std::make_shared<recording_slot>(http_request{}, std::make_shared<outcome>());
    taken.set_value(worker_pipes_here::current()->send(caf::actor_cast<user_handle>(user), slot));
  });
  EXPECT_FALSE(taken.get_future().get());
}

TEST_F(worker_pipe_pair, stray_bytes_from_the_process_close_the_pipe_and_release_its_requests) {
  spawn_user();
  connect(false);
  auto outs = send({"/echo"});
  ASSERT_TRUE(eventually([&] { return ctx->metrics.piped.writes.load() == 1; }));
  const char junk[] = "\xff\xff\xff\x7fjunk from nowhere";
  ASSERT_GT(::write(child_fd, junk, sizeof junk), 0);
  ASSERT_TRUE(eventually([&] { return all_done(outs); }));
  EXPECT_TRUE(outs[0]->dropped);
}

TEST_F(worker_pipe_pair, stray_bytes_to_the_process_close_its_end) {
  spawn_user();
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  server = std::make_unique<worker_pipe_server>(*sys, ctx, std::vector<int>{fds[1]});
  std::vector<char> frame;
  put_dropped(frame, 1);  // not a request: the node never sends one
  ASSERT_EQ(::write(fds[0], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  char c;
  ASSERT_TRUE(eventually([&] { return ::recv(fds[0], &c, 1, MSG_DONTWAIT) == 0; })) << "its end is closed";
  ::close(fds[0]);
}

}  // namespace worker_pipe_test_file
