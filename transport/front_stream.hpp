#pragma once
/// \file
/// The stream the front's sessions read and write: HTTP, the console's and the
/// channels' WebSockets all run on it, so each works the same over plain TCP
/// and (issue 14) TLS.

#include <boost/beast/core/tcp_stream.hpp>

namespace troupe {

using front_stream = boost::beast::tcp_stream;

}  // namespace troupe
