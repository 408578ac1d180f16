#include "actors/user.hpp"

#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/census.hpp"
#include "actors/channel.hpp"
#include "actors/connection_table.hpp"
#include "actors/lazy.hpp"
#include "actors/user_access.hpp"
#include "actors/user_store.hpp"
#include "registry/census_model.hpp"
#include "registry/clocks.hpp"
#include "registry/ids.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <list>
#include <map>
#include <optional>
#include <unordered_map>
#include <variant>

namespace troupe {


namespace {

using detail::user_access;
using promise_type = caf::typed_response_promise<http_response>;
using reply_to = std::variant<local_reply, promise_type>;

struct pending_call {
  std::shared_ptr<const http_request> req;  // the local path shares the front's slot
  reply_to to;
  const std::string* route = nullptr;  // the matched route's metrics key (in the type's router, shared)
};

// A message from another user waiting for its turn (README "Messages between users").
struct pending_message {
  user_message msg;
  caf::typed_response_promise<tell_reply> to;
};

std::int64_t unix_ms(registry::wall_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

const std::string no_name;

enum class durability { freeze, interval, reply };

durability durability_of(const std::string& name) {
  return name == "reply" ? durability::reply : name == "interval" ? durability::interval : durability::freeze;
}


constexpr std::uint8_t idle_tick = 0;
// How far ahead an idle check is scheduled at most (see schedule_idle).
constexpr std::chrono::milliseconds idle_timer_horizon{10000};
constexpr std::uint8_t checkpoint_tick = 1;
constexpr std::uint8_t resume_tick = 2;
constexpr std::uint8_t later_tick = 3;  // a timer of later(), number `arg`
constexpr auto deposit_timeout = std::chrono::seconds(30);

// Counts one handler in his user_busy: when he was last active and, with CPU
// admission on, how long the handler ran (one relaxed add each for him and his
// worker; no lock, no log).
class busy_scope {
public:
  explicit busy_scope(user_busy* b) : busy_(b) {
    if (busy_ && busy_->worker_busy_ns)
      t0_ = std::chrono::steady_clock::now();
  }
  ~busy_scope() { done(); }
  // Counts it now, before the answer is sent, so a beat after the answer sees it; once.
  void done() {
    if (!busy_)
      return;
    auto* b = std::exchange(busy_, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    b->last_active_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count(),
                            std::memory_order_relaxed);
    if (!b->worker_busy_ns)
      return;
    const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0_).count());
    b->busy_ns.fetch_add(ns, std::memory_order_relaxed);
    b->worker_busy_ns->fetch_add(ns, std::memory_order_relaxed);
  }
  busy_scope(const busy_scope&) = delete;
  busy_scope& operator=(const busy_scope&) = delete;

private:
  user_busy* busy_;
  std::chrono::steady_clock::time_point t0_{};
};

// Whether an actor awaits a response to a request it made (CAF keeps them
// protected; a member pointer named through a derived class reaches them).
struct response_peek : caf::scheduled_actor {
  static bool awaits_any(const caf::scheduled_actor& a) {
    return !(a.*(&response_peek::awaited_responses_)).empty() || !(a.*(&response_peek::multiplexed_responses_)).empty();
  }
};

struct user_state : detail::user_host {
  static const char* name;

  user_handle::stateful_pointer<user_state> self = nullptr;
  node_context_ptr ctx;
  std::optional<actor_gauge> gauge;
  std::string user_name;
  std::string worker_name;
  commander_handle commander;
  global_store_handle global_store;
  deposit_handle deposit;
  durability mode = durability::freeze;
  std::chrono::milliseconds idle_after{0};
  std::chrono::milliseconds checkpoint_every{0};
  registry::wall_clock::time_point started{};
  std::optional<user_store> keeper;  // his type's instance, his state's generation and last good state
  user_supervisor supervisor;        // his worker: his timers go through it, his restarts start from it
  const router* routes = nullptr;  // his type's, shared
  const message_router* messages = nullptr;  // the messages his type accepts, shared
  registry::clocks clocks;
  bool dirty = false;          // changed since his last durable parcel
  bool changed_now = false;    // changed by the request being served
  std::chrono::milliseconds guest_idle_after{0};
  std::chrono::milliseconds rest_after{0};  // group.rest_idle_seconds; 0: he never rests
  // His parcel is quarantined (it does not verify, or does not load as his
  // state): he answers 503 to everything and writes nothing until an operator
  // drops him or puts back a parcel that loads (docs/deposit.md).
  lazy<std::string> refused;  // lazy<>: a pointer while empty, as in every idle user (S5)
  std::shared_ptr<const group_gate> gate;  // his group degraded: he refuses every request
  // His placement's owner epoch, and whether the deposit refused it as stale
  // (a newer placement holds him elsewhere): then he leaves, writing nothing.
  std::uint64_t owner_epoch = 0;
  bool fenced = false;
  // His wake (the claim) is under way: connections adopted meanwhile are
  // saved only once he is known to be here (answered then; a fenced or
  // failed wake answers them with its error instead of leaving them waiting).
  bool waking = false;
  std::vector<std::pair<std::string, caf::typed_response_promise<placement>>> adoptions_after_wake;
  connection_table connections;

  // The census: told of every change of state or counts (never per request);
  // the meter counts what he handles, read only by the census's probe.
  census_member_view census;
  actor_meter meter;
  std::uint32_t restarts = 0;
  registry::user_state shown = registry::user_state::active;

  // One request at a time: while a deferred answer (after/login/logout) is
  // pending, later requests wait in `backlog` (bounded by user_queue_length).
  bool busy = false;
  bool stopped = false;  // quit() was called: serve nothing more
  std::list<pending_call> backlog;  // a list: an empty deque allocates ~600 bytes, per user
  std::list<pending_message> message_backlog;  // messages waiting while he is busy (bounded by user_queue_length)
  // A request of his waits for a message's outcome (tell_then): messages for
  // him are served meanwhile, or two users telling each other would wait for
  // each other until the timeout.
  bool awaiting_tell = false;
  // A message's change is being made durable (durability "reply"): requests,
  // messages and a freeze wait for it, as for a request's (busy).
  bool message_writing = false;
  std::vector<std::function<void()>> told_after_write;  // tell_then answers that came during that write
  const std::string* current_sender = &no_name;  // the sender of the message being handled
  // Outcomes of tell()s refused before they left (too big, invalid name): run
  // once the handler that sent them has returned, never inside it.
  std::vector<std::pair<std::function<void(const tell_outcome&)>, tell_outcome>> told_early;
  lazy<pending_call> deferred_call;
  lazy_function<response> deferred_then;
  std::uint64_t deferral_id = 0;

  // Freezing: his parcels are being written; he serves nothing meanwhile.
  bool freezing = false;
  bool quitting = false;  // the freeze is the soft quit's
  std::optional<std::uint8_t> freeze_wanted;  // asked while busy: starts when the deferred answer is out
  std::vector<caf::typed_response_promise<bool>> freeze_waiters;
  bool idle_check_pending = false;
  bool checkpoint_pending = false;
  // A guest's login is on its way: the commander removes his parcel, so no
  // checkpoint of his may be written from now on (it could land after that
  // removal); a failed login lets the checkpoints go on.
  bool leaving_as_guest = false;

  std::shared_ptr<user_busy> cost;  // his cost, read by his worker's admission (null: not counted)

  // The request being served, for the identity accessors.
  const std::string* current_cid = &no_name;
  const std::string* current_page = &no_name;

  // -- detail::user_host --------------------------------------------------------
  const std::string& user() const override { return user_name; }
  const std::string& connection() const override { return *current_cid; }
  const std::string& page() const override { return *current_page; }
  const std::string& node() const override { return ctx->node_name; }
  const std::string& worker() const override { return worker_name; }
  void changed() override {
    dirty = true;
    changed_now = true;
    if (mode == durability::interval)
      schedule_checkpoint();
  }
  caf::local_actor* actor() override { return self; }
  const std::string& message_sender() const override { return *current_sender; }
  void tell(detail::tell_order order) override {
    auto done = std::move(order.done);
    send_message(std::move(order.message), [this, done](const tell_outcome& o) {
      if (done)
        run_callback([&] { done(o); });
    }, true);
  }
  void push(detail::push_order order) override { push_now(std::move(order)); }

  // -- streams and timers (docs/streaming.md) -------------------------------------
  struct stream_entry {
    stream_format format = stream_format::sse;
    stream_handlers handlers;
    streaming::credit_window credit;
    caf::actor sink;  // set when the front's sink opened it
    std::chrono::steady_clock::time_point since;
  };
  // Only a user who streams or sets timers pays for them (one pointer otherwise).
  struct stream_books {
    std::map<std::uint64_t, stream_entry> streams;
    std::uint64_t stream_seq = 0;
    std::map<std::uint64_t, std::function<void()>> timers;
    std::uint64_t timer_seq = 0;
  };
  std::unique_ptr<stream_books> books;

  stream_books& the_books() {
    if (!books)
      books = std::make_unique<stream_books>();
    return *books;
  }
  bool streaming_now() const { return books && !books->streams.empty(); }
  stream_entry* find_stream(std::uint64_t id) {
    if (!books)
      return nullptr;
    auto it = books->streams.find(id);
    return it == books->streams.end() ? nullptr : &it->second;
  }

