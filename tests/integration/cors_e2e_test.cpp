// CORS in Debian's headless Chromium (issue 25): a page of another origin
// (http://localhost:PORT calling http://127.0.0.1:PORT) gets its preflight
// answered by the front and reads the answer; a request the [[cors]] entry does
// not allow is blocked by the browser at its preflight.
#include "../support/cdp_client.hpp"
#include "../support/test_support.hpp"

#include <filesystem>
#include <fstream>

namespace cors_e2e_test_file {

using namespace troupe::test;
using namespace std::chrono_literals;

class CorsInChromium : public node_test {};

TEST_F(CorsInChromium, APageOfAnotherOriginPassesItsPreflightOrIsBlocked) {
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

}  // namespace cors_e2e_test_file
