#pragma once
/// \file
/// What a handler sees of a request and what it answers (docs/http.md): the
/// request, responses with headers and cookies, streaming responses, deferred
/// answers (promises), streamed uploads, and what guards see and decide.
/// Included by <troupe/app.hpp>; include <troupe/troupe.hpp>.

#include <troupe/detail/fwd.hpp>
#include <troupe/detail/wire.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace troupe {

struct http_request;

/// Thrown by a handler to answer `status` with {"error": what()}. Unlike any
/// other exception (a 502 with a generic text, and a restart), the text is
/// meant for the client and the actor lives on.
class http_error : public std::runtime_error {
public:
  /// `retry_after`: seconds for a Retry-After header (0: none), e.g. with 503.
  http_error(std::uint16_t status, const std::string& message, std::uint32_t retry_after = 0)
    : std::runtime_error(message), status_(status), retry_after_(retry_after) {}
  std::uint16_t status() const noexcept { return status_; }
  std::uint32_t retry_after() const noexcept { return retry_after_; }

private:
  std::uint16_t status_;
  std::uint32_t retry_after_;
};

/// 400 with the given text.
class bad_request : public http_error {
public:
  explicit bad_request(const std::string& message) : http_error(400, message) {}
};

/// One HTTP request, as a handler sees it.
class request {
public:
  using params_type = std::vector<std::pair<std::string_view, std::string_view>>;

  request(const http_request& raw, params_type params) : raw_(raw), params_(std::move(params)) {}

  const std::string& method() const noexcept;
  const std::string& path() const noexcept;
  const std::string& body() const noexcept;

  /// The path parameter `{name}` of the matched route, percent-decoded ("" when the route has none).
  std::string param(std::string_view name) const;

  /// The path parameter `{name}` as an integer of type `T`: a route's `{name:int}`
  /// (std::int64_t) or `{name:uint}` (std::uint64_t) has matched its syntax already
  /// and fits 64 bits. Throws bad_request (400) when it is not an integer or does not fit `T`.
  template <class T>
  T param(std::string_view name) const {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "param<T>: T is an integer type");
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(signed_param(name, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    else
      return static_cast<T>(unsigned_param(name, std::numeric_limits<T>::max()));
  }

  /// A query parameter, percent-decoded; nullopt when absent.
  std::optional<std::string> query(std::string_view name) const;

  /// A header (name case-insensitive); nullopt when absent.
  std::optional<std::string> header(std::string_view name) const;

  /// The client's IP address: the peer of the request's socket, or, when that
  /// peer is one of `node.trusted_proxies`, the client the proxies name in
  /// `Forwarded` / `X-Forwarded-For` (from any other peer those headers are
  /// ignored). "" when unknown (a request made inside the node).
  const std::string& client_address() const noexcept;

  /// The body parsed as JSON (once). Throws bad_request when it is not JSON.
  const nlohmann::json& json() const;

  /// json()[key] as a string; throws bad_request when the body is not an
  /// object or the key is missing or not a string.
  std::string json_string(const char* key) const;

private:
  std::int64_t signed_param(std::string_view name, std::int64_t min, std::int64_t max) const;
  std::uint64_t unsigned_param(std::string_view name, std::uint64_t max) const;

  const http_request& raw_;
  params_type params_;
  mutable std::optional<nlohmann::json> json_;
};


// -- streaming responses (docs/streaming.md) ---------------------------------------

/// What a write to a stream did.
enum class stream_write : std::uint8_t {
  written,  ///< queued for the client
  slow,     ///< refused: the credit ran out (the client reads slower than you write); wait for `ready`
  too_big,  ///< refused: larger than limits.stream_max_event_bytes
  closed,   ///< refused: the stream is closed or its client gone (the writer is a no-op now)
};

/// The writer of one streaming response (SSE or NDJSON), a small handle to
/// keep in the actor (copies write to the same stream) and feed from later
/// handlers, timers (user_actor_base::later) and the stream's own callbacks.
/// Valid in its user actor only. Writes never block: one that would exceed
/// the stream's credit is refused (stream_write::slow) and the actor is told
/// (`slow`), then told again when the client has caught up (`ready`).
class stream {
public:
  stream() = default;
  /// Made by the platform (the handle of stream `id` of `host`).
  stream(detail::user_host* host, std::uint64_t id) noexcept : host_(host), id_(id) {}

  /// SSE: one event (`data` split in `data:` lines; optional `event:` and
  /// `id:` fields). NDJSON: `data` as a JSON string line.
  stream_write event(std::string_view data, std::string_view name = {}, std::string_view id = {});
  /// NDJSON: one line. SSE: one event whose data is `value` as JSON.
  stream_write json(const nlohmann::json& value);
  /// SSE: tells the browser to wait `delay` before it reconnects after the
  /// stream ends (`retry:`; its EventSource then sends `Last-Event-ID`, the id
  /// of the last event it received: `q.header("Last-Event-ID")`). NDJSON: writes
  /// nothing and answers `written`.
  stream_write retry(std::chrono::milliseconds delay);
  /// Ends the response once what was written is out; later writes are `closed`.
  void close();

