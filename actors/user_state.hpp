#pragma once
/// \file
/// Internal to the user actor (actors/user*.cpp): his actor's state. The
/// decisions (phase, what runs, what waits, checkpoints, idleness, freezing)
/// are user_core's; this is the glue that carries them out, split by concern:
///   user.cpp            the behaviour, the census, the core's effects
///   user_requests.cpp   HTTP requests: admission, handlers, deferred steps, durable replies
///   user_messages.cpp   messages between users (tell)
///   user_channels.cpp   pages, channels, pushes
///   user_streams.cpp    streams and later() timers
///   user_promises.cpp   deferred answers (defer(), promises)
///   user_sockets.cpp    app WebSockets (route_table::websocket)
///   user_lifecycle.cpp  wake, freeze, checkpoints, rest, login/logout, leaving

#include "actors/census.hpp"
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/global_store.hpp"
#include "actors/lazy.hpp"
#include "actors/stream_book.hpp"
#include "actors/user.hpp"
#include "actors/user_core.hpp"
#include "actors/user_store.hpp"
#include "registry/census_model.hpp"
#include "registry/clocks.hpp"

#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <variant>

namespace troupe {

using user_promise = caf::typed_response_promise<http_response>;
/// A deferred answer to a request from another node: a message to its forwarder (deferred_answer_handle).
struct forwarded_answer {
  deferred_answer_handle to;
  std::uint64_t ref = 0;
};
using reply_to = std::variant<local_reply, user_promise, forwarded_answer>;

/// A request waiting for its turn, or being served.
struct pending_call {
  std::shared_ptr<const http_request> req;  // the local path shares the front's slot
  reply_to to;
  const std::string* route = nullptr;  // the matched route's metrics key (in the type's router, shared)
};

/// A request whose handler deferred its answer (user_actor_base::defer): it
/// waits here, not in his queue, until the actor resolves it or its deadline.
struct parked_answer {
  using clock = std::chrono::steady_clock;
  /// A streamed body being read for it (response::receive).
  struct upload_read {
    upload_handlers handlers;
    upload_source_handle source;
    std::uint64_t received = 0;
    clock::time_point last_piece;  // its deadline moves with the pieces
  };
  pending_call call;
  clock::time_point deadline;  // 504 then
  clock::time_point latest;    // keep_alive() moves the deadline up to here, never past
  std::unique_ptr<upload_read> upload;
};

/// A message from another user waiting for its turn (README "Messages between users").
struct pending_message {
  user_message msg;
  caf::typed_response_promise<tell_reply> to;
};

inline const std::string no_name;

/// Deposit writes and reads of his own are given this long.
constexpr auto deposit_timeout = std::chrono::seconds(30);

std::int64_t unix_ms(registry::wall_clock::time_point t);

/// Counts one handler in his user_busy: when he was last active and, with CPU
/// admission on, how long the handler ran (one relaxed add each for him and
/// his worker; no lock, no log).
class busy_scope {
public:
  explicit busy_scope(user_busy* b) : busy_(b) {
    if (busy_ && busy_->worker_busy_ns)
      t0_ = std::chrono::steady_clock::now();
  }
  ~busy_scope() { done(); }
  /// Counts it now, before the answer is sent, so a beat after the answer sees it; once.
  void done();
  busy_scope(const busy_scope&) = delete;
  busy_scope& operator=(const busy_scope&) = delete;

private:
  user_busy* busy_;
  std::chrono::steady_clock::time_point t0_{};
};

struct user_state : detail::user_host, user_effects {
  static const char* name;

