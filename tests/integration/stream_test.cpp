// Streaming responses on a real node over real sockets (docs/streaming.md):
// SSE GET /api/ticks and NDJSON GET /api/notes.ndjson read fully and parsed;
// no request deadline while streaming; a client that stops reading stays
// bounded in memory and its actor is told it is slow; a disconnect reaches the
// actor; the stream limits are refused with 503 + Retry-After.
#include "../support/prometheus.hpp"
#include "../support/test_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace stream_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

const std::string token = "stream-test-token";
const headers_t auth{{"Authorization", "Bearer " + token}};

class Streaming : public node_test {};

struct sse_event {
  std::string event, id, data;
};

// The events of a whole SSE body (fields per the SSE grammar; comments skipped).
std::vector<sse_event> parse_sse(const std::string& body) {
  std::vector<sse_event> out;
  sse_event cur;
  bool any = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (any)
        out.push_back(cur);
      cur = {};
      any = false;
      continue;
    }
    if (line[0] == ':')
      continue;
    auto colon = line.find(':');
    auto field = line.substr(0, colon);
    auto value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ')
      value.erase(0, 1);
    any = true;
    if (field == "event")
      cur.event = value;
    else if (field == "id")
      cur.id = value;
    else if (field == "data")
      cur.data += (cur.data.empty() ? "" : "\n") + value;
  }
  return out;
}

// A client that sends one request and then reads only when told to: a TCP
// socket with a small receive buffer, so that a client that stops reading
// fills up quickly.
class raw_client {
public:
  explicit raw_client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("raw_client: connect failed");
  }
  ~raw_client() { close(); }
  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& bytes) {
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size()))
      throw std::runtime_error("raw_client: send failed");
  }
  // Reads until `what` appears in what was received (or the deadline): true if it did.
  bool read_until(const std::string& what, milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got_.find(what) == std::string::npos) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0)
        return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0)
        continue;
      char buf[4096];
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0)
        return false;
      got_.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }
  const std::string& received() const { return got_; }

private:
  int fd_ = -1;
  std::string got_;
};

std::string get_request(const std::string& target, const std::string& cid) {
  return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: troupe_cid=" + cid + "\r\n\r\n";
}


double sample(uint16_t port, const std::string& name) {
  return metric(port, auth, name);
}

}  // namespace

