// The `notes` sample's HTTP API through the real node: cookies, identity, login and
// logout, counter and notes, errors (400, 404, 502), crash isolation.
#include "../support/test_support.hpp"

#include <thread>

namespace routing_test_file {

using namespace troupe::test;
using nlohmann::json;

namespace {

class Routing : public shared_node_test<Routing> {};

std::string unique_name(const std::string& prefix) { return prefix + random_token(10); }

// A client whose first request (GET /api/whoami) minted its cookie.
http_client fresh_guest(uint16_t port) {
  http_client c(port);
  auto r = c.get("/api/whoami");
  EXPECT_STATUS(r, 200);
  EXPECT_TRUE(c.cookie().has_value()) << "no troupe_cid minted: " << r.describe();
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------
// Cookie minting

TEST_F(Routing, FirstRequestMintsCookieWithAttributes) {
  http_client c(port());
  auto r = c.get("/api/whoami");
  ASSERT_STATUS(r, 200);
  auto sc = troupe_cid_cookie(r);
  ASSERT_TRUE(sc) << "no Set-Cookie troupe_cid on a first visit: " << r.describe();
  EXPECT_TRUE(is_url_safe_b64(sc->value)) << "cookie value not URL-safe: " << sc->value;
  EXPECT_GE(sc->value.size(), 22u) << "cookie value shorter than 128 bits: " << sc->value;
  EXPECT_TRUE(sc->has_attribute("Path=/")) << r.get("Set-Cookie");
  EXPECT_TRUE(sc->has_attribute("HttpOnly")) << r.get("Set-Cookie");
  EXPECT_TRUE(sc->has_attribute("SameSite=Lax")) << r.get("Set-Cookie");
  EXPECT_EQ(r.get_all("Set-Cookie").size(), 1u) << r.describe();
}

TEST_F(Routing, ValidCookieGetsNoSetCookie) {
  auto c = fresh_guest(port());
  auto cid = c.cookie().value_or("");
  for (const char* target : {"/api/whoami", "/api/counter", "/api/notes"}) {
    auto r = c.get(target);
    ASSERT_STATUS(r, 200);
    EXPECT_FALSE(r.has("Set-Cookie")) << target << ": " << r.describe();
  }
  // The same cookie on a new TCP connection is the same connection id too.
  http_client other(port());
  other.set_cookie(cid);
  auto r = other.get("/api/whoami");
  ASSERT_STATUS(r, 200);
  EXPECT_FALSE(r.has("Set-Cookie")) << r.describe();
  EXPECT_EQ(r.json().value("connection", ""), cid);
}

TEST_F(Routing, EachStrangerGetsADistinctCookie) {
  std::vector<std::string> seen;
  for (int i = 0; i < 5; ++i) {
    http_client c(port());
    auto r = c.get("/api/whoami");
    ASSERT_STATUS(r, 200);
    auto sc = troupe_cid_cookie(r);
    ASSERT_TRUE(sc) << r.describe();
    for (const auto& s : seen)
      EXPECT_NE(s, sc->value);
    seen.push_back(sc->value);
  }
}

TEST_F(Routing, MalformedCookieMintsANewOneNeverAnError) {
  const std::vector<std::string> bad = {
      "abc",                      // too short for 128 bits
      "!!!!",                     // not URL-safe base64
      std::string(1000, 'A'),     // over-long
      "",                         // empty
      "abc def ghi jkl mno pqr stu",  // spaces
  };
  for (const auto& v : bad) {
    SCOPED_TRACE("cookie value [" + v.substr(0, 40) + "]");
    http_client c(port());
    c.use_cookie_jar(false);
    auto r = c.get("/api/whoami", {{"Cookie", "troupe_cid=" + v}});
    ASSERT_STATUS(r, 200);
    auto sc = troupe_cid_cookie(r);
    ASSERT_TRUE(sc) << "malformed cookie did not get a new one: " << r.describe();
    EXPECT_NE(sc->value, v);
    EXPECT_TRUE(is_url_safe_b64(sc->value)) << sc->value;
    EXPECT_GE(sc->value.size(), 22u);
    auto j = r.json();
    EXPECT_EQ(j.value("connection", ""), sc->value) << r.describe();
    EXPECT_EQ(j.value("user", ""), "guest_" + sc->value) << r.describe();
  }
}

TEST_F(Routing, WellFormedCookieTheNodeDidNotMintGetsANewOne) {
  // Well-formed: the shape the node mints (its alphabet and length), but not minted
  // by it (its HMAC does not verify): treated like no cookie at all (session fixation).
  auto minted = fresh_guest(port());
  ASSERT_TRUE(minted.cookie());
  std::string cid = random_token(minted.cookie()->size());
  http_client c(port());
  c.set_cookie(cid);
  auto r = c.get("/api/whoami");
  ASSERT_STATUS(r, 200);
  auto sc = troupe_cid_cookie(r);
  ASSERT_TRUE(sc) << "an id the node never minted was adopted: " << r.describe();
  EXPECT_NE(sc->value, cid);
  auto j = r.json();
  EXPECT_EQ(j.value("connection", ""), sc->value);
  EXPECT_EQ(j.value("user", ""), "guest_" + sc->value);
  EXPECT_EQ(count_of(c.get("/api/counter")), 0);
  EXPECT_EQ(*c.cookie(), sc->value);
}

TEST_F(Routing, CookieAmongOtherCookiesIsFound) {
  auto c = fresh_guest(port());
  auto cid = *c.cookie();
  http_client o(port());
  o.use_cookie_jar(false);
  auto r = o.get("/api/whoami", {{"Cookie", "theme=dark; troupe_cid=" + cid + "; lang=en"}});
  ASSERT_STATUS(r, 200);
  EXPECT_FALSE(r.has("Set-Cookie")) << r.describe();
  EXPECT_EQ(r.json().value("connection", ""), cid);
}

// ---------------------------------------------------------------------------------
// Identity

TEST_F(Routing, WhoamiOfAStranger) {
  http_client c(port());
  auto r = c.get("/api/whoami");
  ASSERT_STATUS(r, 200);
  EXPECT_NE(r.get("Content-Type").find("application/json"), std::string::npos) << r.describe();
  auto j = r.json();
  ASSERT_TRUE(j.is_object()) << r.describe();
  for (const char* k : {"user", "connection", "node", "worker"}) {
    EXPECT_TRUE(j.contains(k)) << "missing \"" << k << "\": " << r.body;
    if (j.contains(k)) {
      EXPECT_FALSE(j[k].is_null()) << k << " is null: " << r.body;
    }
  }
  ASSERT_TRUE(c.cookie());
  EXPECT_EQ(j.value("connection", ""), *c.cookie());
  EXPECT_EQ(j.value("user", ""), "guest_" + *c.cookie());
  // Stable across requests.
  auto j2 = c.get("/api/whoami").json();
  EXPECT_EQ(j2, j);
}

TEST_F(Routing, LoginMovesTheConnectionToTheUser) {
  auto c = fresh_guest(port());
  auto cid = *c.cookie();
  std::string name = unique_name("alice_");
  auto r = c.post_json("/api/login", {{"user", name}});
  ASSERT_STATUS(r, 200);
  auto j = r.json();
  EXPECT_EQ(j.value("user", ""), name) << r.body;
  // The connection moves under a new id (session fixation): the old one is dead.
  auto sc = troupe_cid_cookie(r);
  ASSERT_TRUE(sc) << "login kept the connection id: " << r.describe();
  EXPECT_NE(sc->value, cid);
  EXPECT_EQ(j.value("connection", ""), sc->value) << r.body;
  auto w = c.get("/api/whoami");
  ASSERT_STATUS(w, 200);
  EXPECT_EQ(w.json().value("user", ""), name);
  EXPECT_EQ(w.json().value("connection", ""), sc->value);
}

TEST_F(Routing, LoginNameRules) {
  auto c = fresh_guest(port());
  const std::vector<json> bad = {
      "",                         // empty
      std::string(65, 'a'),       // too long
      "guest_abc",                // reserved prefix
      "guest_",                   //
      "a/b", "a b", "a:b", "a;b", "<x>", "caf\xc3\xa9", "a\nb",
      123, nullptr, json::array({"alice"}), json::object(),
  };
  for (const auto& name : bad) {
    SCOPED_TRACE("user=" + name.dump());
    auto r = c.post_json("/api/login", {{"user", name}});
    EXPECT_TRUE(is_json_error(r, 400));
  }
  // Missing "user", bad JSON, a non-object body.
  EXPECT_TRUE(is_json_error(c.post("/api/login", "{}"), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/login", "{\"user\": \"alice"), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/login", "not json"), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/login", "[\"alice\"]"), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/login", ""), 400));
  // None of that logged anybody in.
  auto w = c.get("/api/whoami").json();
  EXPECT_EQ(w.value("user", ""), "guest_" + *c.cookie());

  // The extremes that are valid.
  for (const std::string& ok : {std::string(64, 'z'), std::string("a"),
                                "A.b@c-d_e." + random_token(6)}) {
    SCOPED_TRACE("user=" + ok);
    http_client g(port());
    auto r = g.post_json("/api/login", {{"user", ok}});
    ASSERT_STATUS(r, 200);
    EXPECT_EQ(r.json().value("user", ""), ok);
  }
}

TEST_F(Routing, LogoutGivesAFreshEmptyGuest) {
  auto c = fresh_guest(port());
  std::string name = unique_name("carol_");
  ASSERT_STATUS(c.post_json("/api/login", {{"user", name}}), 200);
  EXPECT_EQ(count_of(c.post("/api/counter/incr")), 1);
  ASSERT_STATUS(c.post_json("/api/notes", {{"text", "carol's"}}), 200);

  auto r = c.post("/api/logout");
  ASSERT_STATUS(r, 200);
  auto j = r.json();
  auto user = j.value("user", "");
  EXPECT_EQ(user.rfind("guest_", 0), 0u) << r.body;
  EXPECT_NE(user, name);
  ASSERT_TRUE(c.cookie());
  EXPECT_EQ(j.value("connection", ""), *c.cookie()) << r.describe();
  EXPECT_EQ(count_of(c.get("/api/counter")), 0);
  auto notes = c.get("/api/notes");
  ASSERT_STATUS(notes, 200);
  EXPECT_TRUE(note_texts(notes).empty()) << notes.body;
  auto w = c.get("/api/whoami");
  EXPECT_EQ(w.json().value("user", ""), user);

  // carol herself kept her state.
  http_client again(port());
  ASSERT_STATUS(again.post_json("/api/login", {{"user", name}}), 200);
  EXPECT_EQ(count_of(again.get("/api/counter")), 1);
}

// ---------------------------------------------------------------------------------
// Counter and notes

TEST_F(Routing, CounterCounts) {
  auto c = fresh_guest(port());
  EXPECT_EQ(count_of(c.get("/api/counter")), 0);
  for (int i = 1; i <= 5; ++i)
    EXPECT_EQ(count_of(c.post("/api/counter/incr")), i);
  EXPECT_EQ(count_of(c.get("/api/counter")), 5);
  // Another user is not affected.
  auto d = fresh_guest(port());
  EXPECT_EQ(count_of(d.get("/api/counter")), 0);
}

TEST_F(Routing, NotesAppend) {
  auto c = fresh_guest(port());
  auto r = c.get("/api/notes");
  ASSERT_STATUS(r, 200);
  EXPECT_TRUE(note_texts(r).empty()) << r.body;
  r = c.post_json("/api/notes", {{"text", "first"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(note_texts(r), (std::vector<std::string>{"first"}));
  r = c.post_json("/api/notes", {{"text", "second \"quoted\" \xc3\xa9"}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(note_texts(r), (std::vector<std::string>{"first", "second \"quoted\" \xc3\xa9"}));
  r = c.get("/api/notes");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(note_texts(r), (std::vector<std::string>{"first", "second \"quoted\" \xc3\xa9"}));
}

TEST_F(Routing, NotesRejectBadInput) {
  auto c = fresh_guest(port());
  EXPECT_TRUE(is_json_error(c.post("/api/notes", "{\"text\": "), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/notes", "garbage"), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/notes", "{}"), 400));
  EXPECT_TRUE(is_json_error(c.post("/api/notes", ""), 400));
  EXPECT_TRUE(is_json_error(c.post_json("/api/notes", {{"text", 5}}), 400));
  EXPECT_TRUE(is_json_error(c.post_json("/api/notes", {{"text", nullptr}}), 400));
  EXPECT_TRUE(is_json_error(c.post_json("/api/notes", {{"text", json::array({"a"})}}), 400));
  EXPECT_TRUE(is_json_error(c.post_json("/api/notes", {{"txt", "a"}}), 400));
  auto r = c.get("/api/notes");
  ASSERT_STATUS(r, 200);
  EXPECT_TRUE(note_texts(r).empty()) << "a refused note was stored: " << r.body;
}

TEST_F(Routing, UnknownRoutesAre404Json) {
  auto c = fresh_guest(port());
  for (const char* t : {"/api/nope", "/nothing/here", "/api/counter/incr/extra", "/api"}) {
    SCOPED_TRACE(t);
    EXPECT_TRUE(is_json_error(c.get(t), 404));
  }
  EXPECT_TRUE(is_json_error(c.post("/api/nope", "{}"), 404));
  // The connection is still usable afterwards.
  EXPECT_EQ(count_of(c.get("/api/counter")), 0);
}

TEST_F(Routing, SleepReplies) {
  auto c = fresh_guest(port());
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.post_json("/api/sleep", {{"ms", 300}});
  auto took = ms_since(t0);
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("slept", -1), 300) << r.body;
  EXPECT_GE(took, 290);  // it did wait (how little beyond 300 ms: bench/README.md)
}

// ---------------------------------------------------------------------------------
// Login carries the guest's store / the resident state wins

TEST_F(Routing, LoginCarriesTheGuestStoreToANewUser) {
  auto c = fresh_guest(port());
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(count_of(c.post("/api/counter/incr")), i);
  ASSERT_STATUS(c.post_json("/api/notes", {{"text", "carried over"}}), 200);
  std::string name = unique_name("alice_");
  auto r = c.post_json("/api/login", {{"user", name}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("user", ""), name);
  EXPECT_EQ(count_of(c.get("/api/counter")), 3);
  auto notes = c.get("/api/notes");
  ASSERT_STATUS(notes, 200);
  EXPECT_EQ(note_texts(notes), (std::vector<std::string>{"carried over"}));
  EXPECT_EQ(count_of(c.post("/api/counter/incr")), 4);
}

TEST_F(Routing, LoginToALiveUserKeepsTheResidentState) {
  std::string name = unique_name("bob_");
  auto first = fresh_guest(port());
  ASSERT_STATUS(first.post_json("/api/login", {{"user", name}}), 200);
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(count_of(first.post("/api/counter/incr")), i);
  ASSERT_STATUS(first.post_json("/api/notes", {{"text", "bob's own"}}), 200);

  auto second = fresh_guest(port());
  ASSERT_NE(*first.cookie(), *second.cookie());
  ASSERT_EQ(count_of(second.post("/api/counter/incr")), 1);
  ASSERT_EQ(count_of(second.post("/api/counter/incr")), 2);
  ASSERT_STATUS(second.post_json("/api/notes", {{"text", "guest's, dropped"}}), 200);
  auto r = second.post_json("/api/login", {{"user", name}});
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("user", ""), name);
  EXPECT_EQ(r.json().value("connection", ""), *second.cookie());

  EXPECT_EQ(count_of(second.get("/api/counter")), 5);
  auto notes = second.get("/api/notes");
  ASSERT_STATUS(notes, 200);
  EXPECT_EQ(note_texts(notes), (std::vector<std::string>{"bob's own"}));
  // Both connections now reach the one user.
  EXPECT_EQ(count_of(second.post("/api/counter/incr")), 6);
  EXPECT_EQ(count_of(first.get("/api/counter")), 6);
  EXPECT_EQ(count_of(first.post("/api/counter/incr")), 7);
  EXPECT_EQ(count_of(second.get("/api/counter")), 7);
}

// ---------------------------------------------------------------------------------
// Crash isolation

TEST_F(Routing, CrashIs502GenericAndTheUserRestarts) {
  auto x = fresh_guest(port());
  auto y = fresh_guest(port());
  std::string name = unique_name("zed_");
  auto z = fresh_guest(port());
  ASSERT_STATUS(z.post_json("/api/login", {{"user", name}}), 200);
  for (int i = 1; i <= 2; ++i)
    ASSERT_EQ(count_of(x.post("/api/counter/incr")), i);
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(count_of(y.post("/api/counter/incr")), i);
  for (int i = 1; i <= 4; ++i)
    ASSERT_EQ(count_of(z.post("/api/counter/incr")), i);
  auto xwho = x.get("/api/whoami").json();

  auto r = x.post("/api/crash");
  EXPECT_TRUE(is_json_error(r, 502));
  EXPECT_EQ(r.body.find("crash requested"), std::string::npos)
      << "the exception text leaked to the client: " << r.body;
  EXPECT_EQ(r.body.find("runtime_error"), std::string::npos) << r.body;

  // The real text goes to the log (only).
  EXPECT_TRUE(eventually([&] { return node().stderr_log().find("crash requested") != std::string::npos; },
                         std::chrono::milliseconds(5000)))
      << "the exception's text is not in the node's log";

  // The crashed user is served again, from his last good state (not empty).
  auto after = x.get("/api/counter");
  ASSERT_STATUS(after, 200);
  EXPECT_EQ(count_of(after), 2);
  auto w = x.get("/api/whoami");
  ASSERT_STATUS(w, 200);
  EXPECT_EQ(w.json().value("user", ""), xwho.value("user", "?"));
  EXPECT_EQ(w.json().value("connection", ""), xwho.value("connection", "?"));
  EXPECT_EQ(count_of(x.post("/api/counter/incr")), 3);
  // Others untouched.
  EXPECT_EQ(count_of(y.get("/api/counter")), 3);
  EXPECT_EQ(count_of(z.get("/api/counter")), 4);

  // A logged-in user crashing stays who he is.
  auto rz = z.post("/api/crash");
  EXPECT_TRUE(is_json_error(rz, 502));
  auto wz = z.get("/api/whoami");
  ASSERT_STATUS(wz, 200);
  EXPECT_EQ(wz.json().value("user", ""), name);
  EXPECT_EQ(count_of(z.get("/api/counter")), 4);
  EXPECT_EQ(count_of(y.get("/api/counter")), 3);
}

TEST_F(Routing, RepeatedCrashesKeepServing) {
  auto x = fresh_guest(port());
  auto y = fresh_guest(port());
  ASSERT_EQ(count_of(y.post("/api/counter/incr")), 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(is_json_error(x.post("/api/crash"), 502));
    EXPECT_EQ(count_of(x.post("/api/counter/incr")), i + 1);  // each restart keeps what he had
  }
  EXPECT_EQ(count_of(y.get("/api/counter")), 1);
}

// ---------------------------------------------------------------------------------
// HTTP/1.1 basics

TEST_F(Routing, KeepAliveReusesTheConnection) {
  auto c = fresh_guest(port());
  for (int i = 0; i < 20; ++i) {
    auto r = c.get("/api/counter");
    ASSERT_STATUS(r, 200);
    EXPECT_TRUE(r.keep_alive) << r.describe();
    ASSERT_TRUE(c.connected()) << "server closed a keep-alive connection after request " << i;
  }
}

TEST_F(Routing, ConnectionCloseIsHonoured) {
  auto c = fresh_guest(port());
  c.send_raw("GET /api/counter HTTP/1.1\r\nHost: x\r\nCookie: troupe_cid=" + *c.cookie() +
             "\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000)))
      << "server kept the connection open after Connection: close";
  EXPECT_EQ(c.received_raw().rfind("HTTP/1.1 200", 0), 0u) << c.received_raw();
}

TEST_F(Routing, PipelinedRequestsAnsweredInOrder) {
  auto c = fresh_guest(port());
  std::string cookie = "Cookie: troupe_cid=" + *c.cookie() + "\r\n";
  std::string req;
  for (int i = 0; i < 3; ++i)
    req += "POST /api/counter/incr HTTP/1.1\r\nHost: x\r\n" + cookie +
           "Content-Length: 0\r\n\r\n";
  req += "GET /api/counter HTTP/1.1\r\nHost: x\r\n" + cookie + "\r\n";
  c.send_raw(req);
  for (int i = 1; i <= 3; ++i)
    EXPECT_EQ(count_of(c.read_response()), i);
  EXPECT_EQ(count_of(c.read_response()), 3);
}

TEST_F(Routing, MalformedRequestIs400OrClosedAndTheNodeLivesOn) {
  {
    http_client raw(port());
    raw.send_raw("THIS IS NOT HTTP\r\n\r\n");
    bool closed = raw.wait_closed(std::chrono::milliseconds(3000));
    const std::string& got = raw.received_raw();
    EXPECT_TRUE(closed || std::regex_search(got, std::regex("^HTTP/1\\.[01] 400")))
        << "malformed request neither refused nor closed within 3 s; got [" << got << "]";
    if (!got.empty()) {
      EXPECT_TRUE(std::regex_search(got, std::regex("^HTTP/1\\.[01] 400"))) << got;
    }
  }
  auto c = fresh_guest(port());
  EXPECT_EQ(count_of(c.get("/api/counter")), 0);
}

}  // namespace routing_test_file