  void open_stream(pending_call&& call, detail::continuation&& next) {
    auto& b = the_books();
    // A stream the front never opened (its session went away before the
    // answer reached it) is dropped after a request timeout: it holds a place.
    auto stale = std::chrono::steady_clock::now() - node_context::timer_millis(ctx->recipe.limits.request_timeout_seconds);
    for (auto it = b.streams.begin(); it != b.streams.end();)
      it = (!it->second.sink && it->second.since < stale) ? b.streams.erase(it) : std::next(it);
    if (b.streams.size() >= ctx->recipe.limits.max_streams_per_user) {
      ctx->metrics.stream.refusals.fetch_add(1, std::memory_order_relaxed);
      respond(call.to,
              routed(call, error_response(503, "this user has too many open streams (limits.max_streams_per_user)", 1)));
      return;
    }
    auto id = ++b.stream_seq;
    stream_entry e;
    e.format = next.ndjson ? stream_format::ndjson : stream_format::sse;
    e.handlers = std::move(next.handlers);
    e.since = std::chrono::steady_clock::now();
    http_response r;
    r.status = 200;
    r.content_type = content_type_of(e.format);
    r.stream_id = id;
    b.streams.emplace(id, std::move(e));
    respond(call.to, routed(call, std::move(r)));
  }

  void end_stream_here(std::uint64_t id) {
    if (auto* e = find_stream(id)) {
      if (e->sink)
        self->demonitor(e->sink);
      books->streams.erase(id);
    }
  }

  void on_stream_event(stream_event& ev) {
    using kind = stream_event::kind;
    auto* e = find_stream(ev.id);
    switch (static_cast<kind>(ev.what)) {
      case kind::open:
        if (!e || e->sink || !ev.sink) {  // closed (or dropped) before the front opened it: end it
          if (ev.sink)
            caf::anon_send(ev.sink, stream_msg_atom::value, stream_chunk{ev.id, {}, true});
          return;
        }
        e->sink = ev.sink;
        e->credit = streaming::credit_window(ev.bytes);
        self->monitor(e->sink);
        return notify(ev.id, &stream_handlers::open);
      case kind::credit:
        if (e && e->credit.grant(ev.bytes))
          notify(ev.id, &stream_handlers::ready);
        return;
      case kind::slow:
        if (e && e->credit.slow())
          notify(ev.id, &stream_handlers::slow);
        return;
      case kind::gone: {
        if (!e)
          return;
        auto gone = std::move(e->handlers.gone);
        end_stream_here(ev.id);
        if (gone)
          call_app([&] {
            stream w(this, ev.id);
            gone(w);
          });
        return;
      }
    }
  }

  // Runs the stream's callback `which`, if it has one (it may end the stream).
  void notify(std::uint64_t id, std::function<void(stream&)> stream_handlers::*which) {
    auto* e = find_stream(id);
    if (!e || !(e->handlers.*which))
      return;
    auto fn = e->handlers.*which;  // a copy: the callback may close (erase) its own stream
    call_app([&] {
      stream w(this, id);
      fn(w);
    });
  }

  // Application code outside a request (stream callbacks, timers): what a
  // request handler would do — a throw is a failed handler.
  template <class F>
  void call_app(F&& fn) {
    if (stopped)
      return;
    busy_scope timed{cost.get()};
    current_cid = &no_name;
    current_page = &no_name;
    try {
      fn();
    } catch (const std::exception& e) {
      return fail_outside(e.what());
    } catch (...) {
      return fail_outside("unknown exception");
    }
    if (std::exchange(changed_now, false))
      keeper->keep_as_good();
  }

  void fail_outside(const char* what) {
    ctx->metrics.handler_failures.fetch_add(1, std::memory_order_relaxed);
    ctx->handler_failure_log("user {} on {}: a stream callback or timer failed: {}; the worker restarts him",
                             registry::redact(user_name), worker_name, what);
    stopped = true;
    self->send(supervisor, restart_atom::value, user_name, keeper->last_good_encoded(ctx->node_name, worker_name));
    self->quit(make_error(errc::handler_failed));
  }

  stream_write stream_send(std::uint64_t id, std::string_view data, std::string_view name, std::string_view event_id,
                           bool as_json) override {
    auto* e = find_stream(id);
    if (!e || !e->sink || stopped)
      return stream_write::closed;
    std::string frame;
    if (e->format == stream_format::ndjson) {
      if (as_json) {
        frame.reserve(data.size() + 1);
        frame.append(data);
        frame += '\n';
      } else {
        frame = streaming::ndjson_line(nlohmann::json(std::string(data)));
      }
    } else {
      frame = streaming::sse_event(data, name, event_id);
    }
    if (frame.size() > ctx->recipe.limits.stream_max_event_bytes)
      return stream_write::too_big;
    if (!e->credit.take(frame.size())) {
      if (e->credit.became_slow()) {  // told once per spell, as a message: never inside the write that ran out
        ctx->metrics.stream.slow.fetch_add(1, std::memory_order_relaxed);
        stream_event notice;
        notice.id = id;
        notice.what = static_cast<std::uint8_t>(stream_event::kind::slow);
        self->send(self, stream_msg_atom::value, std::move(notice));
      }
      return stream_write::slow;
    }
    caf::anon_send(e->sink, stream_msg_atom::value, stream_chunk{id, std::move(frame), false});
    return stream_write::written;
  }

  void stream_close(std::uint64_t id) override {
    auto* e = find_stream(id);
    if (!e)
      return;
    if (e->sink)
      caf::anon_send(e->sink, stream_msg_atom::value, stream_chunk{id, {}, true});
    end_stream_here(id);  // not yet opened: the sink's open finds it gone and ends the stream
  }

  stream_status stream_state(std::uint64_t id) const override {
    if (!books)
      return {};
    auto it = books->streams.find(id);
    if (it == books->streams.end() || !it->second.sink)
      return {};
    return {true, it->second.credit.slow(), it->second.credit.available()};
  }

  // A sink went down (its node, its front): as if the client went away.
  void on_down(const caf::down_msg& m) {
    if (!books)
      return;
    for (auto& [id, e] : books->streams)
      if (e.sink && e.sink.address() == m.source) {
        stream_event gone;
        gone.id = id;
        gone.what = static_cast<std::uint8_t>(stream_event::kind::gone);
        return on_stream_event(gone);
      }
  }

  bool later(std::chrono::milliseconds delay, std::function<void()> fn) override {
    auto& b = the_books();
    if (stopped || b.timers.size() >= ctx->recipe.limits.user_queue_length)
      return false;
    auto id = ++b.timer_seq;
    b.timers.emplace(id, std::move(fn));
    schedule(std::max(delay, std::chrono::milliseconds(0)), later_tick, id);
    return true;
  }

  void run_timer(std::uint64_t id) {
    if (!books)
      return;
    auto it = books->timers.find(id);
    if (it == books->timers.end())
      return;
    auto fn = std::move(it->second);
    books->timers.erase(it);
    call_app([&] { fn(); });
  }

  // -- the census -------------------------------------------------------------------

  void note(std::optional<registry::user_state> now = std::nullopt) {
    if (now)
      shown = *now;
    if (!census)
      return;
    census_note n;
    n.kind = static_cast<std::uint8_t>(actor_kind::user);
    n.name = user_name;
    n.parent = worker_name;
    n.state = static_cast<std::uint8_t>(shown);
    n.connections = static_cast<std::uint32_t>(connections.size());
    n.pages = static_cast<std::uint32_t>(connections.page_count());
    n.restarts = restarts;
    self->send(census, note_atom::value, std::move(n));
  }

  static std::int64_t ms_or_zero(registry::wall_clock::time_point t) {
    return t == registry::wall_clock::time_point{} ? 0 : unix_ms(t);
  }

  static nlohmann::json seconds_or_null(registry::wall_clock::time_point t) {
    return t == registry::wall_clock::time_point{} ? nlohmann::json(nullptr) : nlohmann::json(registry::to_seconds(t));
  }

