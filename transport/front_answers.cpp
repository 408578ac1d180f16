// The http_session's answers that wake no actor: a CORS preflight and a file
// of a [[static]] mount (docs/http.md "CORS", "Static files").
#include "transport/http_session.hpp"

#include "transport/front.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace troupe {

namespace beast = boost::beast;
namespace http = beast::http;

using http_framing::sv;

// A CORS preflight: answered here, waking nobody (docs/http.md "CORS").
void http_session::answer_preflight(std::string_view origin) {
  auto a = front_.cors().preflight(origin, sv(req_[http::field::access_control_request_method]),
                                   sv(req_[http::field::access_control_request_headers]));
  cors_headers_ = std::move(a.headers);
  if (!a.allowed)
    return do_write(403, error_body("CORS preflight refused: " + a.why), "application/json");
  do_write(204, {}, {});
}

// A file of a [[static]] mount (docs/http.md "Static files").
void http_session::serve_file(const static_mount& mount, std::string_view path) {
  auto method = req_.method();
  if (method != http::verb::get && method != http::verb::head)
    return refuse_method("GET, HEAD");
  static_request sr;
  sr.path = path;
  sr.head = method == http::verb::head;
  sr.if_none_match = sv(req_[http::field::if_none_match]);
  sr.if_modified_since = sv(req_[http::field::if_modified_since]);
  sr.range = sv(req_[http::field::range]);
  sr.if_range = sv(req_[http::field::if_range]);
  sr.accept_encoding = sv(req_[http::field::accept_encoding]);
  auto a = serve_static(mount, sr);
  if (a.fd < 0)
    return do_write(a.status, std::move(a.body), a.content_type, 0, false, &a.headers);
  auto& ctx = front_.context();
  ctx.metrics.count_answer(a.status, std::chrono::steady_clock::now() - started_, route_key_);
  route_key_.clear();
  release_body();
  bool keep = req_.keep_alive() && !close_after_ && !front_.closing();
  file_res_.emplace();
  auto& res = *file_res_;
  res.version(req_.version() ? req_.version() : 11);
  res.result(a.status);
  res.set(http::field::server, "troupe");
  res.set(http::field::content_type, a.content_type);
  add_app_headers(res, a.headers);
  add_cors_headers(res);
  res.keep_alive(keep);
  if (file_buffer_.empty())
    file_buffer_.resize(32768);  // once per connection that asks for a file
  res.body().fd = a.take_fd();
  res.body().offset = a.offset;
  res.body().length = a.length;
  res.body().buffer = file_buffer_.data();
  res.body().buffer_size = file_buffer_.size();
  res.prepare_payload();
  if (sr.head)
    res.body().length = 0;  // its Content-Length stays the file's; nothing follows the head
  stream_.expires_after(limits_.read_timeout);  // a client that does not read its file is cut
  http::async_write(stream_, res, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
    self->file_res_.reset();  // closes the file
    self->on_write(ec, keep);
  });
}

}  // namespace troupe
