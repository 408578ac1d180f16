// Streamed uploads on a real node (issue 25, docs/http.md "Streamed uploads"):
// the notes sample's POST /api/upload reads its body piece by piece with
// credit and answers {"bytes","sha256"}. A 1 GiB body goes through with the
// node's memory bounded; a chunked body, an empty one, 100-continue; a client
// that goes away mid-body reaches the actor as an abort; a body past
// limits.max_stream_body_bytes is 413; other routes keep limits.max_body_bytes.
#include "../support/test_support.hpp"

#include <openssl/evp.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

namespace upload_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// SHA-256 of a stream of pieces, in hex.
class sha256 {
public:
  sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void add(std::string_view piece) { EVP_DigestUpdate(ctx_.get(), piece.data(), piece.size()); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i)
      out += {digits[md[i] >> 4], digits[md[i] & 15]};
    return out;
  }

private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};


std::string head(const std::string& framing, const std::string& extra = {}) {
  return "POST /api/upload HTTP/1.1\r\nHost: x\r\n" + framing + extra + "\r\n";
}

class Upload : public admin_node_test {};

}  // namespace

// 1 GiB, a piece at a time: the right digest, and the node's memory does not
// grow with the body (it holds one piece, limits.upload_chunk_bytes).
TEST_F(Upload, AGibibyteGoesThroughWithMemoryBounded) {
  auto& n = start_with({"--set", "limits.max_stream_body_bytes=2147483648"});
  constexpr std::uint64_t total = 1ull << 30;
  std::string block(1 << 20, '\0');
  for (std::size_t i = 0; i < block.size(); ++i)
    block[i] = static_cast<char>((i * 131 + 7) % 251);
  const long before = rss_kib(n.pid());
  std::atomic<long> peak{before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), rss_kib(n.pid()));
      std::this_thread::sleep_for(20ms);  // a sampling period, not an ordering
    }
  });
  sha256 expected;
  http_client c(port());
  c.send_raw(head("Content-Length: " + std::to_string(total) + "\r\n"));
  for (std::uint64_t sent = 0; sent < total; sent += block.size()) {
    c.send_raw(block, 60s);
    expected.add(block);
  }
  auto r = c.read_response(120s);
  done = true;
  sampler.join();
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("bytes", std::uint64_t{0}), total);
  EXPECT_EQ(r.json().value("sha256", ""), expected.hex());
  EXPECT_LT(peak - before, 64 * 1024) << "RSS grew from " << before << " KiB to " << peak << " KiB";
  EXPECT_EQ(m("troupe_upload_bytes_total"), static_cast<double>(total));
  EXPECT_EQ(m("troupe_uploads_total", "outcome=\"completed\""), 1);
}

// Chunked framing, an empty body and Expect: 100-continue; the connection
// serves its next request after a body read whole.
TEST_F(Upload, ChunkedEmptyAndContinueBodiesAndTheConnectionGoesOn) {
  start_with();
  http_client c(port());
  std::string piece(100000, 'x');
  sha256 expected;
  std::string chunked;
  for (int i = 0; i < 5; ++i) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
    expected.add(piece);
  }
  c.send_raw(head("Transfer-Encoding: chunked\r\n") + chunked + "0\r\n\r\n");
  auto r = c.read_response();
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("bytes", 0), 500000);
  EXPECT_EQ(r.json().value("sha256", ""), expected.hex());
  auto empty = c.post("/api/upload", "");
  ASSERT_STATUS(empty, 200);
  EXPECT_EQ(empty.json().value("sha256", ""), sha256().hex());
  EXPECT_STATUS(c.get("/api/counter"), 200);  // the same connection, its next request
  http_client waits(port());
  waits.send_raw(head("Content-Length: 5\r\n", "Expect: 100-continue\r\n"));
  auto go = waits.read_response();
  EXPECT_EQ(go.status, 100);
  waits.send_raw("hello");
  auto hello = waits.read_response();
  ASSERT_STATUS(hello, 200);
  EXPECT_EQ(hello.json().value("bytes", 0), 5);
}

// A client that goes away mid-body: the actor's abort callback runs (his
// GET /api/uploads counts it) and the node counts it.
TEST_F(Upload, AClientThatGoesAwayMidBodyReachesTheActorAsAnAbort) {
  start_with();
  http_client user(port());
  ASSERT_STATUS(user.get("/api/whoami"), 200);
  {
    http_client raw(port());
    raw.use_cookie_jar(false);
    raw.send_raw(head("Content-Length: 10000000\r\n", "Cookie: troupe_cid=" + *user.cookie() + "\r\n"));
    raw.send_raw(std::string(1000000, 'a'));
    raw.close();
  }
  ASSERT_TRUE(eventually([&] { return m("troupe_uploads_total", "outcome=\"aborted\"") == 1; }));
  auto seen = user.get("/api/uploads");
  ASSERT_STATUS(seen, 200);
  EXPECT_EQ(seen.json().value("aborted", 0), 1) << seen.body;
  EXPECT_EQ(seen.json().value("last_abort", ""), "the client went away");
  EXPECT_EQ(seen.json().value("completed", -1), 0);
}

// Past limits.max_stream_body_bytes: 413, by its length at once, or mid-body
// for a chunked one (the actor told); other routes keep limits.max_body_bytes.
TEST_F(Upload, PastItsLimitABodyIs413AndOtherRoutesKeepTheirs) {
  start_with({"--set", "limits.max_stream_body_bytes=3000000", "--set", "limits.max_body_bytes=100000"});
  http_client c(port());
  c.send_raw(head("Content-Length: 3000001\r\n"));
  EXPECT_STATUS(c.read_response(), 413);
  http_client chunked(port());
  std::string piece(1000000, 'z');
  chunked.send_raw(head("Transfer-Encoding: chunked\r\n"));
  for (int i = 0; i < 4; ++i) {
    try {
      chunked.send_raw("f4240\r\n" + piece + "\r\n");
    } catch (const std::exception&) {
      break;  // the node answered and closed
    }
  }
  EXPECT_STATUS(chunked.read_response(), 413);
  ASSERT_TRUE(eventually([&] { return m("troupe_uploads_total", "outcome=\"aborted\"") == 1; }));
  http_client notes(port());
  EXPECT_STATUS(notes.post("/api/notes", std::string(100001, 'n')), 413);
  EXPECT_STATUS(notes.post("/api/upload", std::string(100001, 'n')), 200);
}

// A user in a worker process: the head crosses the forwarder, the pieces go
// between his actor and the front's source the same way.
TEST_F(Upload, AUserInAWorkerProcessReadsTheBodyAcrossTheProcesses) {
  start_with({"--set", "group.default.isolation=process"});
  std::string block(1 << 20, 'p');
  sha256 expected;
  http_client c(port());
  c.send_raw(head("Content-Length: " + std::to_string(32 * block.size()) + "\r\n"));
  for (int i = 0; i < 32; ++i) {
    c.send_raw(block, 60s);
    expected.add(block);
  }
  auto r = c.read_response(60s);
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("bytes", 0), 32 << 20);
  EXPECT_EQ(r.json().value("sha256", ""), expected.hex());
  EXPECT_STATUS(c.get("/api/counter"), 200);  // the connection goes on
}

}  // namespace upload_test_file