  actor_probe probe(std::uint64_t query, bool detail) {
    auto p = probe_answer(query, self->mailbox().size(), meter, restarts);
    p.last_refresh_ms = ms_or_zero(clocks.last_refresh);
    p.last_user_ms = ms_or_zero(clocks.last_user);
    p.last_rpc_ms = ms_or_zero(clocks.last_rpc);
    if (!detail)
      return p;
    nlohmann::json conns = nlohmann::json::array();
    auto clocks_of = [](const registry::clocks& c) {
      return nlohmann::json{{"last_refresh", seconds_or_null(c.last_refresh)},
                            {"last_user", seconds_or_null(c.last_user)},
                            {"last_rpc", seconds_or_null(c.last_rpc)}};
    };
    for (auto& conn : connections) {
      auto ref = connection_ref(conn.cid);
      nlohmann::json pages = nlohmann::json::array();
      for (auto& page : conn.pages)  // "actor": null while the page is a record only (virtual)
        pages.push_back({{"id", "page:" + user_name + "/" + ref + "/" + page.id}, {"page", page.id},
                         {"actor", nullptr}, {"clocks", clocks_of(page.clocks)}});
      conns.push_back({{"id", "connection:" + user_name + "/" + ref},
                       {"ref", ref},
                       {"actor", nullptr},
                       {"clocks", clocks_of(conn.clocks)},
                       {"pages", std::move(pages)}});
    }
    nlohmann::json store;
    try {
      store = user_access::project(keeper->app());
    } catch (const std::exception& e) {
      store = {{"error", std::string("the projection failed: ") + e.what()}};
    }
    p.detail = nlohmann::json{{"connections", std::move(conns)}, {"store", std::move(store)},
                              {"generation", keeper->generation()}, {"dirty", dirty}, {"backlog", backlog.size()}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return p;
  }

  // -- requests -------------------------------------------------------------------

  // His timers go through his worker, which forwards them only while he
  // lives: a delayed message to himself would keep a dead actor's memory for
  // as long as it is pending (30 minutes for the idle check: 2 KB per crash).
  void schedule(std::chrono::milliseconds delay, std::uint8_t which, std::uint64_t arg = 0) {
    self->send(supervisor, timer_atom::value, self->id(), which, arg, static_cast<std::int64_t>(delay.count()));
  }

  // Past its deadline the front answered 504 already: it is never run.
  bool expired(pending_call& call, std::int64_t now_ms) {
    if (call.req->deadline_ms == 0 || now_ms < call.req->deadline_ms)
      return false;
    ctx->metrics.requests_expired.fetch_add(1, std::memory_order_relaxed);
    respond(call.to, error_response(504, "the request was not answered in time"));
    return true;
  }

  void accept(pending_call&& call) {
    if (gate)
      if (auto retry = gate->retry_after()) {  // his group is degraded: nobody of it is served
        ctx->metrics.admission_rejections[static_cast<std::size_t>(refusal_reason::degraded)].fetch_add(
          1, std::memory_order_relaxed);
        respond(call.to, error_response(503, gate->text(*retry), *retry));
        return;
      }
    if (refused) {
      respond(call.to, error_response(503, "this user's stored state cannot be read; an operator has been told", 30));
      return;
    }
    if (!busy && !message_writing && !stopped)
      return serve(std::move(call));
    if (backlog.size() >= ctx->recipe.limits.user_queue_length) {
      respond(call.to, error_response(503, "this user has too many requests waiting", 1));
      return;
    }
    backlog.push_back(std::move(call));
  }

  void serve(pending_call&& call) {
    if (expired(call, unix_ms(registry::wall_clock::now())))
      return;
    auto* conn = connections.find(call.req->cid);
    if (!conn) {
      http_response moved;
      moved.route = route_note::not_here;
      respond(call.to, std::move(moved));
      return;
    }
    auto now = registry::wall_clock::now();
    clocks.stamp_rpc(now);
    conn->clocks.stamp_rpc(now);
    if (call.req->channel) {  // a channel call: openchannel, or a page that must have opened it (docs/channels.md)
      if (auto answer = channel_gate(*conn, *call.req, now)) {
        respond(call.to, std::move(*answer));
        return;
      }
    } else if (!call.req->page.empty())
      if (auto refusal = touch_page(*conn, call.req->page, now)) {
        respond(call.to, std::move(*refusal));
        return;
      }
    auto found = routes->find(call.req->method, call.req->path);
    if (!found.target && call.req->method == "HEAD")  // GET's answer; the front sends its headers only
      found = routes->find("GET", call.req->path);
    if (!found.target) {
      respond(call.to, found.other_method ? error_response(405, "method not allowed")
                                          : error_response(404, "no such route"));
      return;
    }
    request q(*call.req, std::move(found.params));
    call.route = found.key;
    auto& fn = *found.target;
    run(std::move(call), [&] { return fn(keeper->app(), q); });
  }

  // Runs application code for `call`: an http_error is the client's answer,
  // anything else thrown is a failed handler (502, and this actor restarts).
  template <class F>
  void run(pending_call&& call, F&& fn) {
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

  void fail(pending_call& call, const char* what) {
    ctx->metrics.handler_failures.fetch_add(1, std::memory_order_relaxed);
    ctx->handler_failure_log("user {} on {}: handler {} {} failed: {}; the worker restarts him",
                             registry::redact(user_name), worker_name, call.req->method, call.req->path, what);
    respond(call.to, routed(call, error_response(502, "the request handler failed")));
    told_early.clear();  // they would run in a dead actor
    stopped = true;
    // What the handler half-changed is thrown away: his restart starts from
    // the last good state, which only his worker outlives him to hand over.
    self->send(supervisor, restart_atom::value, user_name, keeper->last_good_encoded(ctx->node_name, worker_name));
    self->quit(make_error(errc::handler_failed));
  }

  void finish(pending_call&& call, response&& out) {
    if (!out.next) {
      http_response r;
      r.status = out.status;
      r.body = std::move(out.body);
      r.content_type = std::move(out.content_type);
      r.retry_after = out.retry_after;
      if (call.route)
        r.route_key = *call.route;
      if (mode == durability::reply && dirty)
        return reply_when_durable(std::move(call), std::move(r));
      if (std::exchange(changed_now, false))
        keeper->keep_as_good();  // one encoding per changing request: what a restart starts from
      respond(call.to, std::move(r));
      return;
    }
    auto next = std::move(out.next);
    if (next->what == detail::continuation::kind::stream) {  // answered now: a stream is not a pending request
      if (std::exchange(changed_now, false))
        keeper->keep_as_good();
      return open_stream(std::move(call), std::move(*next));
    }
    busy = true;
    switch (next->what) {
      case detail::continuation::kind::after:
        deferred_call = std::move(call);
        deferred_then = std::move(next->then);
        schedule(next->delay, resume_tick, ++deferral_id);
        return;
      case detail::continuation::kind::login:
        return move_connection(std::move(call), next->user);
      case detail::continuation::kind::logout:
        return move_connection(std::move(call), std::nullopt);
      case detail::continuation::kind::global:
        return await_global(std::move(call), std::move(*next));
      case detail::continuation::kind::stream:
        return;  // handled above
      case detail::continuation::kind::push:
        return await_push(std::move(call), std::move(*next));
      case detail::continuation::kind::tell:
        return await_tell(std::move(call), std::move(*next));
    }
  }

  // A global-store operation: the global store answers, then the handler's next
  // step runs here (and may defer again: a lease's commit).
  void await_global(pending_call&& call, detail::continuation&& step) {
    auto waiting = std::make_shared<pending_call>(std::move(call));
    auto on_reply = std::move(step.on_reply);
    auto timeout = ctx->request_timeout();
    using kind = detail::global_op::kind;
    bool changes = step.op.what == kind::set || step.op.what == kind::erase || step.op.what == kind::commit;
    self->request(global_store, timeout, global_atom::value, std::move(step.op))
      .then(
        [this, waiting, on_reply](detail::global_reply& r) {
          busy = false;
          run(std::move(*waiting), [&] { return on_reply(r); });
          drain();
        },
        [this, waiting, changes](caf::error& err) {
          spdlog::warn("user {}: the global store did not answer: {}", registry::redact(user_name),
                       self->system().render(err));
          busy = false;
          // A change without an answer may still be applied: never "retry" for it.
          respond(waiting->to, changes ? error_response(503, "the global store did not answer; the change may or may "
                                                             "not have been applied, check before retrying")
                                       : error_response(503, "the global store did not answer, retry", 1));
          drain();
        });
  }

  // after_push / after_push_all: the push goes out, and once every page has
  // been tried the handler's next step answers the request.
  void await_push(pending_call&& call, detail::continuation&& step) {
    auto waiting = std::make_shared<pending_call>(std::move(call));
    auto order = std::move(*step.push);
    order.done = [this, waiting, then = std::move(step.on_pushed)](const push_outcome& o) {
      // Runs in this actor, at once when nothing was to be tried, else when the last page answered.
      auto answer = [this, waiting, then, o] {
        busy = false;
        run(std::move(*waiting), [&] { return then ? then(o) : response::json({{"delivered", o.delivered}}); });
        drain();
      };
      answer();
    };
    push_now(std::move(order));
  }

  // -- messages between users (README "Messages between users") ----------------------

  static tell_outcome refusal(tell_outcome::result r, std::string why) { return tell_outcome{r, std::move(why)}; }

  // Counted on the sender's node, once per message: sent, then delivered or refused{reason}.
  void count_outcome(const tell_outcome& o) {
    if (o.delivered())
      ctx->metrics.messages.delivered.fetch_add(1, std::memory_order_relaxed);
    else if (auto i = static_cast<std::size_t>(o.what); i < ctx->metrics.messages.refused.size())
      ctx->metrics.messages.refused[i].fetch_add(1, std::memory_order_relaxed);
  }

  // The sender waits for the commander (a wake: the deposit's read and the
  // recipient's claim, each within hold_seconds) and the recipient's handler.
  caf::duration message_timeout() const {
    return node_context::to_duration(ctx->recipe.limits.request_timeout_seconds + 3 * ctx->recipe.limits.hold_seconds);
  }

  // Sends `m` through the commander, which knows where everybody lives; `then`
  // runs here with the outcome. One too big or not addressed to a user name
  // is refused here, before anything leaves; with `early` (a tell() from a
  // running handler) that outcome waits until the handler has returned.
  void send_message(detail::encoded_message m, std::function<void(const tell_outcome&)> then, bool early) {
    using R = tell_outcome::result;
    ctx->metrics.messages.sent.fetch_add(1, std::memory_order_relaxed);
    std::optional<tell_outcome> now;
    const auto max = ctx->recipe.limits.max_message_bytes;
    if (m.data.size() > max)
      now = refusal(R::too_big, "the message is " + std::to_string(m.data.size()) +
                                  " bytes encoded, more than limits.max_message_bytes (" + std::to_string(max) + ")");
    else if (!registry::valid_user_name(m.to))
      now = refusal(R::invalid, "not a user name (1-64 of [A-Za-z0-9_.@-], not a guest)");
    if (now) {
      count_outcome(*now);
      if (early)
        told_early.emplace_back(std::move(then), std::move(*now));
      else
        then(*now);
      return;
    }
    // A guest's name carries his connection's secret: his messages come from "".
    user_message msg{registry::is_guest(user_name) ? std::string() : user_name, std::move(m.to), std::move(m.name),
                     std::move(m.data)};
    self->request(commander, message_timeout(), tell_atom::value, std::move(msg))
      .then(
        [this, then](tell_reply& r) {
          auto o = r.outcome();
          count_outcome(o);
          then(o);
        },
        [this, then](caf::error& err) {
          auto o = refusal(R::unavailable, "the message was not answered in time (" + self->system().render(err) + ")");
          count_outcome(o);
          then(o);
        });
  }

  // tell_then(): the request's next step runs once the message's outcome is known.
  void await_tell(pending_call&& call, detail::continuation&& step) {
    auto waiting = std::make_shared<pending_call>(std::move(call));
    auto on_told = std::move(step.on_told);
    awaiting_tell = true;
    send_message(
      std::move(step.message),
      [this, waiting, on_told](const tell_outcome& o) {
        awaiting_tell = false;
        if (message_writing) {  // a message's change is being written: the answer follows it
          told_after_write.emplace_back([this, waiting, on_told, o] {
            run(std::move(*waiting), [&] {
              return on_told ? on_told(o) : response::json({{"delivered", o.delivered()}}, o.status());
            });
          });
          return;
        }
        busy = false;
        run(std::move(*waiting), [&] {
          return on_told ? on_told(o) : response::json({{"delivered", o.delivered()}}, o.status());
        });
        drain();
      },
      false);
  }

  // Outcomes refused before they left, once the handler that sent them has returned.
  void flush_told_early() {
    while (!told_early.empty() && !stopped) {
      auto due = std::move(told_early);
      told_early.clear();
      for (auto& [done, outcome] : due)
        done(outcome);
    }
  }

  // Application code run outside any request (a tell()'s done): a throw is a
  // handler failure, as for a request (he restarts from his last good state).
  template <class F>
  void run_callback(F&& fn) {
    if (stopped)
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
    if (!busy && std::exchange(changed_now, false))
      keeper->keep_as_good();
    flush_told_early();
  }

  void fail_outside(const char* what, const char* why) {
    ctx->metrics.handler_failures.fetch_add(1, std::memory_order_relaxed);
    ctx->handler_failure_log("user {} on {}: {} failed: {}; the worker restarts him", registry::redact(user_name),
                             worker_name, what, why);
    told_early.clear();  // they would run in a dead actor
    stopped = true;
    self->send(supervisor, restart_atom::value, user_name, keeper->last_good_encoded(ctx->node_name, worker_name));
    self->quit(make_error(errc::handler_failed));
  }

  // A message for him: served now, or after the request or wake that keeps
  // him busy (bounded like his requests: user_queue_length).
  void accept_message(pending_message&& pm) {
    using R = tell_outcome::result;
    if (gate)
      if (auto retry = gate->retry_after()) {
        pm.to.deliver(tell_reply::of(R::unavailable, gate->text(*retry)));
        return;
      }
    if (refused) {
      pm.to.deliver(tell_reply::of(R::unavailable, "the recipient's stored state cannot be read"));
      return;
    }
    if (stopped) {  // leaving: the commander routes it again, to where he is next
      pm.to.deliver(tell_reply{tell_reply::not_here, "the recipient is leaving this worker"});
      return;
    }
    if ((!busy || awaiting_tell) && !message_writing)
      return serve_message(std::move(pm));
    if (message_backlog.size() >= ctx->recipe.limits.user_queue_length) {
      pm.to.deliver(tell_reply::of(R::unavailable, "the recipient has too many messages waiting"));
      return;
    }
    message_backlog.push_back(std::move(pm));
  }

  // Runs his type's handler for the message, like a request's: it may
  // mutate(), durability applies (reply: delivered once the change is
  // durable), and a throw is a handler failure (he restarts; nothing it changed is kept).
  void serve_message(pending_message&& pm) {
    using R = tell_outcome::result;
    auto& m = pm.msg;
    if (m.data.size() > ctx->recipe.limits.max_message_bytes) {
      pm.to.deliver(tell_reply::of(R::too_big, "the message is larger than the recipient's limits.max_message_bytes"));
      return;
    }
    auto* fn = messages ? messages->find(m.name) : nullptr;
    if (!fn) {
      pm.to.deliver(tell_reply::of(R::not_accepted, "the recipient's actor type does not accept message " + m.name));
      return;
    }
    auto now = registry::wall_clock::now();
    clocks.stamp_rpc(now);  // a message is activity: he does not freeze under it
    {
      busy_scope timed{cost.get()};
      current_cid = &no_name;
      current_page = &no_name;
      current_sender = &m.from;
      try {
        (*fn)(keeper->app(), m.data, m.from);
      } catch (const bad_message& e) {
        current_sender = &no_name;
        if (!changed_now) {  // its decoding failed before any application code ran
          pm.to.deliver(tell_reply::of(R::invalid, "the message does not decode as " + m.name + ": " + e.what()));
          return;
        }
        pm.to.deliver(tell_reply::of(R::handler_failed, "the recipient's message handler failed"));
        return fail_outside("a message handler", e.what());
      } catch (const std::exception& e) {
        current_sender = &no_name;
        pm.to.deliver(tell_reply::of(R::handler_failed, "the recipient's message handler failed"));
        return fail_outside("a message handler", e.what());
      } catch (...) {
        current_sender = &no_name;
        pm.to.deliver(tell_reply::of(R::handler_failed, "the recipient's message handler failed"));
        return fail_outside("a message handler", "unknown exception");
      }
      current_sender = &no_name;
    }
    if (mode == durability::reply && dirty)
      return deliver_when_durable(std::move(pm));
    if (std::exchange(changed_now, false))
      keeper->keep_as_good();
    pm.to.deliver(tell_reply::of(R::delivered));
    flush_told_early();
  }

  // The write of a message's change is done: what waited for it goes on (a
  // tell_then's answer that came meanwhile first: its request is still busy).
  void end_message_write() {
    message_writing = false;
    flush_told_early();
    auto due = std::move(told_after_write);
    told_after_write.clear();
    for (auto& step : due) {
      busy = false;
      step();
    }
    drain();
  }

  // durability = "reply": "delivered" only once the change is durable (as reply_when_durable).
  void deliver_when_durable(pending_message&& pm) {
    using R = tell_outcome::result;
    message_writing = true;
    dirty = false;
    changed_now = false;
    auto parcel = make_parcel(store::parcel_cause::checkpoint);
    auto payload = std::make_shared<store::bytes>(parcel.payload);
    auto waiting = std::make_shared<pending_message>(std::move(pm));
    self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name, std::move(parcel))
      .then(
        [this, waiting, payload](std::uint64_t) {
          keeper->keep_as_good(*payload);
          waiting->to.deliver(tell_reply::of(R::delivered));
          end_message_write();
        },
        [this, waiting](caf::error& err) {
          if (is(err, errc::stale_owner)) {  // applied nowhere: his new home gets it
            waiting->to.deliver(tell_reply{tell_reply::not_here, "a newer placement holds the recipient"});
            return leave_fenced();
          }
          log_deposit_error("making a message's change durable", err);
          if (is(err, errc::deposit_failed)) {
            keeper->roll_back();
            ctx->metrics.changes_rolled_back.fetch_add(1, std::memory_order_relaxed);
            waiting->to.deliver(tell_reply::of(R::unavailable, "the change could not be made durable and was not applied"));
          } else {
            dirty = true;
            waiting->to.deliver(tell_reply::of(R::unavailable, "the change may or may not have been made durable"));
          }
          end_message_write();
        });
  }

  void on_tick(std::uint8_t which, std::uint64_t arg) {
    if (which == idle_tick)
      check_idle();
    else if (which == checkpoint_tick)
      checkpoint();
    else if (which == resume_tick)
      resume(arg);
    else if (which == later_tick)
      run_timer(arg);
  }

  void resume(std::uint64_t id) {
    if (id != deferral_id || !deferred_call)
      return;
    auto call = std::move(*deferred_call);
    deferred_call.reset();
    auto then = std::move(deferred_then);
    busy = false;
    run(std::move(call), [&] { return then ? then() : response::json(nullptr); });
    drain();
  }

  void drain() {
    if (!busy && !message_writing && !stopped && freeze_wanted)
      return start_freeze(*freeze_wanted);
    // Messages and requests take turns (each queue in its arrival order);
    // messages go on while a request awaits a message's outcome (awaiting_tell).
    while (!stopped && !message_writing) {
      bool message_due = (!busy || awaiting_tell) && !message_backlog.empty();
      if (!message_due && (busy || backlog.empty()))
        break;
      if (message_due) {
        auto pm = std::move(message_backlog.front());
        message_backlog.pop_front();
        serve_message(std::move(pm));
      }
      if (busy || message_writing || stopped || backlog.empty())
        continue;
      auto call = std::move(backlog.front());
      backlog.pop_front();
      serve(std::move(call));
    }
  }

  static void respond(reply_to& to, http_response&& r) {
    if (auto* local = std::get_if<local_reply>(&to))
      (*local)->deliver(std::move(r));
    else
      std::get<promise_type>(to).deliver(std::move(r));
  }

  // `r` as the answer of the route `call` matched: the front counts it in that route's figures.
  static http_response routed(const pending_call& call, http_response r) {
    if (call.route)
      r.route_key = *call.route;
    return r;
  }

  // -- pages -----------------------------------------------------------------------

  // The stamp climbs page → connection → user (the two others are stamped by serve).
  std::optional<http_response> touch_page(connection_record& conn, const std::string& page_id,
                                          registry::wall_clock::time_point now) {
    using outcome = connection_table::touch_outcome;
    auto t = connections.touch_page(conn, page_id, ctx->recipe.limits.max_pages_per_connection,
                                    ctx->recipe.limits.max_pages_per_user);
    switch (t.outcome) {
      case outcome::invalid_id: return error_response(400, "invalid X-Troupe-Page: 1-64 characters of [A-Za-z0-9_.-]");
      case outcome::too_many_on_connection: return error_response(429, "too many pages on this connection");
      case outcome::too_many_for_user: return error_response(429, "too many pages for this user");
      case outcome::added:
        if (t.reclaimed)  // the page count stays: one went, one came
          ctx->metrics.pages_reclaimed.fetch_add(1, std::memory_order_relaxed);
        note();
        [[fallthrough]];
      case outcome::known: t.page->clocks.stamp_rpc(now); return std::nullopt;
    }
    return std::nullopt;
  }

  // -- channels (docs/channels.md) ------------------------------------------------------

  // A channel call's gate: a socket's admission and openchannel are answered
  // here (openchannel binding the page to the call's socket); any other call
  // naming a page goes on only when that page opened its channel on this very
  // socket. nullopt: serve the call.
  std::optional<http_response> channel_gate(connection_record& conn, const http_request& req,
                                            registry::wall_clock::time_point now) {
    if (req.path == socket_admission_path) {  // a socket's admission: whom it counts under
      http_response r;
      r.body = nlohmann::json{{"user", user_name}}.dump();
      return r;
    }
    const bool open = req.path == "/_troupe/openchannel";
    const auto& id = req.page;
    if (id.empty())
      return open ? std::optional<http_response>(error_response(
                      400, "openchannel names no page: put it in the envelope's \"page\""))
                  : std::nullopt;  // a call of the connection, not of a page
    for (auto& other : connections)
      if (&other != &conn && other.find_page(id))
        return error_response(403, "page '" + id + "' is not this connection's");
    if (!open) {
      auto* p = conn.find_page(id);
      if (!p || !p->channel || p->channel->socket != req.channel)
        return error_response(409, "page '" + id + "' has no open channel on this socket: send "
                                   "/_troupe/openchannel for it first");
      p->clocks.stamp_rpc(now);
      return std::nullopt;
    }
    bool sequential = false;
    if (!req.body.empty()) {
      auto params = nlohmann::json::parse(req.body, nullptr, false);
      if (params.is_discarded() || !(params.is_object() || params.is_null()))
        return error_response(400, "openchannel: data must be an object like {\"sequential\": true}");
      if (params.is_object() && params.contains("sequential")) {
        if (!params["sequential"].is_boolean())
          return error_response(400, "openchannel: \"sequential\" must be true or false");
        sequential = params["sequential"].get<bool>();
      }
    }
    if (auto refusal = touch_page(conn, id, now))
      return refusal;
    auto* p = conn.find_page(id);
    if (!p->channel)
      p->channel = std::make_unique<page_channel>();
    // Opening twice on the same socket changes nothing; a new socket (a
    // reconnecting browser) takes the page over from the old one.
    if (p->channel->socket != req.channel) {
      if (auto& old = p->channel->socket)
        self->send(caf::actor_cast<channel_handle>(old.hub), unbind_atom::value, old.socket, id);
      p->channel->socket = req.channel;
      p->channel->sequential = sequential;
      // Sent before the answer: a push this user makes after it reaches the
      // socket after the binding (one sender, one receiver: in order).
      self->send(caf::actor_cast<channel_handle>(req.channel.hub), bind_atom::value, req.channel.socket, conn.cid, id,
                 caf::actor_cast<caf::actor>(self));
    }
    http_response r;
    r.body = nlohmann::json{{"channel", "open"}, {"page", id}, {"sequential", p->channel->sequential}}.dump();
    return r;
  }

  // The channels his pages had open when he froze (the commander kept them):
  // the pages are bound to the same sockets again, to this actor; a socket
  // that closed meanwhile answers unbind (forget_channel) at once.
  void restore_channels(std::vector<channel_binding>& bound) {
    for (auto& b : bound) {
      connections.add(b.cid);
      auto t = connections.touch_page(*connections.find(b.cid), b.page, ctx->recipe.limits.max_pages_per_connection,
                                      ctx->recipe.limits.max_pages_per_user);
      if (!t.page || t.page->channel)
        continue;
      t.page->channel = std::make_unique<page_channel>(page_channel{b.socket, b.sequential});
      self->send(caf::actor_cast<channel_handle>(b.socket.hub), bind_atom::value, b.socket.socket, b.cid, b.page,
                 caf::actor_cast<caf::actor>(self));
    }
  }

  // What a freeze hands to his next placement: every page's open channel.
  std::vector<channel_binding> open_channels() const {
    std::vector<channel_binding> out;
    for (auto& conn : connections)
      for (auto& page : conn.pages)
        if (page.channel && page.channel->socket)
          out.push_back(channel_binding{conn.cid, page.id, page.channel->socket, page.channel->sequential});
    return out;
  }

  // The socket `socket` went (or refused): page `page` of `cid` has no channel any more.
  void forget_channel(const std::string& cid, const std::string& page, const channel_ref& socket) {
    if (auto* conn = connections.find(cid))
      if (auto* p = conn->find_page(page); p && p->channel && p->channel->socket == socket)
        p->channel.reset();
  }

  // What a push has reached so far; `done` runs (in this actor) when nothing is pending.
  struct push_tally {
    push_outcome out;
    std::size_t pending = 1;  // the push itself, until every target has been tried
    std::function<void(const push_outcome&)> done;
    void settle() {
      if (--pending == 0 && done) {
        auto d = std::move(done);
        d(out);
      }
    }
  };

  std::chrono::milliseconds push_timeout() const { return node_context::timer_millis(ctx->recipe.channel.push_timeout_seconds); }

  void not_delivered(push_tally& t, std::uint32_t n = 1) {
    t.out.not_delivered += n;
    ctx->metrics.channel_pushes_not_delivered.fetch_add(n, std::memory_order_relaxed);
  }

  // One page: written only through its bound socket, which checks the binding again.
  void push_to(const std::shared_ptr<push_tally>& t, const std::string& cid, page_record& p, const std::string& frame) {
    if (!p.channel || !p.channel->socket)
      return not_delivered(*t);
    ++t->pending;
    auto socket = p.channel->socket;
    self->request(caf::actor_cast<channel_handle>(socket.hub), push_timeout(), push_atom::value,
                  channel_push{socket.socket, cid, p.id, frame})
      .then(
        [this, t](bool ok) {
          if (ok) {
            ++t->out.delivered;
            ctx->metrics.channel_pushes_delivered.fetch_add(1, std::memory_order_relaxed);
          } else {
            not_delivered(*t);
          }
          t->settle();
        },
        [this, t, cid, page = p.id, socket](caf::error&) {
          forget_channel(cid, page, socket);  // its socket is gone: the binding with it
          not_delivered(*t);
          t->settle();
        });
  }

  void push_own(const std::shared_ptr<push_tally>& t, const std::string& frame) {
    for (auto& conn : connections)
      for (auto& p : conn.pages)
        push_to(t, conn.cid, p, frame);
  }

  // `encoded`: the data as JSON text already (a push_users from another user).
  void push_now(detail::push_order order, const std::string* encoded = nullptr) {
    auto t = std::make_shared<push_tally>();
    t->done = std::move(order.done);
    auto data = encoded ? *encoded : order.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto frame = push_frame(order.path, data);
    using scope = detail::push_order::scope;
    switch (order.to) {
      case scope::page: {
        // A page id is unique within its connection: while serving a request
        // it is looked up on that request's connection only (another
        // connection's page is not written to); outside a request, on any.
        connection_record* conn = nullptr;
        page_record* p = nullptr;
        if (!current_cid->empty()) {
          conn = connections.find(*current_cid);
          p = conn ? conn->find_page(order.page) : nullptr;
        } else {
          for (auto& c : connections)
            if (auto* found = c.find_page(order.page)) {
              conn = &c;
              p = found;
              break;
            }
        }
        if (p)
          push_to(t, conn->cid, *p, frame);
        else
          not_delivered(*t);
        break;
      }
      case scope::own_pages: push_own(t, frame); break;
      case scope::users: {
        std::sort(order.users.begin(), order.users.end());
        order.users.erase(std::unique(order.users.begin(), order.users.end()), order.users.end());
        if (order.users.size() > ctx->recipe.channel.max_push_users) {  // refused whole: nothing half-sent
          not_delivered(*t, static_cast<std::uint32_t>(order.users.size()));
          break;
        }
        for (auto& name : order.users) {
          if (name == user_name) {
            push_own(t, frame);
            continue;
          }
          // Through the commander and his worker: a live user is reached, a
          // frozen one is not woken (he has no open channel).
          ++t->pending;
          self->request(commander, push_timeout(), push_atom::value, name, order.path, data)
            .then(
              [t](std::uint32_t delivered, std::uint32_t missed) {
                t->out.delivered += delivered;  // counted in metrics where his pages are
                t->out.not_delivered += missed;
                t->settle();
              },
              [this, t](caf::error&) {
                not_delivered(*t);
                t->settle();
              });
        }
        break;
      }
    }
    t->settle();
  }

  void detach(const std::string& cid) {
    if (!connections.erase(cid))
      return;
    if (!stopped)
      note();
  }

  // -- login / logout ----------------------------------------------------------------

  placement where() const {
    return placement{user_name, worker_name, ctx->node_name, caf::actor_cast<caf::actor>(self)};
  }

  static http_response identity_response(const placement& p, const std::string& cid, route_note route) {
    http_response r;
    r.body = nlohmann::json{{"user", p.user}, {"connection", cid}, {"node", p.node}, {"worker", p.worker}}.dump();
    r.route = route;
    return r;
  }

  // The guest's store, as the parcel a login carries to a user who is not live.
  store::bytes carried_store() {
    return store::encode(keeper->next_parcel(store::parcel_cause::login, ctx->node_name, worker_name));
  }

  // Login (target set) or logout (none): the commander moves the connection
  // to its new owner under a new id (the request's id dies); this user answers
  // with the new owner's identity and cookie and lets the connection go.
  void move_connection(pending_call&& call, std::optional<std::string> target) {
    if (target && *target == user_name) {
      busy = false;
      respond(call.to, routed(call, identity_response(where(), call.req->cid, route_note::keep)));
      return drain();
    }
    auto waiting = std::make_shared<pending_call>(std::move(call));
    auto on_placed = [self = self, waiting](placement& p) {
      auto& st = self->state;
      const std::string cid = waiting->req->cid;
      st.detach(cid);
      auto reply = routed(*waiting, identity_response(p, p.cid, route_note::changed));
      reply.set_cid = p.cid;
      respond(waiting->to, std::move(reply));
      st.busy = false;
      if (st.connections.empty() && registry::is_guest(st.user_name)) {
        // Ordered after his own writes: no parcel of his dead id outlives him
        // (in every mode: a woken user's parcel stays until replaced).
        self->request(st.deposit, deposit_timeout, remove_atom::value, parcel_kind::user, st.user_name)
          .then([](bool) {}, [](caf::error&) {});  // he is gone by then: the commander removes it too
        return st.retire();
      }
      // He stays (other connections): checkpoints go on.
      if (std::exchange(st.leaving_as_guest, false) && st.dirty && st.mode == durability::interval)
        st.schedule_checkpoint();
      st.drain();
    };
    auto on_error = [self = self, waiting](caf::error& err) {
      auto& st = self->state;
      if (std::exchange(st.leaving_as_guest, false) && st.dirty && st.mode == durability::interval)
        st.schedule_checkpoint();
      spdlog::warn("user {}: moving a connection failed: {}", registry::redact(st.user_name),
                   self->system().render(err));
      respond(waiting->to, routed(*waiting, error_response(503, "login/logout could not be completed, retry", 1)));
      st.busy = false;
      st.drain();
    };
    const auto& cid = waiting->req->cid;
    leaving_as_guest = registry::is_guest(user_name);
    if (target) {
      login_request order{cid, user_name, *target,
                          registry::is_guest(user_name) ? carried_store() : store::bytes{}};
      self->request(commander, ctx->hold_timeout(), login_atom::value, std::move(order))
        .then(on_placed, on_error);
    } else {
      self->request(commander, ctx->hold_timeout(), logout_atom::value, cid, user_name)
        .then(on_placed, on_error);
    }
  }

  // -- the deposit: wake, freeze, checkpoints ----------------------------------------

  store::parcel make_parcel(store::parcel_cause cause) {
    return keeper->next_parcel(cause, ctx->node_name, worker_name);
  }

  // Reads his parcel before serving anything: requests that arrive meanwhile
  // wait in the backlog, so a burst reads the disk once. No parcel: the
  // carried store (a login's), or a fresh one. A failed read leaves no
  // half-born actor: the waiting requests get 503 and he stops.
  void wake(store::bytes carried) {
    busy = true;
    waking = true;
    auto t0 = std::chrono::steady_clock::now();
    // The read claims him for his placement's epoch in the same step: from
    // now on an older holder's writes are refused, even before he writes.
    self->request(deposit, ctx->hold_timeout(), claim_atom::value, user_name, owner_epoch)
      .then(
        [this, carried, t0](std::vector<store::parcel>& found) {
          if (!found.empty()) {
            // A user with a past stays in his group: placed here by default
            // (the commander does not read parcels), he goes where his parcel
            // says while that group exists, before loading anything.
            if (auto& home = found.front().group; !home.empty() && home != keeper->group() && ctx->recipe.group(home))
              return leave_for_group(home);
            // His parcel stays where it is until a newer one replaces it (a
            // crash of the node then brings him back as he last froze).
            try {
              keeper->install(found.front());
            } catch (const std::exception& e) {
              return refuse(found.front(), e.what());
            }
            ctx->metrics.user_wakes.fetch_add(1, std::memory_order_relaxed);
            ctx->metrics.users_frozen.fetch_sub(1, std::memory_order_relaxed);
            if (!carried.empty()) {  // a login into a frozen user: his parcel wins (README "Login")
              ctx->metrics.login_guest_store_dropped_frozen.fetch_add(1, std::memory_order_relaxed);
              spdlog::info("login into {}: he was frozen, his parcel wins; the guest's store ({} bytes) is dropped",
                           registry::redact(user_name), carried.size());
            }
            ctx->metrics.user_wake_seconds.observe(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          } else if (!carried.empty()) {
            install_encoded(carried, "the store carried by login");
          }
          settle_adoptions(std::nullopt);
          busy = false;
          note(registry::user_state::active);
          schedule_idle();
          drain();
        },
        [this](caf::error& err) {
          if (is(err, errc::stale_owner))  // a newer placement holds him: he was never here
            return leave_fenced();
          log_deposit_error("waking", err);
          if (is(err, errc::bad_state))  // quarantined: no retry helps until an operator acts
            return become_refused(err.context().match_elements<std::string>() ? err.context().get_as<std::string>(0)
                                                                              : "his parcel is quarantined");
          settle_adoptions(make_error(errc::wake_failed, "the user could not be woken"));
          for (auto& call : backlog)
            respond(call.to, error_response(503, "the user could not be woken, retry", 1));
          backlog.clear();
          for (auto& pm : message_backlog)
            pm.to.deliver(tell_reply::of(tell_outcome::result::unavailable, "the recipient could not be woken"));
          message_backlog.clear();
          stopped = true;
          note(registry::user_state::frozen);  // he still is: his parcel stays for the next try
          self->quit(make_error(errc::wake_failed));
        });
  }

  // His parcel does not load as his state (it does not decode, was written
  // by a newer version, or no migration takes it): never start him empty. It
  // goes to quarantine (the deposit keeps refusing him: its marker) and he is
  // refused until an operator drops him or puts a parcel back that loads.
  void refuse(const store::parcel& p, const std::string& why) {
    ctx->metrics.users_refused.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("user {} on {}: his parcel (state version {}, generation {}) does not load: {}; it is "
                  "quarantined and he is refused until it can be read",
                  registry::redact(user_name), worker_name, p.state_version, p.generation, why);
    self->request(deposit, deposit_timeout, quarantine_atom::value, user_name, why)
      .then([](std::string&) {}, [this](caf::error& err) { log_deposit_error("quarantining his parcel", err); });
    become_refused(why);
  }

  // He stays, answering 503 to everything and writing nothing, so that a
  // client hammering him costs neither reads nor log lines.
  void become_refused(const std::string& why) {
    refused = why;
    settle_adoptions(std::nullopt);  // he writes nothing: answered where he is
    busy = false;
    note(registry::user_state::active);
    for (auto& call : backlog)
      accept(std::move(call));
    backlog.clear();
    auto messages_waiting = std::move(message_backlog);
    message_backlog.clear();
    for (auto& pm : messages_waiting)
      accept_message(std::move(pm));
  }

  void install_encoded(const store::bytes& encoded, const char* what) {
    try {
      keeper->install(store::decode(encoded));
    } catch (const std::exception& e) {
      spdlog::error("user {}: {} does not verify ({}); he starts empty", registry::redact(user_name), what, e.what());
    }
  }

  void log_deposit_error(const char* doing, const caf::error& err) {
    spdlog::error("user {} on {}: deposit error while {}: {}", registry::redact(user_name), worker_name, doing,
                  self->system().render(err));
  }

  void freeze(std::uint8_t cause, std::optional<caf::typed_response_promise<bool>> waiter) {
    if (waiter)
      freeze_waiters.push_back(std::move(*waiter));
    if (freezing || stopped)
      return;
    if (busy && deferred_call && cause == static_cast<std::uint8_t>(store::parcel_cause::quit))
      interrupt_deferred();  // the soft quit does not wait for a sleeping handler
    if (busy || message_writing) {  // a deferred answer is pending: freeze right after it
      freeze_wanted = cause;
      return;
    }
    start_freeze(cause);
  }

  // The node is leaving: a deferred answer that is not due yet is answered
  // now. Never "retry" for a request whose first step changed the state (it
  // is kept, and frozen with him): retrying would apply it twice.
  void interrupt_deferred() {
    auto call = std::move(*deferred_call);
    deferred_call.reset();
    deferred_then = nullptr;
    ++deferral_id;
    busy = false;
    if (std::exchange(changed_now, false))
      respond(call.to, error_response(503, "the node is shutting down: the request was interrupted after it "
                                           "changed the state, which is kept; do not simply retry it"));
    else
      respond(call.to, error_response(503, "the node is shutting down: the request was not completed, retry", 1));
  }

  // The commander holds his routing first; then his parcels are written; only
  // when all are durable does he announce it and leave. A failed write aborts
  // the whole freeze: he stays, serving, and nothing is announced.
  void start_freeze(std::uint8_t cause) {
    freeze_wanted.reset();
    freezing = true;
    busy = true;
    self->send(commander, freezing_atom::value, user_name, owner_epoch);
    if (empty_guest() || refused)  // nothing to write: no state, or a parcel that stays as it is
      return finish_freeze(true);
    quitting = cause == static_cast<std::uint8_t>(store::parcel_cause::quit);
    if (!quitting)  // at soft quit the census is going away too: no notes for 100,000 users
      note(registry::user_state::departing);
    // A guest's own connection needs no parcel: the cookie alone names guest_<cid>.
    std::vector<const connection_record*> named;
    for (auto& conn : connections)
      if (user_name != registry::guest_name(conn.cid))
        named.push_back(&conn);
    auto pending = std::make_shared<std::size_t>(1 + named.size());
    auto failed = std::make_shared<bool>(false);
    auto done = [this, pending, failed](bool ok) {
      *failed = *failed || !ok;
      if (--*pending == 0)
        finish_freeze(!*failed);
    };
    auto on_error = [this, done](caf::error& err) {
      if (is(err, errc::stale_owner))
        fenced = true;  // finish_freeze sees it: he leaves without writing
      else
        log_deposit_error("freezing", err);
      done(false);
    };
    auto why = static_cast<store::parcel_cause>(cause);
    self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name, make_parcel(why))
      .then([done](std::uint64_t) { done(true); }, on_error);
    for (auto* conn : named)
      self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::connection, conn->cid,
                    connection_parcel(*conn, why))
        .then([done](std::uint64_t) { done(true); }, on_error);
  }

