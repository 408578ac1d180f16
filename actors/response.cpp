// What a handler answers with: responses (their headers, cookies and redirects,
// checked by actors/response_headers.hpp) and the writers of streaming answers.
#include "actors/messages.hpp"
#include "actors/response_headers.hpp"

#include <troupe/app.hpp>

namespace troupe {

// -- response ------------------------------------------------------------------

response response::json(const nlohmann::json& body, std::uint16_t status) {
  response r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

response response::error(std::uint16_t status, const std::string& message) {
  response r;
  r.status = status;
  r.body = error_body(message);
  return r;
}

response response::text(std::string body, std::uint16_t status) {
  response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = "text/plain; charset=utf-8";
  return r;
}

response& response::header(std::string name, std::string value) & {
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

response&& response::header(std::string name, std::string value) && {
  return std::move(header(std::move(name), std::move(value)));
}

response& response::cookie(std::string name, std::string value, const cookie_attributes& attributes) & {
  auto made = make_set_cookie(name, value, attributes);
  if (!made.problem.empty()) {
    if (invalid.empty())
      invalid = std::move(made.problem);
    return *this;
  }
  headers.emplace_back("Set-Cookie", std::move(made.line));
  return *this;
}

response&& response::cookie(std::string name, std::string value, const cookie_attributes& attributes) && {
  return std::move(cookie(std::move(name), std::move(value), attributes));
}

response response::redirect(std::string location, std::uint16_t status) {
  response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  if (!is_redirect_status(status))
    r.invalid = "a redirect's status must be 301, 302, 303, 307 or 308, not " + std::to_string(status);
  else if (location.empty())
    r.invalid = "a redirect needs a location";
  r.headers.emplace_back("Location", std::move(location));
  return r;
}

namespace {
response streaming(stream_handlers h, bool ndjson) {
  response r;
  auto next = std::make_shared<detail::continuation>();
  next->what = detail::continuation::kind::stream;
  next->ndjson = ndjson;
  next->handlers = std::move(h);
  r.next = std::move(next);
  return r;
}
}  // namespace

response response::sse(stream_handlers h) {
  return streaming(std::move(h), false);
}

response response::ndjson(stream_handlers h) {
  return streaming(std::move(h), true);
}

// -- stream (the writer; the user actor's host does the work) ---------------------

stream_write stream::event(std::string_view data, std::string_view name, std::string_view id) {
  return host_ ? host_->stream_send(id_, data, name, id, false) : stream_write::closed;
}

stream_write stream::json(const nlohmann::json& value) {
  if (!host_)
    return stream_write::closed;
  auto text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return host_->stream_send(id_, text, {}, {}, true);
}

stream_write stream::retry(std::chrono::milliseconds delay) {
  auto ms = delay.count() < 0 ? 0 : static_cast<std::uint64_t>(delay.count());
  return host_ ? host_->stream_retry(id_, ms) : stream_write::closed;
}

void stream::close() {
  if (host_)
    host_->stream_close(id_);
}

bool stream::is_open() const {
  return host_ && host_->stream_state(id_).open;
}

bool stream::is_slow() const {
  return host_ && host_->stream_state(id_).slow;
}

std::uint64_t stream::credit() const {
  return host_ ? host_->stream_state(id_).credit : 0;
}

bool promise::resolve(response answer) {
  return host_ && host_->promise_resolve(id_, std::move(answer));
}

bool promise::keep_alive(std::chrono::milliseconds from_now) {
  return host_ && host_->promise_keep_alive(id_, from_now);
}

bool promise::is_open() const {
  return host_ && host_->promise_open(id_);
}

bool app_socket::send_text(std::string text) {
  return host_ && host_->socket_send(id_, std::move(text), 0, 0);
}

bool app_socket::send_binary(std::string bytes) {
  return host_ && host_->socket_send(id_, std::move(bytes), 1, 0);
}

bool app_socket::close(std::uint16_t code, std::string reason) {
  return host_ && host_->socket_send(id_, std::move(reason), 2, code);
}

bool app_socket::is_open() const {
  return host_ && host_->socket_open(id_);
}

}  // namespace troupe
