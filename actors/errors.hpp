#pragma once
/// \file
/// troupe's error codes, carried as caf::error between actors (and nodes).

#include <caf/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace caf {
class actor_system_config;
}

namespace troupe {

/// Errors troupe's actors answer with. Registered with CAF under the
/// category atom "troupe" (see register_errors()).
enum class errc : std::uint8_t {
  not_here = 1,     ///< the actor no longer serves that connection: re-resolve
  handler_failed,   ///< an application handler threw
  unavailable,      ///< no actor can take the request now (placement failed, worker gone)
  bad_request,      ///< the message itself is invalid (bad name, bad page id, …)
  busy,             ///< a bounded queue is full
  too_many_pages,   ///< max_pages_per_connection reached
  deposit_failed,   ///< a parcel could not be written, read or removed
  no_such_user,     ///< the user is not hosted here
  wake_failed,      ///< a user could not be woken from his parcel
  dropped,          ///< an operator dropped the user (his actor's exit reason)
  refused,          ///< an operator's order cannot be carried out as asked (nothing was done)
  too_many_users,   ///< limits.max_live_users reached: no newcomer is placed
  bad_state,        ///< a user's parcel does not decode as his state (quarantined; he is refused)
  stale_owner,      ///< a write from an owner the deposit no longer recognises (fencing)
  /// Admission refused a newcomer (every worker of his group closed by CPU or
  /// memory, and the group at worker_max_number); a refusal (make_refusal).
  admission_refused,
  group_degraded,   ///< the user's group is degraded (restart intensity); a refusal
  user_quarantined, ///< this user crashed max_user_restarts times in the window; a refusal
};

/// Why admission refused (troupe_admission_rejections_total{reason}); the
/// text is the label. Fixed: the metric has one series per reason.
/// users: every worker hosts worker_max_users; machine_memory: the machine is
/// past limits.machine_memory_alarm_percent; low_space: the deposit's disk is
/// under deposit.low_space_percent free; commander_memory: the node process is
/// past limits.commander_memory_max_percent (the last two refuse new guests).
enum class refusal_reason : std::uint8_t {
  cpu, memory, degraded, quarantined, users, machine_memory, low_space, commander_memory
};
inline constexpr std::size_t refusal_reasons = 8;
const char* to_string(refusal_reason r) noexcept;

/// "not_here", "handler_failed", …
const char* to_string(errc code) noexcept;

/// A caf::error of category "troupe" (found by ADL: `return errc::busy;` works in handlers).
caf::error make_error(errc code);
caf::error make_error(errc code, std::string context);

/// A refusal the client should see as 503 with `text` and, when
/// `retry_after_seconds` > 0, that Retry-After (computed by whoever refuses
/// from what it knows; 0: retrying will not help). Crosses nodes intact.
caf::error make_refusal(errc code, std::string text, std::uint32_t retry_after_seconds);

/// What a refusal carries: its text and Retry-After; nullopt for any other error.
struct refusal {
  std::string text;
  std::uint32_t retry_after = 0;
};
std::optional<refusal> refusal_of(const caf::error& err);

/// True when `err` is of troupe's category and has code `code`.
bool is(const caf::error& err, errc code) noexcept;

/// Lets the actor system render troupe errors by name (sys.render(err)).
void register_errors(caf::actor_system_config& cfg);

}  // namespace troupe