  store::parcel connection_parcel(const connection_record& conn, store::parcel_cause why) {
    store::connection_record rec{conn.cid, user_name, {}};
    for (auto& page : conn.pages)
      rec.pages.push_back(page.id);
    store::parcel p;
    p.generation = keeper->generation();
    p.writer_node = ctx->node_name;
    p.writer_worker = worker_name;
    p.cause = why;
    p.payload = store::pack(rec);
    return p;
  }

  // durability = "interval" | "reply": a connection he takes is made durable
  // too, so that after a crash the cookie still finds him ("reply": before the
  // adoption is answered, so before the login's reply).
  caf::result<placement> save_connection(const std::string& cid) {
    auto promise = self->make_response_promise<placement>();
    if (waking)  // saved once his wake tells he is here (settle_adoptions)
      adoptions_after_wake.emplace_back(cid, promise);
    else
      save_connection(cid, promise);
    return promise;
  }

  void save_connection(const std::string& cid, caf::typed_response_promise<placement> promise) {
    auto* conn = connections.find(cid);
    if (!conn) {  // detached meanwhile: nothing to make durable
      promise.deliver(where());
      return;
    }
    auto p = connection_parcel(*conn, store::parcel_cause::login);
    auto write = self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::connection, cid, std::move(p));
    if (mode != durability::reply) {  // interval: the write completes in the background
      write.then([](std::uint64_t) {}, [this](caf::error& err) { log_deposit_error("saving a connection", err); });
      promise.deliver(where());
      return;
    }
    write.then([this, promise](std::uint64_t) mutable { promise.deliver(where()); },
               [this, promise](caf::error& err) mutable {
                 log_deposit_error("saving a connection", err);
                 promise.deliver(make_error(errc::deposit_failed, "the connection could not be made durable"));
               });
  }

