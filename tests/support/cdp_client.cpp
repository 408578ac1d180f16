#include "cdp_client.hpp"
#include "chromium_process.hpp"
#include "eventually.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace troupe::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr size_t max_events = 1000;
constexpr size_t max_message = 64u << 20;      // screenshots are several MB of base64

std::string shorten(const std::string& s, size_t n) {
  return s.size() > n ? s.substr(0, n) + "[...]" : s;
}

// A JSON string literal usable in JavaScript source.
std::string js_string(const std::string& s) {
  return json(s).dump(-1, ' ', true, json::error_handler_t::replace);
}

std::string ms_text(milliseconds d) { return std::to_string(d.count()) + " ms"; }

milliseconds left_until(clock_type::time_point deadline) {
  auto d = std::chrono::duration_cast<milliseconds>(deadline - clock_type::now());
  return d.count() > 0 ? d : milliseconds(0);
}

std::vector<unsigned char> base64_decode(const std::string& in) {
  static const auto table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i)
      t[static_cast<unsigned char>(a[i])] = i;
    return t;
  }();
  std::vector<unsigned char> out;
  out.reserve(in.size() / 4 * 3);
  unsigned acc = 0;
  int bits = 0;
  for (char ch : in) {
    if (ch == '=')
      break;
    int v = table[static_cast<unsigned char>(ch)];
    if (v < 0) {
      if (std::isspace(static_cast<unsigned char>(ch)))
        continue;
      throw std::runtime_error("base64: invalid character");
    }
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<unsigned char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// The text of a Runtime.ExceptionDetails.
std::string describe_exception(const json& d) {
  std::string text = d.value("text", std::string());
  if (d.contains("exception")) {
    const json& ex = d["exception"];
    if (ex.contains("description") && ex["description"].is_string())
      return ex["description"].get<std::string>();
    if (ex.contains("value"))
      return text + " " + ex["value"].dump();
  }
  std::string where;
  if (d.contains("url") && d["url"].is_string() && !d["url"].get<std::string>().empty())
    where = " at " + d["url"].get<std::string>() + ":" +
            std::to_string(d.value("lineNumber", 0) + 1);
  return text + where;
}

// The text of one console API argument (a Runtime.RemoteObject).
std::string describe_remote(const json& o) {
  if (o.contains("value"))
    return o["value"].is_string() ? o["value"].get<std::string>() : o["value"].dump();
  if (o.contains("unserializableValue"))
    return o["unserializableValue"].get<std::string>();
  if (o.contains("description"))
    return o["description"].get<std::string>();
  return o.value("type", std::string("?"));
}

bool truthy(const json& v) {
  if (v.is_null())
    return false;
  if (v.is_boolean())
    return v.get<bool>();
  if (v.is_number())
    return v.get<double>() != 0.0;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return !s.empty() && s != "NaN" && s != "-0" && s != "0n";
  }
  return true;  // objects and arrays
}

}  // namespace

// ---------------------------------------------------------------------------------

struct chromium::impl {
  chromium_options opts;

  // The browser's process (declared first: destroyed after the connection;
  // shutdown() ends both in order).
  std::optional<chromium_process> process;

  // The connection (ioc declared first: destroyed last).
  asio::io_context ioc;
  std::optional<websocket::stream<tcp::socket>> ws;
  beast::flat_buffer rbuf;
  std::string ws_url;
  bool reading = false;
  bool broken = false;
  std::string broken_why;

  // Protocol state.
  int64_t next_id = 1;
  std::set<int64_t> waiting;
  std::map<int64_t, json> responses;
  std::deque<json> events;
  std::vector<std::string> errors;
  std::string target_id, session;
  std::set<std::string> loaded;   // loaderIds whose "load" lifecycle event was seen
  bool crashed = false, detached = false;

  ~impl() { shutdown(); }

  // What went wrong, for an error message: the command line, the process, the connection.
  std::string diagnostics() {
    return process ? process->describe(broken_why) : "---- chromium: not started\n";
  }

