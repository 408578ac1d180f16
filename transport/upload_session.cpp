// An HTTP session's streamed request body (docs/http.md "Streamed uploads"):
// the head went to the user actor at once; the body is read here piece by
// piece, each only when the actor's credit asks for it (through the body's
// source actor, transport/upload_source.hpp), at most limits.upload_chunk_bytes
// at a time, up to limits.max_stream_body_bytes, each read under
// limits.read_timeout_seconds. An answer that goes out before the body was
// read whole closes the connection after it (the rest is never read).
#include "transport/front.hpp"
#include "transport/http_session.hpp"
#include "transport/strand_link.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <caf/all.hpp>

namespace troupe {

namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {

class session_upload_port final : public upload_port, strand_link<http_session> {
public:
  using strand_link::strand_link;
  void read(std::uint64_t max) override {
    post([max](http_session& s, std::uint64_t) { s.upload_read(max); });
  }
  void stop() override {
    post([](http_session& s, std::uint64_t) { s.upload_stop(); });
  }
};

}  // namespace

std::shared_ptr<upload_port> http_session::make_upload_port() {
  return std::make_shared<session_upload_port>(weak_from_this(), stream_.get_executor());
}

// The head is complete and its route streams its body: the head goes on as a
// request of its own (handle), its body waits for the actor's first credit.
void http_session::begin_upload() {
  const auto& head = parser_->get();
  auto expect = head.find(http::field::expect);
  if (expect != head.end() && head.version() >= 11 && !boost::beast::iequals(expect->value(), "100-continue"))
    return refuse_and_close(417, "only Expect: 100-continue is understood");
  const bool continue_first = expect != head.end() && head.version() >= 11;
  upload_parser_.emplace(std::move(*parser_));
  upload_parser_->body_limit(limits_.max_stream_body_bytes);
  parser_.reset();
  req_ = request_type(upload_parser_->get().base());
  close_after_ = !upload_parser_->is_done();  // until the body is read whole
  unwatch();  // the upload times its reads itself
  stream_.expires_never();
  if (!continue_first)
    return handle();
  // The client waits for this before it sends the body (RFC 9110 §10.1.1).
  // Written before the head goes on, so that no answer can be written beside it.
  interim_ = "HTTP/1.1 100 Continue\r\n\r\n";
  stream_.expires_after(limits_.read_timeout);
  net::async_write(stream_, net::buffer(interim_), [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
    if (ec)
      return self->close();
    self->stream_.expires_never();
    self->handle();
  });
}

void http_session::upload_read(std::uint64_t max) {
  if (!upload_parser_ || !upload_source_)
    return;
  if (upload_parser_->is_done()) {  // nothing left (an empty body): its end
    upload_piece end;
    end.last = true;
    return send_piece(std::move(end));
  }
  if (upload_buffer_.size() < limits_.upload_chunk_bytes)
    upload_buffer_.resize(limits_.upload_chunk_bytes);  // once per connection that uploads
  auto asked = static_cast<std::size_t>(std::min<std::uint64_t>(max, upload_buffer_.size()));
  auto& body = upload_parser_->get().body();
  body.data = upload_buffer_.data();
  body.size = asked;
  body.more = true;
  stream_.expires_after(limits_.read_timeout);
  http::async_read_some(stream_, buffer_, *upload_parser_,
                        [self = shared_from_this(), asked](boost::system::error_code ec, std::size_t) {
                          self->on_read_piece(ec, asked);
                        });
}

void http_session::on_read_piece(boost::system::error_code ec, std::size_t asked) {
  if (!upload_parser_)
    return;
  if (ec == http::error::need_buffer)  // the piece is full
    ec = {};
  const auto got = asked - upload_parser_->get().body().size;
  if (ec) {
    upload_piece broke;
    broke.bytes.assign(upload_buffer_.data(), got);
    auto status = http_framing::status_for(ec);
    broke.aborted = status == 413   ? "the body passed limits.max_stream_body_bytes"
                    : status == 400 ? "the body was malformed"
                                    : "the client went away";
    send_piece(std::move(broke));
    if (status != 0 && current_call_ != 0)  // answered here, now: the actor's answer to it is dropped
      return finish(error_response(status, status == 413 ? "request body too large" : "malformed HTTP request"));
    if (status == 0)
      return close();
    return;
  }
  if (upload_parser_->get().body().size > 0 && !upload_parser_->is_done()) {
    // Not full yet: read on into the rest of it (pieces of what one read
    // returns would be a few KiB each, and cost a message each).
    return http::async_read_some(stream_, buffer_, *upload_parser_,
                                 [self = shared_from_this(), asked](boost::system::error_code ec, std::size_t) {
                                   self->on_read_piece(ec, asked);
                                 });
  }
  upload_piece piece;
  piece.bytes.assign(upload_buffer_.data(), got);
  piece.last = upload_parser_->is_done();
  if (piece.last) {
    stream_.expires_never();
    close_after_ = false;  // read whole: the connection may serve the next request
  }
  send_piece(std::move(piece));
}

void http_session::send_piece(upload_piece piece) {
  if (upload_source_)
    caf::anon_send(upload_source_, upload_atom::value, std::move(piece));
  if (piece.last || !piece.aborted.empty())
    upload_source_ = nullptr;  // it ends with this piece
}

void http_session::upload_stop() {
  if (upload_parser_ && !upload_parser_->is_done())
    close_after_ = true;
  upload_source_ = nullptr;  // it has quit
}

void http_session::end_upload() {
  if (!upload_source_)
    return;
  caf::anon_send_exit(upload_source_, caf::exit_reason::user_shutdown);
  upload_source_ = nullptr;
  close_after_ = true;  // what is left of the body is never read
}

}  // namespace troupe