  user_handle::stateful_pointer<user_state> self = nullptr;
  node_context_ptr ctx;
  std::optional<actor_gauge> gauge;
  std::string user_name;
  std::string worker_name;
  std::string type_name;  // his group's user_type (placement::type)
  commander_for_users commander;
  global_store_handle global_store;
  deposit_handle deposit;
  registry::wall_clock::time_point started{};
  std::optional<user_core> core;     // his phase and what follows from it
  std::optional<user_store> keeper;  // his type's instance, his state's generation and last good state
  user_supervisor supervisor;        // his worker: his timers go through it, his restarts start from it
  const router* routes = nullptr;            // his type's, shared
  const message_router* messages = nullptr;  // the messages his type accepts, shared
  registry::clocks clocks;
  std::shared_ptr<const group_gate> gate;  // his group degraded: he refuses every request
  // His placement's owner epoch: a write the deposit refuses as stale (a
  // newer placement holds him elsewhere) makes him leave, writing nothing.
  std::uint64_t owner_epoch = 0;
  // Connections adopted while he wakes: saved only once he is known to be
  // here (answered then; a fenced or failed wake answers them with its error).
  std::vector<std::pair<std::string, caf::typed_response_promise<placement>>> adoptions_after_wake;
  connection_table connections;

  // The census: told of every change of state or counts (never per request);
  // the meter counts what he handles, read only by the census's probe.
  census_member_view census;
  actor_meter meter;
  std::uint32_t restarts = 0;
  registry::user_state shown = registry::user_state::active;

  // What waits for its turn (bounded by user_queue_length each). Lists: an
  // empty deque allocates ~600 bytes, per user.
  std::list<pending_call> backlog;
  std::list<pending_message> message_backlog;
  std::vector<std::function<void()>> told_after_write;  // tell_then answers that came during a message's write
  const std::string* current_sender = &no_name;        // the sender of the message being handled
  // Outcomes of tell()s refused before they left (too big, invalid name): run
  // once the handler that sent them has returned, never inside it.
  std::vector<std::pair<std::function<void(const tell_outcome&)>, tell_outcome>> told_early;
  lazy<pending_call> deferred_call;  // after(): the request sleeping until its resume tick
  lazy_function<response> deferred_then;
  std::vector<caf::typed_response_promise<bool>> freeze_waiters;
  std::map<std::uint64_t, parked_answer> parked;  // deferred answers (defer()), by promise id
  std::uint64_t parked_seq = 0;

  std::shared_ptr<user_busy> cost;  // his cost, read by his worker's admission (null: not counted)

  // The request being served, for the identity accessors.
  const std::string* current_cid = &no_name;
  const std::string* current_page = &no_name;

  // Only a user who streams or sets timers pays for them (one pointer otherwise).
  std::unique_ptr<stream_book> books;

  bool stopped() const { return core->terminal(); }

  // -- detail::user_host (the application's view) -----------------------------------
  const std::string& user() const override { return user_name; }
  const std::string& connection() const override { return *current_cid; }
  const std::string& page() const override { return *current_page; }
  const std::string& node() const override { return ctx->node_name; }
  const std::string& worker() const override { return worker_name; }
  void changed() override { core->changed(); }
  caf::local_actor* actor() override;
  const std::string& message_sender() const override { return *current_sender; }
  void tell(detail::tell_order order) override;
  void push(detail::push_order order) override { push_now(std::move(order)); }
  stream_write stream_send(std::uint64_t id, std::string_view data, std::string_view name, std::string_view event_id,
                           bool as_json) override;
  stream_write stream_retry(std::uint64_t id, std::uint64_t ms) override;
  stream_write send_frame(std::uint64_t id, stream_book::entry& stream, std::string frame);
  void stream_close(std::uint64_t id) override;
  stream_status stream_state(std::uint64_t id) const override;
  bool later(std::chrono::milliseconds delay, std::function<void()> fn) override;
  bool promise_resolve(std::uint64_t id, response&& answer) override;
  bool promise_keep_alive(std::uint64_t id, std::chrono::milliseconds from_now) override;
  bool promise_open(std::uint64_t id) const override { return parked.count(id) > 0; }
  bool socket_send(const std::string& id, std::string data, std::uint8_t kind, std::uint16_t code) override;
  bool socket_open(const std::string& id) const override;
  std::vector<app_socket> socket_list() override;

