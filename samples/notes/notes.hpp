#pragma once
// The `notes` sample: a per-user counter and notes, with login/logout.
// Written exactly as a troupe user writes an actor type: one header, the public API only.

#include <troupe/troupe.hpp>

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
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
  static constexpr std::int64_t max_ticks = 1000000;   // per /api/ticks stream
  static constexpr std::int64_t max_tick_every_ms = 10000;
  static constexpr std::int64_t max_tick_pad = 8192;     // bytes of padding per tick event
  static constexpr std::size_t max_inbox = 100;         // messages kept; the oldest goes first
  static constexpr std::int64_t max_wait_note_ms = 3600000;  // asked of /api/wait-note; limits.max_deferred_seconds caps it

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
      for (auto& waiting : u.note_waiters_)  // /api/wait-note: answered with this note
        waiting.resolve(json({{"from", from}, {"text", msg.text}}));
      u.note_waiters_.clear();
    });
  }

  static void routes(troupe::route_table<notes_user>& r) {
    r.get("/api/whoami", [](notes_user& u, troupe::request& q) {
      auto who = u.identity();
      who["client"] = q.client_address();  // the peer, or whom trusted proxies name (docs/http.md)
      return json(who);
    });
    r.post("/api/login", [](notes_user& u, troupe::request& q) { return u.login(q.json_string("user")); });
    r.post("/api/logout", [](notes_user& u, troupe::request&) { return u.logout(); });

    r.get("/api/counter", [](notes_user& u, troupe::request&) { return json({{"count", u.state().count}}); });
    r.post("/api/counter/incr", [](notes_user& u, troupe::request&) {
      auto count = ++u.mutate().count;
      u.push_all("/counter", {{"count", count}});  // every open page of his shows it live (GET /)
      return json({{"count", count}});
    });
    // The page (GET /, a live counter over its channel) is a file: samples/notes/www/index.html,
    // served by the front from the [[static]] mounts of samples/notes/notes.toml.

    // Pushes (docs/channels.md): {"push": "/notes/broadcast", "data": {"text"}} on
    // every open channel of this user's pages; answers what was delivered.
    r.post("/api/broadcast", [](troupe::request& q) {
      auto text = q.json_string("text");
      if (text.empty() || text.size() > max_note_bytes)
        throw troupe::bad_request("\"text\" must be 1-4096 bytes");
      return after_push_all("/notes/broadcast", {{"text", text}}, [](const troupe::push_outcome& o) {
        return json({{"delivered", o.delivered}, {"not_delivered", o.not_delivered}});
      });
    });
    // The same to one page of this connection ({"page", "text"}).
    r.post("/api/push", [](troupe::request& q) {
      auto page = q.json_string("page");
      auto text = q.json_string("text");
      if (text.size() > max_note_bytes)
        throw troupe::bad_request("\"text\" must be at most 4096 bytes");
      return after_push(page, "/notes/push", {{"text", text}}, [](const troupe::push_outcome& o) {
        return json({{"delivered", o.delivered}, {"not_delivered", o.not_delivered}});
      });
    });

    // The same to every page of each named user who is live ({"users": [...], "text"}).
    r.post("/api/push_users", [](troupe::request& q) {
      const auto& body = q.json();
      if (!body.contains("users") || !body["users"].is_array())
        throw troupe::bad_request("\"users\" must be an array of user names");
      std::vector<std::string> users;
      for (auto& u : body["users"]) {
        if (!u.is_string())
          throw troupe::bad_request("\"users\" must be an array of user names");
        users.push_back(u.get<std::string>());
      }
      auto text = q.json_string("text");
      if (text.size() > max_note_bytes)
        throw troupe::bad_request("\"text\" must be at most 4096 bytes");
      return after_push_users(std::move(users), "/notes/push", {{"text", text}}, [](const troupe::push_outcome& o) {
        return json({{"delivered", o.delivered}, {"not_delivered", o.not_delivered}});
      });
    });

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

    // One note by its index (a typed path parameter: "/api/notes/x" is 404, digits
    // past 64 bits 400); 404 past the end.
    r.get("/api/notes/{index:int}", [](notes_user& u, troupe::request& q) {
      auto index = q.param<std::int64_t>("index");
      auto& notes = u.state().notes;
      if (index < 0 || static_cast<std::uint64_t>(index) >= notes.size())
        throw troupe::http_error(404, "no note " + std::to_string(index) + " (there are " +
                                        std::to_string(notes.size()) + ")");
      return json({{"index", index}, {"note", notes[static_cast<std::size_t>(index)]}});
    });

    // A download: the notes as a text attachment, one a line.
    r.get("/api/notes.txt", [](notes_user& u, troupe::request&) {
      std::string text;
      for (auto& note : u.state().notes)
        text.append(note).append("\n");
      return troupe::response::text(std::move(text))
        .header("Content-Disposition", "attachment; filename=\"notes.txt\"");
    });

    // A redirect within this site only (no open redirect): `to` must be a path,
    // one '/' first ("//host" and "/\host" name another site), no control character.
    r.get("/api/go", [](troupe::request& q) {
      auto to = q.query("to").value_or("");
      bool path = !to.empty() && to[0] == '/' && (to.size() == 1 || (to[1] != '/' && to[1] != '\\'));
      for (unsigned char c : to)
        path = path && c >= 0x20 && c != 0x7f;
      if (!path)
        throw troupe::bad_request("\"to\" must be a path on this site (one '/' first)");
      return troupe::response::redirect(std::move(to), 302);
    });

    // A cookie of the app's own, and an answer no cache keeps.
    r.post("/api/prefs", [](troupe::request& q) {
      auto theme = q.json_string("theme");
      bool word = !theme.empty() && theme.size() <= 32;
      for (unsigned char c : theme)
        word = word && (std::isalnum(c) || c == '-' || c == '_');
      if (!word)
        throw troupe::bad_request("\"theme\" must be 1-32 letters, digits, '-' or '_'");
      troupe::cookie_attributes site_wide;
      site_wide.path = "/";
      site_wide.same_site = "Lax";
      return json({{"theme", theme}}).cookie("theme", theme, site_wide).header("Cache-Control", "no-store");
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
    // A streamed upload (docs/http.md "Streamed uploads"): the body is read
    // piece by piece with credit, never whole in memory, and answered
    // {"bytes": N, "sha256": "<hex>"}. GET /api/uploads counts what his actor saw.
    r.upload("/api/upload", [](notes_user& u, troupe::request&) {
      std::shared_ptr<EVP_MD_CTX> digest(EVP_MD_CTX_new(), EVP_MD_CTX_free);
      if (!digest || EVP_DigestInit_ex(digest.get(), EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("notes sample: no SHA-256 digest");
      troupe::upload_handlers h;
      h.chunk = [digest](const troupe::upload&, std::string_view piece) {
        EVP_DigestUpdate(digest.get(), piece.data(), piece.size());
      };
      h.end = [&u, digest](const troupe::upload& up) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(digest.get(), md, &n);
        static constexpr char hex[] = "0123456789abcdef";
        std::string text;
        for (unsigned int i = 0; i < n; ++i) {
          text += hex[md[i] >> 4];
          text += hex[md[i] & 15];
        }
        ++u.uploads_.completed;
        return json({{"bytes", up.received}, {"sha256", text}});
      };
      h.abort = [&u](const troupe::upload&, const std::string& why) {
        ++u.uploads_.aborted;
        u.uploads_.last_abort = why;
      };
      return troupe::response::receive(std::move(h));
    });
    r.get("/api/uploads", [](notes_user& u, troupe::request&) {
      return json({{"completed", u.uploads_.completed}, {"aborted", u.uploads_.aborted},
                   {"last_abort", u.uploads_.last_abort}});
    });
    // Staff only: a guard, judged on the front before any actor (a refused
    // request wakes nobody and reads nothing from the deposit; docs/http.md "Guards").
    auto staff = r.guarded([](const troupe::guard_request& g) {
      return g.user().rfind("staff_", 0) == 0 ? troupe::guard_verdict::allow()
                                              : troupe::guard_verdict::refuse(403, "staff only");
    });
    staff.get("/api/staff/report", [](notes_user& u, troupe::request&) {
      return json({{"user", u.user()}, {"count", u.state().count}, {"notes", u.state().notes.size()},
                   {"inbox", u.state().inbox.size()}});
    });
    // An app WebSocket (docs/http.md "App WebSockets"): subprotocol echo.v1;
    // each message goes back as it came, text or binary.
    troupe::socket_route<notes_user> echo;
    echo.subprotocols = {"echo.v1"};
    echo.message = [](notes_user&, troupe::app_socket& s, const troupe::socket_message& m) {
      if (m.binary)
        s.send_binary(std::string(m.data));
      else
        s.send_text(std::string(m.data));
    };
    r.websocket("/api/echo", std::move(echo));
    // A socket for trying what sockets do (the tests use it): "crash" fails
    // the handler (closed 1011), "close CODE REASON" closes, "flood N" writes N
    // messages of 200 bytes at once, "all TEXT" writes to every socket of the user; any
    // other text is answered "lab: TEXT". At most 1 KiB a message (1009 past it).
    troupe::socket_route<notes_user> lab;
    lab.max_message_bytes = 1024;
    lab.open = [](notes_user& u, troupe::app_socket& s, troupe::request& q) {
      if (q.query("refuse"))
        throw troupe::http_error(403, "refused by the open handler");
      s.send_text("hello " + u.user());
    };
    lab.message = [](notes_user& u, troupe::app_socket& s, const troupe::socket_message& m) {
      std::string text(m.data);
      if (text == "crash")
        throw std::runtime_error("the lab socket was told to crash");
      if (text.rfind("close ", 0) == 0) {
        auto rest = text.substr(6);
        auto space = rest.find(' ');
        s.close(static_cast<std::uint16_t>(std::stoi(rest.substr(0, space))),
                space == std::string::npos ? "" : rest.substr(space + 1));
      } else if (text.rfind("flood ", 0) == 0) {  // N messages of 200 bytes
        for (int i = 0, n = std::stoi(text.substr(6)); i < n; ++i) {
          auto line = std::to_string(i);
          s.send_text(line + std::string(200 - line.size(), '.'));
        }
      } else if (text.rfind("all ", 0) == 0) {
        for (auto& other : u.sockets())
          other.send_text(text.substr(4));
      } else {
        s.send_text("lab: " + text);
      }
    };
    r.websocket("/api/socket-lab", std::move(lab));
    // A long poll: {"timeout_ms": N} is answered with the next note another
    // user sends him (/api/tell) as {"from","text"}, or 504 after N ms. He
    // serves his other requests meanwhile (a deferred answer: docs/http.md).
    r.post("/api/wait-note", [](notes_user& u, troupe::request& q) {
      auto ms = bounded_integer(q, "timeout_ms", 0, max_wait_note_ms);
      return defer(std::chrono::milliseconds(ms), [&u](troupe::promise p) {
        auto& w = u.note_waiters_;  // those that timed out go first
        w.erase(std::remove_if(w.begin(), w.end(), [](const troupe::promise& x) { return !x.is_open(); }), w.end());
        w.push_back(p);
      });
    });

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

    // Streaming (docs/streaming.md). SSE: GET /api/ticks?n=N[&every_ms=M][&pad=P]
    // sends N events `tick` (data {"tick":k,"of":N}, P bytes of padding), one
    // every M ms (default 100; 0: as fast as the client reads), then ends.
    // A slow client pauses it (its writes are refused) until it caught up.
    // &retry_ms=R first tells the browser to reconnect after R ms; a reconnecting
    // EventSource names the last tick it got (Last-Event-ID): the ticks go on after it.
    r.get("/api/ticks", [](notes_user& u, troupe::request& q) {
      ticker t;
      t.n = query_integer(q, "n", 1, max_ticks, 10);
      t.every_ms = query_integer(q, "every_ms", 0, max_tick_every_ms, 100);
      t.pad = static_cast<std::size_t>(query_integer(q, "pad", 0, max_tick_pad, 0));
      auto retry_ms = query_integer(q, "retry_ms", 0, 60000, 0);
      if (auto last = q.header("Last-Event-ID")) {
        char* end = nullptr;
        errno = 0;
        auto seen = std::strtoll(last->c_str(), &end, 10);
        if (errno == 0 && end != last->c_str() && *end == '\0' && seen >= 0 && seen < t.n)
          t.next = seen + 1;
      }
      return troupe::response::sse(u.feed([&u, t, retry_ms](troupe::stream& s) {
        if (retry_ms > 0)
          s.retry(std::chrono::milliseconds(retry_ms));
        u.tickers_[s.id()] = t;
        u.tickers_[s.id()].out = s;
        u.tick(s.id());
      }));
    });
    // NDJSON: every note as one line {"index": i, "text": ...}, then the end.
    r.get("/api/notes.ndjson", [](notes_user& u, troupe::request&) {
      return troupe::response::ndjson(u.feed([&u](troupe::stream& s) {
        ticker t;  // a cursor over the notes
        t.listing = true;
        t.out = s;
        u.tickers_[s.id()] = t;
        u.tick(s.id());
      }));
    });
    // What this user's actor was told about its streams (it lives in the actor, not in the store).
    r.get("/api/streams", [](notes_user& u, troupe::request&) {
      return json({{"open", u.tickers_.size()}, {"opened", u.seen_.opened}, {"slow", u.seen_.slow},
                   {"ready", u.seen_.ready}, {"gone", u.seen_.gone}, {"ended", u.seen_.ended}});
    });
  }

private:
  // One open stream of this user: ticks, or the listing of his notes.
  struct ticker {
    troupe::stream out;
    bool listing = false;    // /api/notes.ndjson
    std::int64_t next = 1;   // the next tick (or 1 + the next note's index)
    std::int64_t n = 0, every_ms = 0;
    std::size_t pad = 0;
    bool scheduled = false;  // a later() is pending for it
  };
  std::map<std::uint64_t, ticker> tickers_;  // by stream id
  std::vector<troupe::promise> note_waiters_;  // /api/wait-note requests waiting for a note
  struct { std::int64_t completed = 0, aborted = 0; std::string last_abort; } uploads_;  // /api/upload, in memory only
  struct { std::int64_t opened = 0, slow = 0, ready = 0, gone = 0, ended = 0; } seen_;

  troupe::stream_handlers feed(std::function<void(troupe::stream&)> open) {
    troupe::stream_handlers h;
    h.open = [this, open = std::move(open)](troupe::stream& s) {
      ++seen_.opened;
      open(s);
    };
    h.slow = [this](troupe::stream&) { ++seen_.slow; };  // tick() stopped at the refused write
    h.ready = [this](troupe::stream& s) {
      ++seen_.ready;
      auto it = tickers_.find(s.id());
      if (it != tickers_.end() && !it->second.scheduled)
        tick(s.id());
    };
    h.gone = [this](troupe::stream& s) {
      ++seen_.gone;
      tickers_.erase(s.id());
    };
    return h;
  }

  // Writes what stream `id` may write now: one tick (a burst when every_ms
  // is 0, or the notes listing), stopping at a refused write (slow: `ready` resumes it).
  void tick(std::uint64_t id) {
    auto it = tickers_.find(id);
    if (it == tickers_.end())
      return;
    auto& t = it->second;
    t.scheduled = false;
    std::int64_t last = t.listing ? static_cast<std::int64_t>(state().notes.size()) : t.n;
    for (int burst = (t.listing || t.every_ms == 0) ? 64 : 1; burst > 0 && t.next <= last; --burst) {
      troupe::stream_write w;
      if (t.listing) {
        auto i = static_cast<std::size_t>(t.next - 1);
        w = t.out.json({{"index", i}, {"text", state().notes[i]}});
      } else {
        nlohmann::json data{{"tick", t.next}, {"of", t.n}};
        if (t.pad)
          data["pad"] = std::string(t.pad, '.');
        w = t.out.event(data.dump(), "tick", std::to_string(t.next));
      }
      if (w == troupe::stream_write::slow)
        return;  // the client is slow: `ready` resumes
      if (w != troupe::stream_write::written) {
        tickers_.erase(it);
        return;
      }
      ++t.next;
    }
    if (t.next > last) {
      t.out.close();
      ++seen_.ended;
      tickers_.erase(it);
      return;
    }
    t.scheduled = later(std::chrono::milliseconds(t.listing ? 0 : t.every_ms), [this, id] { tick(id); });
    if (!t.scheduled) {  // too many timers pending: end this stream rather than leave it stuck
      t.out.close();
      tickers_.erase(it);
    }
  }

  // ?key=integer in [lo, hi] (default `dflt` when absent), or 400.
  static std::int64_t query_integer(troupe::request& q, const char* key, std::int64_t lo, std::int64_t hi,
                                    std::int64_t dflt) {
    auto v = q.query(key);
    if (!v)
      return dflt;
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
      throw troupe::bad_request(std::string("?") + key + " must be an integer from " + std::to_string(lo) + " to " +
                                std::to_string(hi));
    return n;
  }

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