  /// True until close() or the client's disconnect.
  bool is_open() const;
  /// True while writes are refused for lack of credit (between `slow` and `ready`).
  bool is_slow() const;
  /// Bytes that may be written now without being refused.
  std::uint64_t credit() const;
  std::uint64_t id() const noexcept { return id_; }

private:
  detail::user_host* host_ = nullptr;
  std::uint64_t id_ = 0;
};

struct response;

/// One streamed request body being received (route_table::upload; docs/http.md
/// "Streamed uploads"), as its callbacks see it.
struct upload {
  std::uint64_t id = 0;        ///< this upload's number in its actor
  std::uint64_t received = 0;  ///< body bytes received so far (the piece at hand included)
};

/// What a streamed body tells its actor, each called in the actor, in order,
/// between his other requests and messages. A callback that throws is a
/// failed handler (502; his restart starts from his last good state).
struct upload_handlers {
  /// The next piece of the body (at most limits.upload_chunk_bytes): the front
  /// reads the next one only once this returns.
  std::function<void(const upload&, std::string_view piece)> chunk;
  /// The body is complete: the request's answer (a plain answer). Empty: 200 {"bytes": N}.
  std::function<response(const upload&)> end;
  /// The body broke: the client went away, it passed limits.max_stream_body_bytes,
  /// it was malformed, or its user is leaving. The client gets an error, if anybody.
  std::function<void(const upload&, const std::string& why)> abort;
};

/// What a stream tells its actor, each called in the actor with the stream's
/// writer; any may be empty. A callback that throws is a failed handler (the
/// actor restarts, his streams are cut).
struct stream_handlers {
  std::function<void(stream&)> open;   ///< the response head goes out: start writing
  std::function<void(stream&)> slow;   ///< the credit ran out: writes are refused until `ready`
  std::function<void(stream&)> ready;  ///< the client caught up after `slow`: write again
  std::function<void(stream&)> gone;   ///< the client disconnected (or the front cut the stream): writes are no-ops
};

/// The attributes of a cookie a handler sets with response::cookie() (RFC 6265).
struct cookie_attributes {
  std::optional<std::int64_t> max_age;  ///< Max-Age in seconds (0 or less removes the cookie); none: until the browser closes
  std::string path;                     ///< Path; "": none (the browser takes the request's directory)
  std::string domain;                   ///< Domain; "": this host only
  bool secure = false;                  ///< Secure: sent over HTTPS only
  bool http_only = false;               ///< HttpOnly: hidden from the page's scripts
  std::string same_site;                ///< SameSite: "Strict", "Lax" or "None" (None needs secure); "": none
};

/// What a handler returns: a status and a body, or a deferred answer
/// (login, logout, after, defer) that the platform completes. Headers and cookies
/// are added in a chain: `return response::json(j).header("Cache-Control", "no-store");`
/// Every name and value is checked when the answer leaves the handler (docs/http.md):
/// a control character (CR, LF, NUL), a name that is not a token, a header the
/// platform owns (Connection, Content-Length, Transfer-Encoding, Keep-Alive, TE,
/// Trailer, Upgrade, Proxy-Connection) or the platform's cookie `troupe_cid` turns
/// the answer into a 500, logged once per route: never a split response.
struct response {
  std::uint16_t status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::uint32_t retry_after = 0;                ///< seconds for a Retry-After header; 0: none
  std::shared_ptr<detail::continuation> next;  ///< set for deferred answers only
  /// Headers besides those troupe writes, in order; a name may repeat. header(),
  /// cookie() and redirect() add here; a "Content-Type" header sets content_type.
  std::vector<std::pair<std::string, std::string>> headers;
  /// What was wrong with a header, cookie or redirect given to this response
  /// ("" when nothing): the client gets a 500 instead of this answer.
  std::string invalid;

  /// Adds a header (repeatable: each call adds one line).
  response& header(std::string name, std::string value) &;
  response&& header(std::string name, std::string value) &&;
  /// Adds a Set-Cookie header for `name`=`value` with `attributes`.
  response& cookie(std::string name, std::string value, const cookie_attributes& attributes = {}) &;
  response&& cookie(std::string name, std::string value, const cookie_attributes& attributes = {}) &&;
  /// A redirect to `location` (a path of this site or an absolute URL) with
  /// status 301, 302, 303, 307 or 308; any other status makes it invalid (a 500).
  static response redirect(std::string location, std::uint16_t status = 302);

