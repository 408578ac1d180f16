#pragma once
/// \file
/// The front's HTTP framing policy as pure functions: how a request head is
/// parsed (Beast's request_parser, configured here) and which parsed heads
/// troupe refuses on top of Beast's own checks. The front uses exactly these,
/// and the fuzz targets call them, so what is fuzzed is what runs.

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::http_framing {

/// A Beast string view as a std::string_view (the same bytes, no copy).
inline std::string_view sv(boost::beast::string_view s) noexcept {
  return {s.data(), s.size()};
}

/// The value of cookie `name` in one `Cookie` header value ("a=1; b=2"), "" when absent.
std::string_view cookie_value(std::string_view cookie_header, std::string_view name);

/// troupe's own checks on a parsed request head: "" when acceptable, else the
/// human reason for a 400 (the connection is then closed). Refused: a
/// Transfer-Encoding other than exactly `chunked` (RFC 9112 §6.1), one
/// together with Content-Length (§6.3), more than one Transfer-Encoding,
/// Content-Length or Host field, a target not starting with '/' (but `*` for
/// OPTIONS), an empty or repeated X-Troupe-Page.
std::string header_refusal(const boost::beast::http::request_header<>& h);

/// The limits the parser is configured with (the recipe's [limits]).
struct parse_limits {
  std::uint64_t max_body_bytes;
  std::uint32_t max_header_bytes;
};

/// The front's parser for one request.
using request_parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

/// Sets up a fresh parser the way the front reads every request.
void configure(request_parser& parser, const parse_limits& limits);

/// The status a parse error is answered with: 431 (header limit), 413 (body
/// limit), 400 (anything else malformed); 0 when `ec` is not a parse error
/// (I/O errors, end of stream: nobody to answer).
std::uint16_t status_for(const boost::system::error_code& ec);

/// What parse_stream saw.
struct parse_outcome {
  std::size_t requests = 0;       ///< complete requests accepted, in order
  std::uint16_t refused_with = 0; ///< 0: none; else 400/413/431 for the first refused one
};

/// Feeds `bytes` through the front's parser set-up and checks, request after
/// request (as pipelined on one connection), until the bytes end (an
/// incomplete last request is neither counted nor refused) or one is refused.
parse_outcome parse_stream(std::string_view bytes, const parse_limits& limits);

}  // namespace troupe::http_framing
