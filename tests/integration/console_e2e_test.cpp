// The console end to end, in Debian's headless Chromium (installed by the test command):
// a node with 1,000 users; the counts the page shows match GET /_troupe/census; an
// operator finds a user, opens him, freezes him from the page (with confirmation) and
// sees him frozen, live. A screenshot is saved (build/artifacts/console.png; the README
// shows a copy of it, docs/console.png).
#include "../support/cdp_client.hpp"
#include "../support/test_support.hpp"

#include <filesystem>

namespace console_e2e_test_file {

using namespace troupe::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string token = "console-e2e-" + random_token(12);
const headers_t auth{{"Authorization", "Bearer " + token}};

std::string testid_value(chromium& browser, const std::string& testid) {
  return browser.evaluate("document.querySelector('[data-testid=\"" + testid + "\"]')?.dataset.value ?? null")
    .dump();
}

}  // namespace

class ConsoleInChromium : public node_test {};

TEST_F(ConsoleInChromium, ShowsTheCensusAndFreezesAUserFromThePage) {
  ASSERT_TRUE(chromium::available()) << "/usr/bin/chromium is missing: scripts/test.sh installs Debian's chromium";
  // Guests who only read retire after guest_idle_seconds: these must stay to be shown.
  start({"--admin-token", token, "--set", "group.default.workers=2", "--set", "group.default.guest_idle_seconds=600"});
  // 1,000 users: 999 guests and alice.
  {
    http_client alice(port());
    ASSERT_STATUS(alice.post_json("/api/login", {{"user", "alice"}}), 200);
    for (int i = 0; i < 3; ++i)
      ASSERT_STATUS(alice.post("/api/counter/incr"), 200);
    for (int i = 0; i < 999; ++i) {
      http_client guest(port());
      ASSERT_STATUS(guest.get("/api/counter"), 200);
    }
  }
  http_client api(port());
  auto census = api.get("/_troupe/census?limit=1", auth).json();
  ASSERT_EQ(census["totals"]["users"]["all"], 1000) << census.dump();

  chromium browser;
  auto base = "http://127.0.0.1:" + std::to_string(port());
  browser.navigate(base + "/_troupe/console#token=" + token);
  browser.wait_for("document.querySelector('[data-testid=\"live-status\"]')?.dataset.value === 'live' && "
                   "document.querySelector('[data-testid=\"total-users\"]')?.dataset.value === '1000'",
                   15s, "the console to go live with 1,000 users");
  // The token left the address bar.
  EXPECT_EQ(browser.evaluate("location.hash").get<std::string>(), "");

  // The counts shown are the census's.
  auto& totals = census["totals"];
  EXPECT_EQ(testid_value(browser, "total-users"), "\"" + totals["users"]["all"].dump() + "\"");
  EXPECT_EQ(testid_value(browser, "total-active"), "\"" + totals["users"]["active"].dump() + "\"");
  EXPECT_EQ(testid_value(browser, "total-frozen"), "\"" + totals["users"]["frozen"].dump() + "\"");
  EXPECT_EQ(testid_value(browser, "total-connections"), "\"" + totals["connections"].dump() + "\"");
  EXPECT_EQ(testid_value(browser, "total-workers"), "\"2\"");
  EXPECT_EQ(testid_value(browser, "health-status"), "\"ok\"");
  // A virtualised list: 1,000 users, a screenful of rows in the page.
  auto rows = browser.evaluate("document.querySelectorAll('[data-testid=\"user-row\"]').length").get<int>();
  EXPECT_GT(rows, 5);
  EXPECT_LT(rows, 200);

  // Guests apart from named users: counted apart, each row marked.
  EXPECT_EQ(testid_value(browser, "total-guests"), "\"999\"");
  EXPECT_EQ(testid_value(browser, "total-named"), "\"1\"");
  EXPECT_EQ(browser.evaluate("document.querySelector('[data-testid=\"user-row\"][data-id=\"user:alice\"]')?.dataset.guest")
              .get<std::string>(), "0");
  EXPECT_TRUE(browser.evaluate("[...document.querySelectorAll('[data-testid=\"user-row\"]')]"
                               ".filter(r => r.dataset.id !== 'user:alice').every(r => r.dataset.guest === '1')")
                .get<bool>());
  // The service time is labelled: in total and per request.
  auto headers = browser.evaluate("document.getElementById('cols').textContent").get<std::string>();
  EXPECT_NE(headers.find("service total"), std::string::npos) << headers;
  EXPECT_NE(headers.find("per req"), std::string::npos) << headers;

  // A click on a header sorts by it; another reverses. The first row shown (by position):
  const std::string first_row =
    "[...document.querySelectorAll('[data-testid=\"user-row\"]')].sort((a, b) => a.dataset.index - b.dataset.index)[0]"
    "?.dataset.id";
  browser.wait_for(first_row + " === 'user:alice'", 10s, "alice first by name");
  browser.click("#cols [data-sort=\"name\"]");
  browser.wait_for(first_row + " !== 'user:alice' && document.querySelector('#cols [data-sort=\"name\"]')"
                   ".getAttribute('aria-sort') === 'descending'",
                   5s, "the name order reversed");
  // alice handled a login and 3 increments, each guest one read: she leads by messages handled.
  browser.click("#cols [data-sort=\"handled\"]");
  browser.wait_for(first_row + " === 'user:alice' && document.querySelector('#cols [data-sort=\"handled\"]')"
                   ".getAttribute('aria-sort') === 'descending'",
                   5s, "alice first by messages handled");
  browser.click("#cols [data-sort=\"handled\"]");
  browser.wait_for(first_row + " !== 'user:alice'", 5s, "the fewest handled first");
  browser.click("#cols [data-sort=\"name\"]");
  browser.wait_for(first_row + " === 'user:alice'", 5s, "back to the name order");

  // The rates over time: the node's history, drawn after the traffic above.
  try {
    browser.wait_for("Number(document.querySelector('[data-testid=\"chart-requests\"]')?.dataset.points) >= 2 && "
                     "Number(document.querySelector('[data-testid=\"chart-requests\"]')?.dataset.max) > 0 && "
                     "document.querySelector('[data-testid=\"chart-requests\"] polyline').getAttribute('points').split(' ').length >= 2",
                     10s, "the requests/s chart to have points");
  } catch (const std::exception& e) {
    // What the page held: the samples it drew from, the patches it applied, whether it is live.
    FAIL() << e.what() << "\nthe console: "
           << browser.evaluate("JSON.stringify({seq: troupeConsole.seq, samples: troupeConsole.history.length, "
                               "last: troupeConsole.history.slice(-3), rates: troupeConsole.snapshot?.rates, "
                               "live: document.querySelector('[data-testid=\"live-status\"]')?.dataset.value})")
                .dump()
           << "\nthe node's history: " << [&] {
                auto samples = api.get("/_troupe/history", auth).json()["samples"];
                return std::to_string(samples.size()) + " samples, the last " +
                       (samples.empty() ? std::string("none") : samples.back().dump());
              }();
  }
  // The chart grows while the page is open: each second's sample comes with the snapshot's patch
  // (kept as a copy, since the next patch changes the snapshot's rates in place).
  {
    const std::string points = "Number(document.querySelector('[data-testid=\"chart-requests\"]').dataset.points)";
    auto drawn = browser.evaluate(points).get<int>();
    browser.wait_for(points + " > " + std::to_string(drawn), 10s, "the requests/s chart to grow by a live sample");
  }
  for (const char* chart : {"chart-errors", "chart-wakes", "chart-freezes", "chart-p50", "chart-p99"})
    EXPECT_EQ(browser.evaluate(std::string("!!document.querySelector('[data-testid=\"") + chart + "\"]')").get<bool>(), true)
      << chart;
  EXPECT_TRUE(browser.evaluate("Number(document.querySelector('[data-testid=\"chart-p50\"]').dataset.points) >= 1").get<bool>());
  // Per-route figures: the 999 guests' reads and alice's increments.
  browser.wait_for("Number(document.querySelector('[data-testid=\"route-row\"][data-route=\"GET /api/counter\"]')"
                   "?.dataset.requests) >= 999 && "
                   "Number(document.querySelector('[data-testid=\"route-row\"][data-route=\"POST /api/counter/incr\"]')"
                   "?.dataset.requests) === 3",
                   10s, "the per-route figures");

  // Search, open, freeze with confirmation, see him frozen.
  browser.type("#filter-prefix", "alice");
  browser.wait_for("(() => { const r = document.querySelectorAll('[data-testid=\"user-row\"]');"
                   " return r.length === 1 && r[0].dataset.id === 'user:alice'; })()",
                   10s, "the search to find alice alone");
  browser.click("[data-testid=\"user-row\"][data-id=\"user:alice\"]");
  browser.wait_for("document.querySelector('[data-testid=\"detail-state\"]')?.dataset.value === 'active' && "
                   "document.querySelector('[data-testid=\"detail-store\"]')?.textContent.includes('\"count\": 3')",
                   10s, "alice's detail with her store");
  browser.click("[data-testid=\"action-freeze\"]");
  browser.wait_for("!!document.querySelector('[data-testid=\"confirm-yes\"]')?.offsetParent", 5s,
                   "the confirmation");
  browser.click("[data-testid=\"confirm-yes\"]");
  browser.wait_for("document.querySelector('[data-testid=\"detail-state\"]')?.dataset.value === 'frozen' && "
                   "document.querySelector('[data-testid=\"user-state\"]')?.dataset.value === 'frozen'",
                   10s, "alice frozen in the detail panel and the list");
  browser.wait_for("document.querySelector('[data-testid=\"total-frozen\"]')?.dataset.value === '1' && "
                   "document.querySelector('[data-testid=\"total-active\"]')?.dataset.value === '999'",
                   10s, "the totals to count her frozen (and the browser itself as nobody)");
  browser.wait_for("[...document.querySelectorAll('[data-testid=\"log-line\"]')].some(l => "
                   "l.textContent.includes('freeze') && l.textContent.includes('user:alice'))",
                   10s, "the freeze in the log's tail");
  // Timestamps in ISO form, UTC with its zone.
  EXPECT_TRUE(browser.evaluate("[...document.querySelectorAll('[data-testid=\"log-time\"]')].every(t => "
                               "/^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$/.test(t.textContent))")
                .get<bool>())
    << browser.evaluate("[...document.querySelectorAll('[data-testid=\"log-time\"]')].map(t => t.textContent)").dump();

  // The node agrees, and logged who did it.
  auto frozen = api.get("/_troupe/census?state=frozen", auth).json();
  ASSERT_EQ(frozen["actors"].size(), 1u);
  EXPECT_EQ(frozen["actors"][0]["id"], "user:alice");
  auto lines = api.get("/_troupe/orchestration/log", auth).json()["lines"];
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["what"], "freeze");
  EXPECT_EQ(lines.back()["who"], "console");

  // The settings in force: generation 1 from the start, then an apply shows
  // its generation and profile in the header and its line in the log.
  EXPECT_EQ(testid_value(browser, "settings-generation"), "\"1\"");
  headers_t json_auth = auth;
  json_auth.push_back({"Content-Type", "application/json"});
  ASSERT_STATUS(api.post("/_troupe/orchestration/apply", R"({"group":{"default":{"user_idle_freeze_minutes":60}}})",
                         json_auth),
                200);
  browser.wait_for("document.querySelector('[data-testid=\"settings-generation\"]')?.dataset.value === '2' && "
                   "[...document.querySelectorAll('[data-testid=\"log-line\"]')].some(l => "
                   "l.textContent.includes('apply'))",
                   10s, "the header to show generation 2 and the log its apply");

  // The picture for the README: the whole list, alice's detail open.
  browser.type("#filter-prefix", "");
  browser.wait_for("document.querySelectorAll('[data-testid=\"user-row\"]').length > 5", 10s, "the full list");
  std::filesystem::create_directories(TROUPE_ARTIFACTS_DIR);
  auto shot = std::string(TROUPE_ARTIFACTS_DIR) + "/console.png";
  browser.screenshot_png(shot);
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  EXPECT_TRUE(browser.console_errors().empty()) << browser.console_errors().front();
}

