#pragma once
// The `notes` sample: a per-user counter and notes, with login/logout.
// Written exactly as a troupe user writes an actor type: one header, the public API only.

#include <troupe/troupe.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace notes_sample {

/// A message from another user (README "Messages between users"): its wire
/// form is its msgpack map, under the stable name "notes.note".
struct note_message {
  static constexpr const char* message_name = "notes.note";
  std::string from;  ///< what the sender says he is; the recipient records the platform's sender instead
  std::string text;
  MSGPACK_DEFINE_MAP(from, text);
};

/// One received note_message, as the recipient keeps it.
struct inbox_entry {
  std::string from;
  std::string text;
  MSGPACK_DEFINE_MAP(from, text);
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(inbox_entry, from, text)
};

/// The user's store: frozen and woken as a whole. A map (MSGPACK_DEFINE_MAP):
/// parcels written before `inbox` existed still load (the missing key stays empty).
struct notes_state {
  std::int64_t count = 0;
  std::vector<std::string> notes;
  std::vector<inbox_entry> inbox;  // the last max_inbox messages received
  MSGPACK_DEFINE_MAP(count, notes, inbox);
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(notes_state, count, notes, inbox)  // its projection in the census console
};

class notes_user : public troupe::user_actor<notes_state> {
public:
  static constexpr std::size_t max_note_bytes = 4096;
  static constexpr std::size_t max_notes = 1000;
  static constexpr std::int64_t max_sleep_ms = 60000;
  static constexpr std::int64_t max_grow_mb = 1024;    // per /api/grow
  static constexpr std::int64_t max_ballast_mb = 4096;  // per user
  static constexpr std::size_t max_inbox = 100;         // messages kept; the oldest goes first

  /// The login routing hook (README "Groups"): users named staff_* log in
  /// to group "staff" when the recipe has one (the default group otherwise).
  static std::optional<std::string> login_group(std::string_view user) {
    if (user.substr(0, 6) == "staff_")
      return std::string("staff");
    return std::nullopt;
  }

  /// The messages this type accepts: a note from another user is kept in the
  /// inbox (bounded) and pushed to the recipient's open pages.
  static void messages(troupe::message_table<notes_user>& m) {
    m.on<note_message>([](notes_user& u, const note_message& msg, const std::string& from) {
      auto& inbox = u.mutate().inbox;
      if (inbox.size() >= max_inbox)
        inbox.erase(inbox.begin());
      inbox.push_back({from, msg.text});
      u.push_all("/inbox", {{"from", from}, {"text", msg.text}});
    });
  }

