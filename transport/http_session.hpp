#pragma once
/// \file
/// (Internal to transport/.) One HTTP/1.1 connection of the front, from its
/// accept (transport/front.cpp) to its close: the TLS handshake, then
/// request after request in do_read/on_read and do_write/on_write pairs —
/// a deadline and a size limit on every read (limits.read_timeout_seconds,
/// max_header_bytes, max_body_bytes, the node-wide max_buffered_body_bytes),
/// one write in flight (a reply, then the next request). A request goes to
/// its user actor (transport/user_call.hpp); one under /_troupe goes to the
/// admin routes (transport/admin_routes.hpp), which answer through the calls
/// below; a streaming reply hands the connection to its stream writer
/// (transport/stream_writer.hpp); a WebSocket upgrade hands it to its
/// session (transport/ws_session.hpp).

#include "actors/messages.hpp"
#include "actors/user.hpp"
#include "transport/bridge.hpp"
#include "transport/deadline_list.hpp"
#include "transport/file_range_body.hpp"
#include "transport/front_stream.hpp"
#include "transport/http_framing.hpp"
#include "transport/static_files.hpp"
#include "transport/upload_source.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <caf/actor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace troupe {

class front;
struct front_limits;
class stream_writer;
class app_socket_ticket;

class http_session : public std::enable_shared_from_this<http_session> {
public:
  using request_type = boost::beast::http::request<boost::beast::http::string_body>;

  /// `tls`: the context of a TLS listener's connection (null: plain TCP).
  http_session(boost::asio::ip::tcp::socket&& socket, front& owner, std::shared_ptr<boost::asio::ssl::context> tls);
  ~http_session();

  void start();
  /// Shutdown: an idle keep-alive connection is closed; an open stream is cut (its writer is told).
  void shutdown_if_idle();
  /// Shutdown, past the grace period: a request still awaited is answered 503
  /// + Retry-After now (and its connection closed) instead of being cut.
  void answer_unavailable_now();
  /// An admin operation's answer (posted onto this session's strand).
  void on_actor_reply(std::uint64_t call, http_response&& r);

  // -- for the admin routes (transport/admin_routes.cpp) ------------------------------
  front& owner() noexcept { return front_; }
  const request_type& request() const noexcept { return req_; }
  /// The request's troupe_cid cookie, "" when absent.
  std::string_view request_cid() const;
  /// The address of the socket's peer (once per connection), "" when unknown.
  const std::string& peer_address();
  /// The client the current request comes from: the peer, or whom the trusted
  /// proxies' Forwarded / X-Forwarded-For name (front::client_address).
  std::string client_address() { return front_.client_address(peer_address(), req_); }
  /// Writes the reply (then reads the next request, or closes). `challenge`:
  /// WWW-Authenticate: Bearer (a 401).
  void answer(std::uint16_t status, std::string body, std::string_view content_type, std::uint32_t retry_after = 0,
              bool challenge = false);
  /// 405 with the methods the path takes (Allow).
  void refuse_method(const char* allowed);
  /// An admin operation answered by the actors: `send` hands the slot to the
  /// bridge; the answer comes back like an actor's (on_actor_reply), under the request deadline.
  void call_bridge(const std::function<void(front&, local_admin)>& send);
  /// Hands the connection (its stream and the upgrade request) to a WebSocket
  /// session: start(front_stream&&, request_type&&). The HTTP session is done with then.
  template <class Start>
  void upgrade(Start start) {
    start(std::move(stream_), std::move(req_));
  }

  // -- for the upload source (transport/upload_session.cpp) ----------------------------
  /// Reads at most `max` more bytes of the streamed body and hands them to the source.
  void upload_read(std::uint64_t max);
  /// Its reader is done with the body: nothing more is read (the connection closes after the answer).
  void upload_stop();

