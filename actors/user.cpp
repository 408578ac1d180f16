// The user actor's behaviour and the glue to his state machine (user_core):
// messages become core events, the core's effects are carried out here and in
// the files listed in actors/user_state.hpp.
#include "actors/user.hpp"

#include "actors/errors.hpp"
#include "actors/user_access.hpp"
#include "actors/user_state.hpp"
#include "config/group_settings.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace troupe {

using detail::user_access;

std::int64_t unix_ms(registry::wall_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void busy_scope::done() {
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

const char* user_state::name = "troupe.user";

caf::local_actor* user_state::actor() { return self; }

// -- the census ---------------------------------------------------------------------------

void user_state::note(std::optional<registry::user_state> now) {
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

namespace {

std::int64_t ms_or_zero(registry::wall_clock::time_point t) {
  return t == registry::wall_clock::time_point{} ? 0 : unix_ms(t);
}

nlohmann::json seconds_or_null(registry::wall_clock::time_point t) {
  return t == registry::wall_clock::time_point{} ? nlohmann::json(nullptr) : nlohmann::json(registry::to_seconds(t));
}

}  // namespace

actor_probe user_state::probe(std::uint64_t query, bool detail) {
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
    for (auto& page : conn.pages) {  // "actor": null while the page is a record only (virtual)
      pages.push_back({{"id", "page:" + user_name + "/" + ref + "/" + page.id}, {"page", page.id},
                       {"actor", nullptr}, {"clocks", clocks_of(page.clocks)}});
      if (page.channel && !page.channel->app_path.empty())  // an app WebSocket
        pages.back()["socket"] = {{"path", page.channel->app_path}, {"subprotocol", page.channel->subprotocol}};
    }
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
                            {"generation", keeper->generation()}, {"dirty", core->dirty()},
                            {"backlog", backlog.size()}, {"deferred", parked.size()}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return p;
}

void user_state::log_deposit_error(const char* doing, const caf::error& err) {
  spdlog::error("user {} on {}: deposit error while {}: {}", registry::redact(user_name), worker_name, doing,
                self->system().render(err));
}

// -- ticks and idleness ----------------------------------------------------------------------

void user_state::on_tick(std::uint8_t which, std::uint64_t arg) {
  switch (static_cast<user_timer>(which)) {
    case user_timer::idle: return core->idle_due(idleness());
    case user_timer::checkpoint: return core->checkpoint_due();
    case user_timer::resume: return resume(arg);
    case user_timer::later: return run_timer(arg);
    case user_timer::deferred: return deferred_due(arg);
  }
}

// Idleness is judged on the real clocks (last_user, last_rpc), never on last_refresh.
idle_facts user_state::idleness() const {
  idle_facts f;
  auto last = std::max(clocks.last_activity(), started);
  f.idle_for = std::chrono::duration_cast<std::chrono::milliseconds>(registry::wall_clock::now() - last);
  f.streaming = streaming_now() || !parked.empty();  // a client waits for him either way
  f.holds_live_work = holds_live_work();
  return f;
}

// Something waits for his actor, or is bound to it: he may not rest.
bool user_state::holds_live_work() const {
  if (!backlog.empty() || !message_backlog.empty() || !freeze_waiters.empty() || !adoptions_after_wake.empty() ||
      !told_after_write.empty() || !told_early.empty() || !parked.empty())
    return true;
  if (books && !books->empty())
    return true;
  for (auto& conn : connections)
    for (auto& page : conn.pages)
      if (page.channel)  // an open channel needs this actor's mailbox
        return true;
  return false;
}

// -- the core's effects ----------------------------------------------------------------------

// His timers go through his worker, which forwards them only while he
// lives: a delayed message to himself would keep a dead actor's memory for
// as long as it is pending (30 minutes for the idle check: 2 KB per crash).
void user_state::arm_timer(user_timer which, std::chrono::milliseconds delay, std::uint64_t arg) {
  self->send(supervisor, timer_atom::value, self->id(), static_cast<std::uint8_t>(which), arg,
             static_cast<std::int64_t>(delay.count()));
}

bool user_state::serve_waiting_message() {
  if (message_backlog.empty())
    return false;
  auto pm = std::move(message_backlog.front());
  message_backlog.pop_front();
  serve_message(std::move(pm));
  return true;
}

bool user_state::serve_waiting_request() {
  if (backlog.empty())
    return false;
  auto call = std::move(backlog.front());
  backlog.pop_front();
  serve(std::move(call));
  return true;
}

void user_state::leave(user_exit why) {
  answer_parked();  // nobody could resolve them once he is gone
  switch (why) {
    case user_exit::frozen: return leave_frozen();
    case user_exit::fenced: return leave_fenced();
    case user_exit::relocated: return leave_for_group();
    case user_exit::not_woken: return leave_not_woken();
    case user_exit::failed: return leave_failed();
    case user_exit::retired: return retire();
    case user_exit::rested: return rest();
  }
}

// -- the behaviour -------------------------------------------------------------------------------

namespace {

user_policy policy_of(const node_context& ctx, const user_spec& spec, const std::string& user) {
  user_policy p;
  p.guest = registry::is_guest(user);
  if (auto* group = ctx.group(spec.group)) {
    const double idle_minutes = spec.tuning ? spec.tuning->user_idle_freeze_minutes : group->user_idle_freeze_minutes;
    const double guest_seconds = spec.tuning ? spec.tuning->guest_idle_seconds : group->guest_idle_seconds;
    p.mode = durability_of(group->durability);
    p.idle_after = node_context::timer_millis(idle_minutes * 60);
    p.checkpoint_every = node_context::timer_millis(group->checkpoint_seconds);
    p.guest_idle_after = node_context::timer_millis(guest_seconds);
    if (group->rest_idle_seconds > 0)
      p.rest_after = node_context::timer_millis(group->rest_idle_seconds);
  } else {
    p.idle_after = node_context::timer_millis(30 * 60);
    p.checkpoint_every = node_context::timer_millis(5);
    p.guest_idle_after = node_context::timer_millis(2);
  }
  return p;
}

user_handle::behavior_type user_impl(user_handle::stateful_pointer<user_state> self, user_spec spec) {
  auto& st = self->state;
  st.self = self;
  st.ctx = spec.ctx;
  st.gauge.emplace(st.ctx->metrics, actor_kind::user);
  st.user_name = std::move(spec.user);
  st.worker_name = std::move(spec.worker);
  if (auto* group = st.ctx->group(spec.group))
    st.type_name = group->user_type;
  st.commander = spec.commander;
  st.global_store = spec.global_store;
  st.deposit = spec.deposit;
  st.started = registry::wall_clock::now();
  st.census = st.ctx->census;
  st.supervisor = std::move(spec.supervisor);
  st.restarts = spec.restarts;
  st.cost = std::move(spec.busy);
  st.gate = std::move(spec.gate);
  st.core.emplace(policy_of(*st.ctx, spec, st.user_name), st);
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
    st.wake(std::move(spec.parcel));
  } else {
    if (!spec.parcel.empty())
      st.install_encoded(spec.parcel, "the state he was started with");
    st.core->start();
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
      auto how = st.core->adopt(fresh, st.user_name == registry::guest_name(cid));
      if (how == adoption::answer_now)
        return st.where();
      auto promise = self->make_response_promise<placement>();
      if (how == adoption::save_after_wake)  // saved once his wake tells he is here (settle_adoptions)
        st.adoptions_after_wake.emplace_back(cid, promise);
      else
        st.save_connection(cid, promise);
      return promise;
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
    [=](tune_atom, std::int64_t idle_ms, std::int64_t guest_idle_ms) {
      self->state.core->tune_idleness(std::chrono::milliseconds(idle_ms), std::chrono::milliseconds(guest_idle_ms));
    },
    [=](stream_msg_atom, stream_event& e) {
      actor_meter::scope metered{self->state.meter};
      self->state.on_stream_event(e);
    },
    [=](upload_atom, upload_piece& piece) {
      actor_meter::scope metered{self->state.meter};
      self->state.on_upload_piece(piece);
    },
  };
}

}  // namespace

user_handle spawn_user(caf::local_actor& parent, user_spec spec) {
  return parent.spawn<caf::monitored>(user_impl, std::move(spec));
}

}  // namespace troupe
