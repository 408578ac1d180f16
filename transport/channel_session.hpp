#pragma once
/// \file
/// The page channel, `GET /_troupe/ws` (docs/channels.md): a WebSocket whose
/// frames are JSON envelopes served by the same routes as HTTP (the user
/// actor's route table), replies written back by call id, pushes from actors
/// written as {"push": path, "data": …}. Bounded everywhere (recipe
/// [channel]): the outgoing queue (frames and bytes, with channel.overflow),
/// the incoming frame size, calls in flight, open sockets, idleness (pings).

#include "transport/front_stream.hpp"

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <string>

namespace troupe {

class front;

/// Accepts the upgrade request `upgrade` on `stream` and serves the channel
/// until it closes. `cid`: the handshake's valid troupe_cid, "" when it carried
/// none (the socket is then closed at once with 1008 and a reason).
void start_channel_session(front_stream&& stream,
                           boost::beast::http::request<boost::beast::http::string_body>&& upgrade, front& owner,
                           std::string cid, std::string client);

}  // namespace troupe
