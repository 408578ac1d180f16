// Messages between users: the app-facing half (README "Messages between users").
// The platform's half (routing by name, waking) is in actors/tell.hpp, the
// commander, the worker and the user actor.

#include "actors/app.hpp"

#include <stdexcept>

namespace troupe {

const char* to_string(tell_outcome::result r) noexcept {
  using R = tell_outcome::result;
  switch (r) {
    case R::delivered: return "delivered";
    case R::unknown_user: return "unknown_user";
    case R::not_accepted: return "not_accepted";
    case R::too_big: return "too_big";
    case R::invalid: return "invalid";
    case R::unavailable: return "unavailable";
    case R::handler_failed: return "handler_failed";
  }
  return "unavailable";
}

std::uint16_t tell_outcome::status() const noexcept {
  switch (what) {
    case result::delivered: return 200;
    case result::unknown_user: return 404;
    case result::not_accepted: return 422;
    case result::too_big: return 413;
    case result::invalid: return 400;
    case result::unavailable: return 503;
    case result::handler_failed: return 502;
  }
  return 503;
}

bool message_router::valid_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64)
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == ':' || c == '-'))
      return false;
  return true;
}

message_router& message_router::on(std::string name, handler h) {
  if (!valid_name(name))
    throw std::invalid_argument("message name \"" + name + "\": expected 1-64 of [A-Za-z0-9_.:-]");
  if (!h)
    throw std::invalid_argument("message " + name + ": no handler");
  if (!handlers_.emplace(name, std::move(h)).second)
    throw std::invalid_argument("message " + name + " is declared twice");
  return *this;
}

const message_router::handler* message_router::find(std::string_view name) const {
  auto i = handlers_.find(name);
  return i == handlers_.end() ? nullptr : &i->second;
}

std::vector<std::string> message_router::names() const {
  std::vector<std::string> out;
  out.reserve(handlers_.size());
  for (auto& [name, h] : handlers_)
    out.push_back(name);
  return out;
}

response user_actor_base::tell_encoded(detail::encoded_message message,
                                       std::function<response(const tell_outcome&)> then) {
  response r;
  r.next = std::make_shared<detail::continuation>();
  r.next->what = detail::continuation::kind::tell;
  r.next->message = std::move(message);
  r.next->on_told = std::move(then);
  return r;
}

const message_router* app_types::messages(const std::string& name) const {
  auto i = types_.find(name);
  return i == types_.end() ? nullptr : i->second.messages.get();
}

}  // namespace troupe
