#pragma once
/// \file
/// The messages the front and the actors exchange that are not owned by one
/// actor: HTTP requests and replies, and the atoms. Every type here is
/// inspectable and registered (register_types), so it can cross nodes; the one
/// exception is local_reply, the front's continuation, which never leaves its process.

#include "actors/fwd.hpp"
#include "actors/upload.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/actor.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace caf {
class actor_system_config;
}

namespace troupe {

// -- atoms (at most 10 characters each) ---------------------------------------
using http_atom = caf::atom_constant<caf::atom("http")>;        ///< serve a request
using resolve_atom = caf::atom_constant<caf::atom("resolve")>;  ///< where is this connection's user
using whois_atom = caf::atom_constant<caf::atom("whois")>;      ///< whose is this connection (waking nobody)
using attach_atom = caf::atom_constant<caf::atom("attach")>;    ///< host this user, give him a connection
using adopt_atom = caf::atom_constant<caf::atom("adopt")>;      ///< a connection is now yours
using login_atom = caf::atom_constant<caf::atom("login")>;
using logout_atom = caf::atom_constant<caf::atom("logout")>;
using release_atom = caf::atom_constant<caf::atom("release")>;  ///< forget a retiring user
using resume_atom = caf::atom_constant<caf::atom("resume")>;    ///< a deferred handler is due
using workers_atom = caf::atom_constant<caf::atom("workers")>;  ///< list / register workers
using freeze_atom = caf::atom_constant<caf::atom("freeze")>;    ///< freeze a user (ordered, idle, quit)
using freezing_atom = caf::atom_constant<caf::atom("freezing")>; ///< a user starts writing his parcels
using frozen_atom = caf::atom_constant<caf::atom("frozen")>;    ///< a user's parcels are durable; he leaves
using thaw_atom = caf::atom_constant<caf::atom("thaw")>;        ///< a freeze failed; the user stays
using quit_atom = caf::atom_constant<caf::atom("quit")>;        ///< soft quit: freeze everybody
using tick_atom = caf::atom_constant<caf::atom("tick")>;        ///< a periodic timer (idle, checkpoint, sweep)
using global_atom = caf::atom_constant<caf::atom("global")>;    ///< the global store
using note_atom = caf::atom_constant<caf::atom("note")>;        ///< a member tells the census its state
using probe_atom = caf::atom_constant<caf::atom("probe")>;      ///< the census asks a member for its live figures
using census_atom = caf::atom_constant<caf::atom("census")>;    ///< census queries
using scan_atom = caf::atom_constant<caf::atom("scan")>;        ///< frozen users found in the deposit at start
using drop_atom = caf::atom_constant<caf::atom("drop")>;        ///< an operator drops a user
using drain_atom = caf::atom_constant<caf::atom("drain")>;      ///< an operator drains a worker
using log_atom = caf::atom_constant<caf::atom("log")>;          ///< the orchestration log
using order_atom = caf::atom_constant<caf::atom("order")>;      ///< an operator's order through the bridge
using restart_atom = caf::atom_constant<caf::atom("restart")>;  ///< a failing user leaves his last good state to his worker
using rest_atom = caf::atom_constant<caf::atom("rest")>;        ///< an idle user leaves his state to his worker and stops
using node_down_atom = caf::atom_constant<caf::atom("nodedown")>; ///< a cluster member was declared down
using fence_atom = caf::atom_constant<caf::atom("fence")>;      ///< this node lost the majority: stop serving its users
using admission_atom = caf::atom_constant<caf::atom("admission")>; ///< what a worker admits now (admission_report)
using grow_atom = caf::atom_constant<caf::atom("grow")>;        ///< a group starts one more worker
using retire_atom = caf::atom_constant<caf::atom("retire")>;    ///< a group stops a worker it no longer needs
using relocate_atom = caf::atom_constant<caf::atom("relocate")>; ///< a woken user belongs to another group
using tune_atom = caf::atom_constant<caf::atom("tune")>;  ///< a group's settings applied while it runs (group_tuning)
using degraded_atom = caf::atom_constant<caf::atom("degraded")>; ///< a group is (no longer) degraded: its workers refuse (serve)
using replace_atom = caf::atom_constant<caf::atom("replace")>;  ///< a worker past its memory occupancy asks to be replaced
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>; ///< a worker process's slot asks it for its vitals
using hello_atom = caf::atom_constant<caf::atom("hello")>;      ///< a worker process greets its node (with its token)
using ready_atom = caf::atom_constant<caf::atom("ready")>;      ///< a worker process's worker is up: here it is

/// What a member of the tree (user, worker, group, commander) tells the
/// census when it starts and whenever its state or its counts change — never
/// per request. The census monitors the sender: its going away needs no note.
struct census_note {
  std::uint8_t kind = 0;     ///< an actor_kind
  std::string name;          ///< user name, worker name, group name
  std::string parent;        ///< a user's worker, a worker's group
  std::string info;          ///< a group's user type
  std::uint8_t state = 0;    ///< users: registry::user_state; workers: 0 in service, 1 draining; groups: 0 serving, else a registry::degradation
  std::uint32_t connections = 0;
  std::uint32_t pages = 0;
  std::uint32_t restarts = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, census_note& x) {
  return f(caf::meta::type_name("troupe.census_note"), x.kind, x.name, x.parent, x.info, x.state, x.connections,
           x.pages, x.restarts);
}

/// A member's answer to the census's probe (sent with high priority, so it
/// overtakes a backlog and reports it): its live figures, and in detail
/// (when asked) its own description as JSON text.
struct actor_probe {
  std::uint64_t query = 0;
  std::uint64_t mailbox = 0;
  std::uint64_t handled = 0;     ///< messages handled
  std::uint64_t service_ns = 0;  ///< time spent handling them
  std::uint32_t restarts = 0;
  std::int64_t last_refresh_ms = 0;  ///< clocks in unix milliseconds, 0: never
  std::int64_t last_user_ms = 0;
  std::int64_t last_rpc_ms = 0;
  std::string detail;            ///< a JSON object merged into the actor's description, "" when not asked
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_probe& x) {
  return f(caf::meta::type_name("troupe.actor_probe"), x.query, x.mailbox, x.handled, x.service_ns, x.restarts,
           x.last_refresh_ms, x.last_user_ms, x.last_rpc_ms, x.detail);
}

/// The census as its members see it (its whole interface: actors/census.hpp).
using census_member_view = caf::typed_actor<
  caf::reacts_to<note_atom, census_note>,
  /// A user was dropped: the census forgets him.
  caf::reacts_to<drop_atom, std::string>>;

/// A member as the census probes it (users and workers answer probes).
using probe_handle = caf::typed_actor<caf::replies_to<probe_atom, std::uint64_t, bool>::with<actor_probe>>;

/// One HTTP header field.
struct http_header {
  std::string name;
  std::string value;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_header& x) {
  return f(caf::meta::type_name("troupe.http_header"), x.name, x.value);
}

/// One channel socket (/_troupe/ws), as actors address it: its front's
/// channel hub and the socket's number there. Invalid (no hub) for anything
/// but a channel call.
struct channel_ref {
  channel_handle hub;
  std::uint64_t socket = 0;

