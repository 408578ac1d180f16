#pragma once
// The `notes` sample: a per-user counter and notes, with login/logout.
// Written exactly as a troupe user writes an actor type: one header, the public API only.

#include <troupe/troupe.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace notes_sample {

/// The user's store: frozen and woken as a whole.
struct notes_state {
  std::int64_t count = 0;
  std::vector<std::string> notes;
  MSGPACK_DEFINE_MAP(count, notes);
};

class notes_user : public troupe::user_actor<notes_state> {
public:
  static constexpr std::size_t max_note_bytes = 4096;
  static constexpr std::size_t max_notes = 1000;
  static constexpr std::int64_t max_sleep_ms = 60000;

  void routes(troupe::router& r) override {
    r.get("/api/whoami", [this](troupe::request&) { return json(identity()); });
    r.post("/api/login", [this](troupe::request& q) { return login(q.json_string("user")); });
    r.post("/api/logout", [this](troupe::request&) { return logout(); });

    r.get("/api/counter", [this](troupe::request&) { return json({{"count", state().count}}); });
    r.post("/api/counter/incr", [this](troupe::request&) { return json({{"count", ++mutate().count}}); });

    r.get("/api/notes", [this](troupe::request&) { return json({{"notes", state().notes}}); });
    r.post("/api/notes", [this](troupe::request& q) {
      auto text = q.json_string("text");
      if (text.empty() || text.size() > max_note_bytes)
        throw troupe::bad_request("\"text\" must be 1-4096 bytes");
      if (state().notes.size() >= max_notes)
        throw troupe::bad_request("too many notes (at most 1000)");
      mutate().notes.push_back(std::move(text));
      return json({{"notes", state().notes}});
    });

    r.post("/api/sleep", [](troupe::request& q) {
      const auto& body = q.json();
      auto ms = body.is_object() ? body.find("ms") : body.end();
      if (ms == body.end() || !ms->is_number_integer() || *ms < 0 || *ms > max_sleep_ms)
        throw troupe::bad_request("\"ms\" must be an integer from 0 to 60000");
      auto n = ms->get<std::int64_t>();
      return after(std::chrono::milliseconds(n), [n] { return json({{"slept", n}}); });
    });

    r.post("/api/crash", [](troupe::request&) -> troupe::response {
      throw std::runtime_error("notes sample: crash requested");
    });
  }
};

}  // namespace notes_sample
