// Shared GoogleTest helpers for the integration tests: fixtures owning a node process
// (printing its stderr when a test fails) and small assertions on responses.
#pragma once

#include <gtest/gtest.h>

#include <sys/mount.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "http_client.hpp"
#include "background_load.hpp"
#include "eventually.hpp"
#include "node_process.hpp"
#include "process_status.hpp"
#include "prometheus.hpp"

namespace troupe::test {

#define ASSERT_STATUS(resp, code) ASSERT_EQ((resp).status, (code)) << (resp).describe()
#define EXPECT_STATUS(resp, code) EXPECT_EQ((resp).status, (code)) << (resp).describe()

inline void print_node_diagnostics(node_process& n) {
  std::cerr << "\n==== troupe node diagnostics (test failed) ====\n"
            << n.diagnostics() << std::endl;
}

// One node per test; start it with start({...}).
class node_test : public ::testing::Test {
protected:
  node_process& start(std::vector<std::string> args = {}) {
    node_ = std::make_unique<node_process>(std::move(args));
    return *node_;
  }
  // Starts a node on `dir`, a deposit the test owns (restart scenarios). The earlier
  // node is kept (its temp dir too) until the test ends, for its diagnostics.
  node_process& start_on(const std::string& dir, std::vector<std::string> args = {}) {
    if (node_)
      previous_.push_back(std::move(node_));
    args.push_back("--deposit");
    args.push_back(dir);
    node_options o;
    o.with_deposit = false;
    node_ = std::make_unique<node_process>(std::move(args), o);
    return *node_;
  }
  node_process& node() { return *node_; }
  uint16_t port() const { return node_->port(); }
  void TearDown() override {
    if (!HasFailure())
      return;
    for (auto& n : previous_)
      print_node_diagnostics(*n);
    if (node_)
      print_node_diagnostics(*node_);
  }
  std::unique_ptr<node_process> node_;
  std::vector<std::unique_ptr<node_process>> previous_;
};

// One node shared by every test of a suite (default configuration unless the suite
// overrides args()). A start failure fails every test of the suite with its reason.
template <class Derived>
class shared_node_test : public ::testing::Test {
protected:
  static std::vector<std::string> args() { return {}; }
  static void TearDownTestSuite() {
    node_.reset();
    start_error_.clear();
  }
  void SetUp() override {
    if (!node_ && start_error_.empty()) {
      try {
        node_ = std::make_unique<node_process>(Derived::args());
      } catch (const std::exception& e) {
        start_error_ = e.what();
      }
    }
    ASSERT_TRUE(node_) << start_error_;
  }
  void TearDown() override {
    if (node_ && HasFailure())
      print_node_diagnostics(*node_);
  }
  static node_process& node() { return *node_; }
  static uint16_t port() { return node_->port(); }
  static inline std::unique_ptr<node_process> node_;
  static inline std::string start_error_;
};

// A directory for nodes started one after the other on the same deposit
// (restart scenarios); removed at the end unless TROUPE_TEST_KEEP_DIRS is set.
struct scratch_dir {
  explicit scratch_dir(const std::string& prefix = "troupe-it-") : path(make_temp_dir(prefix)) {}
  ~scratch_dir() {
    std::error_code ec;
    if (!std::getenv("TROUPE_TEST_KEEP_DIRS"))
      std::filesystem::remove_all(path, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  std::string path;
};

// A small tmpfs mounted at `at` (created if missing), unmounted at the end: a
// deposit that fills up for real. Needs mount(2) (root); mounted() says whether
// it worked, why() why not.
struct small_tmpfs {
  explicit small_tmpfs(std::string at, const std::string& size = "1m") : path(std::move(at)) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0)
      ok = true;
    else
      error = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
  }
  ~small_tmpfs() {
    if (ok)
      ::umount2(path.c_str(), MNT_DETACH);
  }
  small_tmpfs(const small_tmpfs&) = delete;
  small_tmpfs& operator=(const small_tmpfs&) = delete;
  bool mounted() const { return ok; }
  const std::string& why() const { return error; }
  // Writes 64 KiB blocks into `file` under it until it is full (or 4 MiB).
  void fill(const std::string& file = "filler") const {
    std::ofstream out(path + "/" + file, std::ios::binary);
    std::string block(64 * 1024, 'x');
    for (int i = 0; i < 64 && out; ++i)
      out.write(block.data(), static_cast<std::streamsize>(block.size())), out.flush();
  }
  std::string path;

private:
  bool ok = false;
  std::string error;
};

// Runs `command` with sh; returns its exit code (-1 when it did not exit
// normally) and its stdout.
inline std::pair<int, std::string> run_command(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p))
    out += buf;
  int status = p ? ::pclose(p) : -1;
  return {status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Every path under `dir`, one a line, for failure messages.
inline std::string listing(const std::filesystem::path& dir) {
  std::string s;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    s += "  " + it->path().string() + "\n";
  return s.empty() ? "  (empty)\n" : s;
}

inline bool is_url_safe_b64(const std::string& s) {
  static const std::regex re("^[A-Za-z0-9_-]+$");
  return std::regex_match(s, re);
}

// An error reply: `status`, a JSON object body with a string "error".
inline ::testing::AssertionResult is_json_error(const response& r, int status) {
  if (r.status != status)
    return ::testing::AssertionFailure() << "expected HTTP " << status << ", got "
                                         << r.describe();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.body);
  } catch (const std::exception&) {
    return ::testing::AssertionFailure() << "error body is not JSON: " << r.describe();
  }
  if (!j.is_object() || !j.contains("error"))
    return ::testing::AssertionFailure() << "error body has no \"error\": " << r.describe();
  if (!j["error"].is_string() || j["error"].get<std::string>().empty())
    return ::testing::AssertionFailure()
           << "\"error\" is not a non-empty string: " << r.describe();
  return ::testing::AssertionSuccess();
}