// Issue 23 (c): names in natural order, digit runs as numbers (user2 before
// user10), in the user list both ways, the tree's workers and the worker filter.
TEST_F(ConsoleInChromium, NamesAreInNaturalOrder) {
  ASSERT_TRUE(chromium::available()) << "/usr/bin/chromium is missing: scripts/test.sh installs Debian's chromium";
  start({"--admin-token", token, "--set", "group.default.workers=11"});
  for (const char* name : {"user10", "user2", "user1"}) {
    http_client c(port());
    ASSERT_STATUS(c.post_json("/api/login", {{"user", name}}), 200);
  }
  chromium browser;
  browser.navigate("http://127.0.0.1:" + std::to_string(port()) + "/_troupe/console#token=" + token);
  browser.wait_for("document.querySelector('[data-testid=\"live-status\"]')?.dataset.value === 'live' && "
                   "document.querySelector('[data-testid=\"total-users\"]')?.dataset.value === '3' && "
                   "document.querySelectorAll('[data-testid=\"tree-item\"][data-worker]').length === 11",
                   15s, "the console to go live with 3 users and 11 workers");
  const std::string rows_in_order =
    "[...document.querySelectorAll('[data-testid=\"user-row\"]')].sort((a, b) => a.dataset.index - b.dataset.index)"
    ".map(r => r.dataset.id).join(' ')";
  browser.wait_for(rows_in_order + " === 'user:user1 user:user2 user:user10'", 5s, "the users in natural order");
  browser.click("#cols [data-sort=\"name\"]");
  browser.wait_for(rows_in_order + " === 'user:user10 user:user2 user:user1'", 5s, "the users in reverse natural order");
  auto workers = browser.evaluate("[...document.querySelectorAll('[data-testid=\"tree-item\"][data-worker]')]"
                                  ".map(e => e.dataset.worker).join(' ')").get<std::string>();
  EXPECT_NE(workers.find("-w2 default-w3"), std::string::npos) << workers;
  EXPECT_NE(workers.find("-w9 default-w10 default-w11"), std::string::npos) << workers;
  auto options = browser.evaluate("[...document.querySelectorAll('#filter-worker option')].map(o => o.value).join(' ')")
                   .get<std::string>();
  EXPECT_NE(options.find("-w9 default-w10 default-w11"), std::string::npos) << options;
  EXPECT_TRUE(browser.console_errors().empty()) << browser.console_errors().front();
}

}  // namespace console_e2e_test_file
