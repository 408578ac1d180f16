#pragma once
/// \file
/// (Internal to transport/.) The writer of one streaming reply (SSE or NDJSON,
/// docs/streaming.md): it takes over its HTTP session's connection once the
/// head is due (the connection ends with the stream). Its sink actor
/// (transport/stream_sink.hpp) keeps the queue and sends one batch at a time;
/// the writer writes it as one chunk and tells the sink when it is out (one
/// write in flight). A read stays posted meanwhile, to notice the client's
/// disconnect (no request deadline applies; a client that takes nothing for
/// limits.read_timeout_seconds is cut).

#include "transport/stream_sink.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/serializer.hpp>
#include <caf/actor.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace troupe {

class http_session;

class stream_writer : public std::enable_shared_from_this<stream_writer> {
public:
  using head_type = boost::beast::http::response<boost::beast::http::empty_body>;

  /// Spawns the sink of stream `id` of `writer` (the user actor that answered
  /// with it; `content_type` names its format), writes `head` on `session`'s
  /// connection, then the chunks. The session keeps a weak pointer (its
  /// shutdown cuts the stream: gone()); the writer holds the session.
  static std::shared_ptr<stream_writer> start(std::shared_ptr<http_session> session, head_type head,
                                              stream_writer_for_sinks writer, std::uint64_t id,
                                              const std::string& content_type);

  stream_writer(std::shared_ptr<http_session> session, head_type head);
  ~stream_writer();

  // -- from the sink (posted onto the connection's strand) -----------------------------
  void write(std::string bytes);
  void end(bool clean);
  /// The client went away (or cannot be written to), or the node shuts down:
  /// the sink is told once, the connection closed.
  void gone();

private:
  void on_head(boost::system::error_code ec);
  void do_chunk(std::string bytes);
  void on_chunk(boost::system::error_code ec, std::size_t n);
  // The last chunk, then a half-close; the watching read sees the client close (or a short linger cuts it).
  void finish_end();
  void do_watch_client();

  std::shared_ptr<http_session> session_;
  stream_sink_handle sink_;
  head_type head_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> head_writer_;
  boost::asio::steady_timer linger_;
  bool head_done_ = false;
  std::optional<std::string> pending_;  // the next batch (the first one, when it came before the head was out)
  std::string out_;                     // the batch on the wire
  bool writing_ = false;
  bool ending_ = false, end_clean_ = false, last_out_ = false;
  bool gone_ = false;  // the sink was told (or has ended): tell it nothing more
  std::array<char, 512> discard_{};
};

}  // namespace troupe