  // -- for the stream writer (transport/stream_writer.cpp) ----------------------------
  front_stream& stream() noexcept { return stream_; }
  const front_limits& limits() const noexcept { return limits_; }
  void close();

private:
  // TLS: the handshake comes before the first read, within limits.tls_handshake_timeout_seconds.
  void do_handshake();
  void on_handshake(boost::system::error_code ec);
  // Idle keep-alive: wait (idle_timeout) for the first byte of the next request.
  void do_wait();
  void on_first_bytes(boost::system::error_code ec, std::size_t n);
  // A request has begun: read all of it (read_timeout, header and body limits).
  void do_read();
  void on_read_header(boost::system::error_code ec, std::size_t n);
  // The head passed every check: read the body (after a 100 Continue when asked for).
  void do_read_body();
  void on_read(boost::system::error_code ec, std::size_t n);
  using request_parser_base = boost::beast::http::basic_parser<true>;
  bool parse_buffered(bool (request_parser_base::*stage_done)() const, boost::system::error_code& ec);
  // Which answer a failed read gets (431/413/400/503), or a silent close.
  void on_read_error(boost::system::error_code ec);
  // A streamed body (route_table::upload; transport/upload_session.cpp): the
  // head goes to the actor now, the body as its reader asks for it.
  void begin_upload();
  void on_read_piece(boost::system::error_code ec, std::size_t asked);
  void send_piece(upload_piece piece);
  void end_upload();  // an answer is going out: a body not read whole is not read further
  std::shared_ptr<upload_port> make_upload_port();
  // The node-wide budget of buffered bodies (limits.max_buffered_body_bytes).
  bool reserve_body(std::uint64_t bytes);
  void release_body();
  void handle();
  void dispatch_call();
  void on_deadline();
  void finish(http_response&& r);
  // An app WebSocket's upgrade, accepted (101) by its user.
  void accept_socket(std::unique_ptr<app_socket_ticket> ticket, const http_response& accepted);
  // A streaming reply (docs/streaming.md): refused, or handed to its writer.
  void start_stream(http_response&& r);
  // The Set-Cookie value this reply carries ("" for none); given once.
  std::string take_cookie();
  // `app_headers`: a handler's own (checked by its actor), written after the front's.
  void do_write(std::uint16_t status, std::string body, std::string_view content_type, std::uint32_t retry_after = 0,
                bool challenge = false, const std::vector<http_header>* app_headers = nullptr);
  static void add_app_headers(boost::beast::http::fields& fields, const std::vector<http_header>& headers);
  void add_cors_headers(boost::beast::http::fields& fields);
  void answer_preflight(std::string_view origin);
  void serve_file(const static_mount& mount, std::string_view path);
  void on_write(boost::system::error_code ec, bool keep);
  void refuse_and_close(std::uint16_t status, const std::string& text, std::uint32_t retry_after = 0);
  void linger_close();

  // The deadline of this connection's own reads and writes (the idle wait, the
  // request, the reply), on its io thread's deadline list: set while one of
  // them is pending (that operation keeps the session alive), it closes the
  // connection when it passes. Beast's per-operation timers stay for the rest
  // (TLS, uploads, files, streams, the linger).
  class io_deadline final : public deadline_entry {
  public:
    explicit io_deadline(http_session& s) : session_(s) {}

  private:
    void expired() override { session_.close(); }
    http_session& session_;
  };
  void watch(deadline_entry::clock::duration d);
  void unwatch() noexcept;

  front_stream stream_;
  front& front_;
  const front_limits& limits_;
  boost::beast::flat_buffer buffer_;
  std::optional<http_framing::request_parser> parser_;
  // A streamed body: its parser (the head's, moved), its source, what was read.
  std::optional<boost::beast::http::request_parser<boost::beast::http::buffer_body>> upload_parser_;
  upload_source_actor upload_source_;
  std::vector<char> upload_buffer_;  // one piece, limits.upload_chunk_bytes
  request_type req_;
  boost::beast::http::response<boost::beast::http::string_body> res_;
  boost::asio::steady_timer deadline_;
  bool idle_ = true;
  bool close_after_ = false;
  bool over_budget_ = false;         // the body budget refused a chunk of the current request
  std::uint64_t reserved_body_ = 0;  // bytes of the node-wide body budget this request holds
  // Beast keeps a reference to its chunk callback: it lives as long as the session.
  std::function<void(std::uint64_t, boost::beast::string_view, boost::system::error_code&)> on_chunk_;
  std::string allow_;      // the Allow header of a 405, "" otherwise
  std::string route_key_;  // the user type's route that answered (its figures), "" otherwise
  std::string interim_;    // "100 Continue", while it is written
  // The request being served, shared with the slots that carry it to actors.
  std::shared_ptr<http_request> call_req_;
  bool minted_ = false;
  std::optional<user_handle> routed_;  // the route cache's actor for this request's id, until its call takes it
  std::string rotated_cid_;  // login/logout gave the connection this new id: the reply's cookie
  std::string peer_;         // peer_address(), asked of the socket once
  std::vector<http_header> cors_headers_;  // [[cors]]: what this request's answer carries
  std::optional<boost::beast::http::response<file_range_body>> file_res_;  // a static file being written
  std::vector<char> file_buffer_;  // what file_res_ reads into, 32 KiB at a time
  bool counted_ = false;
  std::uint64_t call_seq_ = 0;
  std::uint64_t current_call_ = 0;  // 0: nothing awaited
  std::chrono::steady_clock::time_point started_;
  user_handle target_;                   // the actor that answered the current call (a stream's writer)
  std::weak_ptr<stream_writer> writer_;  // the streaming reply this connection carries now, if any
  std::unique_ptr<app_socket_ticket> socket_ticket_;  // an app WebSocket's upgrade, while its user answers
  io_deadline io_deadline_{*this};
  std::unique_ptr<deadline_list> own_deadlines_;  // off the front's io threads only (none today)
  deadline_list* deadlines_ = nullptr;            // the io thread's, found at the first watch
};

}  // namespace troupe