  void shutdown() {
    if (ws && !broken && process && !process->exited()) {
      try {
        json msg = {{"id", next_id++}, {"method", "Browser.close"}, {"params", json::object()}};
        write(msg.dump(), clock_type::now() + milliseconds(1000));
      } catch (...) {
      }
    }
    if (process)
      process->stop();
    if (ws) {
      beast::error_code ignored;
      ws->next_layer().close(ignored);
      ws.reset();
    }
    process.reset();  // its drain ended, its directory removed
  }

  // ---- connection -------------------------------------------------------------

  // Runs the io_context until `done()` or the deadline. False when the deadline passed
  // (or there is nothing left to run).
  template <class Pred>
  bool pump_until(clock_type::time_point deadline, Pred done) {
    while (!done()) {
      if (clock_type::now() >= deadline)
        return false;
      if (ioc.stopped())
        ioc.restart();
      if (ioc.run_one_until(deadline) == 0 && ioc.stopped() && !done())
        return false;  // no pending work: nothing can change done()
    }
    return true;
  }

  void poll() {
    if (!ws)
      return;
    if (ioc.stopped())
      ioc.restart();
    ioc.poll();
  }

  void mark_broken(const std::string& why) {
    if (!broken) {
      broken = true;
      broken_why = why;
    }
  }