  // -- user_effects (user.cpp, user_lifecycle.cpp) ------------------------------------
  void arm_timer(user_timer which, std::chrono::milliseconds delay, std::uint64_t arg) override;
  bool serve_waiting_message() override;
  bool serve_waiting_request() override;
  void write_checkpoint() override;
  void hold_routing() override;
  void write_freeze_parcels(std::uint8_t cause, std::uint64_t attempt) override;
  void thaw() override;
  void answer_sleeper() override;
  void settle_adoptions(bool ok) override;
  void show(registry::user_state s) override { note(s); }
  void leave(user_exit why) override;
  bool state_pristine() const override { return keeper->pristine(); }

  // -- the census (user.cpp) ----------------------------------------------------------
  void note(std::optional<registry::user_state> now = std::nullopt);
  actor_probe probe(std::uint64_t query, bool detail);
  void on_tick(std::uint8_t which, std::uint64_t arg);
  idle_facts idleness() const;
  bool holds_live_work() const;
  void log_deposit_error(const char* doing, const caf::error& err);

  // -- requests (user_requests.cpp) -------------------------------------------------
  bool expired(pending_call& call, std::int64_t now_ms);
  void accept(pending_call&& call);
  void serve(pending_call&& call);
  template <class F>
  void run(pending_call&& call, F&& fn);
  void fail(pending_call& call, const char* what);
  std::vector<http_header> checked_headers(const pending_call& call, response& out);
  static http_response plain_answer(const pending_call& call, response&& out, std::vector<http_header>&& headers);
  void finish(pending_call&& call, response&& out);
  void await_global(pending_call&& call, detail::continuation&& step);
  void await_push(pending_call&& call, detail::continuation&& step);
  void resume(std::uint64_t id);
  void reply_when_durable(pending_call&& call, http_response&& r);
  static void respond(reply_to& to, http_response&& r);
  static http_response routed(const pending_call& call, http_response r);

  // -- messages between users (user_messages.cpp) -------------------------------------
  void count_outcome(const tell_outcome& o);
  caf::duration message_timeout() const;
  void send_message(detail::encoded_message m, std::function<void(const tell_outcome&)> then, bool early);
  void await_tell(pending_call&& call, detail::continuation&& step);
  void flush_told_early();
  template <class F>
  void run_callback(F&& fn);
  void fail_outside(const char* what, const char* why);
  void accept_message(pending_message&& pm);
  void serve_message(pending_message&& pm);
  void end_message_write();
  void deliver_when_durable(pending_message&& pm);

  // -- pages, channels, pushes (user_channels.cpp) -------------------------------------
  std::optional<http_response> touch_page(connection_record& conn, const std::string& page_id,
                                          registry::wall_clock::time_point now);
  std::optional<http_response> channel_gate(connection_record& conn, const http_request& req,
                                            registry::wall_clock::time_point now);
  void restore_channels(std::vector<channel_binding>& bound);
  std::vector<channel_binding> open_channels() const;
  void forget_channel(const std::string& cid, const std::string& page, const channel_ref& socket);
  void push_now(detail::push_order order, const std::string* encoded = nullptr);
  void detach(const std::string& cid);

  // -- app WebSockets (user_sockets.cpp) -------------------------------------------------
  void serve_socket(pending_call&& call, connection_record& conn, registry::wall_clock::time_point now);
  void open_socket(pending_call&& call, connection_record& conn, registry::wall_clock::time_point now);
  app_socket socket_value(const page_record& p);
  page_record* find_socket(const std::string& id, connection_record** conn = nullptr);
  void drop_socket(const std::string& cid, const std::string& id);
  void socket_gone(connection_record& conn, page_record& p);

  // -- streams and later() (user_streams.cpp) -------------------------------------------
  stream_book& the_books();
  bool streaming_now() const { return books && books->streams() > 0; }
  void open_stream(pending_call&& call, detail::continuation&& next, std::vector<http_header> headers);
  void end_stream_here(std::uint64_t id);
  void on_stream_event(stream_event& ev);
  void notify(std::uint64_t id, std::function<void(stream&)> stream_handlers::*which);
  template <class F>
  void call_app(F&& fn);
  void on_down(const caf::down_msg& m);
  void run_timer(std::uint64_t id);

