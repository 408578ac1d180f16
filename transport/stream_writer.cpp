#include "transport/stream_writer.hpp"

#include "actors/node_context.hpp"
#include "actors/stream.hpp"
#include "config/duration.hpp"
#include "config/limits_settings.hpp"
#include "transport/front.hpp"
#include "transport/http_session.hpp"
#include "transport/strand_link.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/all.hpp>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// The writer as its stream's sink sees it: calls are posted onto the strand,
// dropped when the writer is gone (its destructor told the sink).
class writer_port final : public stream_port, strand_link<stream_writer, bool> {
public:
  using strand_link::strand_link;
  void write(std::string bytes) override {
    post([b = std::move(bytes)](stream_writer& w, bool) mutable { w.write(std::move(b)); });
  }
  void end(bool clean) override {
    post([clean](stream_writer& w, bool) { w.end(clean); });
  }
};


}  // namespace

std::shared_ptr<stream_writer> stream_writer::start(std::shared_ptr<http_session> session, head_type head,
                                                    stream_writer_for_sinks writer, std::uint64_t id,
                                                    const std::string& content_type) {
  auto& f = session->owner();
  auto& ctx = f.context();
  const auto& lim = ctx.limits();
  auto ex = session->stream().get_executor();
  auto w = std::make_shared<stream_writer>(std::move(session), std::move(head));
  stream_sink_spec spec;
  spec.writer = std::move(writer);
  spec.id = id;
  spec.format = content_type == content_type_of(stream_format::ndjson) ? stream_format::ndjson : stream_format::sse;
  spec.port = std::make_shared<writer_port>(w, ex);
  spec.queue_bytes = lim.stream_queue_bytes;
  spec.credit_bytes = lim.stream_credit_bytes;
  spec.keepalive = config::to_millis(lim.stream_keepalive_seconds);
  spec.metrics = &ctx.metrics;
  w->sink_ = spawn_stream_sink(f.bridge()->home_system(), std::move(spec));
  w->head_writer_.emplace(w->head_);
  w->do_watch_client();
  auto& stream = w->session_->stream();
  stream.expires_after(w->session_->limits().read_timeout);
  http::async_write_header(stream, *w->head_writer_,
                           [w](beast::error_code ec, std::size_t) { w->on_head(ec); });
  return w;
}

stream_writer::stream_writer(std::shared_ptr<http_session> session, head_type head)
  : session_(std::move(session)), head_(std::move(head)), linger_(session_->stream().get_executor()) {}

stream_writer::~stream_writer() {
  if (sink_ && !gone_)  // the writer ends under its stream (the front stopped): the sink ends too
    caf::anon_send(sink_, gone_atom::value);
}

void stream_writer::on_head(beast::error_code ec) {
  if (ec)
    return gone();
  head_done_ = true;
  if (pending_) {
    auto first = std::move(*pending_);
    pending_.reset();
    return do_chunk(std::move(first));
  }
  if (ending_)
    finish_end();
}

void stream_writer::write(std::string bytes) {
  if (gone_ || ending_)
    return;
  if (!head_done_ || writing_) {  // the sink sends one batch at a time: at most one waits here
    pending_ = std::move(bytes);
    return;
  }
  do_chunk(std::move(bytes));
}

void stream_writer::do_chunk(std::string bytes) {
  out_ = std::move(bytes);
  writing_ = true;
  auto& stream = session_->stream();
  stream.expires_after(session_->limits().read_timeout);  // the write timer only: the watching read never expires
  net::async_write(stream, http::make_chunk(net::buffer(out_)),
                   [self = shared_from_this(), n = out_.size()](beast::error_code ec, std::size_t) {
                     self->on_chunk(ec, n);
                   });
}

