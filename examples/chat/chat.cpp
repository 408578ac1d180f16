// chat: chat rooms, a complete troupe application. Each browser is a page with
// an app WebSocket (docs/http.md "App WebSockets"); a room is no actor of its
// own: it is the members each user knows and the messages between their actors.
//
//   GET /                          the chat page (HTML and a little JavaScript)
//   POST /login {"user"}           the connection becomes that user's
//   POST /rooms/{room}/join        joins room: its members are kept in the global
//                                  store (key "room:<room>"); each member is told
//   GET /rooms                     {"user", "rooms": {room: [members]}} as he knows them
//   /rooms/{room}/socket           WebSocket, subprotocol chat.v1: a text message is said
//                                  in the room; every member is told and writes
//                                  {"room","from","text"} to each of his sockets of that
//                                  room (a frozen member is woken by it, his sockets open)
#include <troupe/troupe.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

struct chat_line {  // a message between users: one line said in a room
  static constexpr const char* message_name = "chat.line";
  std::string room;
  std::string from;
  std::string text;
  MSGPACK_DEFINE_MAP(room, from, text);
};

struct chat_joined {  // a member came
  static constexpr const char* message_name = "chat.joined";
  std::string room;
  std::string user;
  MSGPACK_DEFINE_MAP(room, user);
};

struct chat_state {  // frozen and woken with him
  std::map<std::string, std::set<std::string>> rooms;          // room → its members, as he knows them
  std::map<std::string, std::vector<chat_line>> history;       // room → its last lines he heard
  MSGPACK_DEFINE_MAP(rooms, history);
};

extern const char* const chat_page;

class chat_user : public troupe::user_actor<chat_state> {
public:
  static constexpr std::size_t max_members = 1000;   // per room
  static constexpr std::size_t max_rooms = 20;       // per user
  static constexpr std::size_t kept_lines = 20;      // per room, replayed to a new socket
  static constexpr std::size_t max_line_bytes = 2000;

  static void routes(troupe::route_table<chat_user>& r) {
    r.get("/", [](troupe::request&) {
      auto page = troupe::response::text(chat_page);
      page.content_type = "text/html; charset=utf-8";
      return page;
    });
    r.post("/login", [](chat_user& u, troupe::request& q) { return u.login(q.json_string("user")); });
    r.get("/rooms", [](chat_user& u, troupe::request&) { return json({{"user", u.user()}, {"rooms", u.state().rooms}}); });
    r.post("/rooms/{room}/join", [](chat_user& u, troupe::request& q) {
      auto room = room_name(q.param("room"));
      if (u.guest())
        throw troupe::http_error(403, "log in first (POST /login)");
      if (!u.state().rooms.count(room) && u.state().rooms.size() >= max_rooms)
        throw troupe::http_error(409, "in too many rooms");
      auto me = u.user();
      auto add_me = [me](const std::optional<std::string>& current) -> std::optional<std::string> {
        auto members = current ? nlohmann::json::parse(*current, nullptr, false) : nlohmann::json::array();
        if (!members.is_array())
          members = nlohmann::json::array();
        // A full room stays as it is (a throw here would restart his actor): `joined` tells him.
        if (std::find(members.begin(), members.end(), me) == members.end() && members.size() < max_members)
          members.push_back(me);
        return members.dump();
      };
      // Runs in his actor once the store has the new list: he knows the members, they learn of him.
      auto joined = [&u, room, me](const std::optional<std::string>& value) {
        auto members = nlohmann::json::parse(value.value_or("[]")).get<std::set<std::string>>();
        if (!members.count(me))
          return json({{"error", "the room is full"}}, 409);
        u.mutate().rooms[room] = members;
        for (auto& m : members)
          if (m != me)
            u.tell(m, chat_joined{room, me});
        return json({{"room", room}, {"members", members}});
      };
      return with_lease("room:" + room, std::chrono::seconds(5), add_me, joined);
    });

    troupe::socket_route<chat_user> socket;
    socket.subprotocols = {"chat.v1"};
    socket.max_message_bytes = max_line_bytes;
    socket.open = [](chat_user& u, troupe::app_socket& s, troupe::request& q) {
      auto room = room_name(q.param("room"));
      if (!u.state().rooms.count(room))
        throw troupe::http_error(403, "join the room first (POST /rooms/" + room + "/join)");
      if (auto h = u.state().history.find(room); h != u.state().history.end())
        for (auto& line : h->second)  // what was said before this page came
          s.send_text(as_json(line));
    };
    socket.message = [](chat_user& u, troupe::app_socket& s, const troupe::socket_message& m) {
      if (m.binary)
        return void(s.close(1003, "text messages only"));
      chat_line line{room_of(s), u.user(), std::string(m.data)};
      auto members = u.state().rooms.at(line.room);
      for (auto& member : members)
        if (member != line.from)
          u.tell(member, line);  // a frozen member is woken by it
      u.hear(line);
    };
    r.websocket("/rooms/{room}/socket", std::move(socket));
  }

