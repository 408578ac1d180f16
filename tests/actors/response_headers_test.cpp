// A handler's headers and cookies: what may leave the node, and what is refused
// before it could split a response or reach what the platform owns.
#include "actors/response_headers.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace response_headers_test_file {

using namespace troupe;

TEST(response_headers, accepts_ordinary_headers) {
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
         {"Cache-Control", "no-store"},
         {"Content-Disposition", "attachment; filename=\"notes.txt\""},
         {"X-Custom_1", ""},
         {"Location", "/next?a=1&b=%20"},
         {"Access-Control-Allow-Origin", "*"},
         {"X-Tab", "a\tb"},
         {"X-Utf8", "caf\xc3\xa9"},
         {"Set-Cookie", "theme=dark; Path=/"},
         {"Server", "shop"}})
    EXPECT_EQ(header_problem(name, value), "") << name;
}

TEST(response_headers, refuses_what_would_split_a_response_or_is_the_platforms) {
  struct row {
    std::string name, value, says;
  };
  for (auto& r : std::vector<row>{
         {"X-A", "x\r\nSet-Cookie: troupe_cid=stolen", "control character"},
         {"X-A", "x\nX-B: y", "control character"},
         {"X-A", "x\ry", "control character"},
         {"X-A", std::string("x\0y", 3), "control character"},
         {"X-A", "x\x7fy", "control character"},
         {"X-A\r\nX-B", "y", "token"},
         {"X A", "y", "token"},
         {"X:A", "y", "token"},
         {"", "y", "token"},
         {"Connection", "close", "platform's"},
         {"content-length", "5", "platform's"},
         {"Transfer-Encoding", "chunked", "platform's"},
         {"Keep-Alive", "timeout=5", "platform's"},
         {"TE", "trailers", "platform's"},
         {"Trailer", "X", "platform's"},
         {"Upgrade", "websocket", "platform's"},
         {"Proxy-Connection", "keep-alive", "platform's"},
         {"Set-Cookie", "troupe_cid=abc; Path=/", "troupe_cid"},
         {"set-cookie", " TROUPE_CID =abc", "troupe_cid"}}) {
    auto problem = header_problem(r.name, r.value);
    EXPECT_NE(problem.find(r.says), std::string::npos) << r.name << ": " << problem;
    EXPECT_EQ(problem.find_first_of("\r\n"), std::string::npos) << "a problem is one log line: " << problem;
  }
}

TEST(response_headers, a_cookie_has_its_attributes_in_order) {
  cookie_attributes a;
  EXPECT_EQ(make_set_cookie("theme", "dark", a).line, "theme=dark");
  a.path = "/";
  a.same_site = "Lax";
  EXPECT_EQ(make_set_cookie("theme", "dark", a).line, "theme=dark; Path=/; SameSite=Lax");
  cookie_attributes all;
  all.max_age = 3600;
  all.path = "/shop";
  all.domain = "example.org";
  all.secure = true;
  all.http_only = true;
  all.same_site = "none";
  EXPECT_EQ(make_set_cookie("cart", "\"a1\"", all).line,
            "cart=\"a1\"; Max-Age=3600; Path=/shop; Domain=example.org; Secure; HttpOnly; SameSite=None");
  cookie_attributes gone;
  gone.max_age = -5;
  EXPECT_EQ(make_set_cookie("cart", "", gone).line, "cart=; Max-Age=0");
}

TEST(response_headers, refuses_a_cookie_that_is_not_one) {
  cookie_attributes none;
  cookie_attributes lax_path_semicolon;
  lax_path_semicolon.path = "/; Domain=evil.example";
  cookie_attributes bad_domain;
  bad_domain.domain = "a b";
  cookie_attributes bad_same_site;
  bad_same_site.same_site = "Sometimes";
  cookie_attributes insecure_none;
  insecure_none.same_site = "None";
  struct row {
    std::string name, value;
    cookie_attributes attrs;
    std::string says;
  };
  for (auto& r : std::vector<row>{{"troupe_cid", "x", none, "platform's"},
                                  {"Troupe_Cid", "x", none, "platform's"},
                                  {"a b", "x", none, "token"},
                                  {"a;b", "x", none, "token"},
                                  {"a", "x y", none, "cannot carry"},
                                  {"a", "x;y", none, "cannot carry"},
                                  {"a", "x,y", none, "cannot carry"},
                                  {"a", "x\r\ny", none, "cannot carry"},
                                  {"a", "x\\y", none, "cannot carry"},
                                  {"a", "x", lax_path_semicolon, "Path"},
                                  {"a", "x", bad_domain, "Domain"},
                                  {"a", "x", bad_same_site, "SameSite"},
                                  {"a", "x", insecure_none, "Secure"}}) {
    auto made = make_set_cookie(r.name, r.value, r.attrs);
    EXPECT_EQ(made.line, "") << r.name;
    EXPECT_NE(made.problem.find(r.says), std::string::npos) << r.name << ": " << made.problem;
  }
}

TEST(response_headers, the_builders_chain_and_remember_the_first_problem) {
  cookie_attributes root;
  root.path = "/";
  auto ok = response::json({{"a", 1}}).header("Cache-Control", "no-store").cookie("theme", "dark", root);
  ASSERT_EQ(ok.headers.size(), 2u);
  EXPECT_EQ(ok.headers[1].second, "theme=dark; Path=/");
  EXPECT_EQ(ok.invalid, "");

  auto bad = response::text("x").cookie("troupe_cid", "stolen").cookie("a b", "x");
  EXPECT_NE(bad.invalid.find("troupe_cid"), std::string::npos) << bad.invalid;
  EXPECT_TRUE(bad.headers.empty());

  auto moved = response::redirect("/next", 303);
  EXPECT_EQ(moved.status, 303);
  EXPECT_EQ(moved.invalid, "");
  ASSERT_EQ(moved.headers.size(), 1u);
  EXPECT_EQ(moved.headers[0], (std::pair<std::string, std::string>{"Location", "/next"}));
  for (std::uint16_t status : {200, 300, 304, 305, 306, 309, 404})
    EXPECT_NE(response::redirect("/next", status).invalid, "") << status;
  for (std::uint16_t status : {301, 302, 303, 307, 308})
    EXPECT_EQ(response::redirect("/next", status).invalid, "") << status;
  EXPECT_NE(response::redirect("", 302).invalid, "");
}

TEST(response_headers, take_headers_moves_checked_headers_and_the_content_type) {
  auto r = response::text("x").header("Content-Type", "text/csv").header("X-A", "1").header("X-A", "2");
  std::string content_type = r.content_type;
  std::vector<http_header> out;
  EXPECT_EQ(take_headers(r, content_type, out), "");
  EXPECT_EQ(content_type, "text/csv");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].value, "1");
  EXPECT_EQ(out[1].value, "2");

  // Pushed by hand, past the builders: still checked, and nothing moves.
  response raw;
  raw.headers.emplace_back("X-Ok", "1");
  raw.headers.emplace_back("X-Split", "a\r\nb");
  std::vector<http_header> none;
  EXPECT_NE(take_headers(raw, content_type, none), "");
  EXPECT_TRUE(none.empty());

  auto invalid = response::redirect("/x", 200);
  EXPECT_NE(take_headers(invalid, content_type, none), "");
  EXPECT_TRUE(none.empty());
}

}  // namespace response_headers_test_file