void stream_writer::on_chunk(beast::error_code ec, std::size_t n) {
  writing_ = false;
  if (ec)
    return gone();
  out_.clear();
  if (!gone_)
    caf::anon_send(sink_, written_atom::value, static_cast<std::uint64_t>(n));
  if (pending_) {
    auto next = std::move(*pending_);
    pending_.reset();
    return do_chunk(std::move(next));
  }
  if (ending_)
    finish_end();
}

void stream_writer::end(bool clean) {
  if (gone_)
    return;
  gone_ = true;  // the sink has ended: nothing more to tell it
  ending_ = true;
  end_clean_ = clean;
  if (!clean)
    return session_->close();
  if (head_done_ && !writing_ && !pending_)
    finish_end();
}

void stream_writer::finish_end() {
  if (!end_clean_)
    return session_->close();
  if (last_out_)
    return;
  last_out_ = true;
  auto& stream = session_->stream();
  stream.expires_after(session_->limits().read_timeout);
  net::async_write(stream, http::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec)
      return self->session_->close();
    beast::error_code ignored;
    self->session_->stream().socket().shutdown(tcp::socket::shutdown_send, ignored);
    self->linger_.expires_after(std::chrono::seconds(2));
    self->linger_.async_wait([self](beast::error_code e) {
      if (!e)
        self->session_->close();
    });
  });
}

void stream_writer::do_watch_client() {
  auto& stream = session_->stream();
  stream.expires_never();  // no request deadline while streaming: the read only watches for the client's end
  stream.async_read_some(net::buffer(discard_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (!ec)
      return self->do_watch_client();  // a client has nothing to say on a stream: discarded
    if (self->last_out_)
      return self->session_->close();  // the stream ended and the client closed: done
    self->gone();
  });
}

void stream_writer::gone() {
  if (!gone_) {
    gone_ = true;
    caf::anon_send(sink_, gone_atom::value);
  }
  session_->close();
}

// -- the session's side: its head, then the writer (docs/streaming.md) ------------------

void http_session::start_stream(http_response&& r) {
  auto& ctx = front_.context();
  const auto& lim = ctx.limits();
  auto tell_writer_gone = [&] {
    stream_event e;
    e.id = r.stream_id;
    e.what = static_cast<std::uint8_t>(stream_event::kind::gone);
    if (target_)
      caf::anon_send(target_, stream_msg_atom::value, std::move(e));
  };
  if (req_.method() == http::verb::head) {  // the head only: no stream behind it
    tell_writer_gone();
    return do_write(200, {}, r.content_type);
  }
  auto& open = ctx.metrics.stream.open;
  if (!target_ || open.fetch_add(1, std::memory_order_relaxed) >= static_cast<std::int64_t>(lim.max_streams)) {
    if (target_)
      open.fetch_sub(1, std::memory_order_relaxed);
    ctx.metrics.stream.refusals.fetch_add(1, std::memory_order_relaxed);
    tell_writer_gone();
    return do_write(503, error_body("the node has too many open streams (limits.max_streams), retry"),
                    "application/json", 1);
  }
  // Counted in troupe_stream_open now; the sink counts itself out when it ends.
  // Its route's figures count it as answered once its head is due.
  ctx.metrics.count_answer(200, std::chrono::steady_clock::now() - started_, route_key_);
  route_key_.clear();
  release_body();
  http::response<http::empty_body> head;
  head.version(req_.version() ? req_.version() : 11);
  head.result(http::status::ok);
  head.set(http::field::server, "troupe");
  head.set(http::field::content_type, r.content_type);
  head.set(http::field::cache_control, "no-cache");
  head.set("X-Accel-Buffering", "no");  // proxies must not hold events back
  if (auto cookie = take_cookie(); !cookie.empty())
    head.set(http::field::set_cookie, cookie);
  add_app_headers(head, r.headers);
  add_cors_headers(head);
  head.keep_alive(false);  // the connection ends with the stream
  head.chunked(true);
  writer_ = stream_writer::start(shared_from_this(), std::move(head), target_, r.stream_id, r.content_type);
}

}  // namespace troupe
