// The front's framing policy (transport/http_framing): each refusal of a request head,
// the cookie parser, and parse_stream over pipelined and smuggling byte streams.
#include "transport/http_framing.hpp"

#include <boost/asio/error.hpp>
#include <gtest/gtest.h>

#include <string>

namespace http_framing_test_file {

namespace http = boost::beast::http;
using namespace troupe::http_framing;

namespace {

const parse_limits limits{4096, 4096};

// The head of `raw` as the front's parser sees it (the head only: the body is not needed).
http::request_header<> head_of(const std::string& raw) {
  request_parser p;
  configure(p, limits);
  p.eager(false);
  boost::system::error_code ec;
  p.put(boost::asio::buffer(raw.data(), raw.size()), ec);
  EXPECT_TRUE(p.is_header_done()) << raw << ": " << ec.message();
  return p.get().base();
}

std::string refusal(const std::string& fields, const std::string& start = "POST /api/x HTTP/1.1") {
  return header_refusal(head_of(start + "\r\nHost: h\r\n" + fields + "\r\n"));
}

}  // namespace

TEST(CookieValue, FindsTheNamedCookieAmongOthers) {
  EXPECT_EQ(cookie_value("troupe_cid=abc", "troupe_cid"), "abc");
  EXPECT_EQ(cookie_value("a=1; troupe_cid=abc; b=2", "troupe_cid"), "abc");
  EXPECT_EQ(cookie_value("a=1;troupe_cid=abc", "troupe_cid"), "abc");
  EXPECT_EQ(cookie_value("a=1; troupe_cid=", "troupe_cid"), "");
}

TEST(CookieValue, EmptyWhenAbsentOrOnlyAPrefixMatches) {
  EXPECT_EQ(cookie_value("", "troupe_cid"), "");
  EXPECT_EQ(cookie_value("troupe_cidx=abc", "troupe_cid"), "");
  EXPECT_EQ(cookie_value("xtroupe_cid=abc", "troupe_cid"), "");
  EXPECT_EQ(cookie_value("troupe_cid", "troupe_cid"), "");
  EXPECT_EQ(cookie_value(";;;", "troupe_cid"), "");
  EXPECT_EQ(cookie_value("a=1", ""), "");
}

TEST(HeaderRefusal, AcceptsAnOrdinaryRequest) {
  EXPECT_EQ(refusal("Content-Length: 3\r\n"), "");
  EXPECT_EQ(refusal("Transfer-Encoding: chunked\r\n"), "");
  EXPECT_EQ(refusal("Transfer-Encoding: Chunked\r\n"), "");
  EXPECT_EQ(refusal("X-Troupe-Page: tab-1\r\n"), "");
  EXPECT_EQ(refusal("", "OPTIONS * HTTP/1.1"), "");
}

TEST(HeaderRefusal, RefusesEveryTransferEncodingButChunked) {
  for (const char* te : {"xchunked", "gzip", "chunked, gzip", "gzip, chunked", "identity", "chunked, chunked",
                         "deflate", "chunkedx"})
    EXPECT_NE(refusal(std::string("Transfer-Encoding: ") + te + "\r\n"), "") << te;
}

TEST(HeaderRefusal, RefusesTwoTransferEncodingFields) {
  EXPECT_NE(refusal("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), "");
}

TEST(HeaderRefusal, RefusesContentLengthWithTransferEncoding) {
  // Beast refuses CL before TE, and CL after chunked, itself; the rest is ours.
  EXPECT_NE(refusal("Transfer-Encoding: gzip\r\nContent-Length: 5\r\n"), "");
  http::request_header<> h;
  h.method(http::verb::post);
  h.target("/a");
  h.set(http::field::content_length, "5");
  h.set(http::field::transfer_encoding, "chunked");
  EXPECT_NE(header_refusal(h), "");
  for (const char* fields : {"Content-Length: 5\r\nTransfer-Encoding: gzip\r\n",
                             "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                             "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"})
    EXPECT_EQ(parse_stream(std::string("POST /a HTTP/1.1\r\nHost: h\r\n") + fields + "\r\nhello", limits).refused_with,
              400)
      << fields;
}

TEST(HeaderRefusal, RefusesRepeatedContentLengthOrHost) {
  EXPECT_NE(refusal("Content-Length: 5\r\nContent-Length: 5\r\n"), "");
  EXPECT_NE(refusal("Host: other\r\n"), "");
}

TEST(HeaderRefusal, RefusesATargetWithoutALeadingSlash) {
  EXPECT_NE(refusal("", "GET api/whoami HTTP/1.1"), "");
  EXPECT_NE(refusal("", "GET http://h/api/whoami HTTP/1.1"), "");
  EXPECT_NE(refusal("", "GET * HTTP/1.1"), "");
}

TEST(HeaderRefusal, RefusesAnEmptyOrRepeatedPage) {
  EXPECT_NE(refusal("X-Troupe-Page:\r\n"), "");
  EXPECT_NE(refusal("X-Troupe-Page: a\r\nX-Troupe-Page: b\r\n"), "");
}

TEST(StatusFor, MapsParserErrors) {
  EXPECT_EQ(status_for(http::error::header_limit), 431);
  EXPECT_EQ(status_for(http::error::body_limit), 413);
  EXPECT_EQ(status_for(http::error::buffer_overflow), 413);
  EXPECT_EQ(status_for(http::error::bad_method), 400);
  EXPECT_EQ(status_for(http::error::bad_transfer_encoding), 400);
  EXPECT_EQ(status_for(http::error::end_of_stream), 0);
  EXPECT_EQ(status_for(boost::asio::error::connection_reset), 0);
}

TEST(ParseStream, CountsPipelinedRequests) {
  std::string two = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
  auto out = parse_stream(two, limits);
  EXPECT_EQ(out.requests, 2u);
  EXPECT_EQ(out.refused_with, 0);
  out = parse_stream(two + "GET /c HTTP/1.1\r\nHo", limits);  // an incomplete third one
  EXPECT_EQ(out.requests, 2u);
  EXPECT_EQ(out.refused_with, 0);
}

TEST(ParseStream, ChunkedBody) {
  auto out = parse_stream("POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", limits);
  EXPECT_EQ(out.requests, 1u);
  EXPECT_EQ(out.refused_with, 0);
}

TEST(ParseStream, ASmuggledRequestIsNeverCounted) {
  std::string inner = "POST /api/counter/incr HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
  for (const char* te : {"xchunked", "gzip", "chunked, gzip", "identity"}) {
    auto out = parse_stream(std::string("POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ") + te + "\r\n\r\n" + inner,
                            limits);
    EXPECT_EQ(out.requests, 0u) << te;
    EXPECT_EQ(out.refused_with, 400) << te;
  }
  auto out = parse_stream("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "0\r\n\r\n" + inner, limits);
  EXPECT_EQ(out.requests, 0u);
  EXPECT_EQ(out.refused_with, 400);
}

TEST(ParseStream, Limits) {
  EXPECT_EQ(parse_stream("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n", limits).refused_with, 413);
  EXPECT_EQ(parse_stream("GET /a HTTP/1.1\r\nX: " + std::string(5000, 'x') + "\r\n\r\n", limits).refused_with, 431);
  EXPECT_EQ(parse_stream("GET /a HTTP/1.1\r\nX: " + std::string(5000, 'x'), limits).refused_with, 431);
  EXPECT_EQ(parse_stream("NOT HTTP\r\n\r\n", limits).refused_with, 400);
  EXPECT_EQ(parse_stream("GET a HTTP/1.1\r\nHost: h\r\n\r\n", limits).refused_with, 400);
}

}  // namespace http_framing_test_file
