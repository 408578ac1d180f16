#pragma once
/// \file
/// (Internal to transport/.) App WebSockets (route_table::websocket; docs/http.md
/// "App WebSockets"): the front's side of one socket, from its upgrade request
/// to its close.
///
/// The upgrade is a request to the user like any other (guards, wake, forwarding
/// across members), carrying a socket number of the front's channel hub and the
/// page id the socket will be. Before it leaves, the HTTP session takes a
/// ticket: the socket registered at the hub with its outgoing queue (so the
/// user's `open` handler may write to it at once), its place in the socket
/// quotas. The user answers 101 (accepted) or a status (refused: the ticket is
/// given back, the status written as an HTTP answer). Accepted, the socket's
/// session reads one message at a time: each is a call to the user (credit 1:
/// the next is read once he has handled it) and writes what he queues, one
/// frame in flight, bounded as a page channel's queue.

#include "actors/messages.hpp"
#include "transport/channel_outbox.hpp"
#include "transport/front_stream.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <memory>
#include <string>
#include <vector>

namespace troupe {

class front;
struct app_socket_slot;

/// What an app WebSocket holds on its front from its upgrade request on; given
/// back (destroyed), all of it is released and the hub tells the user bound to
/// the socket that it went.
class app_socket_ticket {
public:
  /// A ticket for a socket of connection `cid` whose session will run on
  /// `strand`; nullptr, with `refusal` set (429, 503), when a limit refuses it.
  static std::unique_ptr<app_socket_ticket> issue(front& owner, boost::asio::any_io_executor strand,
                                                  const std::string& cid, http_response& refusal);
  ~app_socket_ticket();
  app_socket_ticket(const app_socket_ticket&) = delete;
  app_socket_ticket& operator=(const app_socket_ticket&) = delete;

  /// The socket as the user binds it: (the front's hub, its number).
  channel_ref socket() const;
  /// The page id the socket is for its user ("ws-<number>-<random>").
  const std::string& page() const noexcept { return page_; }

private:
  friend class app_socket_session;
  app_socket_ticket(front& owner, std::uint64_t socket, std::string page);

  front& front_;
  std::uint64_t socket_;
  std::string page_;
  std::shared_ptr<channel_outbox> outbox_;
  std::shared_ptr<app_socket_slot> slot_;  // the session, once there is one (read on its strand only)
  bool in_quota_ = false;
};

/// The user accepted the upgrade (`accepted`: his 101, whose body names him,
/// the subprotocol and the largest message): the socket's session takes the
/// connection over. `call`: the upgrade as it went to him; `headers`: what the
/// 101 carries besides the handshake's own (the connection's new cookie).
void start_app_socket(front_stream&& stream, boost::beast::http::request<boost::beast::http::string_body>&& upgrade,
                      front& owner, std::unique_ptr<app_socket_ticket> ticket, const http_response& accepted,
                      const http_request& call, std::vector<http_header> headers);

}  // namespace troupe