TEST_F(Streaming, SseTicksAreReadFullyAndParsed) {
  start();
  http_client c(port());
  auto r = c.get("/api/ticks?n=5&every_ms=10");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.get("Content-Type"), "text/event-stream");
  EXPECT_EQ(r.get("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r.get("Cache-Control"), "no-cache");
  auto events = parse_sse(r.body);
  ASSERT_EQ(events.size(), 5u) << r.body;
  for (int k = 1; k <= 5; ++k) {
    const auto& e = events[static_cast<std::size_t>(k - 1)];
    EXPECT_EQ(e.event, "tick");
    EXPECT_EQ(e.id, std::to_string(k));
    EXPECT_EQ(json::parse(e.data), (json{{"tick", k}, {"of", 5}}));
  }
  // The actor saw the stream open and end (and no disconnect).
  http_client again(port());
  again.set_cookie(*c.cookie());
  auto seen = again.get("/api/streams").json();
  EXPECT_EQ(seen["opened"], 1);
  EXPECT_EQ(seen["ended"], 1);
  EXPECT_EQ(seen["open"], 0);
  // Bad parameters are the client's error.
  EXPECT_TRUE(is_json_error(again.get("/api/ticks?n=0"), 400));
  EXPECT_TRUE(is_json_error(again.get("/api/ticks?n=2000000"), 400));
  EXPECT_TRUE(is_json_error(again.get("/api/ticks?n=3&every_ms=x"), 400));
}

// retry: first when asked; a reconnect naming the last event it got (Last-Event-ID)
// goes on after it, as an EventSource expects.
TEST_F(Streaming, SseRetryAndLastEventIdResumeTheTicks) {
  start();
  http_client c(port());
  auto r = c.get("/api/ticks?n=5&every_ms=0&retry_ms=1500", {{"Last-Event-ID", "3"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.body.rfind("retry: 1500\n\n", 0), 0u) << r.body;
  auto events = parse_sse(r.body.substr(r.body.find("\n\n") + 2));
  ASSERT_EQ(events.size(), 2u) << r.body;
  EXPECT_EQ(events[0].id, "4");
  EXPECT_EQ(events[1].id, "5");
  for (auto last : {"x", "-1", "5", "99"}) {  // not a tick before the last: all of them again
    auto again = c.get("/api/ticks?n=5&every_ms=0", {{"Last-Event-ID", last}});
    ASSERT_STATUS(again, 200);
    EXPECT_EQ(parse_sse(again.body).size(), 5u) << last << "\n" << again.body;
  }
  EXPECT_EQ(c.get("/api/ticks?n=1&every_ms=0").body.find("retry:"), std::string::npos) << "not asked, not written";
}

TEST_F(Streaming, NdjsonNotesAreReadFullyAndParsedAcrossManyCreditGrants) {
  // A window far smaller than the listing: it goes out only if credit keeps coming back.
  start({"--set", "limits.stream_queue_bytes=2048", "--set", "limits.stream_credit_bytes=1024", "--set",
         "limits.stream_max_event_bytes=1024"});
  http_client c(port());
  std::vector<std::string> texts{"first", "two\nlines and a \"quote\"", "caf\xc3\xa9"};
  for (int i = 0; i < 200; ++i)
    texts.push_back("note " + std::to_string(i) + " " + std::string(100, 'x'));
  for (auto& t : texts)
    ASSERT_STATUS(c.post_json("/api/notes", {{"text", t}}), 200);
  auto r = c.get("/api/notes.ndjson");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.get("Content-Type"), "application/x-ndjson");
  std::istringstream in(r.body);
  std::string line;
  std::size_t i = 0;
  while (std::getline(in, line)) {
    ASSERT_LT(i, texts.size());
    auto v = json::parse(line);
    EXPECT_EQ(v["index"], i);
    EXPECT_EQ(v["text"], texts[i]);
    ++i;
  }
  EXPECT_EQ(i, texts.size());
  EXPECT_EQ(r.body.back(), '\n');
}

TEST_F(Streaming, NoRequestDeadlineWhileStreaming) {
  start({"--set", "limits.request_timeout_seconds=1"});
  http_client c(port());
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.get("/api/ticks?n=15&every_ms=100", {}, milliseconds(20000));
  ASSERT_STATUS(r, 200);
  EXPECT_GT(ms_since(t0), 1000);  // longer than limits.request_timeout: no 504
  EXPECT_EQ(parse_sse(r.body).size(), 15u);
  // The deadline still holds for an ordinary request.
  auto slow = c.post_json("/api/sleep", {{"ms", 1500}});
  EXPECT_TRUE(is_json_error(slow, 504));
}

TEST_F(Streaming, SlowReaderStaysBoundedTheActorIsToldAndTheDisconnectReachesIt) {
  const std::uint64_t queue = 65536;
  auto& n = start({"--set", "node.admin_token=" + token, "--set", "limits.stream_queue_bytes=" + std::to_string(queue),
                   "--set", "limits.stream_credit_bytes=32768", "--set", "limits.stream_max_event_bytes=16384"});
  http_client c(port());
  ASSERT_STATUS(c.get("/api/whoami"), 200);
  auto cid = *c.cookie();
  // 1,000,000 ticks of ~1 KB as fast as the client reads: ~1 GB if anything buffered it.
  raw_client slow(port());
  slow.send(get_request("/api/ticks?n=1000000&every_ms=0&pad=1000", cid));
  ASSERT_TRUE(slow.read_until("\r\n\r\n", milliseconds(5000))) << slow.received();
  EXPECT_NE(slow.received().find("200 OK"), std::string::npos) << slow.received();
  // The client reads nothing more: the kernel's buffers fill, then the sink's
  // queue, then the writer's credit runs out and the actor is told.
  json seen;
  ASSERT_TRUE(eventually([&] {
    seen = c.get("/api/streams").json();  // the same user serves this while his stream is open
    return seen["slow"].get<int>() >= 1;
  }, milliseconds(15000))) << seen.dump();
  EXPECT_EQ(seen["open"], 1);
  EXPECT_GE(sample(port(), "troupe_stream_slow_total"), 1);
  EXPECT_EQ(sample(port(), "troupe_stream_open"), 1);
  // Bounded: the queue never holds more than its limit, and the node does not
  // grow while the writer is held back (1 GB of ticks are waiting to be written).
  auto rss0 = rss_kib(n.pid());
  for (int i = 0; i < 10; ++i) {
    EXPECT_LE(sample(port(), "troupe_stream_queued_bytes"), static_cast<double>(queue));
    // Sampling over a second while the writer is held back: the pace of the samples, orders nothing.
    std::this_thread::sleep_for(milliseconds(100));
  }
  auto rss1 = rss_kib(n.pid());
  EXPECT_LT(rss1 - rss0, 16 * 1024) << "RSS grew from " << rss0 << " to " << rss1 << " KiB";
  auto events = sample(port(), "troupe_stream_events_total");
  EXPECT_LT(events, 20000) << "far fewer than the 1,000,000 ticks were taken";
  // The client goes away: the actor is told, the stream ends on both sides.
  const double disconnects = sample(port(), "troupe_stream_disconnects_total");
  slow.close();
  ASSERT_TRUE(eventually([&] {
    seen = c.get("/api/streams").json();
    return seen["gone"].get<int>() >= 1;
  }, milliseconds(10000))) << seen.dump();
  EXPECT_EQ(seen["open"], 0);
  EXPECT_EQ(seen["ended"], 0);
  EXPECT_GE(sample(port(), "troupe_stream_disconnects_total"), disconnects + 1);
  EXPECT_TRUE(eventually([&] {
    return sample(port(), "troupe_stream_open") == 0 && sample(port(), "troupe_stream_queued_bytes") == 0;
  }, milliseconds(5000)));
}

TEST_F(Streaming, StreamLimitsAreRefusedWith503AndRetryAfter) {
  start({"--set", "node.admin_token=" + token, "--set", "limits.max_streams_per_user=1", "--set",
         "limits.max_streams=2"});
  http_client a(port());
  ASSERT_STATUS(a.get("/api/whoami"), 200);
  raw_client first(port());
  first.send(get_request("/api/ticks?n=100&every_ms=1000", *a.cookie()));
  ASSERT_TRUE(first.read_until("data: ", milliseconds(5000))) << first.received();
  // The same user's second stream: his limit.
  auto r = a.get("/api/ticks?n=2&every_ms=1");
  EXPECT_TRUE(is_json_error(r, 503));
  EXPECT_EQ(r.get("Retry-After"), "1");
  EXPECT_NE(r.body.find("max_streams_per_user"), std::string::npos) << r.body;
  // Another user opens the node's second stream; a third user is past the node's limit.
  http_client b(port());
  ASSERT_STATUS(b.get("/api/whoami"), 200);
  raw_client second(port());
  second.send(get_request("/api/ticks?n=100&every_ms=1000", *b.cookie()));
  ASSERT_TRUE(second.read_until("data: ", milliseconds(5000))) << second.received();
  http_client c(port());
  auto past = c.get("/api/ticks?n=2&every_ms=1");
  EXPECT_TRUE(is_json_error(past, 503));
  EXPECT_EQ(past.get("Retry-After"), "1");
  EXPECT_NE(past.body.find("limits.max_streams"), std::string::npos) << past.body;
  EXPECT_GE(sample(port(), "troupe_stream_refusals_total"), 2);
  // Once a stream ends, a new one is served — to the user refused by the node:
  // his refused stream was given back (else his own limit of 1 would refuse him now).
  first.close();
  ASSERT_TRUE(eventually([&] { return sample(port(), "troupe_stream_open") == 1; }, milliseconds(5000)));
  auto ok = c.get("/api/ticks?n=2&every_ms=1");
  ASSERT_STATUS(ok, 200);
  EXPECT_EQ(parse_sse(ok.body).size(), 2u);
}

TEST_F(Streaming, AQuietSseStreamGetsKeepAliveComments) {
  start({"--set", "limits.stream_keepalive_seconds=0.2"});
  http_client a(port());
  ASSERT_STATUS(a.get("/api/whoami"), 200);
  raw_client quiet(port());
  quiet.send(get_request("/api/ticks?n=2&every_ms=5000", *a.cookie()));
  EXPECT_TRUE(quiet.read_until(": keep-alive\n\n", milliseconds(5000))) << quiet.received();
}

TEST_F(Streaming, ASoftQuitCutsOpenStreamsInsteadOfWaitingForThem) {
  // A grace period far longer than the test's bound: a stream that held the
  // shutdown would show as an exit after it.
  start({"--set", "node.shutdown_grace_seconds=30"});
  http_client a(port());
  ASSERT_STATUS(a.get("/api/whoami"), 200);
  raw_client open(port());
  open.send(get_request("/api/ticks?n=1000&every_ms=1000", *a.cookie()));
  ASSERT_TRUE(open.read_until("data: ", milliseconds(5000))) << open.received();
  auto t0 = std::chrono::steady_clock::now();
  node().terminate();
  // It exits well within the 30 s grace the stream would have held it for (how soon: bench/README.md).
  auto code = node().wait_exit(milliseconds(20000));
  ASSERT_TRUE(code.has_value()) << "still running 20 s after SIGTERM: the open stream held the shutdown";
  EXPECT_EQ(*code, 0);
  std::cerr << "[ info ] the node exited " << ms_since(t0) << " ms after SIGTERM\n";
  EXPECT_FALSE(open.read_until("\r\n0\r\n\r\n", milliseconds(1000)));  // cut: no last chunk
}

// The writer in another process than the socket (isolation = "process": the
// user actor lives in a worker process, the sink next to the front): the data
// path is typed messages over CAF's middleman, the credit and the notices too.
TEST_F(Streaming, AWriterInAWorkerProcessStreamsThroughTheMiddleman) {
  start({"--set", "group.default.isolation=process", "--set", "limits.stream_queue_bytes=4096", "--set",
         "limits.stream_credit_bytes=2048", "--set", "limits.stream_max_event_bytes=2048"});
  http_client c(port());
  ASSERT_STATUS(c.get("/api/whoami"), 200);
  auto r = c.get("/api/ticks?n=300&every_ms=0&pad=100");  // ~45 KB through a 2 KiB window
  ASSERT_STATUS(r, 200);
  auto events = parse_sse(r.body);
  ASSERT_EQ(events.size(), 300u);
  EXPECT_EQ(json::parse(events.back().data)["tick"], 300);
  raw_client open(port());
  open.send(get_request("/api/ticks?n=1000&every_ms=200", *c.cookie()));
  ASSERT_TRUE(open.read_until("data: ", milliseconds(5000))) << open.received();
  open.close();
  json seen;
  ASSERT_TRUE(eventually([&] {
    seen = c.get("/api/streams").json();
    return seen["gone"].get<int>() >= 1;
  }, milliseconds(10000))) << seen.dump();
  EXPECT_EQ(seen["ended"], 1);
  EXPECT_EQ(seen["open"], 0);
}

}  // namespace stream_test_file
