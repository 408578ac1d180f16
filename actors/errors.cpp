#include "actors/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

namespace troupe {

namespace {
constexpr caf::atom_value category = caf::atom("troupe");
}

const char* to_string(errc code) noexcept {
  switch (code) {
    case errc::not_here: return "not_here";
    case errc::handler_failed: return "handler_failed";
    case errc::unavailable: return "unavailable";
    case errc::bad_request: return "bad_request";
    case errc::busy: return "busy";
    case errc::too_many_pages: return "too_many_pages";
    case errc::deposit_failed: return "deposit_failed";
    case errc::no_such_user: return "no_such_user";
    case errc::wake_failed: return "wake_failed";
    case errc::dropped: return "dropped";
    case errc::refused: return "refused";
    case errc::too_many_users: return "too_many_users";
    case errc::bad_state: return "bad_state";
    case errc::stale_owner: return "stale_owner";
    case errc::admission_refused: return "admission_refused";
    case errc::group_degraded: return "group_degraded";
    case errc::user_quarantined: return "user_quarantined";
  }
  return "unknown";
}

const char* to_string(refusal_reason r) noexcept {
  switch (r) {
    case refusal_reason::cpu: return "cpu";
    case refusal_reason::memory: return "memory";
    case refusal_reason::degraded: return "degraded";
    case refusal_reason::quarantined: return "quarantined";
    case refusal_reason::users: return "users";
    case refusal_reason::machine_memory: return "machine_memory";
    case refusal_reason::low_space: return "low_space";
    case refusal_reason::commander_memory: return "commander_memory";
  }
  return "unknown";
}

caf::error make_refusal(errc code, std::string text, std::uint32_t retry_after_seconds) {
  return {static_cast<std::uint8_t>(code), category, caf::make_message(std::move(text), retry_after_seconds)};
}

std::optional<refusal> refusal_of(const caf::error& err) {
  if (err.category() != category)
    return std::nullopt;
  auto& ctx = err.context();
  if (!ctx.match_elements<std::string, std::uint32_t>())
    return std::nullopt;
  return refusal{ctx.get_as<std::string>(0), ctx.get_as<std::uint32_t>(1)};
}

caf::error make_error(errc code) {
  return {static_cast<std::uint8_t>(code), category};
}

caf::error make_error(errc code, std::string context) {
  return {static_cast<std::uint8_t>(code), category, caf::make_message(std::move(context))};
}

bool is(const caf::error& err, errc code) noexcept {
  return err.category() == category && err.code() == static_cast<std::uint8_t>(code);
}

void register_errors(caf::actor_system_config& cfg) {
  cfg.add_error_category(category, [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
    std::string out = "troupe::";
    out += to_string(static_cast<errc>(code));
    if (!ctx.empty())
      out += " " + to_string(ctx);
    return out;
  });
}

}  // namespace troupe
