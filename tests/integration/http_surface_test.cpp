// An app's HTTP surface (issue 25), against the real node serving the notes
// sample: its handlers' headers, cookies and redirects on the wire, and the
// platform's own cookie with its Max-Age.
#include "../support/test_support.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace http_surface_test_file {

using namespace troupe::test;

class HttpSurface : public node_test {};

// The platform's cookie carries Max-Age (node.cookie_max_age_seconds) and is
// written when it changes only: minted, then never again on that connection.
TEST_F(HttpSurface, ThePlatformCookieHasItsMaxAgeAndIsWrittenOnlyWhenItChanges) {
  start();
  http_client c(port());
  auto first = c.get("/api/whoami");
  ASSERT_STATUS(first, 200);
  auto cookie = troupe_cid_cookie(first);
  ASSERT_TRUE(cookie) << first.describe();
  for (auto attribute : {"Max-Age=86400", "Path=/", "HttpOnly", "SameSite=Lax"})
    EXPECT_TRUE(cookie->has_attribute(attribute)) << attribute << "\n" << first.describe();
  auto second = c.get("/api/whoami");
  ASSERT_STATUS(second, 200);
  EXPECT_FALSE(second.has("Set-Cookie")) << second.describe();
}

TEST_F(HttpSurface, ACookieMaxAgeOfZeroMakesASessionCookie) {
  start({"--set", "node.cookie_max_age_seconds=0"});
  http_client c(port());
  auto r = c.get("/api/whoami");
  auto cookie = troupe_cid_cookie(r);
  ASSERT_TRUE(cookie) << r.describe();
  for (auto& a : cookie->attributes)
    EXPECT_NE(a.rfind("Max-Age", 0), 0u) << r.describe();
  EXPECT_TRUE(cookie->has_attribute("HttpOnly"));
}

// POST /api/prefs: a cookie of the app's own beside the platform's, and Cache-Control.
TEST_F(HttpSurface, PrefsSetsTheAppsCookieBesideThePlatformsAndNoStore) {
  start();
  http_client c(port());
  auto r = c.post("/api/prefs", R"({"theme":"dark"})");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("theme", ""), "dark");
  EXPECT_EQ(r.get("Cache-Control"), "no-store") << r.describe();
  auto cookies = r.get_all("Set-Cookie");
  ASSERT_EQ(cookies.size(), 2u) << r.describe();  // the platform's (a new connection) and the app's
  EXPECT_TRUE(troupe_cid_cookie(r)) << r.describe();
  EXPECT_NE(std::find(cookies.begin(), cookies.end(), "theme=dark; Path=/; SameSite=Lax"), cookies.end())
    << r.describe();
  auto again = c.post("/api/prefs", R"({"theme":"light"})");
  ASSERT_STATUS(again, 200);
  EXPECT_EQ(again.get_all("Set-Cookie"), (std::vector<std::string>{"theme=light; Path=/; SameSite=Lax"}))
    << again.describe();
  for (auto body : {R"({"theme":"da rk"})", R"({"theme":"dark;Path=/x"})", R"({"theme":""})", R"({})"}) {
    auto bad = c.post("/api/prefs", body);
    EXPECT_STATUS(bad, 400) << body;
    EXPECT_FALSE(bad.has("Set-Cookie") && !troupe_cid_cookie(bad)) << bad.describe();
  }
}

// GET /api/go?to=PATH: 302 to a path of this site, 400 for anything else (no
// open redirect, no header injection through a decoded CR/LF).
TEST_F(HttpSurface, GoRedirectsToPathsOfThisSiteOnly) {
  start();
  http_client c(port());
  for (auto [query, location] : std::vector<std::pair<std::string, std::string>>{
         {"to=/notes", "/notes"},
         {"to=%2F", "/"},
         {"to=/a%3Fb%3D1", "/a?b=1"},
         {"to=/caf%C3%A9", "/caf\xc3\xa9"}}) {
    auto r = c.get("/api/go?" + query);
    EXPECT_STATUS(r, 302) << query;
    EXPECT_EQ(r.get("Location"), location) << r.describe();
  }
  for (auto query : {"", "to=", "to=notes", "to=//evil.example", "to=%2F%2Fevil.example", "to=/%5Cevil.example",
                     "to=https://evil.example", "to=/%0D%0ASet-Cookie:%20a=b", "to=/a%00b", "to=%09/x"}) {
    auto r = c.get(std::string("/api/go?") + query);
    EXPECT_STATUS(r, 400) << query;
    EXPECT_FALSE(r.has("Location")) << r.describe();
    for (auto& sc : r.get_all("Set-Cookie"))
      EXPECT_EQ(sc.rfind("troupe_cid=", 0), 0u) << r.describe();
  }
}