  // The wake ended: the adoptions that waited for it are saved and answered,
  // answered without a write (he is refused and writes nothing), or failed.
  void settle_adoptions(std::optional<caf::error> failed) {
    waking = false;
    auto waiting = std::move(adoptions_after_wake);
    adoptions_after_wake.clear();
    for (auto& [cid, promise] : waiting) {
      if (failed)
        promise.deliver(*failed);
      else if (refused)
        promise.deliver(where());
      else
        save_connection(cid, promise);
    }
  }

  void finish_freeze(bool ok) {
    if (fenced)
      return leave_fenced();
    auto waiters = std::move(freeze_waiters);
    freeze_waiters.clear();
    if (!ok) {
      spdlog::error("user {} on {}: freeze aborted (a parcel could not be written); he stays",
                    registry::redact(user_name), worker_name);
      freezing = false;
      busy = false;
      self->send(commander, thaw_atom::value, user_name, owner_epoch);
      note(registry::user_state::active);
      for (auto& w : waiters)
        w.deliver(make_error(errc::deposit_failed, "the parcels could not be written"));
      schedule_idle();
      return drain();
    }
    // Before the not_here answers below; his pages' channels go to his next placement.
    self->send(commander, frozen_atom::value, user_name, owner_epoch, open_channels());
    if (empty_guest()) {  // he leaves no trace: the census forgets him too
      ctx->metrics.guests_retired.fetch_add(1, std::memory_order_relaxed);
      self->send(commander, release_atom::value, user_name);
      if (census && !quitting)
        self->send(census, drop_atom::value, user_name);
    } else {
      ctx->metrics.user_freezes.fetch_add(1, std::memory_order_relaxed);
      ctx->metrics.users_frozen.fetch_add(1, std::memory_order_relaxed);
      if (!quitting)
        note(registry::user_state::frozen);
    }
    dirty = false;
    for (auto& w : waiters)
      w.deliver(true);
    retire();
  }

