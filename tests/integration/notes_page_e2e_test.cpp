// The notes sample's page (GET /) end to end in Debian's headless Chromium: it opens
// its channel, shows the user's counter live — changed over the channel and over
// HTTP, it arrives as a push — and after an operator froze the user the page keeps
// its channel (issue 23: the binding survives the freeze and the wake): its next
// call is served on it, and a change made over HTTP after another freeze is pushed
// to it, without a reopen and with nothing lost.
// A screenshot is saved (build/artifacts/notes.png).
#include "../support/cdp_client.hpp"
#include "../support/test_support.hpp"

#include <filesystem>

namespace notes_page_e2e_test_file {

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

const std::string token = "notes-e2e-" + random_token(12);

std::string value_js(const std::string& testid) {
  return "document.querySelector('[data-testid=\"" + testid + "\"]')?.dataset.value";
}

}  // namespace

class NotesPageInChromium : public node_test {};

TEST_F(NotesPageInChromium, ShowsALiveCounterOverItsChannelThroughFreezesAndWakes) {
  ASSERT_TRUE(chromium::available()) << "/usr/bin/chromium is missing: scripts/test.sh installs Debian's chromium";
  start({"--admin-token", token, "--config", std::string(TROUPE_SOURCE_DIR) + "/samples/notes/notes.toml"});
  chromium browser;
  browser.navigate("http://127.0.0.1:" + std::to_string(port()) + "/");
  browser.wait_for(value_js("channel") + " === 'open' && " + value_js("counter") + " === '0'", 15s,
                   "the channel open and the counter shown");
  auto user = browser.wait_for(value_js("user"), 5s, "the page's user").get<std::string>();
  ASSERT_EQ(user.rfind("guest_", 0), 0u) << user;

  browser.click("[data-testid=\"incr\"]");  // a channel call; its change is pushed back
  browser.wait_for(value_js("counter") + " === '1' && " + value_js("pushes") + " === '1'", 10s,
                   "the counter pushed after +1 over the channel");
  browser.click("[data-testid=\"incr-http\"]");  // over HTTP: only the push shows it
  browser.wait_for(value_js("counter") + " === '2' && " + value_js("pushes") + " === '2'", 10s,
                   "the counter pushed after +1 over HTTP");

  // An operator freezes him: his page keeps its channel, and its binding comes
  // back with him. The page's next call wakes him and is served on it.
  http_client api(port());
  auto freeze = [&] {
    auto frozen = api.post("/_troupe/users/" + user + "/freeze", "", {{"Authorization", "Bearer " + token}});
    ASSERT_STATUS(frozen, 200);
    ASSERT_TRUE(eventually([&] {
      auto c = api.get("/_troupe/census?prefix=" + user, {{"Authorization", "Bearer " + token}}).json();
      return !c["actors"].empty() && c["actors"][0]["state"] == "frozen";
    }, 10s)) << "the user was not frozen";
  };
  freeze();
  browser.click("[data-testid=\"incr\"]");
  browser.wait_for(value_js("channel") + " === 'open' && " + value_js("counter") + " === '3' && " +
                     value_js("pushes") + " === '3'",
                   10s, "the woken user's counter, on the same channel");
  // Frozen again, woken by a change over HTTP this time: its push reaches the page.
  freeze();
  browser.click("[data-testid=\"incr-http\"]");
  browser.wait_for(value_js("counter") + " === '4' && " + value_js("pushes") + " === '4'", 10s,
                   "the push of the user woken over HTTP");
  auto log = browser.evaluate("document.getElementById('log').textContent").get<std::string>();
  EXPECT_EQ(log.find("reopening"), std::string::npos) << "the page had to reopen its channel: " << log;

  std::filesystem::create_directories(TROUPE_ARTIFACTS_DIR);
  auto shot = std::string(TROUPE_ARTIFACTS_DIR) + "/notes.png";
  browser.screenshot_png(shot);
  EXPECT_GT(std::filesystem::file_size(shot), 5000u);
  EXPECT_TRUE(browser.console_errors().empty()) << browser.console_errors().front();
}

}  // namespace notes_page_e2e_test_file
