// Static files (issue 25): the path resolver's traversal table, and what a GET
// or HEAD under a mount is answered with, on real files in a temporary root.
#include "transport/static_files.hpp"

#include "../support/node_process.hpp"  // make_temp_dir

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace static_files_test_file {

using namespace troupe;
namespace fs = std::filesystem;

// What the resolver refuses, whatever the files: at least 20 ways to leave a root.
TEST(static_relative_path, refuses_every_way_out_and_every_hidden_name) {
  for (auto bad : {"..", "../etc/passwd", "a/../../b", "%2e%2e/x", "%2E%2E%2Fetc", ".%2e/x", "%2e./x", "a/%2e%2e",
                   "..%2Fetc%2Fpasswd", "a%2Fb", "a%2fb", "a%5Cb", "a%5cb", "..\\x", "a%00b", "a%00", "%00",
                   "a%0Ab", "a%0d%0ab", "a%7Fb", ".", "./x", "a/./b", "%2e", ".env", "a/.git/config", ".%2e",
                   "a//b", "//etc/passwd", "%zz", "a%2", "a%g0b", "a/%", "\x01x"})
    EXPECT_FALSE(static_relative_path(bad)) << bad;
}

TEST(static_relative_path, decodes_ordinary_paths) {
  struct row {
    const char* in;
    const char* out;
  };
  for (auto& r : std::vector<row>{{"", ""},
                                  {"app.js", "app.js"},
                                  {"css/site.css", "css/site.css"},
                                  {"docs/", "docs/"},
                                  {"caf%C3%A9.txt", "caf\xc3\xa9.txt"},
                                  {"a%20b.txt", "a b.txt"},
                                  {"a+b.txt", "a+b.txt"},
                                  {"v1..2.js", "v1..2.js"},
                                  {"a/b/c/", "a/b/c/"}}) {
    auto got = static_relative_path(r.in);
    ASSERT_TRUE(got) << r.in;
    EXPECT_EQ(*got, r.out) << r.in;
  }
}

TEST(static_content_type, by_extension) {
  EXPECT_EQ(static_content_type("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(static_content_type("a/app.JS"), "text/javascript; charset=utf-8");
  EXPECT_EQ(static_content_type("logo.svg"), "image/svg+xml");
  EXPECT_EQ(static_content_type("font.woff2"), "font/woff2");
  EXPECT_EQ(static_content_type("README"), "application/octet-stream");
  EXPECT_EQ(static_content_type("dir.d/file"), "application/octet-stream");
  EXPECT_EQ(static_content_type("x.unknown"), "application/octet-stream");
}

class static_root : public ::testing::Test {
protected:
  static_root() : dir(test::make_temp_dir("troupe-static")) {
    fs::create_directories(dir + "/www/css");
    fs::create_directories(dir + "/www/docs");
    write("www/index.html", "<h1>home</h1>");
    write("www/css/site.css", "body{}");
    write("www/app.js", std::string(1000, 'j'));
    write("www/app.js.gz", "GZ");
    write("www/docs/index.html", "<h1>docs</h1>");
    write("www/.env", "SECRET=1");
    write("outside.txt", "secret");
    fs::create_symlink(dir + "/outside.txt", dir + "/www/escape.txt");
    fs::create_symlink("css/site.css", dir + "/www/inside.css");
    fs::create_symlink("../outside.txt", dir + "/www/up.txt");
    fs::create_symlink(dir + "/www/css/site.css", dir + "/www/absolute.css");
  }
  ~static_root() override { fs::remove_all(dir); }

  void write(const std::string& rel, const std::string& text) { std::ofstream(dir + "/" + rel) << text; }

  static_mount mount(bool spa = false, std::string prefix = "/static/") {
    config::static_settings s;
    s.prefix = std::move(prefix);
    s.root = dir + "/www";
    s.spa_fallback = spa;
    s.cache_control = "max-age=60";
    return static_mount(s);
  }

  static std::string header(const static_answer& a, std::string_view name) {
    for (auto& h : a.headers)
      if (h.name == name)
        return h.value;
    return {};
  }

  static std::string content(static_answer& a) {
    std::string out(a.length, '\0');
    auto n = ::pread(a.fd, out.data(), a.length, static_cast<off_t>(a.offset));
    EXPECT_EQ(n, static_cast<ssize_t>(a.length));
    return out;
  }

  static_answer get(const static_mount& m, std::string_view path) {
    static_request r;
    r.path = path;
    return serve_static(m, r);
  }

  std::string dir;
};

TEST_F(static_root, serves_files_with_their_type_etag_and_cache_control) {
  auto m = mount();
  auto a = get(m, "/static/css/site.css");
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.content_type, "text/css; charset=utf-8");
  EXPECT_EQ(content(a), "body{}");
  EXPECT_FALSE(header(a, "ETag").empty());
  EXPECT_FALSE(header(a, "Last-Modified").empty());
  EXPECT_EQ(header(a, "Cache-Control"), "max-age=60");
  EXPECT_EQ(header(a, "Accept-Ranges"), "bytes");
  auto index = get(m, "/static/");
  ASSERT_EQ(index.status, 200);
  EXPECT_EQ(content(index), "<h1>home</h1>");
  auto docs = get(m, "/static/docs/");
  ASSERT_EQ(docs.status, 200);
  EXPECT_EQ(content(docs), "<h1>docs</h1>");
  auto inside = get(m, "/static/inside.css");
  EXPECT_EQ(inside.status, 200) << "a relative symlink that stays inside the root is served";
}

TEST_F(static_root, a_directory_without_its_slash_is_redirected) {
  auto m = mount();
  auto docs = get(m, "/static/docs");
  EXPECT_EQ(docs.status, 301);
  EXPECT_EQ(header(docs, "Location"), "/static/docs/");
  auto prefix = get(m, "/static");
  EXPECT_EQ(prefix.status, 301);
  EXPECT_EQ(header(prefix, "Location"), "/static/");
}

TEST_F(static_root, what_leaves_the_root_or_is_hidden_or_missing_is_404) {
  auto m = mount();
  for (auto path : {"/static/escape.txt", "/static/up.txt", "/static/absolute.css", "/static/../outside.txt", "/static/%2e%2e/outside.txt", "/static/.env",
                    "/static/missing.js", "/static/css/site.css/", "/static/app.js/x"})
    EXPECT_EQ(get(m, path).status, 404) << path;
}

TEST_F(static_root, conditional_requests_are_304) {
  auto m = mount();
  auto first = get(m, "/static/app.js");
  auto etag = header(first, "ETag");
  static_request r;
  r.path = "/static/app.js";
  r.if_none_match = etag;
  auto again = serve_static(m, r);
  EXPECT_EQ(again.status, 304);
  EXPECT_EQ(again.fd, -1);
  EXPECT_EQ(header(again, "ETag"), etag);
  std::string listed = "\"other\", W/" + etag;  // r's fields are views: the text must outlive them
  r.if_none_match = listed;
  EXPECT_EQ(serve_static(m, r).status, 304);
  r.if_none_match = "\"other\"";
  EXPECT_EQ(serve_static(m, r).status, 200);
  r.if_none_match = {};
  auto since = header(first, "Last-Modified");
  r.if_modified_since = since;
  EXPECT_EQ(serve_static(m, r).status, 304);
  r.if_modified_since = "Thu, 01 Jan 1970 00:00:00 GMT";
  EXPECT_EQ(serve_static(m, r).status, 200);
  r.if_modified_since = "yesterday";
  EXPECT_EQ(serve_static(m, r).status, 200);
}

TEST_F(static_root, ranges_are_206_or_416) {
  auto m = mount();
  static_request r;
  r.path = "/static/app.js";  // 1000 bytes
  struct row {
    const char* range;
    int status;
    std::uint64_t offset, length;
    const char* content_range;
  };
  for (auto& t : std::vector<row>{{"bytes=0-9", 206, 0, 10, "bytes 0-9/1000"},
                                  {"bytes=990-", 206, 990, 10, "bytes 990-999/1000"},
                                  {"bytes=-5", 206, 995, 5, "bytes 995-999/1000"},
                                  {"bytes=500-5000", 206, 500, 500, "bytes 500-999/1000"},
                                  {"bytes=-5000", 206, 0, 1000, "bytes 0-999/1000"},
                                  {"bytes=1000-", 416, 0, 0, "bytes */1000"},
                                  {"bytes=-0", 416, 0, 0, "bytes */1000"},
                                  {"bytes=0-1,5-6", 200, 0, 1000, ""},
                                  {"items=0-1", 200, 0, 1000, ""},
                                  {"bytes=5-1", 200, 0, 1000, ""},
                                  {"bytes=x-1", 200, 0, 1000, ""}}) {
    r.range = t.range;
    auto a = serve_static(m, r);
    EXPECT_EQ(a.status, t.status) << t.range;
    EXPECT_EQ(header(a, "Content-Range"), t.content_range) << t.range;
    if (t.status != 416) {
      EXPECT_EQ(a.offset, t.offset) << t.range;
      EXPECT_EQ(a.length, t.length) << t.range;
    }
  }
  r.range = "bytes=0-9";
  r.if_range = "\"stale\"";
  EXPECT_EQ(serve_static(m, r).status, 200) << "If-Range of another version: the whole file";
}

TEST_F(static_root, a_gzip_sibling_is_sent_to_clients_that_take_gzip) {
  auto m = mount();
  static_request r;
  r.path = "/static/app.js";
  r.accept_encoding = "br, gzip;q=0.8";
  auto a = serve_static(m, r);
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(header(a, "Content-Encoding"), "gzip");
  EXPECT_EQ(a.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(content(a), "GZ");
  EXPECT_EQ(header(a, "Vary"), "Accept-Encoding");
  r.accept_encoding = "gzip;q=0";
  auto plain = serve_static(m, r);
  EXPECT_EQ(header(plain, "Content-Encoding"), "");
  EXPECT_EQ(plain.length, 1000u);
  EXPECT_NE(header(plain, "ETag"), header(a, "ETag"));
}

TEST_F(static_root, the_spa_fallback_answers_unknown_paths_with_the_index) {
  auto m = mount(true);
  auto a = get(m, "/static/settings/profile");
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(content(a), "<h1>home</h1>");
  EXPECT_EQ(a.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(get(m, "/static/../outside.txt").status, 404) << "a refused path is never the index";
  EXPECT_EQ(get(m, "/static/.env").status, 404);
}

TEST_F(static_root, a_root_that_is_no_directory_is_refused_by_name) {
  config::static_settings s;
  s.prefix = "/x/";
  s.root = dir + "/nothing";
  try {
    static_mount bad(s);
    FAIL() << "a missing root was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/x/"), std::string::npos) << e.what();
  }
}

}  // namespace static_files_test_file
