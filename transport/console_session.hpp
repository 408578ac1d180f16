#pragma once
/// \file
/// The console's live channel, `/_troupe/console/live`: a WebSocket on which
/// the node sends the census of the console's view, in full once and then
/// every second as an RFC 6902 patch of what changed (docs/census.md). One
/// census query in flight per console, at most 4 messages queued: a slow
/// console skips ticks instead of growing the node's memory.

#include "transport/front_stream.hpp"
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <string_view>

namespace troupe {

class front;

/// The console's page (transport/console/console.html, built into the binary).
std::string_view console_page();

/// Accepts the upgrade request `upgrade` on `stream` and serves the console
/// until it leaves (or the front closes). `counted`: the upgrade carried the
/// admin token and took a console slot (front::console_opened); otherwise the
/// channel waits (at most 10 s) for the token as its first message and takes
/// a slot only then.
void start_console_session(front_stream&& stream,
                           boost::beast::http::request<boost::beast::http::string_body>&& upgrade, front& owner,
                           bool counted);

}  // namespace troupe
