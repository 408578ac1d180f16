// cdp_client: a blocking Chrome DevTools Protocol client driving one headless Chromium,
// for the end-to-end tests of the web console.
//
//   if (!troupe::test::chromium::available()) GTEST_SKIP() << "no chromium";
//   troupe::test::chromium browser;
//   browser.navigate("http://127.0.0.1:" + std::to_string(node.port()) + "/");
//   browser.wait_for("document.querySelector('#status')?.textContent === 'ready'",
//                    std::chrono::seconds(10), "the console to be ready");
//   browser.click("#refresh");
//   browser.screenshot_png(dir + "/console.png");
//   EXPECT_TRUE(browser.console_errors().empty());
//
// The constructor starts `<binary> --headless --remote-debugging-port=0 ...` with a fresh
// --user-data-dir, in its own process group, with SIGKILL as its parent-death signal
// (note: Linux sends it when the *thread* that created the object exits, so create it on
// the thread that runs the test). Chromium's stdout/stderr go to one pipe, read until the
// line `DevTools listening on ws://...` and then drained by a thread into a bounded tail.
// The client connects to that browser WebSocket, creates a page (Target.createTarget) and
// attaches to it in flatten mode: page commands carry the session id.
//
// Every operation has a deadline. The client is single-threaded: the WebSocket is driven
// by the caller's thread, on the client's own io_context, with one read always pending
// (responses matched by id, events buffered), so a command that times out leaves the
// connection usable (its late response is dropped). Use one object from one thread.
//
// The destructor sends Browser.close, SIGKILLs the process group if chromium has not
// exited within 3 s (and any member still alive after that), reaps it and removes the
// user-data-dir (kept when TROUPE_TEST_KEEP_DIRS is set).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::test {

struct chromium_options {
  std::string binary = "/usr/bin/chromium";
  int width = 1400, height = 900;
  std::chrono::milliseconds start_timeout{30000};  // launch + connect + page setup
  std::vector<std::string> extra_args;             // appended to the default flags
};

// A JavaScript exception raised by evaluated code (what(): the exception text).
class js_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The browser answered a command with a protocol error (what(): method and message).
class cdp_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// One headless browser process and one page (tab) attached in flatten mode.
class chromium {
public:
  // Launches, connects and creates the page; throws std::runtime_error with the
  // command line and chromium's stderr tail on failure.
  explicit chromium(chromium_options opts = {});
  ~chromium();
  chromium(const chromium&) = delete;
  chromium& operator=(const chromium&) = delete;
  chromium(chromium&&) noexcept;             // a moved-from object can only be destroyed
  chromium& operator=(chromium&&) noexcept;

  // The binary exists and is executable.
  static bool available(const chromium_options& opts = {});

  // Page.navigate, then waits for the load event of that navigation. Throws on a
  // navigation error (net::ERR_...) or timeout. A same-document navigation returns at once.
  void navigate(const std::string& url,
                std::chrono::milliseconds timeout = std::chrono::seconds(15));

  // Runtime.evaluate with awaitPromise and returnByValue: the value (null for undefined;
  // "NaN", "Infinity", "-0", "1n"... as strings). Throws js_error with the exception
  // text when the script throws (or its promise rejects), cdp_error on a protocol error.
  nlohmann::json evaluate(const std::string& js,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Evaluates the expression `js` every 100 ms until its value is truthy (JS rules:
  // not null/false/0/""/"NaN") and returns it. A JS exception counts as not yet (e.g. the
  // element is not rendered yet). On timeout throws std::runtime_error naming `what`
  // and the last value or exception.
  nlohmann::json wait_for(const std::string& js, std::chrono::milliseconds timeout,
                          const std::string& what);

  // scrollIntoView + el.click(). Throws if no element matches or the element is disabled.
  void click(const std::string& css_selector,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Focuses the element, sets its value (through the prototype's setter, so frameworks
  // see it; textContent for contenteditable) and dispatches `input` and `change`.
  // Throws if no element matches or it has no value.
  void type(const std::string& css_selector, const std::string& text,
            std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Page.captureScreenshot (PNG, the viewport: width x height), written to `path`
  // (parent directories created).
  void screenshot_png(const std::string& path,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Uncaught exceptions / unhandled rejections (Runtime.exceptionThrown) and
  // console.error / console.assert messages (Runtime.consoleAPICalled) seen so far.
  std::vector<std::string> console_errors() const;

  // A raw command on the page session (e.g. "Input.dispatchMouseEvent"): its result.
  nlohmann::json send(const std::string& method,
                      const nlohmann::json& params = nlohmann::json::object(),
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The last (at most 1000) protocol events received: {"method", "params"[, "sessionId"]}.
  std::vector<nlohmann::json> events() const;

  pid_t pid() const;                          // the browser process (and process group)
  const std::string& user_data_dir() const;
  const std::string& websocket_url() const;   // ws://127.0.0.1:PORT/devtools/browser/ID
  std::string stderr_tail(size_t max_bytes = 8192) const;

private:
  void dom_action(const std::string& what, const std::string& js, std::chrono::milliseconds timeout);
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace troupe::test