// GET /api/notes.txt: the notes as a download.
TEST_F(HttpSurface, NotesTxtIsAnAttachment) {
  start();
  http_client c(port());
  ASSERT_STATUS(c.post("/api/notes", R"({"text":"first"})"), 200);
  ASSERT_STATUS(c.post("/api/notes", R"({"text":"second"})"), 200);
  auto r = c.get("/api/notes.txt");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.get("Content-Disposition"), "attachment; filename=\"notes.txt\"");
  EXPECT_EQ(r.get("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.body, "first\nsecond\n");
  auto head = c.request("HEAD", "/api/notes.txt");
  EXPECT_STATUS(head, 200);
  EXPECT_EQ(head.get("Content-Disposition"), "attachment; filename=\"notes.txt\"");
  EXPECT_EQ(head.body, "");
}

// GET /api/notes/{index:int}: a typed path parameter.
TEST_F(HttpSurface, ANoteByItsIndexIsATypedPathParameter) {
  start();
  http_client c(port());
  ASSERT_STATUS(c.post("/api/notes", R"({"text":"first"})"), 200);
  ASSERT_STATUS(c.post("/api/notes", R"({"text":"second"})"), 200);
  auto one = c.get("/api/notes/1");
  ASSERT_STATUS(one, 200);
  EXPECT_EQ(one.json().value("note", ""), "second");
  EXPECT_EQ(c.get("/api/notes/0").json().value("note", ""), "first");
  for (auto path : {"/api/notes/2", "/api/notes/-1", "/api/notes/x", "/api/notes/1.0", "/api/notes/+1"})
    EXPECT_STATUS(c.get(path), 404) << path;
  auto huge = c.get("/api/notes/99999999999999999999");
  EXPECT_STATUS(huge, 400);
  EXPECT_NE(huge.body.find("index"), std::string::npos) << huge.describe();
}

// whoami's "client": the peer, or whom the headers name when the peer is a
// trusted proxy (node.trusted_proxies); from any other peer they are ignored.
TEST_F(HttpSurface, TheClientAddressBelievesTrustedProxiesOnly) {
  start();
  http_client c(port());
  auto plain = c.get("/api/whoami", {{"X-Forwarded-For", "198.51.100.7"}, {"Forwarded", "for=198.51.100.8"}});
  ASSERT_STATUS(plain, 200);
  EXPECT_EQ(plain.json().value("client", ""), "127.0.0.1") << "no trusted proxies: the headers are ignored";
}

TEST_F(HttpSurface, TheClientAddressFromATrustedProxyIsTheOneItNames) {
  start({"--set", "node.trusted_proxies=10.0.0.0/8,127.0.0.1/32"});
  http_client c(port());
  auto client_of = [&](const headers_t& headers) {
    auto r = c.get("/api/whoami", headers);
    EXPECT_STATUS(r, 200);
    return r.json().value("client", "?");
  };
  EXPECT_EQ(client_of({}), "127.0.0.1");
  EXPECT_EQ(client_of({{"X-Forwarded-For", "198.51.100.7"}}), "198.51.100.7");
  EXPECT_EQ(client_of({{"X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.1.1.1"}}), "198.51.100.7");
  EXPECT_EQ(client_of({{"X-Forwarded-For", "6.6.6.6"}, {"X-Forwarded-For", "198.51.100.9"}}), "198.51.100.9")
    << "two lines are one list";
  EXPECT_EQ(client_of({{"Forwarded", "for=\"[2001:db8::5]:443\";proto=https"}, {"X-Forwarded-For", "6.6.6.6"}}),
            "2001:db8::5");
  EXPECT_EQ(client_of({{"X-Forwarded-For", "not-an-address"}}), "127.0.0.1");
}

TEST(HttpSurfaceRecipe, ATrustedProxyThatIsNoNetworkStopsTheNode) {
  auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--set", "node.trusted_proxies=10.0.0.0/8,proxy.example"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("node.trusted_proxies"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("proxy.example"), std::string::npos) << r.err;
}

// [[cors]]: a preflight is the front's (nobody woken, no connection minted); the
// answers to an allowed origin's requests carry Access-Control-Allow-Origin.
TEST_F(HttpSurface, ACorsPreflightIsAnsweredByTheFrontAndAllowedOriginsGetTheHeaders) {
  auto dir = make_temp_dir("troupe-cors");
  {
    std::ofstream recipe(dir + "/recipe.toml");
    recipe << "[[cors]]\norigins = [\"https://shop.example\"]\nmethods = [\"GET\", \"POST\"]\n"
              "headers = [\"Content-Type\", \"X-Troupe-Page\"]\nmax_age_seconds = 300\ncredentials = true\n";
  }
  const std::string token = "cors-admin-" + random_token(12);
  start({"--config", dir + "/recipe.toml", "--admin-token", token});
  headers_t admin{{"Authorization", "Bearer " + token}};
  http_client c(port());
  auto pre = c.request("OPTIONS", "/api/notes", {},
                       {{"Origin", "https://shop.example"},
                        {"Access-Control-Request-Method", "POST"},
                        {"Access-Control-Request-Headers", "content-type"}});
  EXPECT_STATUS(pre, 204);
  EXPECT_EQ(pre.get("Access-Control-Allow-Origin"), "https://shop.example") << pre.describe();
  EXPECT_EQ(pre.get("Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(pre.get("Access-Control-Allow-Methods"), "GET, POST");
  EXPECT_EQ(pre.get("Access-Control-Allow-Headers"), "Content-Type, X-Troupe-Page");
  EXPECT_EQ(pre.get("Access-Control-Max-Age"), "300");
  EXPECT_EQ(pre.get("Vary"), "Origin");
  EXPECT_FALSE(pre.has("Set-Cookie")) << "a preflight mints no connection";
  EXPECT_EQ(pre.body, "");
  for (auto [origin, method] : std::vector<std::pair<const char*, const char*>>{
         {"https://evil.example", "POST"}, {"https://shop.example", "DELETE"}}) {
    auto refused = c.request("OPTIONS", "/api/notes", {}, {{"Origin", origin}, {"Access-Control-Request-Method", method}});
    EXPECT_STATUS(refused, 403) << origin << " " << method;
    EXPECT_FALSE(refused.has("Access-Control-Allow-Origin")) << refused.describe();
  }
  EXPECT_EQ(metric(port(), admin, "troupe_actors", "kind=\"user\""), 0) << "the preflights woke nobody";

  auto allowed = c.post("/api/notes", R"({"text":"from the shop"})", {{"Origin", "https://shop.example"}});
  ASSERT_STATUS(allowed, 200);
  EXPECT_EQ(allowed.get("Access-Control-Allow-Origin"), "https://shop.example") << allowed.describe();
  EXPECT_EQ(allowed.get("Access-Control-Allow-Credentials"), "true");
  auto other = c.get("/api/notes", {{"Origin", "https://evil.example"}});
  ASSERT_STATUS(other, 200);  // served: reading the answer is what the browser refuses the page
  EXPECT_FALSE(other.has("Access-Control-Allow-Origin")) << other.describe();
  EXPECT_EQ(other.get("Vary"), "Origin");
  std::filesystem::remove_all(dir);
}

// [[static]]: files served by the front, no actor and no connection minted; the
// app's routes keep their paths even under a "/" mount.
TEST_F(HttpSurface, StaticFilesAreServedByTheFront) {
  auto dir = make_temp_dir("troupe-static-it");
  std::filesystem::create_directories(dir + "/www/assets");
  std::ofstream(dir + "/www/index.html") << "<h1>shop</h1>";
  std::ofstream(dir + "/www/assets/app.js") << std::string(100000, 'x');
  std::ofstream(dir + "/secret.txt") << "secret";
  std::filesystem::create_symlink(dir + "/secret.txt", dir + "/www/assets/leak.txt");
  {
    std::ofstream recipe(dir + "/recipe.toml");
    recipe << "[[static]]\nprefix = \"/\"\nroot = \"" << dir << "/www\"\nspa_fallback = true\n"
              "cache_control = \"public, max-age=60\"\n";
  }
  const std::string token = "static-admin-" + random_token(12);
  start({"--config", dir + "/recipe.toml", "--admin-token", token});
  http_client c(port());
  auto home = c.get("/index.html");
  ASSERT_STATUS(home, 200);
  EXPECT_EQ(home.body, "<h1>shop</h1>");
  EXPECT_EQ(home.get("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(home.get("Cache-Control"), "public, max-age=60");
  EXPECT_FALSE(home.has("Set-Cookie")) << "a static file mints no connection";
  EXPECT_EQ(c.get("/").body, "<h1>shop</h1>") << "/ is the mount's index";
  auto js = c.get("/assets/app.js");
  ASSERT_STATUS(js, 200);
  EXPECT_EQ(js.body.size(), 100000u);
  auto etag = js.get("ETag");
  EXPECT_STATUS(c.get("/assets/app.js", {{"If-None-Match", etag}}), 304);
  auto part = c.get("/assets/app.js", {{"Range", "bytes=10-19"}});
  EXPECT_STATUS(part, 206);
  EXPECT_EQ(part.body, std::string(10, 'x'));
  EXPECT_EQ(part.get("Content-Range"), "bytes 10-19/100000");
  EXPECT_STATUS(c.get("/assets/app.js", {{"Range", "bytes=100000-"}}), 416);
  auto head = c.request("HEAD", "/assets/app.js");
  EXPECT_STATUS(head, 200);
  EXPECT_EQ(head.get("Content-Length"), "100000");
  EXPECT_EQ(head.body, "");
  EXPECT_STATUS(c.get("/assets/leak.txt"), 404);
  EXPECT_STATUS(c.get("/assets/%2e%2e/%2e%2e/secret.txt"), 404);
  EXPECT_STATUS(c.post("/assets/app.js", "{}"), 405);
  auto spa = c.get("/cart/42");
  ASSERT_STATUS(spa, 200);
  EXPECT_EQ(spa.body, "<h1>shop</h1>") << "an unknown path of a single-page app is its index";
  // The app's routes are the app's, under a "/" mount too.
  auto who = c.get("/api/whoami");
  ASSERT_STATUS(who, 200);
  EXPECT_TRUE(who.json().contains("user")) << who.describe();
  EXPECT_EQ(metric(port(), {{"Authorization", "Bearer " + token}}, "troupe_actors", "kind=\"user\""), 1)
    << "the static files woke nobody; whoami woke one guest";
  std::filesystem::remove_all(dir);
}

TEST(HttpSurfaceRecipe, AStaticRootThatIsNoDirectoryStopsTheNode) {
  auto dir = make_temp_dir("troupe-static-bad");
  {
    std::ofstream recipe(dir + "/recipe.toml");
    recipe << "[[static]]\nprefix = \"/static/\"\nroot = \"" << dir << "/missing\"\n";
  }
  auto r = run_binary({"node", "--listen", "127.0.0.1:0", "--deposit", dir + "/deposit", "--config", dir + "/recipe.toml"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/static/"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// The run command's recipe for the notes sample: its page at / and under /static/.
TEST_F(HttpSurface, TheNotesSamplesRecipeServesItsPageAtTheRoot) {
  start({"--config", std::string(TROUPE_SOURCE_DIR) + "/samples/notes/notes.toml"});
  http_client c(port());
  auto page = c.get("/");
  ASSERT_STATUS(page, 200);
  EXPECT_EQ(page.get("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<title>troupe notes</title>"), std::string::npos);
  EXPECT_EQ(c.get("/static/index.html").body, page.body);
  EXPECT_STATUS(c.get("/api/counter"), 200);  // the app's, beside the "/" mount
}

// The same answers as curl sees them on the wire (`curl -i`: the status line
// and every header as sent): the app's cookie and Cache-Control, a redirect,
// an attachment; a decoded CR/LF never becomes a header.
TEST_F(HttpSurface, CurlSeesTheHeadersCookiesAndRedirectsOnTheWire) {
  start();
  const auto base = "http://127.0.0.1:" + std::to_string(port());
  auto curl = [&](const std::string& args) {
    auto [code, out] = run_command("curl -s -i --max-time 10 " + args + " 2>&1");
    EXPECT_EQ(code, 0) << args << "\n" << out;
    return out;
  };
  auto has_line = [](const std::string& out, const std::string& line) {
    return out.find("\r\n" + line + "\r\n") != std::string::npos;
  };
  auto prefs = curl("-X POST -d '{\"theme\":\"dark\"}' " + base + "/api/prefs");
  EXPECT_EQ(prefs.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << prefs;
  EXPECT_TRUE(has_line(prefs, "Set-Cookie: theme=dark; Path=/; SameSite=Lax")) << prefs;
  EXPECT_TRUE(has_line(prefs, "Cache-Control: no-store")) << prefs;
  auto go = curl("'" + base + "/api/go?to=/notes'");
  EXPECT_EQ(go.rfind("HTTP/1.1 302 Found\r\n", 0), 0u) << go;
  EXPECT_TRUE(has_line(go, "Location: /notes")) << go;
  auto injected = curl("'" + base + "/api/go?to=/a%0d%0aSet-Cookie:%20stolen=1'");
  EXPECT_EQ(injected.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << injected;
  EXPECT_EQ(injected.find("stolen=1\r\n"), std::string::npos) << injected;
  auto text = curl(base + "/api/notes.txt");
  EXPECT_TRUE(has_line(text, "Content-Disposition: attachment; filename=\"notes.txt\"")) << text;
}

}  // namespace http_surface_test_file
