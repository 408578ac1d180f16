#pragma once
/// \file
/// The API a troupe user writes against: a user actor type with a state,
/// login/logout, identities, messages between users. What a request and its
/// answer are (requests, responses, streams, promises, uploads, sockets) is in
/// <troupe/http.hpp>; how a type declares its routes, in <troupe/routes.hpp>.
/// See README "Write your own actor type" and samples/.

#include <troupe/codec.hpp>
#include <troupe/detail/fwd.hpp>
#include <troupe/detail/traits.hpp>
#include <troupe/detail/wire.hpp>
#include <troupe/http.hpp>
#include <troupe/routes.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace troupe {

struct http_request;
struct push_outcome;
class user_actor_base;

/// What became of a message sent with tell(): delivered (the recipient's
/// handler ran and returned), or refused and why. The sender always learns one.
struct tell_outcome {
  enum class result : std::uint8_t {
    delivered = 0,
    unknown_user,    ///< nobody of that name: never live here and no parcel (nobody is created by a message)
    not_accepted,    ///< his actor type declares no handler for this message type
    too_big,         ///< past limits.max_message_bytes
    invalid,         ///< not a user name (guests cannot be told), or bytes that do not decode as the type
    unavailable,     ///< he could not be reached or woken in time (queue full, quarantined, degraded, timeout …): retry
    handler_failed,  ///< his handler threw: nothing it changed is kept (his actor restarts, as for a request)
  };
  result what = result::unavailable;
  std::string text;  ///< why, in one line, for a refusal ("" when delivered)

  bool delivered() const noexcept { return what == result::delivered; }
  /// The HTTP status a handler may answer with: 200, 404 unknown_user, 422
  /// not_accepted, 413 too_big, 400 invalid, 503 unavailable, 502 handler_failed.
  std::uint16_t status() const noexcept;
};

/// "delivered", "unknown_user", "not_accepted", … (also the metric label).
const char* to_string(tell_outcome::result r) noexcept;


/// Thrown by a message handler's decoding step when the bytes are not the
/// declared message type (the sender learns tell_outcome::result::invalid).
class bad_message : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The messages one user actor type accepts, type-erased: stable name →
/// handler. Built once per type (app_types::add), shared by all its users.
/// Write them with message_table<Self>.
class message_router {
public:
  /// Decodes the bytes (throws bad_message when they do not decode) and runs
  /// the type's handler for the recipient `self`; `from` is the sender's user name.
  using handler = std::function<void(user_actor_base& self, const store::bytes& data, const std::string& from)>;

  /// Adds the handler of message `name`. Throws std::invalid_argument for a
  /// name outside 1-64 of [A-Za-z0-9_.:-] or one declared twice.
  message_router& on(std::string name, handler h);
  /// The handler of message `name`, or nullptr (the type does not accept it).
  const handler* find(std::string_view name) const;
  std::size_t size() const noexcept { return handlers_.size(); }
  std::vector<std::string> names() const;

  /// True for a usable message name: 1-64 of [A-Za-z0-9_.:-].
  static bool valid_name(std::string_view name) noexcept;

private:
  std::map<std::string, handler, std::less<>> handlers_;
};


/// The messages user actor type `Self` accepts, as its `static void
/// messages(troupe::message_table<Self>& m)` declares them. A message type M
/// is a struct with MSGPACK_DEFINE / MSGPACK_DEFINE_MAP (its wire form) and a
/// stable `static constexpr const char* message_name` (or a name given here).
/// A handler takes `(Self& u, const M& m)` or `(Self& u, const M& m, const
/// std::string& from)` and returns nothing; it runs in the recipient's actor
/// like a request (one at a time with his requests; may mutate()).
template <class Self>
class message_table {
public:
  explicit message_table(message_router& r) : r_(r) {}

  template <class M, class F>
  message_table& on(F f) { return on<M>(detail::message_name_of<M>(), std::move(f)); }

