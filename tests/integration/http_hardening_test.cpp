// The front under hostile or careless clients (issue 10): request smuggling through
// Transfer-Encoding (3), running out of file descriptors and limits.max_connections (4),
// token-less console channels (6), limits.max_buffered_body_bytes (11), and the smaller
// contract points (14): Expect: 100-continue, an empty X-Troupe-Page, a target without
// a leading '/', 405 + Allow on read-only admin paths, one line on stdout, error texts.
#include "../support/test_support.hpp"
#include "../support/ws_client.hpp"

#include <sys/resource.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <atomic>
#include <thread>

namespace http_hardening_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

class HttpHardening : public node_test {};

const std::string token = "hardening-token";

// utime + stime of `pid` in clock ticks (/proc/<pid>/stat fields 14 and 15).
long long cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), {});
  auto rest = all.substr(all.rfind(')') + 2);  // after "pid (comm) "
  std::istringstream fields(rest);
  std::string f;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14)
      utime = std::stoll(f);
    if (i == 15)
      stime = std::stoll(f);
  }
  return utime + stime;
}

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

std::size_t count_of_text(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

// A client that has a cookie (a user) whose counter is 0.
http_client counted_client(uint16_t port) {
  http_client c(port);
  auto r = c.get("/api/counter");
  EXPECT_EQ(count_of(r), 0);
  EXPECT_TRUE(c.cookie());
  return c;
}

}  // namespace

// -- 3: request smuggling ---------------------------------------------------------------

TEST_F(HttpHardening, AnyTransferEncodingButChunkedIs400AndTheSmuggledRequestNeverRuns) {
  start();
  auto c = counted_client(port());
  std::string cookie = "Cookie: troupe_cid=" + *c.cookie() + "\r\n";
  // The body of each outer request is a whole second request that increments.
  std::string smuggled = "POST /api/counter/incr HTTP/1.1\r\nHost: x\r\n" + cookie + "Content-Length: 0\r\n\r\n";
  std::vector<std::string> framings = {
    "Transfer-Encoding: xchunked\r\n",
    "Transfer-Encoding: gzip\r\n",
    "Transfer-Encoding: chunked, gzip\r\n",
    "Transfer-Encoding: identity\r\n",
    "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
    "Content-Length: " + std::to_string(smuggled.size()) + "\r\nTransfer-Encoding: gzip\r\n",
    "Transfer-Encoding: chunked\r\nContent-Length: " + std::to_string(smuggled.size()) + "\r\n",
  };
  for (const auto& framing : framings) {
    SCOPED_TRACE(framing);
    http_client raw(port());
    raw.use_cookie_jar(false);
    raw.send_raw("GET /api/counter HTTP/1.1\r\nHost: x\r\n" + cookie + framing + "\r\n" + smuggled);
    auto r = raw.read_response(milliseconds(5000));
    EXPECT_TRUE(is_json_error(r, 400)) << r.describe();
    EXPECT_FALSE(r.keep_alive);
    EXPECT_TRUE(raw.wait_closed(milliseconds(5000)));
  }
  EXPECT_EQ(count_of(c.get("/api/counter")), 0) << "a smuggled request ran";
  // Exactly "chunked" still works.
  http_client raw(port());
  raw.use_cookie_jar(false);
  raw.send_raw("POST /api/counter/incr HTTP/1.1\r\nHost: x\r\n" + cookie
               + "Transfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  EXPECT_STATUS(raw.read_response(milliseconds(5000)), 200);
  EXPECT_EQ(count_of(c.get("/api/counter")), 1);
}

// -- 4: out of file descriptors, limits.max_connections ---------------------------------

TEST_F(HttpHardening, OutOfFileDescriptorsTheFrontBacksOffAndKeepsServing) {
  start();
  http_client kept(port());
  ASSERT_STATUS(kept.get("/api/whoami"), 200);
  // Leave the node a few descriptors only, then connect more clients than that.
  pid_t pid = node().pid();
  rlimit original{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &original), 0) << std::strerror(errno);
  rlimit low = original;  // the soft limit only: it can be raised again without privileges
  low.rlim_cur = open_fds(pid) + 8;
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
  std::vector<std::unique_ptr<http_client>> crowd;
  for (int i = 0; i < 40; ++i) {
    crowd.push_back(std::make_unique<http_client>(port()));
    crowd.back()->connect(milliseconds(5000));  // the kernel's backlog takes it
    crowd.back()->send_raw("GET /api/whoami HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  ASSERT_TRUE(eventually([&] { return node().stderr_log().find("accept failed") != std::string::npos; }))
    << "the node never ran out of descriptors";

  // Over a second and a half of exhaustion: little CPU and (almost) no log.
  auto log_before = node().stderr_log().size();
  auto ticks_before = cpu_ticks(pid);
  auto wall_before = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(1500));  // the measured interval (what happens in it is measured; orders nothing)
  auto cpu_s = static_cast<double>(cpu_ticks(pid) - ticks_before) / static_cast<double>(sysconf(_SC_CLK_TCK));
  auto wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
  auto grown = node().stderr_log().substr(log_before);
  std::cerr << "measured: " << cpu_s << " s CPU in " << wall_s << " s, the log grew by " << grown.size()
            << " bytes\n";
  EXPECT_LT(cpu_s, 0.5 * wall_s) << "the node used " << cpu_s << " s of CPU in " << wall_s << " s";
  EXPECT_LE(count_of_text(grown, "\n"), 3u) << "the log grew by " << grown.size() << " bytes:\n"
                                            << grown.substr(0, 2000);

  // The connection it has is still served.
  auto r = kept.get("/api/whoami", {}, milliseconds(5000));
  EXPECT_STATUS(r, 200);

  // Once descriptors are free again, the waiting clients are served.
  crowd.clear();
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &original, nullptr), 0) << std::strerror(errno);
  EXPECT_TRUE(eventually([&] {
    try {
      http_client fresh(port());
      return fresh.get("/api/whoami", {}, milliseconds(2000)).status == 200;
    } catch (const transport_error&) {
      return false;
    }
  }));
}

