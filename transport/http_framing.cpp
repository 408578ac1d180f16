#include "transport/http_framing.hpp"

#include "registry/url.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

namespace troupe::http_framing {

namespace http = boost::beast::http;

namespace {

std::size_t count(const http::request_header<>& h, http::field f) {
  auto [first, last] = h.equal_range(f);
  return static_cast<std::size_t>(std::distance(first, last));
}

}  // namespace

std::string_view cookie_value(std::string_view all, std::string_view name) {
  if (name.empty())
    return {};
  while (!all.empty()) {
    auto semi = all.find(';');
    auto pair = all.substr(0, semi);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t'))
      pair.remove_prefix(1);
    if (pair.size() > name.size() && pair.substr(0, name.size()) == name && pair[name.size()] == '=')
      return pair.substr(name.size() + 1);
    if (semi == std::string_view::npos)
      break;
    all.remove_prefix(semi + 1);
  }
  return {};
}

std::string header_refusal(const http::request_header<>& h) {
  auto te_fields = count(h, http::field::transfer_encoding);
  if (te_fields > 1)
    return "more than one Transfer-Encoding header";
  if (te_fields == 1) {
    // Only "chunked" alone is understood; anything else would leave the body's
    // end to guesswork (request smuggling), RFC 9112 §6.1.
    auto coding = registry::trim_ows(sv(h[http::field::transfer_encoding]));
    if (!boost::beast::iequals(boost::beast::string_view(coding.data(), coding.size()), "chunked"))
      return "unsupported Transfer-Encoding (only chunked is accepted)";
    if (count(h, http::field::content_length) != 0)
      return "Content-Length together with Transfer-Encoding";
  }
  if (count(h, http::field::content_length) > 1)
    return "more than one Content-Length header";
  if (count(h, http::field::host) > 1)
    return "more than one Host header";
  auto target = sv(h.target());
  if (target.empty() || (target.front() != '/' && !(target == "*" && h.method() == http::verb::options)))
    return "the request target must start with '/'";
  auto page = h.equal_range("X-Troupe-Page");
  if (page.first != page.second) {
    if (std::next(page.first) != page.second)
      return "more than one X-Troupe-Page header";
    if (page.first->value().empty())
      return "X-Troupe-Page must be 1-64 characters of A-Z a-z 0-9 _ . -";
  }
  return {};
}

void configure(request_parser& parser, const parse_limits& limits) {
  parser.header_limit(limits.max_header_bytes);
  parser.body_limit(limits.max_body_bytes);
}

std::uint16_t status_for(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit)
    return 431;
  if (ec == http::error::body_limit || ec == http::error::buffer_overflow)
    return 413;
  if (ec == http::error::end_of_stream || ec == http::error::need_more || ec == http::error::partial_message)
    return 0;
  if (ec.category() == boost::system::error_code(http::error::bad_target).category())
    return 400;
  return 0;
}

parse_outcome parse_stream(std::string_view bytes, const parse_limits& limits) {
  parse_outcome out;
  while (!bytes.empty()) {
    request_parser parser;
    configure(parser, limits);
    bool head_checked = false;
    while (!parser.is_done()) {
      boost::system::error_code ec;
      auto used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(used);
      if (ec == http::error::need_more)
        return out;  // the rest has not arrived: neither accepted nor refused
      if (ec) {
        out.refused_with = status_for(ec) ? status_for(ec) : 400;
        return out;
      }
      if (parser.is_header_done() && !head_checked) {
        head_checked = true;
        if (!header_refusal(parser.get().base()).empty()) {
          out.refused_with = 400;
          return out;
        }
      }
      if (used == 0 && !parser.is_done())
        return out;  // nothing more can be parsed from what is here
    }
    ++out.requests;
  }
  return out;
}

}  // namespace troupe::http_framing