  template <class M, class F>
  message_table& on(std::string name, F f) {
    static_assert(std::is_default_constructible_v<M>, "a message type is default-constructible");
    r_.on(std::move(name), [f = std::move(f)](user_actor_base& self, const store::bytes& data, const std::string& from) {
      M m{};
      try {
        store::unpack(data, m);
      } catch (const store::codec_error& e) {
        throw bad_message(e.what());
      }
      if constexpr (std::is_invocable_v<F&, Self&, const M&, const std::string&>) {
        std::invoke(f, static_cast<Self&>(self), m, from);
      } else {
        static_assert(std::is_invocable_v<F&, Self&, const M&>,
                      "a message handler takes (Self&, const M&) or (Self&, const M&, const std::string& from)");
        (void)from;
        std::invoke(f, static_cast<Self&>(self), m);
      }
    });
    return *this;
  }

private:
  message_router& r_;
};

/// What a push reached: pages whose open channel took the frame, and pages
/// that were not written to (no open channel, gone, another connection's,
/// or a socket that refused it).
struct push_outcome {
  std::uint32_t delivered = 0;
  std::uint32_t not_delivered = 0;
};

}  // namespace troupe

// The platform side of a user actor (needs the types above complete).
#include <troupe/detail/host.hpp>

namespace troupe {

/// A user's state as an earlier version of his actor type stored it: the
/// version it was written with and its msgpack bytes. user_actor::migrate()
/// reads it as the State type that version had.
class stored_state {
public:
  stored_state(std::uint32_t version, const store::bytes& data) : version_(version), data_(data) {}
  /// The state version the parcel was written with (1 for parcels from before versions).
  std::uint32_t version() const noexcept { return version_; }
  /// Decodes the bytes as `Old` (that version's State); throws store::codec_error.
  template <class Old>
  Old as() const {
    Old out{};
    store::unpack(data_, out);
    return out;
  }
  /// The raw msgpack bytes, for a migration that reads fields by hand.
  const store::bytes& bytes() const noexcept { return data_; }

private:
  std::uint32_t version_;
  const store::bytes& data_;
};

/// The base of every user actor type; derive from user_actor<State>.
/// One instance serves exactly one user, one request at a time: its state
/// needs no locks.
class user_actor_base {
public:
  virtual ~user_actor_base() = default;

  // A type declares its HTTP routes with a static member, called once per
  // type (not per user) when it is registered:
  //     static void routes(troupe::route_table<Self>& r);

protected:
  /// The user this instance serves ("alice", or "guest_<connection>").
  const std::string& user() const { return host_->user(); }
  /// The connection (cookie id) of the request being served.
  const std::string& connection() const { return host_->connection(); }
  /// The page (X-Troupe-Page) of the request being served; "" when none.
  const std::string& page() const { return host_->page(); }
  const std::string& node() const { return host_->node(); }
  const std::string& worker() const { return host_->worker(); }
  /// True while this user is a guest (nobody logged in on the connection).
  bool guest() const;

  /// {"user","connection","node","worker"} of the request being served.
  nlohmann::json identity() const;

  /// A JSON reply.
  static response json(const nlohmann::json& body, std::uint16_t status = 200) {
    return response::json(body, status);
  }

  /// Moves the current connection to user `name` and answers his identity().
  /// If he is not live, what this guest accumulated becomes his store; if he
  /// is, his resident state wins and the guest's is dropped (logged).
  /// Throws bad_request for an invalid name (1–64 of [A-Za-z0-9_.@-], not guest_*).
  response login(const std::string& name) const;

  /// Moves the current connection to a fresh guest and answers its identity().
  response logout() const;

  /// Answers with `then()` after `delay`, without blocking any thread. This
  /// user's later requests wait their turn; other users are served meanwhile.
  static response after(std::chrono::milliseconds delay, std::function<response()> then);

  /// Answers later, from any later event: `start(p)` runs in this actor as soon
  /// as the handler returns, with the promise `p` of this request to keep and
  /// complete with p.resolve(answer). Unlike after(), this user serves his other
  /// requests and messages meanwhile. Past `timeout` (at most
  /// limits.max_deferred_seconds; p.keep_alive() moves it) the client gets 504. A
  /// user holding a promise neither rests nor freezes for idleness; one who
  /// leaves (a soft quit, a freeze, a restart) answers it 503 + Retry-After.
  /// At most limits.user_queue_length promises are open per user (503 past it).
  static response defer(std::chrono::milliseconds timeout, std::function<void(promise)> start);