  void schedule_idle(std::chrono::milliseconds after = std::chrono::milliseconds::zero()) {
    if (idle_check_pending || freezing || stopped)
      return;
    idle_check_pending = true;
    // At most idle_timer_horizon ahead (check_idle re-arms for the rest): a
    // pending timer costs ~170 B until it is due, dead user or not, so a crash
    // storm's leftovers are bounded by its rate × the horizon, not × the idle
    // threshold (30 min: it grew ~300 B per crash, heaptrack).
    auto wait = after.count() > 0 ? after : idle_threshold();
    if (after.count() == 0 && rest_after.count() > 0)
      wait = std::min(wait, rest_after);
    schedule(std::min(wait, idle_timer_horizon), idle_tick);
  }

  // Idleness is judged on the real clocks (last_user, last_rpc), never on last_refresh.
  // `rest_now`: false right after a resume (whatever woke him is in his mailbox).
  void check_idle(bool rest_now = true) {
    idle_check_pending = false;
    auto now = registry::wall_clock::now();
    auto last = std::max(clocks.last_activity(), started);
    auto idle_for = std::chrono::duration_cast<std::chrono::milliseconds>(now - last);
    auto threshold = idle_threshold();
    if (idle_for >= threshold && !busy && !streaming_now())  // an open stream is not idleness
      return freeze(static_cast<std::uint8_t>(store::parcel_cause::freeze), std::nullopt);
    bool rests = rest_after.count() > 0 && rest_after < threshold;
    if (rests && rest_now && idle_for >= rest_after && may_rest())
      return rest();
    auto next = busy ? threshold : threshold - idle_for;
    if (rests)  // not resting yet, or not free to (a channel, a stream, a call in flight): looked at again later
      next = std::min(next, idle_for < rest_after && rest_now ? rest_after - idle_for : rest_after);
    schedule_idle(next);
  }