  // Runs one asynchronous operation on the socket to completion under a deadline; on
  // timeout the socket is closed (the connection is then unusable).
  template <class Initiate>
  beast::error_code run_op(Initiate&& initiate, clock_type::time_point deadline) {
    beast::error_code result;
    bool done = false;
    initiate([&](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    if (!pump_until(deadline, [&] { return done; })) {
      beast::error_code ignored;
      ws->next_layer().cancel(ignored);
      ws->next_layer().close(ignored);
      // The aborted operation completes now; `done` lives on this frame: wait for it.
      while (!done) {
        if (ioc.stopped())
          ioc.restart();
        if (ioc.run_one() == 0 && !done)
          break;
      }
      return beast::error::timeout;
    }
    return result;
  }

  void connect(clock_type::time_point deadline) {
    static const std::regex url_re(R"(^ws://([^/:]+):([0-9]+)(/.*)$)");
    std::smatch m;
    if (!std::regex_match(ws_url, m, url_re))
      throw std::runtime_error("chromium: unexpected DevTools URL '" + ws_url + "'\n" +
                               diagnostics());
    std::string host = m[1], target = m[3];
    auto port = static_cast<uint16_t>(std::stoul(m[2]));
    beast::error_code aec;
    auto addr = asio::ip::make_address(host, aec);
    if (aec)
      addr = asio::ip::make_address("127.0.0.1");

    ws.emplace(ioc);
    ws->read_message_max(max_message);
    auto ec = run_op([&](auto h) { ws->next_layer().async_connect(tcp::endpoint(addr, port), h); },
                     deadline);
    if (ec)
      throw std::runtime_error("chromium: connect " + ws_url + ": " + ec.message() + "\n" +
                               diagnostics());
    beast::error_code ignored;
    ws->next_layer().set_option(tcp::no_delay(true), ignored);
    ws->set_option(websocket::stream_base::decorator([](websocket::request_type& req) {
      req.set(beast::http::field::user_agent, "troupe-tests-cdp");
    }));
    ec = run_op([&](auto h) { ws->async_handshake(host + ":" + std::to_string(port), target, h); },
                deadline);
    if (ec)
      throw std::runtime_error("chromium: WebSocket handshake " + ws_url + ": " + ec.message() +
                               "\n" + diagnostics());
    ws->text(true);
    start_read();
  }

  void start_read() {
    if (reading || broken || !ws)
      return;
    reading = true;
    ws->async_read(rbuf, [this](beast::error_code ec, std::size_t) {
      reading = false;
      if (ec) {
        mark_broken("WebSocket read: " + ec.message());
        return;
      }
      std::string text = beast::buffers_to_string(rbuf.data());
      rbuf.consume(rbuf.size());
      try {
        dispatch(text);
      } catch (const std::exception&) {
        // a malformed message never stops the read loop
      }
      start_read();
    });
  }

  void dispatch(const std::string& text) {
    json msg = json::parse(text, nullptr, false);
    if (msg.is_discarded() || !msg.is_object())
      return;
    if (msg.contains("id") && msg["id"].is_number_integer()) {
      int64_t id = msg["id"].get<int64_t>();
      if (waiting.count(id))
        responses[id] = std::move(msg);
      return;  // otherwise: the late answer of a command that timed out
    }
    if (!msg.contains("method"))
      return;
    const std::string method = msg["method"].get<std::string>();
    const std::string sid = msg.value("sessionId", std::string());
    const json params = msg.value("params", json::object());
    events.push_back(msg);
    if (events.size() > max_events)
      events.pop_front();

    if (method == "Target.detachedFromTarget") {
      if (params.value("sessionId", std::string()) == session)
        detached = true;
      return;
    }
    if (method == "Target.targetCrashed") {
      if (params.value("targetId", std::string()) == target_id)
        crashed = true;
      return;
    }
    if (sid != session || session.empty())
      return;
    if (method == "Page.lifecycleEvent") {
      if (params.value("name", std::string()) == "load")
        loaded.insert(params.value("loaderId", std::string()));
    } else if (method == "Inspector.targetCrashed") {
      crashed = true;
    } else if (method == "Inspector.detached") {
      detached = true;
    } else if (method == "Runtime.exceptionThrown") {
      errors.push_back(describe_exception(params.value("exceptionDetails", json::object())));
    } else if (method == "Runtime.consoleAPICalled") {
      std::string type = params.value("type", std::string());
      if (type == "error" || type == "assert") {
        std::string line = type == "assert" ? "console.assert: " : "";
        bool first = true;
        for (const auto& a : params.value("args", json::array())) {
          if (!first)
            line += ' ';
          first = false;
          line += describe_remote(a);
        }
        errors.push_back(line);
      }
    }
  }

  void write(const std::string& text, clock_type::time_point deadline) {
    if (broken || !ws)
      throw std::runtime_error("connection to chromium lost (" + broken_why + ")");
    auto ec = run_op([&](auto h) { ws->async_write(asio::buffer(text), h); }, deadline);
    if (ec) {
      mark_broken("WebSocket write: " + ec.message());
      throw std::runtime_error("connection to chromium: write: " + ec.message());
    }
  }

  // One command (on the page session when `on_page`), its result or a throw.
  json command(const std::string& method, const json& params, bool on_page,
               clock_type::time_point deadline) {
    auto start = clock_type::now();
    int64_t id = next_id++;
    json msg = {{"id", id}, {"method", method}, {"params", params}};
    if (on_page)
      msg["sessionId"] = session;
    waiting.insert(id);  // before writing: the answer may be read while the write finishes
    struct forget {
      impl* self;
      int64_t id;
      ~forget() {
        self->waiting.erase(id);
        self->responses.erase(id);
      }
    } guard{this, id};
    try {
      write(msg.dump(-1, ' ', false, json::error_handler_t::replace), deadline);
    } catch (const std::exception& e) {
      throw std::runtime_error(method + ": " + e.what() + "\n" + diagnostics());
    }
    bool page_gone = false;
    pump_until(deadline, [&] {
      page_gone = on_page && (crashed || detached);
      return responses.count(id) > 0 || broken || page_gone;
    });
    auto it = responses.find(id);
    if (it == responses.end()) {
      if (page_gone)
        throw std::runtime_error(method + ": the page " +
                                 (crashed ? "crashed" : "was detached") + "\n" + diagnostics());
      if (broken)
        throw std::runtime_error(method + ": connection to chromium lost (" + broken_why +
                                 ")\n" + diagnostics());
      auto took = std::chrono::duration_cast<milliseconds>(clock_type::now() - start);
      throw std::runtime_error(method + ": no answer within " + ms_text(took));
    }
    json resp = std::move(it->second);
    if (resp.contains("error")) {
      const json& e = resp["error"];
      std::string text = e.value("message", std::string("?"));
      if (e.contains("data"))
        text += " (" + (e["data"].is_string() ? e["data"].get<std::string>() : e["data"].dump()) +
                ")";
      throw cdp_error(method + ": " + text);
    }
    return resp.value("result", json::object());
  }

  json page(const std::string& method, const json& params, milliseconds timeout) {
    return command(method, params, true, clock_type::now() + timeout);
  }

  void setup(clock_type::time_point deadline) {
    json created = command("Target.createTarget", {{"url", "about:blank"}}, false, deadline);
    target_id = created.value("targetId", std::string());
    json attached = command("Target.attachToTarget", {{"targetId", target_id}, {"flatten", true}},
                            false, deadline);
    session = attached.value("sessionId", std::string());
    if (target_id.empty() || session.empty())
      throw std::runtime_error("chromium: no target/session id (" + created.dump() + ", " +
                               attached.dump() + ")");
    command("Inspector.enable", json::object(), true, deadline);
    command("Page.enable", json::object(), true, deadline);
    command("Page.setLifecycleEventsEnabled", {{"enabled", true}}, true, deadline);
    command("Runtime.enable", json::object(), true, deadline);
    command("Emulation.setDeviceMetricsOverride",
            {{"width", opts.width},
             {"height", opts.height},
             {"deviceScaleFactor", 1},
             {"mobile", false}},
            true, deadline);
    command("Emulation.setFocusEmulationEnabled", {{"enabled", true}}, true, deadline);
    command("Page.bringToFront", json::object(), true, deadline);
  }
};

// ---------------------------------------------------------------------------------
// chromium

chromium::chromium(chromium_options opts) : p_(std::make_unique<impl>()) {
  // On a throw, ~impl() kills chromium and removes its directory.
  p_->opts = std::move(opts);
  auto deadline = clock_type::now() + p_->opts.start_timeout;
  p_->process.emplace(p_->opts);
  p_->ws_url = p_->process->wait_devtools_url(deadline);
  p_->connect(deadline);
  try {
    p_->setup(deadline);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("chromium: page setup failed: ") + e.what() + "\n" +
                             p_->diagnostics());
  }
}

chromium::~chromium() = default;
chromium::chromium(chromium&&) noexcept = default;
chromium& chromium::operator=(chromium&&) noexcept = default;

bool chromium::available(const chromium_options& opts) {
  struct stat st {};
  return ::stat(opts.binary.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(opts.binary.c_str(), X_OK) == 0;
}

void chromium::navigate(const std::string& url, milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  p_->loaded.clear();
  json r = p_->command("Page.navigate", {{"url", url}}, true, deadline);
  if (r.contains("errorText") && !r["errorText"].get<std::string>().empty())
    throw std::runtime_error("navigate " + url + ": " + r["errorText"].get<std::string>());
  std::string loader = r.value("loaderId", std::string());
  if (loader.empty())
    return;  // same-document navigation: no load event
  bool ok = p_->pump_until(deadline, [&] {
    return p_->loaded.count(loader) > 0 || p_->broken || p_->crashed || p_->detached;
  });
  if (p_->loaded.count(loader))
    return;
  if (p_->broken || p_->crashed || p_->detached)
    throw std::runtime_error("navigate " + url + ": " +
                             (p_->crashed ? "the page crashed" : "lost the page") + "\n" +
                             p_->diagnostics());
  (void)ok;
  throw std::runtime_error("navigate " + url + ": no load event within " + ms_text(timeout));
}

json chromium::evaluate(const std::string& js, milliseconds timeout) {
  json r = p_->page("Runtime.evaluate",
                    {{"expression", js},
                     {"awaitPromise", true},
                     {"returnByValue", true},
                     {"userGesture", true}},
                    timeout);
  if (r.contains("exceptionDetails"))
    throw js_error("evaluate(" + shorten(js, 200) +
                   "): " + describe_exception(r["exceptionDetails"]));
  const json& o = r.value("result", json::object());
  if (o.contains("value"))
    return o["value"];
  if (o.contains("unserializableValue"))
    return o["unserializableValue"];
  return nullptr;  // undefined (or a value that cannot be serialized)
}

json chromium::wait_for(const std::string& js, milliseconds timeout, const std::string& what) {
  auto deadline = clock_type::now() + timeout;
  std::string last = "(not evaluated)";
  for (;;) {
    auto attempt = std::max(left_until(deadline), milliseconds(250));
    try {
      json v = evaluate(js, attempt);
      if (truthy(v))
        return v;
      last = "value " + shorten(v.dump(), 2000);
    } catch (const js_error& e) {
      last = std::string("exception ") + e.what();
    } catch (const cdp_error& e) {  // e.g. no execution context during a navigation
      last = std::string("protocol error ") + e.what();
    }
    if (clock_type::now() + milliseconds(100) >= deadline)
      break;
    // Sleep while still reading events (console errors, lifecycle).
    auto wake = clock_type::now() + milliseconds(100);
    p_->pump_until(wake, [] { return false; });
  }
  throw std::runtime_error("timed out after " + ms_text(timeout) + " waiting for " + what +
                           " [" + shorten(js, 300) + "]; last: " + last);
}

// Runs `js`, a DOM action that answers "ok" or why it could not act.
void chromium::dom_action(const std::string& what, const std::string& js, milliseconds timeout) {
  json r = evaluate(js, timeout);
  if (r != "ok")
    throw std::runtime_error(what + ": " + (r.is_string() ? r.get<std::string>() : r.dump()));
}

void chromium::click(const std::string& css_selector, milliseconds timeout) {
  std::string sel = js_string(css_selector);
  std::string js = "(() => {\n"
                   "  const el = document.querySelector(" + sel + ");\n"
                   "  if (!el) return 'no element matches';\n"
                   "  if (el.disabled) return 'the element is disabled';\n"
                   "  el.scrollIntoView({block: 'center', inline: 'center'});\n"
                   "  if (typeof el.click === 'function') el.click();\n"
                   "  else el.dispatchEvent(new MouseEvent('click',\n"
                   "      {bubbles: true, cancelable: true, view: window}));\n"
                   "  return 'ok';\n"
                   "})()";
  dom_action("click " + css_selector, js, timeout);
}

void chromium::type(const std::string& css_selector, const std::string& text,
                    milliseconds timeout) {
  std::string sel = js_string(css_selector);
  std::string js = "(() => {\n"
                   "  const el = document.querySelector(" + sel + ");\n"
                   "  if (!el) return 'no element matches';\n"
                   "  if (!('value' in el) && !el.isContentEditable) return 'not editable';\n"
                   "  el.scrollIntoView({block: 'center', inline: 'center'});\n"
                   "  el.focus();\n"
                   "  const text = " + js_string(text) + ";\n"
                   "  if (el.isContentEditable) { el.textContent = text; }\n"
                   "  else {\n"
                   "    let proto = Object.getPrototypeOf(el), desc;\n"
                   "    while (proto && !(desc = Object.getOwnPropertyDescriptor(proto, 'value')))\n"
                   "      proto = Object.getPrototypeOf(proto);\n"
                   "    if (desc && desc.set) desc.set.call(el, text); else el.value = text;\n"
                   "  }\n"
                   "  el.dispatchEvent(new Event('input', {bubbles: true}));\n"
                   "  el.dispatchEvent(new Event('change', {bubbles: true}));\n"
                   "  return 'ok';\n"
                   "})()";
  dom_action("type " + css_selector, js, timeout);
}

void chromium::screenshot_png(const std::string& path, milliseconds timeout) {
  json r = p_->page("Page.captureScreenshot", {{"format", "png"}, {"fromSurface", true}},
                    timeout);
  if (!r.contains("data") || !r["data"].is_string())
    throw std::runtime_error("Page.captureScreenshot: no data");
  std::vector<unsigned char> png = base64_decode(r["data"].get_ref<const std::string&>());
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path())
    fs::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  out.close();
  if (!out)
    throw std::runtime_error("screenshot: cannot write " + path);
}

std::vector<std::string> chromium::console_errors() const {
  p_->poll();  // pick up what has arrived meanwhile
  return p_->errors;
}

json chromium::send(const std::string& method, const json& params, milliseconds timeout) {
  return p_->page(method, params, timeout);
}

std::vector<json> chromium::events() const {
  p_->poll();
  return std::vector<json>(p_->events.begin(), p_->events.end());
}

pid_t chromium::pid() const { return p_->process->pid(); }
const std::string& chromium::user_data_dir() const { return p_->process->user_data_dir(); }
const std::string& chromium::websocket_url() const { return p_->ws_url; }
std::string chromium::stderr_tail(size_t max_bytes) const { return p_->process->output_tail(max_bytes); }

}  // namespace troupe::test
