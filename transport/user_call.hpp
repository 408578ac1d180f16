#pragma once
/// \file
/// One request carried to its user actor the way the front carries HTTP
/// requests (transport/front.cpp): the routing cache, or the bridge on a miss
/// (the commander resolves, waking a frozen user); a local actor gets the
/// reply slot directly, a remote one goes through the forwarder; a `not_here`
/// answer or an actor that died with the request re-resolves once; a deadline
/// answers 504. Used by the channel session for its calls.

#include "actors/messages.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace troupe {

class front;

/// Sends `req` (cid, method, path, body set) to the user of `req->cid`;
/// `done` runs exactly once, on `ex` (the caller's strand), with the answer.
/// A reply carrying set_cid (login/logout over the call) has already dropped
/// the old route. `minted`: the id was just made (no user can exist for it).
void call_user(front& owner, boost::asio::any_io_executor ex, std::shared_ptr<http_request> req,
               std::chrono::milliseconds timeout, std::function<void(http_response&&)> done, bool minted = false);

}  // namespace troupe
