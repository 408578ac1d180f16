#include "actors/app.hpp"

#include <troupe/caf.hpp>

#include "actors/messages.hpp"
#include "actors/metrics.hpp"  // route_key
#include "actors/user_access.hpp"
#include "registry/ids.hpp"
#include "registry/url.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace troupe {

std::string error_body(const std::string& text) {
  return nlohmann::json{{"error", text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}


namespace {


// An application's path parameters and query: '+' is a space, a malformed escape is kept as written.
std::string percent_decode(std::string_view in) {
  return *registry::percent_decode(in, true, registry::bad_escape::keep);
}

// Splits "/a/b/c" into {"a","b","c"}; a trailing slash yields an empty last segment.
template <class Out>
void split_path(std::string_view path, Out&& out) {
  if (!path.empty() && path.front() == '/')
    path.remove_prefix(1);
  while (true) {
    auto slash = path.find('/');
    out(path.substr(0, slash));
    if (slash == std::string_view::npos)
      break;
    path.remove_prefix(slash + 1);
  }
}

bool is_param(std::string_view segment) noexcept {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// The digits of a typed parameter: an optional '-' (signed only), then at least one digit.
bool integer_syntax(std::string_view s, bool is_signed) noexcept {
  if (is_signed && !s.empty() && s.front() == '-')
    s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

// -- request -------------------------------------------------------------------

const std::string& request::method() const noexcept {
  return raw_.method;
}
const std::string& request::path() const noexcept {
  return raw_.path;
}
const std::string& request::body() const noexcept {
  return raw_.body;
}
const std::string& request::client_address() const noexcept {
  return raw_.client;
}

std::string request::param(std::string_view name) const {
  for (auto& [key, value] : params_)
    if (key == name)
      return percent_decode(value);
  return {};
}

std::int64_t request::signed_param(std::string_view name, std::int64_t min, std::int64_t max) const {
  auto text = param(name);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < min || v > max)
    throw bad_request("path parameter \"" + std::string(name) + "\" must be an integer from " + std::to_string(min) +
                      " to " + std::to_string(max));
  return v;
}

std::uint64_t request::unsigned_param(std::string_view name, std::uint64_t max) const {
  auto text = param(name);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v > max)
    throw bad_request("path parameter \"" + std::string(name) + "\" must be an integer from 0 to " +
                      std::to_string(max));
  return v;
}

std::optional<std::string> request::query(std::string_view name) const {
  std::string_view q = raw_.query;
  while (!q.empty()) {
    auto amp = q.find('&');
    auto pair = q.substr(0, amp);
    auto eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string{} : percent_decode(pair.substr(eq + 1));
    if (amp == std::string_view::npos)
      break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::optional<std::string> request::header(std::string_view name) const {
  for (auto& h : raw_.headers)
    if (registry::iequals(h.name, name))
      return h.value;
  return std::nullopt;
}

const nlohmann::json& request::json() const {
  if (!json_) {
    auto parsed = nlohmann::json::parse(raw_.body, nullptr, false);
    if (parsed.is_discarded())
      throw bad_request("the body is not valid JSON");
    json_ = std::move(parsed);
  }
  return *json_;
}

std::string request::json_string(const char* key) const {
  auto& j = json();
  if (!j.is_object())
    throw bad_request("the body must be a JSON object");
  auto i = j.find(key);
  if (i == j.end() || !i->is_string())
    throw bad_request(std::string("\"") + key + "\" must be a string");
  return i->get<std::string>();
}

// -- router --------------------------------------------------------------------

router& router::on(std::string_view method, std::string_view pattern, handler h, guards route_guards,
                   bool streamed_body, std::shared_ptr<const socket_handlers> socket) {
  route r;
  if (socket)
    for (auto& p : socket->subprotocols)  // what the handshake's Sec-WebSocket-Protocol may carry (RFC 6455 §4.1)
      if (p.empty() || p.size() > 255 || !registry::is_http_token(p))
        throw std::invalid_argument("route " + std::string(pattern) + ": subprotocol \"" + p +
                                    "\" is not an HTTP token");
  r.method = std::string(method);
  r.pattern = std::string(pattern);
  split_path(pattern, [&](std::string_view seg) {
    if (!is_param(seg)) {
      r.segments.emplace_back(seg);
      r.kinds.push_back(segment_kind::literal);
      return;
    }
    auto inner = seg.substr(1, seg.size() - 2);
    auto colon = inner.find(':');
    auto type = colon == std::string_view::npos ? std::string_view{} : inner.substr(colon + 1);
    auto name = inner.substr(0, colon);
    if (name.empty())
      throw std::invalid_argument("route " + r.pattern + ": a parameter needs a name");
    r.segments.emplace_back(name);
    if (colon == std::string_view::npos)
      r.kinds.push_back(segment_kind::text);
    else if (type == "int")
      r.kinds.push_back(segment_kind::signed_int);
    else if (type == "uint")
      r.kinds.push_back(segment_kind::unsigned_int);
    else
      throw std::invalid_argument("route " + r.pattern + ": parameter {" + std::string(name) + "} has type \"" +
                                  std::string(type) + "\"; the types are int and uint");
  });
  r.fn = std::move(h);
  r.own_guards = std::move(route_guards);
  r.streamed_body = streamed_body;
  r.socket = std::move(socket);
  route_guards_ = route_guards_ || !r.own_guards.empty();
  routes_.push_back(std::move(r));
  return *this;
}

router& router::guard_all(guard g) {
  if (!g)
    throw std::invalid_argument("a guard must be callable");
  type_guards_.push_back(std::move(g));
  return *this;
}

bool router::guarded(std::size_t index) const noexcept {
  return !type_guards_.empty() || (index < routes_.size() && !routes_[index].own_guards.empty());
}

guard_verdict router::judge(std::size_t index, const guard_request& g) const {
  auto run = [&](const guard& fn) -> guard_verdict {
    try {
      auto v = fn(g);
      if (!v.allowed() && (v.status < 400 || v.status > 599))  // a refusal is an error status
        return guard_verdict::refuse(500, "the guard refused with an invalid status");
      return v;
    } catch (const std::exception&) {
      return guard_verdict::refuse(500, "the guard failed");
    } catch (...) {
      return guard_verdict::refuse(500, "the guard failed");
    }
  };
  for (auto& fn : type_guards_)
    if (auto v = run(fn); !v.allowed())
      return v;
  if (index < routes_.size())
    for (auto& fn : routes_[index].own_guards)
      if (auto v = run(*fn); !v.allowed())
        return v;
  return guard_verdict::allow();
}

bool guard_request::guest() const noexcept {
  return registry::is_guest(user_);
}

void router::name_routes(const std::string& type) {
  for (auto& r : routes_)
    r.key = route_key(type, r.method, r.pattern);
}

router::match router::find(std::string_view method, std::string_view path) const {
  match result;
  boost::container::small_vector<std::string_view, 16> parts;  // on the stack: find runs twice per request
  split_path(path, [&](std::string_view s) { parts.push_back(s); });
  for (auto& r : routes_) {
    const auto& segments = r.segments;
    if (segments.size() != parts.size())
      continue;
    request::params_type params;
    std::string_view out_of_range;
    bool ok = true;
    for (std::size_t i = 0; i < parts.size() && ok; ++i) {
      switch (r.kinds[i]) {
        case segment_kind::literal:
          ok = segments[i] == parts[i];
          break;
        case segment_kind::text:
          ok = !parts[i].empty();
          break;
        case segment_kind::signed_int:
        case segment_kind::unsigned_int: {
          // Its syntax decides whether the route matches (404 when none does);
          // digits past 64 bits match and are refused (400).
          auto text = percent_decode(parts[i]);
          bool is_signed = r.kinds[i] == segment_kind::signed_int;
          ok = integer_syntax(text, is_signed);
          if (ok && out_of_range.empty()) {
            std::int64_t s = 0;
            std::uint64_t u = 0;
            auto end = text.data() + text.size();
            auto fits = is_signed ? std::from_chars(text.data(), end, s).ec == std::errc{}
                                  : std::from_chars(text.data(), end, u).ec == std::errc{};
            if (!fits)
              out_of_range = segments[i];
          }
          break;
        }
      }
      if (ok && r.kinds[i] != segment_kind::literal)
        params.emplace_back(segments[i], parts[i]);
    }
    if (!ok)
      continue;
    if (r.method != method) {
      result.other_method = true;
      continue;
    }
    result.target = &r.fn;
    result.key = &r.key;
    result.index = static_cast<std::size_t>(&r - routes_.data());
    result.streamed_body = r.streamed_body;
    result.socket = r.socket.get();
    result.params = std::move(params);
    result.out_of_range = out_of_range;
    result.other_method = false;
    return result;
  }
  return result;
}

// -- user_actor_base -----------------------------------------------------------

bool user_actor_base::guest() const {
  return registry::is_guest(user());
}

nlohmann::json user_actor_base::identity() const {
  nlohmann::json j{{"user", user()}, {"connection", connection()}, {"node", node()}, {"worker", worker()}};
  if (!page().empty())
    j["page"] = page();
  return j;
}

app_socket user_actor_base::socket(const std::string& id) const {
  for (auto& s : host_->socket_list())
    if (s.id() == id)
      return s;
  return app_socket(host_, id, {}, {});  // its writes are refused: not open for him
}

response user_actor_base::login(const std::string& name) const {
  if (!registry::valid_user_name(name))
    throw bad_request("invalid user name: 1-64 characters of [A-Za-z0-9_.@-], not starting with guest_");
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::login;
  r.next->user = name;
  return r;
}

response user_actor_base::logout() const {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::logout;
  return r;
}

response user_actor_base::after(std::chrono::milliseconds delay, std::function<response()> then) {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::after;
  r.next->delay = delay < std::chrono::milliseconds::zero() ? std::chrono::milliseconds::zero() : delay;
  r.next->then = std::move(then);
  return r;
}

response response::receive(upload_handlers h) {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::upload;
  r.next->uploads = std::move(h);
  return r;
}

response user_actor_base::defer(std::chrono::milliseconds timeout, std::function<void(promise)> start) {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::defer;
  r.next->delay = timeout < std::chrono::milliseconds::zero() ? std::chrono::milliseconds::zero() : timeout;
  r.next->on_deferred = std::move(start);
  return r;
}

// -- the global store ----------------------------------------------------------

namespace {

using detail::global_op;
using detail::global_reply;

response global_call(global_op op, std::function<response(const global_reply&)> on_reply) {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::global;
  r.next->op = std::move(op);
  r.next->on_reply = std::move(on_reply);
  return r;
}

// A refusal by the store as the request's answer, in words a client
// understands (the store's codes stay in the log and the tests of the store).
[[noreturn]] void refuse(const std::string& why) {
  if (why == "invalid_key")
    throw http_error(400, "the key must be 1-256 bytes of UTF-8 without NUL");
  if (why == "invalid_ttl")
    throw http_error(400, "the lease duration must be above 0 and at most commander.global_max_lease_seconds");
  if (why == "value_too_big")
    throw http_error(413, "the value is larger than commander.global_max_value_bytes");
  if (why == "lease_expired")
    throw http_error(409, "the lease on this key expired before the update was committed; start it again");
  if (why == "key_leased")
    throw http_error(409, "the key is being updated by someone else right now");
  if (why == "queue_full")
    throw http_error(503, "too many requests are waiting for this key, retry", 1);
  if (why == "wait_expired")
    throw http_error(503, "the key stayed busy too long, retry", 1);
  // commander.durability = "reply": a change is answered once durable.
  if (why == "not_durable")
    throw http_error(503, "the change could not be made durable and was not applied, retry", 1);
  if (why == "durability_unknown")  // no Retry-After: retrying may apply it twice
    throw http_error(503, "the change may or may not have been made durable (the deposit did not answer); "
                          "check before retrying");
  throw http_error(503, "the global store cannot answer right now, retry", 1);
}

}  // namespace

response user_actor_base::global_get(std::string key,
                                     std::function<response(const std::optional<std::string>&)> then) {
  global_op op;
  op.what = global_op::kind::get;
  op.key = std::move(key);
  return global_call(std::move(op), [then = std::move(then)](const global_reply& r) {
    if (!r.refusal.empty())
      refuse(r.refusal);
    return then(r.current());
  });
}

response user_actor_base::global_set(std::string key, std::string value, std::function<response()> then) {
  global_op op;
  op.what = global_op::kind::set;
  op.key = std::move(key);
  op.has_value = true;
  op.value = std::move(value);
  return global_call(std::move(op), [then = std::move(then)](const global_reply& r) {
    if (!r.refusal.empty())
      refuse(r.refusal);
    return then();
  });
}

response user_actor_base::global_erase(std::string key, std::function<response(bool)> then) {
  global_op op;
  op.what = global_op::kind::erase;
  op.key = std::move(key);
  return global_call(std::move(op), [then = std::move(then)](const global_reply& r) {
    if (r.refusal == "no_such_key")
      return then(false);
    if (!r.refusal.empty())
      refuse(r.refusal);
    return then(true);
  });
}

response user_actor_base::global_lease(std::string key, std::chrono::milliseconds ttl,
                                       std::function<response(const lease_grant&)> then,
                                       std::chrono::milliseconds wait) {
  global_op op;
  op.what = global_op::kind::lease;
  op.key = key;
  op.ttl_ms = ttl.count();
  op.wait_ms = wait.count();
  return global_call(std::move(op), [key = std::move(key), then = std::move(then)](const global_reply& r) {
    if (!r.refusal.empty())
      refuse(r.refusal);
    return then(lease_grant{key, r.token, r.current()});
  });
}

response user_actor_base::global_commit(const lease_grant& lease, std::optional<std::string> value,
                                        std::function<response()> then) {
  global_op op;
  op.what = global_op::kind::commit;
  op.key = lease.key;
  op.token = lease.token;
  op.has_value = value.has_value();
  op.value = value.value_or(std::string{});
  return global_call(std::move(op), [then = std::move(then)](const global_reply& r) {
    if (!r.refusal.empty())
      refuse(r.refusal);
    return then();
  });
}

response user_actor_base::global_abort(const lease_grant& lease, std::function<response()> then) {
  global_op op;
  op.what = global_op::kind::abort;
  op.key = lease.key;
  op.token = lease.token;
  return global_call(std::move(op), [then = std::move(then)](const global_reply& r) {
    if (!r.refusal.empty() && r.refusal != "lease_expired")
      refuse(r.refusal);
    return then();
  });
}

response user_actor_base::with_lease(
  std::string key, std::chrono::milliseconds ttl,
  std::function<std::optional<std::string>(const std::optional<std::string>&)> modify,
  std::function<response(const std::optional<std::string>&)> then, std::chrono::milliseconds wait) {
  return global_lease(std::move(key), ttl, [modify = std::move(modify), then = std::move(then)](const lease_grant& g) {
    std::optional<std::string> next;
    try {
      next = modify(g.value);
    } catch (const http_error& e) {
      // The client's error: give the lease back first, then answer it.
      return global_abort(g, [status = e.status(), text = std::string(e.what()), retry = e.retry_after()]() -> response {
        throw http_error(status, text, retry);
      });
    }
    // Any other exception escapes: nothing is applied, and the lease goes back
    // when this actor goes down (the worker restarts it).
    return global_commit(g, next, [then, next] { return then(next); });
  }, wait);
}

// -- app_types -----------------------------------------------------------------

const app_types::factory* app_types::find(const std::string& name) const {
  auto i = types_.find(name);
  return i == types_.end() ? nullptr : &i->second.make;
}

const router* app_types::routes(const std::string& name) const {
  auto i = types_.find(name);
  return i == types_.end() ? nullptr : i->second.routes.get();
}

std::optional<std::string> app_types::login_group(const std::string& name, std::string_view user) const {
  auto i = types_.find(name);
  if (i == types_.end() || !i->second.login_group)
    return std::nullopt;
  return i->second.login_group(user);
}

std::vector<std::string> app_types::names() const {
  std::vector<std::string> out;
  for (auto& [name, f] : types_)
    out.push_back(name);
  return out;
}

// -- pushes ----------------------------------------------------------------------

void user_actor_base::push(std::string page, std::string path, nlohmann::json data,
                           std::function<void(const push_outcome&)> done) {
  detail::push_order o;
  o.to = detail::push_order::scope::page;
  o.page = std::move(page);
  o.path = std::move(path);
  o.data = std::move(data);
  o.done = std::move(done);
  host_->push(std::move(o));
}

void user_actor_base::push_all(std::string path, nlohmann::json data, std::function<void(const push_outcome&)> done) {
  detail::push_order o;
  o.to = detail::push_order::scope::own_pages;
  o.path = std::move(path);
  o.data = std::move(data);
  o.done = std::move(done);
  host_->push(std::move(o));
}

void user_actor_base::push_users(std::vector<std::string> users, std::string path, nlohmann::json data,
                                 std::function<void(const push_outcome&)> done) {
  detail::push_order o;
  o.to = detail::push_order::scope::users;
  o.users = std::move(users);
  o.path = std::move(path);
  o.data = std::move(data);
  o.done = std::move(done);
  host_->push(std::move(o));
}

namespace {
response deferred_push(detail::push_order o, std::function<response(const push_outcome&)> then) {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::push;
  r.next->push = std::make_shared<detail::push_order>(std::move(o));
  // The outcome reaches the request through the order's done (user.cpp).
  r.next->then = nullptr;
  r.next->push->done = nullptr;
  r.next->on_pushed = std::move(then);
  return r;
}
}  // namespace

response user_actor_base::after_push_all(std::string path, nlohmann::json data,
                                         std::function<response(const push_outcome&)> then) {
  detail::push_order o;
  o.to = detail::push_order::scope::own_pages;
  o.path = std::move(path);
  o.data = std::move(data);
  return deferred_push(std::move(o), std::move(then));
}

response user_actor_base::after_push(std::string page, std::string path, nlohmann::json data,
                                     std::function<response(const push_outcome&)> then) {
  detail::push_order o;
  o.to = detail::push_order::scope::page;
  o.page = std::move(page);
  o.path = std::move(path);
  o.data = std::move(data);
  return deferred_push(std::move(o), std::move(then));
}

response user_actor_base::after_push_users(std::vector<std::string> users, std::string path, nlohmann::json data,
                                           std::function<response(const push_outcome&)> then) {
  detail::push_order o;
  o.to = detail::push_order::scope::users;
  o.users = std::move(users);
  o.path = std::move(path);
  o.data = std::move(data);
  return deferred_push(std::move(o), std::move(then));
}

caf::local_actor* caf_actor(user_actor_base& u) { return detail::user_access::host(u)->actor(); }

}  // namespace troupe