// {"count": n} of a 200 reply, or -1 (with a failure recorded) otherwise.
inline long long count_of(const response& r) {
  if (r.status != 200) {
    ADD_FAILURE() << "expected a 200 {\"count\":n}, got " << r.describe();
    return -1;
  }
  try {
    auto j = r.json();
    return j.at("count").get<long long>();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "no integer \"count\": " << e.what() << "\n" << r.describe();
    return -1;
  }
}

// The texts of a {"notes":[...]} reply; a note is either a string or an object with
// a "text" member.
inline std::vector<std::string> note_texts(const response& r) {
  std::vector<std::string> out;
  try {
    auto j = r.json();
    for (const auto& n : j.at("notes")) {
      if (n.is_string())
        out.push_back(n.get<std::string>());
      else if (n.is_object() && n.contains("text") && n["text"].is_string())
        out.push_back(n["text"].get<std::string>());
      else
        ADD_FAILURE() << "unexpected note shape " << n.dump() << " in " << r.describe();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "no \"notes\" array: " << e.what() << "\n" << r.describe();
  }
  return out;
}

inline long long ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

// The node's /_troupe/metrics text (`auth`: the admin token's header); a non-200 is a failure.
inline std::string metrics_text(uint16_t port, const headers_t& auth) {
  http_client c(port);
  auto r = c.get("/_troupe/metrics", auth);
  if (r.status != 200)
    ADD_FAILURE() << "GET /_troupe/metrics: " << r.describe();
  return r.body;
}

// One sample of the node's metrics; a missing sample is a failure (and reads as -1).
inline double metric(uint16_t port, const headers_t& auth, const std::string& name, const std::string& labels = "") {
  auto text = metrics_text(port, auth);
  auto v = prometheus_sample(text, name, labels);
  if (!v) {
    ADD_FAILURE() << "no sample " << name << (labels.empty() ? "" : "{" + labels + "}") << " in the metrics:\n"
                  << text;
    return -1;
  }
  return *v;
}

// A node with an admin token of its own (metrics, census, operators' orders),
// and the calls the tests of an app's surface share.
class admin_node_test : public node_test {
protected:
  node_process& start_with(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--admin-token", token};
    args.insert(args.end(), extra.begin(), extra.end());
    return start(args);
  }
  static void login(http_client& c, const std::string& user) {
    ASSERT_STATUS(c.post_json("/api/login", {{"user", user}}), 200);
  }
  // The node's metric `name`{labels}.
  double m(const std::string& name, const std::string& labels = "") { return metric(port(), auth, name, labels); }

  const std::string token = "admin-" + random_token(16);
  const headers_t auth{{"Authorization", "Bearer " + token}};
};

}  // namespace troupe::test