  static void messages(troupe::message_table<chat_user>& m) {
    m.on<chat_line>([](chat_user& u, const chat_line& line) {
      if (u.state().rooms.count(line.room))  // a room he left (or never joined) is not heard
        u.hear(line);
    });
    m.on<chat_joined>([](chat_user& u, const chat_joined& j) {
      if (u.state().rooms.count(j.room))
        u.mutate().rooms[j.room].insert(j.user);
    });
  }

private:
  static std::string room_name(const std::string& room) {
    if (room.empty() || room.size() > 32 ||
        room.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      throw troupe::bad_request("a room name is 1-32 of a-z, 0-9 and -");
    return room;
  }
  // "/rooms/<room>/socket" → <room>
  static std::string room_of(const troupe::app_socket& s) {
    const std::string& p = s.path();
    return p.substr(7, p.size() - 7 - 7);
  }
  static std::string as_json(const chat_line& line) {
    return nlohmann::json{{"room", line.room}, {"from", line.from}, {"text", line.text}}.dump();
  }

  // A line said in one of his rooms: kept, and written to each of his pages' sockets of that room.
  void hear(const chat_line& line) {
    auto& kept = mutate().history[line.room];
    kept.push_back(line);
    if (kept.size() > kept_lines)
      kept.erase(kept.begin());
    for (auto& s : sockets())
      if (room_of(s) == line.room)
        s.send_text(as_json(line));
  }
};

const char* const chat_page = R"html(<!doctype html>
<html><head><meta charset="utf-8"><title>troupe chat</title>
<style>body{font:15px sans-serif;margin:2em;max-width:40em}#lines{border:1px solid #ccc;height:20em;overflow:auto;padding:.5em}</style>
</head><body>
<h1>troupe chat</h1>
<p><input id="user" placeholder="your name"> <input id="room" value="lobby"> <button id="enter">enter</button> <span id="status"></span></p>
<div id="lines"></div>
<p><input id="text" size="50" disabled> <button id="say" disabled>say</button></p>
<script>
const $ = (id) => document.getElementById(id);
let socket = null;
function show(text) { const p = document.createElement('div'); p.textContent = text; $('lines').append(p); p.scrollIntoView(); }
async function post(path, body) {
  const r = await fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body || {})});
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.status);
  return j;
}
$('enter').onclick = async () => {
  try {
    await post('/login', {user: $('user').value});
    const room = $('room').value;
    const joined = await post('/rooms/' + room + '/join');
    $('status').textContent = 'members: ' + joined.members.join(', ');
    if (socket) socket.close();
    socket = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/rooms/' + room + '/socket', 'chat.v1');
    socket.onmessage = (e) => { const l = JSON.parse(e.data); show(l.from + ': ' + l.text); };
    socket.onclose = (e) => { $('status').textContent = 'closed (' + e.code + ') ' + e.reason; $('say').disabled = $('text').disabled = true; };
    socket.onopen = () => { $('say').disabled = $('text').disabled = false; };
  } catch (err) { $('status').textContent = String(err); }
};
$('say').onclick = () => { if ($('text').value) socket.send($('text').value); $('text').value = ''; };
$('text').onkeydown = (e) => { if (e.key === 'Enter') $('say').onclick(); };
</script></body></html>
)html";

int main(int argc, char** argv) {
  return troupe::node_main(argc, argv, troupe::user_types<chat_user>("chat"));
}