  // Nothing of his is under way or bound to this actor: his state alone says
  // all he is, so it may wait in his worker while his actor is gone.
  bool may_rest() const {
    if (busy || stopped || freezing || waking || fenced || refused || leaving_as_guest || awaiting_tell ||
        message_writing || freeze_wanted || deferred_call || checkpoint_pending)
      return false;
    if (!backlog.empty() || !message_backlog.empty() || !freeze_waiters.empty() || !adoptions_after_wake.empty() ||
        !told_after_write.empty() || !told_early.empty())
      return false;
    if (books && (!books->streams.empty() || !books->timers.empty()))
      return false;
    if (dirty && mode != durability::freeze)  // his checkpoint or durable reply comes first
      return false;
    for (auto& conn : connections)
      for (auto& page : conn.pages)
        if (page.channel)  // an open channel needs this actor's mailbox
          return false;
    return !response_peek::awaits_any(*self);
  }

  // Rests (docs/config.md rest_idle_seconds): leaves his state to his worker
  // and stops. He stays placed there; what comes for him next (a request, a
  // message, his idle freeze) starts his actor again from what he left.
  void rest() {
    auto left = std::make_shared<resting_user>();
    if (!empty_guest())  // a guest who never had a state leaves none: he starts again as new
      left->parcel = store::encode(make_parcel(store::parcel_cause::checkpoint));
    left->clocks = clocks;
    left->started = started;
    left->dirty = dirty;
    note(registry::user_state::resting);
    left->connections = std::move(connections);
    stopped = true;
    ctx->metrics.user_rests.fetch_add(1, std::memory_order_relaxed);
    self->send(supervisor, rest_atom::value, user_name, std::move(left));
    self->quit();
  }

  // Starts as he was when he rested: his state, connections and clocks.
  void resume_from_rest(resting_user& left) {
    if (!left.parcel.empty())
      install_encoded(left.parcel, "the state he left when he rested");
    connections = std::move(left.connections);
    clocks = left.clocks;
    started = left.started;
    dirty = left.dirty;
    note(registry::user_state::active);
    // His idleness counts on: past his freeze (his worker's sweep woke him
    // for it), he freezes now; he rests again only after rest_idle_seconds more.
    check_idle(false);
  }

  // A guest who never had a state has nothing to lose: he is cheap and
  // short-lived (group.guest_idle_seconds), and is never written anywhere.
  bool empty_guest() const { return registry::is_guest(user_name) && keeper->pristine() && !dirty; }

  std::chrono::milliseconds idle_threshold() const {
    return empty_guest() ? std::min(guest_idle_after, idle_after) : idle_after;
  }

  void schedule_checkpoint() {
    if (checkpoint_pending || stopped)
      return;
    checkpoint_pending = true;
    schedule(checkpoint_every, checkpoint_tick);
  }