  explicit operator bool() const noexcept { return static_cast<bool>(hub); }
  friend bool operator==(const channel_ref& a, const channel_ref& b) noexcept {
    return a.socket == b.socket && a.hub == b.hub;
  }
  friend bool operator!=(const channel_ref& a, const channel_ref& b) noexcept { return !(a == b); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_ref& x) {
  return f(caf::meta::type_name("troupe.channel_ref"), x.hub, x.socket);
}

struct http_response;

/// Where the answer of a request forwarded from another node goes when its
/// handler deferred it (user_actor_base::defer): the forwarder that sent the
/// request, with the request's number there (http_request::answer_ref). The
/// forwarder takes an interim answer (http_response::deferred_ms) first.
using deferred_answer_handle = caf::typed_actor<caf::reacts_to<http_atom, std::uint64_t, http_response>>;

/// What a request carries for an app WebSocket (route_table::websocket; docs/http.md "App WebSockets").
enum class socket_event : std::uint8_t {
  none = 0,  ///< an HTTP request or a page-channel call
  open,      ///< the upgrade request: `channel` is the socket, `page` its page id; accepted with 101
  text,      ///< a text message from the socket's client, in `body`
  binary,    ///< a binary message, in `body`
};

/// A request as the front hands it to an actor: already size-checked and
/// attributed to a connection (and page, when the request names one).
struct http_request {
  std::string method;   ///< "GET", "POST", …
  std::string path;     ///< decoded-free path, no query
  std::string query;    ///< raw query string without '?'
  std::string body;
  std::string cid;      ///< the connection (cookie) id
  std::string page;     ///< X-Troupe-Page, empty when none
  std::vector<http_header> headers;
  std::int64_t deadline_ms = 0;  ///< unix ms after which nobody waits for the answer: never run then (0: none)
  /// Set for a channel call (a frame on /_troupe/ws): the socket, which
  /// openchannel binds the page to; invalid for a plain HTTP request.
  channel_ref channel;
  /// The client's address as the front judged it (node.trusted_proxies; docs/http.md), "" when unknown.
  std::string client;
  /// Set by the forwarder of a request from another node: where a deferred
  /// answer goes, and under which number (invalid and 0 on the local path).
  deferred_answer_handle answer_to;
  std::uint64_t answer_ref = 0;
  /// A streamed body (route_table::upload): where its pieces are read from; `body` is empty.
  upload_source_handle upload_from;
  /// An app WebSocket's upgrade or message (socket_event::none otherwise).
  socket_event socket = socket_event::none;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_request& x) {
  return f(caf::meta::type_name("troupe.http_request"), x.method, x.path, x.query, x.body, x.cid,
           x.page, x.headers, x.deadline_ms, x.channel, x.client, x.answer_to, x.answer_ref, x.upload_from, x.socket);
}

/// The keys of a group's settings applied while the node runs (config's hot
/// keys; docs/config.md "Profiles"), with the generation of the composition
/// they come from: a worker takes a generation newer than the one it has only.
struct group_tuning {
  std::uint64_t generation = 0;
  double user_idle_freeze_minutes = 30;
  double guest_idle_seconds = 2;
  std::int32_t worker_max_users = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_tuning& x) {
  return f(caf::meta::type_name("troupe.group_tuning"), x.generation, x.user_idle_freeze_minutes, x.guest_idle_seconds,
           x.worker_max_users);
}

/// What the front must do with its routing cache after a reply.
enum class route_note : std::uint8_t {
  keep = 0,     ///< served; the route stays valid
  changed = 1,  ///< served, and the connection now belongs to another user (login/logout)
  not_here = 2, ///< NOT served: this actor does not own the connection; re-resolve and resend
};

/// An actor's answer to an http_request.
struct http_response {
  std::uint16_t status = 200;
  std::string body;
  std::string content_type = "application/json";
  route_note route = route_note::keep;
  std::uint32_t retry_after = 0;  ///< seconds for a Retry-After header (503), 0: none
  /// A new connection id for the client's cookie (login and logout rotate it;
  /// the request's id is dead), "" when the id is unchanged.
  std::string set_cid;  /// Not 0: the answer is a streaming response (content_type says SSE or
  /// NDJSON), this stream of the answering actor: the front opens a stream
  /// sink for it (transport/stream_sink.hpp) instead of writing `body`.
  std::uint64_t stream_id = 0;
  /// The user type's route that answered (node_metrics::route), "" for none.
  std::string route_key;
  /// The handler's own headers (checked: actors/response_headers.hpp), in order;
  /// the front writes them after its own. A channel call's reply has none.
  std::vector<http_header> headers;
  /// Not 0: an interim answer to a forwarded request (never to the client): its
  /// handler deferred the answer, which comes to http_request::answer_to within
  /// this many ms (or its user actor answers 504 first).
  std::uint64_t deferred_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_response& x) {
  return f(caf::meta::type_name("troupe.http_response"), x.status, x.body, x.content_type, x.route,
           x.retry_after, x.set_cid, x.stream_id, x.route_key, x.headers, x.deferred_ms);
}

/// The front's side of one in-flight request: it holds the request (shared,
/// never copied, never changed) and takes the answer; an actor calls deliver()
/// exactly once. An implementation learns that the request was dropped
/// unanswered (its actor died with it in the mailbox) when it is destroyed undelivered.
class reply_slot {
public:
  virtual ~reply_slot() = default;
  virtual const http_request& request() const = 0;
  virtual void deliver(http_response&& response) = 0;
  /// The answer is deferred (user_actor_base::defer): wait for it `from_now`
  /// from now instead of the request deadline. May come several times before
  /// deliver(); a slot that cannot wait longer ignores it.
  virtual void extend(std::chrono::milliseconds /*from_now*/) {}
};

/// The local fast path's continuation (never serialized: front and actor share
/// a process). Requests from another node use the request/response form instead.
using local_reply = std::shared_ptr<reply_slot>;

/// A JSON error body {"error": text}.
std::string error_body(const std::string& text);

/// An http_response carrying {"error": text}.
http_response error_response(std::uint16_t status, const std::string& text,
                             std::uint32_t retry_after = 0);

/// Registers every message type of troupe with `cfg` (and troupe's error category).
void register_types(caf::actor_system_config& cfg);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::local_reply)