  // -- the global store (shared by all users; see README "The global store") -------
  // Each call answers later, blocking nothing: `then` runs in this actor when the
  // store has answered and its response is the request's answer. A refusal by
  // the store answers the request with an error status (400 invalid key, 413
  // value too big, 409 lease expired or key leased, 503 + Retry-After when the
  // wait for a lease was too long or its queue full, or when the deposit refused
  // a change under commander.durability "reply" — nothing applied —, 503 without
  // Retry-After when a change's outcome is unknown) unless `then` takes it.

  /// Reads `key`; then(value or nullopt).
  static response global_get(std::string key, std::function<response(const std::optional<std::string>&)> then);
  /// Writes `key` (refused while somebody holds its lease).
  static response global_set(std::string key, std::string value, std::function<response()> then);
  /// Erases `key`; then(true if it existed).
  static response global_erase(std::string key, std::function<response(bool existed)> then);
  /// An exclusive lease on a key: its fencing token and the value it had.
  struct lease_grant {
    std::string key;
    std::uint64_t token = 0;
    std::optional<std::string> value;
  };
  /// Takes the lease of `key` for `ttl` (waiting at most `wait` behind other
  /// holders, in FIFO order); then(grant). End it with global_commit or
  /// global_abort; a lease past its TTL is reclaimed and its commit refused (409).
  static response global_lease(std::string key, std::chrono::milliseconds ttl,
                               std::function<response(const lease_grant&)> then,
                               std::chrono::milliseconds wait = std::chrono::seconds(5));
  /// Installs the complete new value (nullopt erases the key) and ends the lease.
  static response global_commit(const lease_grant& lease, std::optional<std::string> value,
                                std::function<response()> then);
  /// Ends the lease with nothing applied.
  static response global_abort(const lease_grant& lease, std::function<response()> then);
  /// Read-modify-write under an exclusive lease: `modify(current)` returns the
  /// complete new value (nullopt erases the key), which is committed; then(new
  /// value). If `modify` throws, nothing is applied: the lease goes back when
  /// this actor goes down (it is restarted, as for any failed handler).
  static response with_lease(std::string key, std::chrono::milliseconds ttl,
                             std::function<std::optional<std::string>(const std::optional<std::string>&)> modify,
                             std::function<response(const std::optional<std::string>&)> then,
                             std::chrono::milliseconds wait = std::chrono::seconds(5));

  // -- pushing to pages (docs/channels.md) -------------------------------------------
  // A push writes {"push": path, "data": data} on the channel (WebSocket) of a
  // page that opened one; `done` (optional) runs in this actor once every
  // target page has been tried, with what was delivered.

  /// Pushes to this user's page `page`.
  void push(std::string page, std::string path, nlohmann::json data,
            std::function<void(const push_outcome&)> done = {});
  /// Pushes to every page of this user.
  void push_all(std::string path, nlohmann::json data, std::function<void(const push_outcome&)> done = {});
  /// Pushes to every page of each of `users` that is live (a frozen user has
  /// no open channel: he is not woken for a push, his pages count as not delivered).
  void push_users(std::vector<std::string> users, std::string path, nlohmann::json data,
                  std::function<void(const push_outcome&)> done = {});
  /// Pushes to every page of this user and answers the request with
  /// `then(outcome)` once every page has been tried (later requests of this
  /// user wait their turn meanwhile, as with after()).
  static response after_push_all(std::string path, nlohmann::json data,
                                 std::function<response(const push_outcome&)> then);
  /// Pushes to page `page` (as push()) and answers with `then(outcome)`.
  static response after_push(std::string page, std::string path, nlohmann::json data,
                             std::function<response(const push_outcome&)> then);
  /// Pushes to the pages of `users` (as push_users()) and answers with `then(outcome)`.
  static response after_push_users(std::vector<std::string> users, std::string path, nlohmann::json data,
                                   std::function<response(const push_outcome&)> then);

