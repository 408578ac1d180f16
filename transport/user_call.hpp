#pragma once
/// \file
/// One request carried to its user actor: the routing cache, or the bridge on
/// a miss (the commander resolves, waking a frozen user); a local actor gets
/// the reply slot directly, a remote one goes through the forwarder; a
/// `not_here` answer or an actor that died with the request re-resolves once;
/// a deadline answers 504 (logged, rate-limited). The one path of every user
/// call: HTTP requests (transport/front.cpp) and channel calls alike.

#include "actors/messages.hpp"
#include "actors/user.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <caf/actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace troupe {

class front;

/// Runs once with the answer and the actor that gave it (invalid when none
/// did: a refusal, a timeout); that actor writes a streaming answer (docs/streaming.md).
using user_call_done = std::function<void(http_response&&, const user_handle& answered_by)>;

/// Sends `req` (cid, method, path, body set) to the user of `req->cid`;
/// `done` runs exactly once, on `ex` (the caller's strand), with the answer.
/// A reply carrying set_cid (login/logout over the call) has already dropped
/// the old route and closed the old id's other channel sockets on this node.
/// `minted`: the id was just made (no user can exist for it). `routed`: the
/// route cache's actor for the id, when the caller looked it up already.
void call_user(front& owner, boost::asio::any_io_executor ex, std::shared_ptr<http_request> req,
               std::chrono::milliseconds timeout, user_call_done done, bool minted = false,
               std::optional<user_handle> routed = std::nullopt);

}  // namespace troupe