  /// `body` serialized as JSON.
  static response json(const nlohmann::json& body, std::uint16_t status = 200);
  /// {"error": message}.
  static response error(std::uint16_t status, const std::string& message);
  /// A plain-text body.
  static response text(std::string body, std::uint16_t status = 200);
  /// A Server-Sent Events stream (text/event-stream, chunked): `h.open`
  /// gets its writer once the client is connected. The request deadline no
  /// longer applies; the actor serves his other requests meanwhile.
  static response sse(stream_handlers h);
  /// An NDJSON stream (application/x-ndjson, one JSON value per line), as sse().
  static response ndjson(stream_handlers h);
  /// Reads the request's streamed body (a route declared with route_table::upload)
  /// piece by piece with `h`; `h.end`'s answer is the request's.
  static response receive(upload_handlers h);
};

/// The answer of one deferred request (user_actor_base::defer): a small
/// handle to keep in the actor (copies answer the same request) and complete
/// from any later event in it — a message from another user, a global-store
/// result, a timer (docs/http.md "Deferred answers"). Valid in its user actor only.
class promise {
public:
  promise() = default;
  /// Made by the platform (the handle of deferred answer `id` of `host`).
  promise(detail::user_host* host, std::uint64_t id) noexcept : host_(host), id_(id) {}

  /// Answers the request with `answer`: a plain answer (status, body, headers,
  /// cookies); a deferred one (after, a stream, the global store …) is refused
  /// and the client gets 500. False, and nothing sent, when the request was
  /// answered already, timed out (the client got 504) or its user left: a late
  /// completion, dropped and counted (troupe_deferred_answers_total{outcome="late"}).
  bool resolve(response answer);
  /// Moves the deadline to `from_now` from now, never past limits.max_deferred_seconds
  /// after defer() (nor, for a request forwarded from another cluster member, past
  /// its request deadline). False when the promise is no longer open.
  bool keep_alive(std::chrono::milliseconds from_now);
  /// True until it is resolved, timed out, or its user left.
  bool is_open() const;
  std::uint64_t id() const noexcept { return id_; }

private:
  detail::user_host* host_ = nullptr;
  std::uint64_t id_ = 0;
};


// -- app WebSockets (docs/http.md "App WebSockets") --------------------------------

/// One whole message from an app WebSocket's client (route_table::websocket).
struct socket_message {
  std::string_view data;  ///< its payload: UTF-8 text, or bytes (valid during the handler only)
  bool binary = false;    ///< a binary message, else a text one
};

/// One app WebSocket of the user (route_table::websocket), as his handlers see
/// it: a page of his (the census lists it with his pages) open on a socket of
/// the front that accepted it. A small value; its id() reaches it again from
/// any later handler (user_actor_base::socket), after a freeze and wake too.
/// Valid in its user actor only.
class app_socket {
public:
  app_socket() = default;
  /// Made by the platform.
  app_socket(detail::user_host* host, std::string id, std::string path, std::string subprotocol)
    : host_(host), id_(std::move(id)), path_(std::move(path)), subprotocol_(std::move(subprotocol)) {}

  /// Its page id ("ws-…"), unique among the user's pages.
  const std::string& id() const noexcept { return id_; }
  /// The path its upgrade asked for (its route's pattern, parameters filled in).
  const std::string& path() const noexcept { return path_; }
  /// The subprotocol agreed at the upgrade ("" for none).
  const std::string& subprotocol() const noexcept { return subprotocol_; }

  /// Queues a text message (UTF-8) for the client. True when it went toward
  /// the socket; false when the socket is not open for this user (closed,
  /// gone with its connection, never his). The queue is bounded as a page
  /// channel's (channel.max_queued_frames, max_queued_bytes, overflow): a
  /// client that reads too slowly is closed with 1013 (or loses the oldest messages).
  bool send_text(std::string text);
  /// Queues a binary message, as send_text().
  bool send_binary(std::string bytes);
  /// Closes the socket with `code` (1000, 1001, 1003, 1007, 1008, 1011,
  /// 1013, or 3000–4999; another is sent as 1000) and `reason` (cut at 123
  /// bytes) once what was queued before is written. `closed` runs when it is.
  bool close(std::uint16_t code = 1000, std::string reason = {});
  /// True while the socket is open for this user.
  bool is_open() const;

private:
  detail::user_host* host_ = nullptr;
  std::string id_;
  std::string path_;
  std::string subprotocol_;
};

// -- guards (docs/http.md "Guards") ------------------------------------------------

/// What a guard sees: the request (its method, path, path parameters, query,
/// headers, body, client address) and the user it is for. A guard runs on the
/// front's threads before the request reaches any actor — concurrently with
/// other requests: it reads only this and constant data, never an actor's state.
class guard_request : public request {
public:
  guard_request(const http_request& raw, params_type params, const std::string& user)
    : request(raw, std::move(params)), user_(user) {}
  /// The user the connection belongs to ("guest_<connection>" for a guest).
  const std::string& user() const noexcept { return user_; }
  /// True when the connection has nobody logged in.
  bool guest() const noexcept;

private:
  const std::string& user_;
};

/// A guard's verdict: let the request through, or refuse it with a status.
struct guard_verdict {
  std::uint16_t status = 0;  ///< 0: allowed; else the refusal's status (400–499 or 503)
  std::string message;       ///< the refusal's {"error": message}

  static guard_verdict allow() { return {}; }
  static guard_verdict refuse(std::uint16_t status = 403, std::string message = "forbidden") {
    return {status, std::move(message)};
  }
  bool allowed() const noexcept { return status == 0; }
};

}  // namespace troupe