  // -- app WebSockets (docs/http.md "App WebSockets") ---------------------------------

  /// This user's app socket `id` (app_socket::id()): its writes are refused
  /// (false) when it is not open for him.
  app_socket socket(const std::string& id) const;
  /// Every app socket this user has open (e.g. to write to each of his browsers).
  std::vector<app_socket> sockets() const { return host_->socket_list(); }

  /// Runs `fn` in this actor after `delay`, blocking nothing (a timer, e.g.
  /// to feed a stream). False, and nothing scheduled, when
  /// limits.user_queue_length timers are pending already. A `fn` that throws
  /// is a failed handler (the actor restarts).
  bool later(std::chrono::milliseconds delay, std::function<void()> fn) { return host_->later(delay, std::move(fn)); }

  // -- messages between users (README "Messages between users") ----------------------
  // A message goes to a user by name, wherever he lives: a live user gets it
  // in his mailbox, a frozen one is woken first; nobody is created by it. It
  // runs in his actor as his type's messages() declares it.

  /// Sends `message` (a type with `message_name` and MSGPACK_DEFINE) to user
  /// `to`; `done` (optional) runs in this actor with what became of it.
  template <class M>
  void tell(std::string to, const M& message, std::function<void(const tell_outcome&)> done = {}) {
    host_->tell(detail::tell_order{detail::encode_message(std::move(to), message), std::move(done)});
  }
  /// The same, as the answer of the request being served: `then(outcome)`
  /// runs in this actor once the recipient ran his handler or it was refused,
  /// and its response is the request's answer.
  template <class M>
  static response tell_then(std::string to, const M& message, std::function<response(const tell_outcome&)> then) {
    return tell_encoded(detail::encode_message(std::move(to), message), std::move(then));
  }
  static response tell_encoded(detail::encoded_message message, std::function<response(const tell_outcome&)> then);

  /// The sender of the message being handled ("" outside a message handler).
  const std::string& message_sender() const { return host_->message_sender(); }

  /// Tells the platform the state changed (user_actor::mutate() calls it).
  void changed() { host_->changed(); }

private:
  friend struct detail::user_access;
  /// The store projected to JSON for the census console (GET
  /// /_troupe/actors/user:NAME). user_actor<State> projects State through its
  /// nlohmann `to_json` when it has one, null otherwise; override to show
  /// something else (or less: the console shows what this returns to operators).
  virtual nlohmann::json project_state() const { return nullptr; }
  virtual store::bytes save_state() const = 0;
  /// Installs a state stored with `version`; throws (store::codec_error or any
  /// exception of a migration) leaving the current state untouched.
  virtual void load_state(const store::bytes& data, std::uint32_t version) = 0;
  /// Back to a default-constructed State (a user who never had one).
  virtual void reset_state() = 0;
  /// The version of the state this type stores (user_actor<State>::state_version).
  virtual std::uint32_t stored_version() const noexcept = 0;
  detail::user_host* host_ = nullptr;
};

/// A user actor type whose store is `State` (default-constructible and
/// msgpack-serializable: MSGPACK_DEFINE / MSGPACK_DEFINE_MAP). A State with an
/// nlohmann `to_json` (e.g. NLOHMANN_DEFINE_TYPE_INTRUSIVE) is shown as JSON
/// in the census console.
///
/// State versions: a parcel records the version of the State it holds. When
/// State changes shape in a way msgpack cannot read back (a field changes type,
/// MSGPACK_DEFINE's positional array changes), raise `state_version()` and
/// implement `migrate()`, which turns what an older version stored into today's
/// State. A parcel that does not decode (or that no migration takes, or that a
/// newer version wrote) is never loaded half or silently emptied: it is
/// quarantined and the user is refused (503) until an operator acts.
template <class State>
class user_actor : public user_actor_base {
public:
  using state_type = State;

  /// The version of State this type writes (default 1; parcels written before
  /// versions existed count as 1). Override to raise it.
  virtual std::uint32_t state_version() const noexcept { return 1; }

