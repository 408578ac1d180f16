#pragma once
/// \file
/// The channel (WebSocket) of a page, as the actors see it: the socket actor's
/// typed interface and the messages of a push (docs/channels.md).
///
/// The sockets of a front are represented by one actor on its node, its
/// channel hub (transport/channel_actor.hpp), which keeps each socket's
/// bindings; a socket is (hub, number): a channel_ref (actors/messages.hpp).
/// That reference travels in every channel call (http_request::channel) to
/// the user actor, wherever he lives; an `openchannel` binds the page record
/// to it, and pushes are typed messages to the hub naming the socket. Every
/// type here is inspectable and registered (register_types): a user on
/// another node pushes the same way.

#include "actors/fwd.hpp"
#include "actors/messages.hpp"

#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// What a queued frame is on the wire.
enum class frame_kind : std::uint8_t {
  text = 0,  ///< a text message
  binary,    ///< a binary message (app WebSockets)
  close,     ///< the close handshake, after what was queued before it (app WebSockets)
};

/// One frame pushed to one page: delivered only when `page` of connection
/// `cid` is bound to socket number `socket` of the receiving hub.
struct channel_push {
  std::uint64_t socket = 0;
  std::string cid;
  std::string page;
  /// A page channel's: the whole JSON text {"push": path, "data": data}; an
  /// app WebSocket's: the message (a close's reason).
  std::string frame;
  frame_kind kind = frame_kind::text;
  std::uint16_t close_code = 0;  ///< frame_kind::close only
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_push& x) {
  return f(caf::meta::type_name("troupe.channel_push"), x.socket, x.cid, x.page, x.frame, x.kind, x.close_code);
}

/// A page's open channel as its user froze with it: handed to his next
/// placement (through the commander), which binds the page to the same socket
/// again, so a page keeps hearing its user across a freeze and a wake.
struct channel_binding {
  std::string cid;
  std::string page;
  channel_ref socket;
  bool sequential = false;
  /// An app WebSocket's (route_table::websocket): the path of its upgrade and
  /// its subprotocol; "" for a page channel.
  std::string app_path;
  std::string subprotocol;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_binding& x) {
  return f(caf::meta::type_name("troupe.channel_binding"), x.cid, x.page, x.socket, x.sequential, x.app_path,
           x.subprotocol);
}

// channel_handle, the hub's typed interface, and the atoms of its messages
// are in actors/fwd.hpp: every channel call carries a hub (channel_ref).

/// The internal call a socket's session makes once, before reading any frame:
/// its user answers 200 {"user": <his name>}, whom the socket then counts
/// under (channel.max_sockets_per_user). A client's frame naming it is refused
/// 404 by the session: only the front sends it.
constexpr const char* socket_admission_path = "/_troupe/socket";

/// The pushed frame's text: {"push": path, "data": data}, data being JSON text
/// ("" for null).
std::string push_frame(const std::string& path, const std::string& data_json);

}  // namespace troupe