TEST_F(HttpHardening, AConnectionPastMaxConnectionsIs503AndClosed) {
  start({"--set", "limits.max_connections=3"});
  std::vector<std::unique_ptr<http_client>> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(std::make_unique<http_client>(port()));
    ASSERT_STATUS(open.back()->get("/api/whoami"), 200);
  }
  {
    http_client extra(port());
    auto r = extra.get("/api/whoami");
    EXPECT_TRUE(is_json_error(r, 503)) << r.describe();
    EXPECT_FALSE(r.get("Retry-After").empty()) << r.describe();
    EXPECT_FALSE(r.keep_alive) << r.describe();
    EXPECT_TRUE(extra.wait_closed(milliseconds(5000)));
  }
  for (auto& c : open)  // the three are served all along
    EXPECT_STATUS(c->get("/api/whoami"), 200);
  open.pop_back();
  EXPECT_TRUE(eventually([&] {
    try {
      http_client again(port());
      return again.get("/api/whoami").status == 200;
    } catch (const transport_error&) {
      return false;
    }
  })) << "a freed place was not given to a newcomer";
}

// -- 6: the console's slots ---------------------------------------------------------------

TEST_F(HttpHardening, TokenlessConsoleChannelsDoNotKeepTheAdminOut) {
  start({"--admin-token", token, "--set", "limits.max_consoles=2"});
  std::vector<std::unique_ptr<ws_client>> squatters;
  for (int i = 0; i < 2; ++i)
    squatters.push_back(std::make_unique<ws_client>(port(), "/_troupe/console/live"));
  // The admin, token in the first message (what the console page does).
  ws_client admin(port(), "/_troupe/console/live");
  admin.send(json{{"token", token}}.dump());
  auto first = admin.read(milliseconds(5000));
  ASSERT_TRUE(first) << "close code " << admin.close_code();
  EXPECT_EQ(json::parse(*first)["type"], "full") << *first;
  // And one with the token in the upgrade's header.
  ws_client by_header(port(), "/_troupe/console/live", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(by_header.read(milliseconds(5000))) << "close code " << by_header.close_code();
  // Both slots are taken by authenticated channels now: a third is refused.
  EXPECT_THROW(ws_client(port(), "/_troupe/console/live", {{"Authorization", "Bearer " + token}}), transport_error);
  ws_client third(port(), "/_troupe/console/live");
  third.send(json{{"token", token}}.dump());
  EXPECT_FALSE(third.read(milliseconds(5000)));
  EXPECT_EQ(third.close_code(), 1013);
}

TEST_F(HttpHardening, UnauthenticatedConsoleChannelsAreBounded) {
  start({"--admin-token", token, "--set", "limits.max_unauthenticated_consoles=2"});
  ws_client oldest(port(), "/_troupe/console/live");
  ws_client second(port(), "/_troupe/console/live");
  ws_client newest(port(), "/_troupe/console/live");  // one too many: the oldest waiting goes
  EXPECT_FALSE(oldest.read(milliseconds(5000)));
  EXPECT_EQ(oldest.close_code(), 1008);
  newest.send(json{{"token", token}}.dump());
  EXPECT_TRUE(newest.read(milliseconds(5000))) << "close code " << newest.close_code();
}

// -- 11: limits.max_buffered_body_bytes -----------------------------------------------------

TEST_F(HttpHardening, BodiesBufferedAcrossTheNodeAreBounded) {
  start({"--set", "limits.max_buffered_body_bytes=65536"});
  const std::size_t body = 30 * 1024;  // two fit in 64 KiB, three do not
  auto head = [&](std::size_t n) {
    return "POST /api/notes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
           + std::to_string(n) + "\r\n\r\n";
  };
  // A note the app takes, padded with a member it ignores to exactly `body` bytes.
  std::string note = "{\"text\":\"padded\",\"pad\":\"" + std::string(body - 26, 'x') + "\"}";
  ASSERT_EQ(note.size(), body);
  // Two clients send their head and half their body, and stall. (Their heads ask for
  // 100 Continue, which comes once the node has reserved their bodies.)
  http_client a(port()), b(port());
  for (auto* c : {&a, &b}) {
    c->send_raw(head(body).insert(head(body).size() - 2, "Expect: 100-continue\r\n"));
    ASSERT_EQ(c->read_response(milliseconds(5000)).status, 100);
    c->send_raw(note.substr(0, body / 2));
  }
  // A third one's whole request is refused while they hold the budget.
  http_client third(port());
  third.send_raw(head(body) + note);
  auto refused = third.read_response(milliseconds(5000));
  EXPECT_TRUE(is_json_error(refused, 503)) << refused.describe();
  EXPECT_FALSE(refused.get("Retry-After").empty());
  EXPECT_FALSE(refused.keep_alive);
  // The two are served when their bodies arrive, and the budget is given back.
  a.send_raw(note.substr(body / 2));
  EXPECT_STATUS(a.read_response(), 200);
  b.send_raw(note.substr(body / 2));
  EXPECT_STATUS(b.read_response(), 200);
  http_client after(port());
  after.send_raw(head(body) + note);
  EXPECT_STATUS(after.read_response(), 200);
}

TEST_F(HttpHardening, ChunkedBodiesCountAgainstTheBufferedBudget) {
  start({"--set", "limits.max_buffered_body_bytes=65536"});
  // One client holds 40,000 bytes of the budget (reserved once its 100 Continue came).
  http_client holder(port());
  holder.send_raw("POST /api/notes HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 40000\r\n\r\n");
  ASSERT_EQ(holder.read_response(milliseconds(5000)).status, 100);
  // A chunk of 40 KiB does not fit beside it: refused as soon as its size is read.
  http_client chunked(port());
  chunked.send_raw("POST /api/notes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na000\r\n"
                   + std::string(1024, 'x'));
  auto refused = chunked.read_response(milliseconds(5000));
  EXPECT_TRUE(is_json_error(refused, 503)) << refused.describe();
  EXPECT_FALSE(refused.keep_alive);
  // A small chunked body fits.
  http_client small(port());
  small.send_raw("POST /api/counter/incr HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  EXPECT_STATUS(small.read_response(milliseconds(5000)), 200);
}

// -- 14: the smaller points ------------------------------------------------------------------

TEST_F(HttpHardening, Expect100ContinueIsAnsweredBeforeTheBody) {
  start({"--set", "limits.max_body_bytes=4096"});
  std::string note = R"({"text":"after 100"})";
  http_client c(port());
  c.send_raw("POST /api/notes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
             "Content-Length: " + std::to_string(note.size()) + "\r\n\r\n");
  response interim;
  try {
    interim = c.read_response(milliseconds(3000));
  } catch (const transport_error& e) {
    FAIL() << "no 100 Continue before the body: " << e.what();
  }
  EXPECT_EQ(interim.status, 100) << interim.describe();
  c.send_raw(note);
  EXPECT_STATUS(c.read_response(), 200);
  // A body over the limit gets its final answer at once, no 100.
  http_client big(port());
  big.send_raw("POST /api/notes HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10000\r\n\r\n");
  EXPECT_TRUE(is_json_error(big.read_response(milliseconds(3000)), 413));
}

TEST_F(HttpHardening, AnEmptyPageHeaderIs400) {
  start();
  http_client c(port());
  EXPECT_STATUS(c.get("/api/whoami", {{"X-Troupe-Page", "tab1"}}), 200);
  EXPECT_TRUE(is_json_error(c.get("/api/whoami", {{"X-Troupe-Page", ""}}), 400));
}

TEST_F(HttpHardening, ATargetWithoutLeadingSlashIs400) {
  start();
  for (const char* target : {"api/whoami", "http://127.0.0.1/api/whoami", "*"}) {
    SCOPED_TRACE(target);
    http_client c(port());
    c.send_raw(std::string("GET ") + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
    auto r = c.read_response(milliseconds(5000));
    EXPECT_TRUE(is_json_error(r, 400)) << r.describe();
  }
}

TEST_F(HttpHardening, WritingMethodsOnReadOnlyAdminPathsAre405WithAllow) {
  start({"--admin-token", token});
  http_client c(port());
  headers_t auth{{"Authorization", "Bearer " + token}};
  for (const char* path : {"/_troupe/health", "/_troupe/metrics", "/_troupe/global", "/_troupe/census",
                           "/_troupe/actors/user:u1", "/_troupe/orchestration/log", "/_troupe/console",
                           "/_troupe/console/live"})
    for (const char* method : {"POST", "DELETE", "PUT"}) {
      SCOPED_TRACE(std::string(method) + " " + path);
      auto r = c.request(method, path, "", auth);
      EXPECT_TRUE(is_json_error(r, 405)) << r.describe();
      EXPECT_NE(r.get("Allow").find("GET"), std::string::npos) << r.describe();
    }
  auto r = c.get("/_troupe/users/u1/freeze", auth);
  EXPECT_TRUE(is_json_error(r, 405)) << r.describe();
  EXPECT_EQ(r.get("Allow"), "POST");
  EXPECT_STATUS(c.get("/_troupe/health"), 200);
  EXPECT_STATUS(c.get("/_troupe/metrics", auth), 200);
}

TEST_F(HttpHardening, StdoutCarriesOnlyTheReadyLine) {
  start({"--admin-token", token});
  // The node logs "... up:" after everything it prints at start.
  ASSERT_TRUE(eventually([&] { return node().stderr_log().find(" up: ") != std::string::npos; }));
  EXPECT_NE(node().stderr_log().find("/_troupe/console"), std::string::npos) << "the console's URL is logged";
  node().terminate();
  ASSERT_TRUE(node().wait_exit(milliseconds(20000)));
  // Give the pipe's reader a moment to take what the node wrote before it went.
  eventually([&] { return split_lines(node().stdout_text()).size() > 1; }, milliseconds(1000));
  auto lines = split_lines(node().stdout_text());
  ASSERT_EQ(lines.size(), 1u) << node().stdout_text();
  EXPECT_EQ(lines[0].rfind("troupe node listening on http://", 0), 0u) << lines[0];
}

TEST_F(HttpHardening, ErrorBodiesSayWhatIsWrongInWords) {
  start();
  http_client c(port());
  // A key longer than the store takes.
  auto r = c.request("PUT", "/api/global/" + std::string(300, 'k'), R"({"value":"v"})");
  ASSERT_TRUE(is_json_error(r, 400)) << r.describe();
  auto text = r.json()["error"].get<std::string>();
  EXPECT_EQ(text.find("invalid_key"), std::string::npos) << text;
  EXPECT_EQ(text.find("global store:"), std::string::npos) << text;
  EXPECT_NE(text.find("key"), std::string::npos) << text;
}

// The house rule: nothing logs a line per request on the io thread under overload.
TEST_F(HttpHardening, TimeoutsAreLoggedAtMostOnceASecond) {
  start({"--set", "limits.request_timeout_seconds=0.3"});
  constexpr int clients = 20;
  std::vector<std::thread> threads;
  std::atomic<int> timed_out{0};
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&] {
      try {
        http_client c(port());  // a user of its own each
        if (c.post_json("/api/sleep", json{{"ms", 2000}}).status == 504)
          ++timed_out;
      } catch (const std::exception&) {
      }
    });
  for (auto& t : threads)
    t.join();
  ASSERT_EQ(timed_out.load(), clients);
  auto log = node().stderr_log();
  auto lines = count_of_text(log, "not answered within");
  EXPECT_GE(lines, 1u) << log;
  EXPECT_LE(lines, 3u) << log;  // 20 timeouts within a second or so
}

// A reply to HEAD carries no content (RFC 9110 §9.3.2) but GET's status and
// headers, its Content-Length included. Read off a raw socket: the HEAD is
// pipelined with a second request, so any byte of content after the HEAD
// reply's head would sit where the second reply must start.
namespace {

struct raw_head {
  std::string status_line;
  std::map<std::string, std::string> fields;  // lower-case names
  std::string after;                           // every byte after the head
};

raw_head head_then_health(uint16_t port, const std::string& path, const headers_t& extra) {
  http_client raw(port);
  raw.use_cookie_jar(false);
  std::string request = "HEAD " + path + " HTTP/1.1\r\nHost: x\r\n";
  for (auto& [name, value] : extra)
    request += name + ": " + value + "\r\n";
  request += "\r\nGET /_troupe/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  raw.send_raw(request);
  EXPECT_TRUE(raw.wait_closed(milliseconds(5000))) << "the connection was not closed after the second reply";
  const std::string& bytes = raw.received_raw();
  raw_head out;
  auto end = bytes.find("\r\n\r\n");
  if (end == std::string::npos) {
    ADD_FAILURE() << "no complete head in: " << bytes;
    return out;
  }
  std::istringstream lines(bytes.substr(0, end + 2));
  std::getline(lines, out.status_line);
  if (!out.status_line.empty() && out.status_line.back() == '\r')
    out.status_line.pop_back();
  for (std::string line; std::getline(lines, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (!value.empty() && value.back() == '\r')
      value.pop_back();
    out.fields[name] = value;
  }
  out.after = bytes.substr(end + 4);
  return out;
}

}  // namespace

TEST_F(HttpHardening, HeadRepliesCarryGetsHeadersAndNoBody) {
  start({"--admin-token", token});
  auto c = counted_client(port());
  const headers_t auth{{"Authorization", "Bearer " + token}};
  const headers_t cookie{{"Cookie", "troupe_cid=" + *c.cookie()}};
  struct probe {
    std::string path;
    headers_t headers;
    bool stable_length;  // the metrics change between two requests
  };
  const std::vector<probe> probes = {
    {"/api/counter", cookie, true},       {"/api/no-such-route", cookie, true},
    {"/_troupe/health", {}, true},        {"/_troupe/console", auth, true},
    {"/_troupe/global", auth, true},      {"/_troupe/metrics", auth, false},
    {"/_troupe/metrics", {}, true},       // 401
  };
  http_client get(port());
  get.use_cookie_jar(false);
  for (const auto& p : probes) {
    SCOPED_TRACE("HEAD " + p.path);
    auto g = get.get(p.path, p.headers);
    auto h = head_then_health(port(), p.path, p.headers);
    EXPECT_EQ(h.after.substr(0, 9), "HTTP/1.1 ")
        << "content after the HEAD reply's head (or no second reply): " << h.after.substr(0, 200);
    EXPECT_EQ(h.status_line.substr(0, 12), "HTTP/1.1 " + std::to_string(g.status)) << h.status_line;
    EXPECT_EQ(h.fields["content-type"], g.get("Content-Type"));
    ASSERT_TRUE(h.fields.count("content-length")) << "GET's Content-Length is expected";
    if (p.stable_length)
      EXPECT_EQ(h.fields["content-length"], std::to_string(g.body.size()));
    else
      EXPECT_GT(std::stoll(h.fields["content-length"]), 0);
    for (const char* field : {"allow", "www-authenticate", "retry-after"})
      EXPECT_EQ(h.fields[field], g.get(field)) << field;
  }
  EXPECT_EQ(count_of(c.get("/api/counter")), 0) << "HEAD ran the GET handler, which changes nothing";
}

}  // namespace http_hardening_test_file