  /// Today's State from one stored by an older version (old.version() <
  /// state_version()); e.g. `auto v1 = old.as<cart_v1>(); return cart{...};`.
  /// The default refuses: an older parcel with no migration is quarantined.
  virtual State migrate(const stored_state& old) {
    throw store::codec_error("no migration from state version " + std::to_string(old.version()) + " to "
                             + std::to_string(state_version()));
  }

protected:
  /// The user's store, read-only.
  const State& state() const noexcept { return state_; }
  /// The user's store, for changing it (marks it changed).
  State& mutate() {
    changed();
    return state_;
  }

  nlohmann::json project_state() const override {
    if constexpr (std::is_constructible_v<nlohmann::json, const State&>)
      return nlohmann::json(state_);
    else
      return nullptr;
  }

private:
  store::bytes save_state() const override { return store::pack(state_); }
  void load_state(const store::bytes& data, std::uint32_t version) override {
    auto current = state_version();
    if (version == 0)
      version = 1;  // written before state versions
    if (version == current)
      return store::unpack(data, state_);
    if (version > current)
      throw store::codec_error("state version " + std::to_string(version) + " is newer than this application's "
                               + std::to_string(current));
    state_ = migrate(stored_state(version, data));
  }
  void reset_state() override { state_ = State{}; }
  std::uint32_t stored_version() const noexcept override { return state_version(); }
  State state_{};
};


/// The user actor types a node can host, by name (a group's `user_type`).
///
/// The login routing hook: a type may declare
///
///     static std::optional<std::string> login_group(std::string_view user);
///
/// A login from one of its users (a guest of its group) into `user` then goes
/// to the [[group]] it names (e.g. staff users to group "staff"); nullopt, or
/// a group the recipe does not have, keeps the default. A user's parcel wins
/// over the hook: a user with a past wakes in the group he lived in while it
/// exists (docs/SUPERVISION.md "Groups and placement"). It runs on the
/// commander's thread for every login: keep it cheap and pure.
class app_types {
public:
  using factory = std::function<std::unique_ptr<user_actor_base>()>;
  using login_router = std::function<std::optional<std::string>(std::string_view)>;

  template <class T>
  app_types& add(std::string name) {
    static_assert(std::is_base_of_v<user_actor_base, T>, "T must derive from troupe::user_actor<State>");
    entry e;
    e.make = [] { return std::make_unique<T>(); };
    // The type's routes, built once: its user actors share them.
    auto built = std::make_shared<router>();
    if constexpr (detail::has_routes<T>::value) {
      route_table<T> table(*built);
      T::routes(table);
    }
    built->name_routes(name);
    e.routes = std::move(built);
    // Its messages (README "Messages between users"), built once the same way.
    auto accepted = std::make_shared<message_router>();
    if constexpr (detail::has_messages<T>::value) {
      message_table<T> table(*accepted);
      T::messages(table);
    }
    e.messages = std::move(accepted);
    if constexpr (detail::has_login_group<T>::value)
      e.login_group = [](std::string_view user) -> std::optional<std::string> { return T::login_group(user); };
    types_[std::move(name)] = std::move(e);
    return *this;
  }
  /// The factory registered as `name`, or nullptr.
  const factory* find(const std::string& name) const;
  /// The routes of type `name` (built once, shared by its users), or nullptr.
  const router* routes(const std::string& name) const;
  /// The messages type `name` accepts (built once, shared), or nullptr.
  const message_router* messages(const std::string& name) const;
  std::vector<std::string> names() const;
  /// What type `name`'s login hook says of a login into `user` (nullopt: no
  /// hook, no such type, or the hook leaves him to the default).
  std::optional<std::string> login_group(const std::string& name, std::string_view user) const;

private:
  struct entry {
    factory make;
    std::shared_ptr<const router> routes;
    std::shared_ptr<const message_router> messages;
    login_router login_group;  // empty: the type has no hook
  };
  std::map<std::string, entry> types_;
};

/// app_types holding `T` under `name`; chain .add<U>("other") for more.
template <class T>
app_types user_types(std::string name) {
  app_types types;
  types.add<T>(std::move(name));
  return types;
}

}  // namespace troupe
