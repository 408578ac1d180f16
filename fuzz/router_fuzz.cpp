// libFuzzer target: troupe::router (actors/app.hpp), the route pattern parser
// (router::on) and the matcher (router::find), plus what a handler reads of a
// matched request (request::param / query / json: the percent-decoder and the
// JSON parser).
//
// Input (tests/fuzz/router/): "METHOD TARGET\nBODY" — TARGET is a path with an
// optional "?query". The path is matched against a fixed set of routes (the
// samples' patterns), and is also registered as a pattern itself.
//
// Checked beyond "no crash, no sanitizer report":
//  - a parameter's value is a non-empty piece of the requested path;
//  - a pattern registered with on() matches its own text under its method, and
//    under another method only says "other method" (405); one on() refuses names
//    a typed parameter ({name:type}) of an unknown type.

#include "actors/app.hpp"
#include "actors/messages.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

using troupe::router;

// The patterns of the notes and tally samples, and a few shapes beyond them.
constexpr std::pair<const char*, const char*> fixed_routes[] = {
  {"GET", "/api/whoami"},         {"POST", "/api/login"},
  {"POST", "/api/logout"},        {"GET", "/api/counter"},
  {"POST", "/api/counter/incr"},  {"GET", "/api/notes"},
  {"POST", "/api/notes"},         {"POST", "/api/sleep"},
  {"POST", "/api/crash"},         {"GET", "/api/global/{key}"},
  {"PUT", "/api/global/{key}"},   {"DELETE", "/api/global/{key}"},
  {"POST", "/api/global/{key}/add"}, {"GET", "/tally"},
  {"GET", "/tally/{name}"},       {"POST", "/tally/{name}"},
  {"PATCH", "/a/{x}/b/{y}"},      {"GET", "/"},
  {"GET", "/trailing/"},          {"GET", "/{}/{x}"},
};

void add_fixed(router& r) {
  for (auto [method, pattern] : fixed_routes)
    r.on(method, pattern, [](troupe::user_actor_base&, troupe::request&) { return troupe::response{}; });
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "router_fuzz: invariant broken: %s\n", what);
  std::abort();
}

// Reads everything a handler could read of the request; none of it may crash.
void read_like_a_handler(const troupe::http_request& raw, const router::match& m) {
  troupe::request q(raw, m.params);
  for (auto& [name, value] : m.params)
    (void)q.param(name);
  (void)q.param("absent");
  for (const char* name : {"a", "key", "", "x y", "%"})
    (void)q.query(name);
  (void)q.header("Content-Type");
  try {
    (void)q.json_string("user");
  } catch (const troupe::bad_request&) {
    // Expected for a body that is not {"user": "..."}.
  }
}

void check_params(std::string_view path, const router::match& m) {
  for (auto& [name, value] : m.params) {
    if (value.empty())
      finding("empty parameter value");
    if (value.data() < path.data() || value.data() + value.size() > path.data() + path.size())
      finding("parameter value outside the path");
    if (name.empty())
      finding("empty parameter name");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto eol = input.find('\n');
  std::string_view line = input.substr(0, eol);
  std::string_view body = eol == std::string_view::npos ? std::string_view{} : input.substr(eol + 1);
  auto space = line.find(' ');
  if (space == std::string_view::npos)
    return 0;
  troupe::http_request raw;
  raw.method = std::string(line.substr(0, space));
  std::string_view target = line.substr(space + 1);
  auto qmark = target.find('?');
  raw.path = std::string(target.substr(0, qmark));
  if (qmark != std::string_view::npos)
    raw.query = std::string(target.substr(qmark + 1));
  raw.body = std::string(body);
  raw.headers.push_back({"Content-Type", "application/json"});

  static const router fixed = [] {
    router r;
    add_fixed(r);
    return r;
  }();

  // 1. The fixed routes.
  auto m = fixed.find(raw.method, raw.path);
  check_params(raw.path, m);
  if (m.target && m.other_method)
    finding("a match that also says other_method");
  if (m.target)
    read_like_a_handler(raw, m);

  // 2. The path as a pattern (router::on parses it): refused only for a typed
  // parameter it does not know ("{x:float}", "{:int}"); else it matches its own
  // text, unless that text has typed parameters ("{id:int}" is no integer).
  router own;
  try {
    own.on(raw.method, raw.path, [](troupe::user_actor_base&, troupe::request&) { return troupe::response{}; });
  } catch (const std::invalid_argument&) {
    if (raw.path.find(':') == std::string::npos)
      finding("a pattern without a typed parameter was refused");
    return 0;
  }
  if (raw.path.find(":int}") != std::string::npos || raw.path.find(":uint}") != std::string::npos)
    return 0;
  auto self = own.find(raw.method, raw.path);
  if (!self.target)
    finding("a pattern does not match its own text");
  check_params(raw.path, self);
  read_like_a_handler(raw, self);
  std::string other_method = raw.method + "X";
  auto other = own.find(other_method, raw.path);
  if (other.target || !other.other_method)
    finding("a pattern under another method is not other_method");
  return 0;
}