  static void routes(troupe::route_table<notes_user>& r) {
    r.get("/api/whoami", [](notes_user& u, troupe::request&) { return json(u.identity()); });
    r.post("/api/login", [](notes_user& u, troupe::request& q) { return u.login(q.json_string("user")); });
    r.post("/api/logout", [](notes_user& u, troupe::request&) { return u.logout(); });

    r.get("/api/counter", [](notes_user& u, troupe::request&) { return json({{"count", u.state().count}}); });
    r.post("/api/counter/incr", [](notes_user& u, troupe::request&) { return json({{"count", ++u.mutate().count}}); });

    r.get("/api/notes", [](notes_user& u, troupe::request&) { return json({{"notes", u.state().notes}}); });
    r.post("/api/notes", [](notes_user& u, troupe::request& q) {
      auto text = q.json_string("text");
      if (text.empty() || text.size() > max_note_bytes)
        throw troupe::bad_request("\"text\" must be 1-4096 bytes");
      if (u.state().notes.size() >= max_notes)
        throw troupe::bad_request("too many notes (at most 1000)");
      u.mutate().notes.push_back(std::move(text));
      return json({{"notes", u.state().notes}});
    });

    // Messages between users: {"user", "text"} sends a note_message to that
    // user (woken if frozen); the answer says what became of it (200
    // delivered, 404 unknown user, 413 too big, 422 not accepted by his type, 503 retry).
    r.post("/api/tell", [](notes_user& u, troupe::request& q) {
      auto to = q.json_string("user");
      auto text = q.json_string("text");
      if (text.empty())
        throw troupe::bad_request("\"text\" must not be empty");
      return tell_then(to, note_message{u.user(), std::move(text)}, [to](const troupe::tell_outcome& o) {
        if (!o.delivered())
          return json({{"error", o.text}, {"reason", troupe::to_string(o.what)}, {"user", to}}, o.status());
        return json({{"delivered", true}, {"user", to}});
      });
    });
    r.get("/api/inbox", [](notes_user& u, troupe::request&) { return json({{"inbox", u.state().inbox}}); });

    r.post("/api/sleep", [](troupe::request& q) {
      auto n = bounded_integer(q, "ms", 0, max_sleep_ms);
      return after(std::chrono::milliseconds(n), [n] { return json({{"slept", n}}); });
    });

    r.post("/api/crash", [](troupe::request&) -> troupe::response {
      throw std::runtime_error("notes sample: crash requested");
    });

    // Faults for the supervision and admission tests (issue 13). /api/spin
    // busy-loops on the handler's thread (a stuck or CPU-hot handler);
    // /api/abort calls std::abort() — with isolation = "thread" that is the
    // whole node; /api/grow keeps N MB in this user's actor (memory only: it
    // is not part of his store, so it is never written to the deposit and a
    // wake starts without it).
    r.post("/api/spin", [](troupe::request& q) {
      auto n = bounded_integer(q, "ms", 0, max_sleep_ms);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(n);
      std::uint64_t turns = 0;
      while (std::chrono::steady_clock::now() < until)
        ++turns;
      return json({{"spun_ms", n}, {"turns", turns}});
    });
    r.post("/api/abort", [](troupe::request&) -> troupe::response { std::abort(); });
    // /api/exit ends the process at once with exit code N (std::_Exit): with
    // isolation = "process", a worker exiting with permanent_failure_exitcode.
    r.post("/api/exit", [](troupe::request& q) -> troupe::response {
      std::_Exit(static_cast<int>(bounded_integer(q, "code", 0, 255)));
    });
    r.post("/api/grow", [](notes_user& u, troupe::request& q) {
      auto mb = bounded_integer(q, "mb", 1, max_grow_mb);
      if (u.ballast_mb_ + mb > max_ballast_mb)
        throw troupe::bad_request("at most " + std::to_string(max_ballast_mb) + " MB per user");
      std::string block(static_cast<std::size_t>(mb) << 20, '\0');
      for (std::size_t i = 0; i < block.size(); i += 4096)  // touched: resident, not just reserved
        block[i] = static_cast<char>(i);
      u.ballast_.push_back(std::move(block));
      u.ballast_mb_ += mb;
      return json({{"held_mb", u.ballast_mb_}});
    });

    // The global store, shared by every user: values are JSON, stored as text.
    r.get("/api/global/{key}", [](troupe::request& q) {
      auto key = q.param("key");
      return global_get(key, [key](const std::optional<std::string>& v) {
        if (!v)
          throw troupe::http_error(404, "no such key");
        return json({{"key", key}, {"value", nlohmann::json::parse(*v)}});
      });
    });
    r.put("/api/global/{key}", [](troupe::request& q) {
      auto key = q.param("key");
      const auto& body = q.json();
      if (!body.is_object() || !body.contains("value"))
        throw troupe::bad_request("the body must be {\"value\": ...}");
      auto value = body.at("value");
      return global_set(key, value.dump(), [key, value] { return json({{"key", key}, {"value", value}}); });
    });
    r.del("/api/global/{key}", [](troupe::request& q) {
      auto key = q.param("key");
      return global_erase(key, [key](bool existed) {
        if (!existed)
          throw troupe::http_error(404, "no such key");
        return json({{"deleted", key}});
      });
    });
    // Read-modify-write under a lease: {"delta": n} adds n to a JSON integer
    // (absent counts as 0). "crash_inside": true throws while holding the lease
    // (502; nothing applied; the lease goes back with the crashed actor).
    // "hold_ms" + "ttl_ms" hold the lease before committing (to outlive its TTL).
    r.post("/api/global/{key}/add", [](troupe::request& q) {
      auto key = q.param("key");
      const auto& body = q.json();
      auto delta = body.is_object() ? body.find("delta") : body.end();
      if (delta == body.end() || !delta->is_number_integer())
        throw troupe::bad_request("\"delta\" must be an integer");
      auto n = delta->get<std::int64_t>();
      bool crash = body.value("crash_inside", false);
      auto hold = std::chrono::milliseconds(body.value("hold_ms", std::int64_t{0}));
      auto ttl = std::chrono::milliseconds(body.value("ttl_ms", std::int64_t{5000}));
      auto add = [n, crash](const std::optional<std::string>& current) -> std::optional<std::string> {
        auto value = current ? nlohmann::json::parse(*current, nullptr, false) : nlohmann::json(0);
        if (!value.is_number_integer())
          throw troupe::http_error(409, "the value is not an integer");
        if (crash)
          throw std::runtime_error("notes sample: crash inside the lease");
        return nlohmann::json(value.get<std::int64_t>() + n).dump();
      };
      auto answer = [](const std::optional<std::string>& v) {
        return json({{"value", nlohmann::json::parse(v.value_or("null"))}});
      };
      if (hold.count() <= 0)
        return with_lease(key, ttl, add, answer);
      return global_lease(key, ttl, [add, answer, hold](const lease_grant& g) {
        return after(hold, [g, add, answer] {
          auto next = add(g.value);
          return global_commit(g, next, [answer, next] { return answer(next); });
        });
      });
    });
  }

private:
  // {"<key>": integer in [lo, hi]} or 400.
  static std::int64_t bounded_integer(troupe::request& q, const char* key, std::int64_t lo, std::int64_t hi) {
    const auto& body = q.json();
    auto v = body.is_object() ? body.find(key) : body.end();
    if (v == body.end() || !v->is_number_integer() || *v < lo || *v > hi)
      throw troupe::bad_request("\"" + std::string(key) + "\" must be an integer from " + std::to_string(lo) + " to " +
                                std::to_string(hi));
    return v->get<std::int64_t>();
  }

  std::vector<std::string> ballast_;  // /api/grow
  std::int64_t ballast_mb_ = 0;
};

}  // namespace notes_sample
