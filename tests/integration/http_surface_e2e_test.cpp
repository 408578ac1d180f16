// An app's HTTP surface in Debian's headless Chromium (issue 25): CORS — a page
// of another origin (http://localhost:PORT calling http://127.0.0.1:PORT) gets its
// preflight answered by the front and reads the answer, a request the [[cors]]
// entry does not allow is blocked at its preflight — and a redirect followed, the
// app's cookie kept where scripts see it and the platform's HttpOnly one not.
#include "../support/cdp_client.hpp"
#include "../support/test_support.hpp"

#include <filesystem>
#include <fstream>

namespace http_surface_e2e_test_file {

using namespace troupe::test;
using namespace std::chrono_literals;

class HttpSurfaceInChromium : public node_test {};

TEST_F(HttpSurfaceInChromium, APageOfAnotherOriginPassesItsPreflightOrIsBlocked) {
  ASSERT_TRUE(chromium::available()) << "/usr/bin/chromium is missing: scripts/test.sh installs Debian's chromium";
  auto dir = make_temp_dir("troupe-cors-e2e");
  {
    std::ofstream recipe(dir + "/recipe.toml");
    recipe << "[[cors]]\norigins = [\"*\"]\nmethods = [\"GET\", \"POST\"]\nheaders = [\"Content-Type\"]\n";
  }
  start({"--config", dir + "/recipe.toml"});
  auto api = "http://127.0.0.1:" + std::to_string(port()) + "/api/notes";
  chromium browser;
  browser.navigate("http://localhost:" + std::to_string(port()) + "/");  // another origin than 127.0.0.1
  browser.wait_for("document.readyState === 'complete'", 15s, "the page loaded");
  // A JSON POST needs a preflight (its Content-Type is not a simple one).
  auto allowed = browser.evaluate("(async () => { const r = await fetch('" + api +
                                  "', {method: 'POST', headers: {'Content-Type': 'application/json'},"
                                  " body: JSON.stringify({text: 'from another origin'})});"
                                  " const j = await r.json(); return r.status + ':' + j.notes.length; })()");
  EXPECT_EQ(allowed.get<std::string>(), "200:1");
  // A header the entry does not list: the preflight is refused, the request never sent.
  auto blocked = browser.evaluate("(async () => { try { await fetch('" + api +
                                  "', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Secret': '1'},"
                                  " body: '{}'}); return 'read'; } catch (e) { return 'blocked'; } })()");
  EXPECT_EQ(blocked.get<std::string>(), "blocked");
  std::filesystem::remove_all(dir);
}

TEST_F(HttpSurfaceInChromium, RedirectsAndCookiesAreWhatABrowserFollowsAndKeeps) {
  ASSERT_TRUE(chromium::available()) << "/usr/bin/chromium is missing: scripts/test.sh installs Debian's chromium";
  start({"--config", std::string(TROUPE_SOURCE_DIR) + "/samples/notes/notes.toml"});
  auto base = "http://127.0.0.1:" + std::to_string(port());
  chromium browser;
  // GET /api/go?to=… answers 302: the browser lands on the page it names.
  browser.navigate(base + "/api/go?to=%2Fstatic%2Findex.html");
  browser.wait_for("location.pathname === '/static/index.html' && document.title === 'troupe notes'", 15s,
                   "the redirect followed to the sample's page");
  // POST /api/prefs sets theme=dark (scripts see it); troupe_cid is HttpOnly (they do not).
  auto set = browser.evaluate("(async () => { const r = await fetch('/api/prefs', {method: 'POST',"
                              " headers: {'Content-Type': 'application/json'}, body: JSON.stringify({theme: 'dark'})});"
                              " return r.status + ':' + r.headers.get('Cache-Control'); })()");
  EXPECT_EQ(set.get<std::string>(), "200:no-store");
  auto cookies = browser.evaluate("document.cookie").get<std::string>();
  EXPECT_NE(cookies.find("theme=dark"), std::string::npos) << cookies;
  EXPECT_EQ(cookies.find("troupe_cid"), std::string::npos) << "the platform's cookie is HttpOnly: " << cookies;
  // The browser sends both back: the same connection (its user) on the next call.
  auto first = browser.evaluate("fetch('/api/whoami').then(r => r.json()).then(j => j.user)").get<std::string>();
  auto again = browser.evaluate("fetch('/api/whoami').then(r => r.json()).then(j => j.user)").get<std::string>();
  EXPECT_EQ(first, again);
  EXPECT_EQ(first.rfind("guest_", 0), 0u) << first;
}

}  // namespace http_surface_e2e_test_file