  // -- deferred answers (user_promises.cpp) ---------------------------------------------
  parked_answer* park(pending_call&& call, std::chrono::milliseconds timeout, std::uint64_t& id);
  void defer_answer(pending_call&& call, detail::continuation&& next);
  void receive_upload(pending_call&& call, detail::continuation&& next);
  void on_upload_piece(upload_piece& piece);
  template <class F>
  bool run_upload_callback(std::uint64_t id, const char* what, F&& fn);
  void resolve_parked(std::uint64_t id, response&& answer);
  void arm_deadline(std::uint64_t id, parked_answer& p, parked_answer::clock::time_point now);
  void deferred_due(std::uint64_t id);
  void answer_parked();

  // -- wake, freeze, checkpoints, rest, login (user_lifecycle.cpp) --------------------------
  placement where() const;
  store::parcel make_parcel(store::parcel_cause cause);
  store::bytes carried_store();
  void move_connection(pending_call&& call, std::optional<std::string> target);
  void wake(store::bytes carried);
  void refuse(const store::parcel& p, const std::string& why);
  void become_refused();
  void install_encoded(const store::bytes& encoded, const char* what);
  void freeze(std::uint8_t cause, std::optional<caf::typed_response_promise<bool>> waiter);
  store::parcel connection_parcel(const connection_record& conn, store::parcel_cause why);
  caf::result<placement> save_connection(const std::string& cid);
  void save_connection(const std::string& cid, caf::typed_response_promise<placement> promise);
  void resume_from_rest(resting_user& left);
  void rest();
  void leave_frozen();
  void leave_fenced();
  void leave_for_group();
  void leave_not_woken();
  void leave_failed();
  void retire();
};

// -- templates shared by the files above ---------------------------------------------------

// Runs application code for `call`: an http_error is the client's answer,
// anything else thrown is a failed handler (502, and this actor restarts).
template <class F>
void user_state::run(pending_call&& call, F&& fn) {
  busy_scope timed{cost.get()};
  current_cid = &call.req->cid;
  current_page = &call.req->page;
  // Outside the handler no request is being served: identities read "" (a
  // push from a timer or a message looks its page up on every connection).
  struct unset {
    user_state& st;
    ~unset() { st.current_cid = st.current_page = &no_name; }
  } unset_after{*this};
  response out;
  try {
    out = fn();
  } catch (const http_error& e) {
    out = response::error(e.status(), e.what());
    out.retry_after = e.retry_after();
  } catch (const std::exception& e) {
    return fail(call, e.what());
  } catch (...) {
    return fail(call, "unknown exception");
  }
  timed.done();
  finish(std::move(call), std::move(out));
  flush_told_early();
}

// Application code run outside any request (a tell()'s done): a throw is a
// handler failure, as for a request (he restarts from his last good state).
template <class F>
void user_state::run_callback(F&& fn) {
  if (stopped())
    return;
  busy_scope timed{cost.get()};
  try {
    fn();
  } catch (const std::exception& e) {
    return fail_outside("a tell callback", e.what());
  } catch (...) {
    return fail_outside("a tell callback", "unknown exception");
  }
  timed.done();
  if (!core->busy() && core->take_change())
    keeper->keep_as_good();
  flush_told_early();
}

// Application code outside a request (stream callbacks, timers): what a
// request handler would do — a throw is a failed handler.
template <class F>
void user_state::call_app(F&& fn) {
  if (stopped())
    return;
  busy_scope timed{cost.get()};
  current_cid = &no_name;
  current_page = &no_name;
  try {
    fn();
  } catch (const std::exception& e) {
    return fail_outside("a stream callback or timer", e.what());
  } catch (...) {
    return fail_outside("a stream callback or timer", "unknown exception");
  }
  if (core->take_change())
    keeper->keep_as_good();
}

}  // namespace troupe