  // durability = "interval": a changed store is written every checkpoint_seconds.
  void checkpoint() {
    checkpoint_pending = false;
    if (!dirty || freezing || stopped || leaving_as_guest)
      return;
    dirty = false;
    self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name,
                  make_parcel(store::parcel_cause::checkpoint))
      .then([](std::uint64_t) {},
            [this](caf::error& err) {
              if (is(err, errc::stale_owner))
                return leave_fenced();
              log_deposit_error("checkpointing", err);
              dirty = true;
              schedule_checkpoint();
            });
  }

  // durability = "reply": the answer to a request that changed the store goes
  // out only once the new parcel is durable.
  // A write the deposit refused leaves his previous parcel intact: the change
  // is rolled back in memory too, so "retry" is the truth. A write with no
  // answer (timeout) may have landed: the change is kept and the client told
  // the outcome is unknown — never "retry" for a change that may be applied.
  void reply_when_durable(pending_call&& call, http_response&& r) {
    busy = true;
    dirty = false;
    changed_now = false;
    auto parcel = make_parcel(store::parcel_cause::checkpoint);
    auto waiting = std::make_shared<std::pair<pending_call, http_response>>(std::move(call), std::move(r));
    auto payload = std::make_shared<store::bytes>(parcel.payload);
    self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name, std::move(parcel))
      .then(
        [this, waiting, payload](std::uint64_t) {
          keeper->keep_as_good(*payload);
          respond(waiting->first.to, std::move(waiting->second));
          busy = false;
          drain();
        },
        [this, waiting](caf::error& err) {
          if (is(err, errc::stale_owner)) {  // not applied anywhere: the front re-resolves it to his owner
            http_response moved;
            moved.route = route_note::not_here;
            respond(waiting->first.to, std::move(moved));
            return leave_fenced();
          }
          log_deposit_error("making a change durable", err);
          if (is(err, errc::deposit_failed)) {
            keeper->roll_back();
            ctx->metrics.changes_rolled_back.fetch_add(1, std::memory_order_relaxed);
            respond(waiting->first.to,
                    error_response(503, "the change could not be made durable and was not applied, retry", 1));
          } else {
            dirty = true;
            respond(waiting->first.to, error_response(503, "the change may or may not have been made durable "
                                                           "(the deposit did not answer); check before retrying"));
          }
          busy = false;
          drain();
        });
  }

  // The deposit refused his epoch as stale (docs/CLUSTER.md "Fencing"): a
  // newer placement holds him, maybe on another node. The state held here is
  // the stale one: he leaves at once and writes nothing more. What waits is
  // answered not_here (the front re-resolves it once, then 503 + Retry-After);
  // the commander is told he left, as after a freeze with nothing written.
  void leave_fenced() {
    if (stopped)
      return;
    fenced = true;
    settle_adoptions(make_error(errc::not_here, "a newer placement holds the user"));
    ctx->metrics.users_fenced.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("user {} on {}: fenced at owner epoch {}; he leaves without writing", registry::redact(user_name),
                  worker_name, owner_epoch);
    for (auto& w : freeze_waiters)
      w.deliver(make_error(errc::stale_owner, "a newer placement holds the user; nothing was written here"));
    freeze_waiters.clear();
    if (deferred_call) {
      http_response moved;
      moved.route = route_note::not_here;
      respond(deferred_call->to, std::move(moved));
      deferred_call.reset();
      deferred_then = nullptr;
    }
    dirty = false;
    // He is not placed here any more; his channels are the newer placement's business.
    self->send(commander, frozen_atom::value, user_name, owner_epoch, std::vector<channel_binding>{});
    note(registry::user_state::frozen);
    retire();
  }

  // His parcel says he lives in group `home`: he leaves without writing
  // anything (his parcel stays as it is), the commander places him there
  // (told first: what waits here is sent back to the front, which asks it
  // again). Adoptions that waited for the wake are answered with this actor,
  // unsaved: a request sent to it once it is gone is re-resolved by the front.
  void leave_for_group(const std::string& home) {
    spdlog::debug("user {} on {}: his parcel says group {}; he moves there", registry::redact(user_name), worker_name,
                  home);
    self->send(commander, relocate_atom::value, user_name, owner_epoch, home);
    waking = false;
    auto waiting = std::move(adoptions_after_wake);
    adoptions_after_wake.clear();
    for (auto& [cid, promise] : waiting)
      promise.deliver(where());
    busy = false;
    note(registry::user_state::frozen);
    retire();
  }

  // A guest whose only connection left, or a user who froze: answer what
  // waits (not here: the front asks the commander again), stop.
  void retire() {
    for (auto& call : backlog) {
      http_response moved;
      moved.route = route_note::not_here;
      respond(call.to, std::move(moved));
    }
    backlog.clear();
    for (auto& pm : message_backlog)  // the commander routes them again, to where he is next
      pm.to.deliver(tell_reply{tell_reply::not_here, "the recipient left this worker"});
    message_backlog.clear();
    stopped = true;  // before the detaches: no census note for each
    while (!connections.empty())
      detach(std::string(connections.front().cid));
    self->quit();
  }
};

const char* user_state::name = "troupe.user";

user_handle::behavior_type user_impl(user_handle::stateful_pointer<user_state> self, user_spec spec) {
  auto& st = self->state;
  st.self = self;
  st.ctx = spec.ctx;
  st.gauge.emplace(st.ctx->metrics, actor_kind::user);
  st.user_name = std::move(spec.user);
  st.worker_name = std::move(spec.worker);
  st.commander = caf::actor_cast<commander_handle>(spec.commander);
  st.global_store = caf::actor_cast<global_store_handle>(spec.global_store);
  st.deposit = caf::actor_cast<deposit_handle>(spec.deposit);
  st.started = registry::wall_clock::now();
  st.census = st.ctx->census;
  st.supervisor = std::move(spec.supervisor);
  st.restarts = spec.restarts;
  st.cost = std::move(spec.busy);
  st.gate = std::move(spec.gate);
  if (auto* group = st.ctx->recipe.group(spec.group)) {
    st.mode = durability_of(group->durability);
    st.idle_after = node_context::timer_millis(group->user_idle_freeze_minutes * 60);
    st.checkpoint_every = node_context::timer_millis(group->checkpoint_seconds);
    st.guest_idle_after = node_context::timer_millis(group->guest_idle_seconds);
    if (group->rest_idle_seconds > 0)
      st.rest_after = node_context::timer_millis(group->rest_idle_seconds);
  } else {
    st.idle_after = node_context::timer_millis(30 * 60);
    st.checkpoint_every = node_context::timer_millis(5);
    st.guest_idle_after = node_context::timer_millis(2);
  }
  st.keeper.emplace((*spec.factory)());
  st.owner_epoch = spec.owner_epoch;
  st.keeper->set_owner_epoch(spec.owner_epoch);
  st.keeper->set_group(spec.group);
  static const router no_routes;
  st.routes = spec.routes ? spec.routes : &no_routes;
  st.messages = spec.messages;
  user_access::bind(st.keeper->app(), &st);
  self->set_down_handler([self](caf::down_msg& m) { self->state.on_down(m); });  // his streams' sinks
  st.restore_channels(spec.channels);
  if (spec.resumed) {
    st.resume_from_rest(*spec.resumed);
  } else if (spec.wake && st.deposit) {
    st.note(registry::user_state::unfreezing);
    st.wake(std::move(spec.parcel));
  } else {
    st.note(registry::user_state::active);
    if (!spec.parcel.empty())
      st.install_encoded(spec.parcel, "the state he was started with");
    st.schedule_idle();
  }
  return {
    [=](http_atom, local_reply& k) {
      actor_meter::scope metered{self->state.meter};
      std::shared_ptr<const http_request> req(k, &k->request());
      self->state.accept(pending_call{std::move(req), std::move(k)});
    },
    [=](http_atom, http_request& req) -> caf::result<http_response> {
      actor_meter::scope metered{self->state.meter};
      auto promise = self->make_response_promise<http_response>();
      self->state.accept(pending_call{std::make_shared<const http_request>(std::move(req)), promise});
      return promise;
    },
    [=](adopt_atom, std::string& cid) -> caf::result<placement> {
      auto& st = self->state;
      actor_meter::scope metered{st.meter};
      bool fresh = st.connections.add(cid);
      if (fresh)
        st.note();
      if (!fresh || st.mode == durability::freeze || st.user_name == registry::guest_name(cid))
        return st.where();
      return st.save_connection(cid);
    },

    [=](tell_atom, user_message& m) -> caf::result<tell_reply> {
      actor_meter::scope metered{self->state.meter};
      auto promise = self->make_response_promise<tell_reply>();
      self->state.accept_message(pending_message{std::move(m), promise});
      return promise;
    },
    [=](freeze_atom, std::uint8_t cause) -> caf::result<bool> {
      auto promise = self->make_response_promise<bool>();
      self->state.freeze(cause, promise);
      return promise;
    },
    [=](probe_atom, std::uint64_t query, bool detail) { return self->state.probe(query, detail); },
    [=](unbind_atom, const std::string& cid, const std::string& page, const channel_ref& socket) {
      self->state.forget_channel(cid, page, socket);
    },
    [=](push_atom, std::string& path, std::string& data) -> caf::result<std::uint32_t, std::uint32_t> {
      auto& st = self->state;
      actor_meter::scope metered{st.meter};
      auto promise = self->make_response_promise<std::uint32_t, std::uint32_t>();
      detail::push_order order;
      order.to = detail::push_order::scope::own_pages;
      order.path = std::move(path);
      order.done = [promise](const push_outcome& o) mutable { promise.deliver(o.delivered, o.not_delivered); };
      st.push_now(std::move(order), &data);
      return promise;
    },
    [=](tick_atom, std::uint8_t which, std::uint64_t arg) {
      actor_meter::scope metered{self->state.meter};
      self->state.on_tick(which, arg);
    },
    [=](stream_msg_atom, stream_event& e) {
      actor_meter::scope metered{self->state.meter};
      self->state.on_stream_event(e);
    },
  };
}

}  // namespace

user_handle spawn_user(caf::local_actor& parent, user_spec spec) {
  return parent.spawn<caf::monitored>(user_impl, std::move(spec));
}

}  // namespace troupe
