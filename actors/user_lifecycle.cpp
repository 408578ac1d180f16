// The user actor's life with the deposit and the commander: waking, freezing,
// checkpoints, resting, login/logout, and the ways he leaves. When each
// happens is user_core's decision; this file carries it out.
#include "actors/errors.hpp"
#include "actors/user_state.hpp"
#include "config/group_settings.hpp"
#include "registry/ids.hpp"
#include "store/parcel.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

placement user_state::where() const {
  return placement{user_name, worker_name, ctx->node_name, self, {}, type_name};
}

store::parcel user_state::make_parcel(store::parcel_cause cause) {
  return keeper->next_parcel(cause, ctx->node_name, worker_name);
}

void user_state::install_encoded(const store::bytes& encoded, const char* what) {
  try {
    keeper->install(store::decode(encoded));
  } catch (const std::exception& e) {
    spdlog::error("user {}: {} does not verify ({}); he starts empty", registry::redact(user_name), what, e.what());
  }
}

// -- waking ------------------------------------------------------------------------------

// Reads his parcel before serving anything: requests that arrive meanwhile
// wait in the backlog, so a burst reads the disk once. No parcel: the
// carried store (a login's), or a fresh one. A failed read leaves no
// half-born actor: the waiting requests get 503 and he stops.
void user_state::wake(store::bytes carried) {
  core->wake();
  auto t0 = std::chrono::steady_clock::now();
  // The read claims him for his placement's epoch in the same step: from
  // now on an older holder's writes are refused, even before he writes.
  core->asked();
  self->request(deposit, ctx->hold_timeout(), claim_atom::value, user_name, owner_epoch)
    .then(
      [this, carried, t0](std::vector<store::parcel>& found) {
        core->answered();
        if (!found.empty()) {
          // A user with a past stays in his group: placed here by default
          // (the commander does not read parcels), he goes where his parcel
          // says while that group exists, before loading anything.
          if (auto& home = found.front().group; !home.empty() && home != keeper->group() && ctx->group(home)) {
            spdlog::debug("user {} on {}: his parcel says group {}; he moves there", registry::redact(user_name),
                          worker_name, home);
            // Told first: what waits here is sent back to the front, which asks it again.
            self->send(commander, relocate_atom::value, user_name, owner_epoch, home);
            return core->relocated();
          }
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
        core->woke();
      },
      [this](caf::error& err) {
        core->answered();
        if (is(err, errc::stale_owner)) {  // a newer placement holds him: he was never here
          core->fence();
          return;
        }
        log_deposit_error("waking", err);
        if (is(err, errc::bad_state))  // quarantined: no retry helps until an operator acts
          return become_refused();
        core->wake_failed();
      });
}

// The wake ended: the adoptions that waited for it are saved and answered,
// answered without a write (he is refused and writes nothing), or failed.
void user_state::settle_adoptions(bool ok) {
  auto waiting = std::move(adoptions_after_wake);
  adoptions_after_wake.clear();
  for (auto& [cid, promise] : waiting) {
    if (!ok)
      promise.deliver(make_error(errc::wake_failed, "the user could not be woken"));
    else if (core->phase() == user_phase::refused)
      promise.deliver(where());
    else
      save_connection(cid, promise);
  }
}

// His parcel does not load as his state (it does not decode, was written
// by a newer version, or no migration takes it): never start him empty. It
// goes to quarantine (the deposit keeps refusing him: its marker) and he is
// refused until an operator drops him or puts a parcel back that loads.
void user_state::refuse(const store::parcel& p, const std::string& why) {
  ctx->metrics.users_refused.fetch_add(1, std::memory_order_relaxed);
  spdlog::error("user {} on {}: his parcel (state version {}, generation {}) does not load: {}; it is "
                "quarantined and he is refused until it can be read",
                registry::redact(user_name), worker_name, p.state_version, p.generation, why);
  core->asked();
  self->request(deposit, deposit_timeout, quarantine_atom::value, user_name, why)
    .then([this](std::string&) { core->answered(); },
          [this](caf::error& err) {
            core->answered();
            log_deposit_error("quarantining his parcel", err);
          });
  become_refused();
}

// He stays, answering 503 to everything and writing nothing, so that a
// client hammering him costs neither reads nor log lines.
void user_state::become_refused() {
  core->quarantined();
  auto calls = std::move(backlog);
  backlog.clear();
  for (auto& call : calls)
    accept(std::move(call));
  auto messages_waiting = std::move(message_backlog);
  message_backlog.clear();
  for (auto& pm : messages_waiting)
    accept_message(std::move(pm));
}

// -- connections ----------------------------------------------------------------------------

store::parcel user_state::connection_parcel(const connection_record& conn, store::parcel_cause why) {
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
void user_state::save_connection(const std::string& cid, caf::typed_response_promise<placement> promise) {
  auto* conn = connections.find(cid);
  if (!conn) {  // detached meanwhile: nothing to make durable
    promise.deliver(where());
    return;
  }
  auto p = connection_parcel(*conn, store::parcel_cause::login);
  core->asked();
  auto write = self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::connection, cid, std::move(p));
  if (core->policy().mode != durability::reply) {  // interval: the write completes in the background
    write.then([this](std::uint64_t) { core->answered(); },
               [this](caf::error& err) {
                 core->answered();
                 log_deposit_error("saving a connection", err);
               });
    promise.deliver(where());
    return;
  }
  write.then(
    [this, promise](std::uint64_t) mutable {
      core->answered();
      promise.deliver(where());
    },
    [this, promise](caf::error& err) mutable {
      core->answered();
      log_deposit_error("saving a connection", err);
      promise.deliver(make_error(errc::deposit_failed, "the connection could not be made durable"));
    });
}

// -- login / logout ----------------------------------------------------------------------

namespace {

http_response identity_response(const placement& p, const std::string& cid, route_note route) {
  http_response r;
  r.body = nlohmann::json{{"user", p.user}, {"connection", cid}, {"node", p.node}, {"worker", p.worker}}.dump();
  r.route = route;
  return r;
}

}  // namespace

// The guest's store, as the parcel a login carries to a user who is not live.
store::bytes user_state::carried_store() {
  return store::encode(keeper->next_parcel(store::parcel_cause::login, ctx->node_name, worker_name));
}

// Login (target set) or logout (none): the commander moves the connection
// to its new owner under a new id (the request's id dies); this user answers
// with the new owner's identity and cookie and lets the connection go.
void user_state::move_connection(pending_call&& call, std::optional<std::string> target) {
  if (target && *target == user_name) {
    core->resume_request();
    respond(call.to, routed(call, identity_response(where(), call.req->cid, route_note::keep)));
    return core->drain();
  }
  auto waiting = std::make_shared<pending_call>(std::move(call));
  auto on_placed = [self = self, waiting](placement& p) {
    auto& st = self->state;
    st.core->answered();
    const std::string cid = waiting->req->cid;
    st.detach(cid);
    auto reply = routed(*waiting, identity_response(p, p.cid, route_note::changed));
    reply.set_cid = p.cid;
    respond(waiting->to, std::move(reply));
    st.core->resume_request();
    if (st.connections.empty() && registry::is_guest(st.user_name)) {
      // Ordered after his own writes: no parcel of his dead id outlives him
      // (in every mode: a woken user's parcel stays until replaced). Not
      // counted as awaited: he is gone by then, and the commander removes it too.
      self->request(st.deposit, deposit_timeout, remove_atom::value, parcel_kind::user, st.user_name)
        .then([](bool) {}, [](caf::error&) {});
      return st.core->retire();
    }
    st.core->login_ended();  // he stays (other connections): checkpoints go on
    st.core->drain();
  };
  auto on_error = [self = self, waiting](caf::error& err) {
    auto& st = self->state;
    st.core->answered();
    st.core->login_ended();
    spdlog::warn("user {}: moving a connection failed: {}", registry::redact(st.user_name),
                 self->system().render(err));
    respond(waiting->to, routed(*waiting, error_response(503, "login/logout could not be completed, retry", 1)));
    st.core->resume_request();
    st.core->drain();
  };
  const auto& cid = waiting->req->cid;
  core->login_started();
  core->asked();
  if (target) {
    login_request order{cid, user_name, *target, registry::is_guest(user_name) ? carried_store() : store::bytes{}};
    self->request(commander, ctx->hold_timeout(), login_atom::value, std::move(order)).then(on_placed, on_error);
  } else {
    self->request(commander, ctx->hold_timeout(), logout_atom::value, cid, user_name).then(on_placed, on_error);
  }
}

// -- freezing and checkpoints --------------------------------------------------------------

void user_state::freeze(std::uint8_t cause, std::optional<caf::typed_response_promise<bool>> waiter) {
  if (waiter)
    freeze_waiters.push_back(std::move(*waiter));
  core->freeze_asked(cause);
}

// The commander holds his routing first; then his parcels are written; only
// when all are durable does he announce it and leave. A failed write aborts
// the whole freeze: he stays, serving, and nothing is announced.
void user_state::hold_routing() { self->send(commander, freezing_atom::value, user_name, owner_epoch); }

void user_state::write_freeze_parcels(std::uint8_t cause, std::uint64_t attempt) {
  // A guest's own connection needs no parcel: the cookie alone names guest_<cid>.
  std::vector<const connection_record*> named;
  for (auto& conn : connections)
    if (user_name != registry::guest_name(conn.cid))
      named.push_back(&conn);
  struct tally {
    std::size_t pending;
    freeze_writes outcome = freeze_writes::written;
  };
  auto t = std::make_shared<tally>(tally{1 + named.size()});
  auto done = [this, t, attempt](freeze_writes w) {
    core->answered();
    if (w == freeze_writes::stale || (w == freeze_writes::failed && t->outcome == freeze_writes::written))
      t->outcome = w;  // a stale epoch wins: he leaves without writing
    if (--t->pending == 0)
      core->freeze_written(attempt, t->outcome);
  };
  auto on_error = [this, done](caf::error& err) {
    if (is(err, errc::stale_owner))
      return done(freeze_writes::stale);
    log_deposit_error("freezing", err);
    done(freeze_writes::failed);
  };
  auto why = static_cast<store::parcel_cause>(cause);
  // The soft quit's writes have no timeout of their own: the worker's freeze
  // run bounds them with one deadline for all (worker_actor_state::freezes_out),
  // where a timeout each would put every user through CAF's clock thread.
  const caf::duration timeout = core->quitting() ? caf::duration{caf::infinite} : caf::duration{deposit_timeout};
  core->asked();
  self->request(deposit, timeout, put_atom::value, parcel_kind::user, user_name, make_parcel(why))
    .then([done](std::uint64_t) { done(freeze_writes::written); }, on_error);
  for (auto* conn : named) {
    core->asked();
    self->request(deposit, timeout, put_atom::value, parcel_kind::connection, conn->cid, connection_parcel(*conn, why))
      .then([done](std::uint64_t) { done(freeze_writes::written); }, on_error);
  }
}

void user_state::thaw() {
  spdlog::error("user {} on {}: freeze aborted (a parcel could not be written); he stays",
                registry::redact(user_name), worker_name);
  self->send(commander, thaw_atom::value, user_name, owner_epoch);
  auto waiters = std::move(freeze_waiters);
  freeze_waiters.clear();
  for (auto& w : waiters)
    w.deliver(make_error(errc::deposit_failed, "the parcels could not be written"));
}

void user_state::leave_frozen() {
  auto waiters = std::move(freeze_waiters);
  freeze_waiters.clear();
  // Before the not_here answers below; his pages' channels go to his next placement.
  self->send(commander, frozen_atom::value, user_name, owner_epoch, open_channels());
  if (core->empty_guest()) {  // he leaves no trace: the census forgets him too
    ctx->metrics.guests_retired.fetch_add(1, std::memory_order_relaxed);
    self->send(commander, release_atom::value, user_name);
    if (census && !core->quitting())
      self->send(census, drop_atom::value, user_name);
  } else {
    ctx->metrics.user_freezes.fetch_add(1, std::memory_order_relaxed);
    ctx->metrics.users_frozen.fetch_add(1, std::memory_order_relaxed);
    if (!core->quitting())
      note(registry::user_state::frozen);
  }
  for (auto& w : waiters)
    w.deliver(true);
  retire();
}

// durability = "interval": a changed store is written every checkpoint_seconds.
void user_state::write_checkpoint() {
  core->asked();
  self->request(deposit, deposit_timeout, put_atom::value, parcel_kind::user, user_name,
                make_parcel(store::parcel_cause::checkpoint))
    .then([this](std::uint64_t) { core->answered(); },
          [this](caf::error& err) {
            core->answered();
            if (is(err, errc::stale_owner)) {
              core->fence();
              return;
            }
            log_deposit_error("checkpointing", err);
            core->checkpoint_failed();
          });
}

// -- resting ---------------------------------------------------------------------------------

// Rests (docs/config.md rest_idle_seconds): leaves his state to his worker
// and stops. He stays placed there; what comes for him next (a request, a
// message, his idle freeze) starts his actor again from what he left.
void user_state::rest() {
  auto left = std::make_shared<resting_user>();
  if (!core->empty_guest())  // a guest who never had a state leaves none: he starts again as new
    left->parcel = store::encode(make_parcel(store::parcel_cause::checkpoint));
  left->clocks = clocks;
  left->started = started;
  left->dirty = core->dirty();
  note(registry::user_state::resting);
  left->connections = std::move(connections);
  ctx->metrics.user_rests.fetch_add(1, std::memory_order_relaxed);
  self->send(supervisor, rest_atom::value, user_name, std::move(left));
  self->quit();
}

// Starts as he was when he rested: his state, connections and clocks.
void user_state::resume_from_rest(resting_user& left) {
  if (!left.parcel.empty())
    install_encoded(left.parcel, "the state he left when he rested");
  connections = std::move(left.connections);
  clocks = left.clocks;
  started = left.started;
  if (left.dirty)
    core->mark_dirty();
  core->resumed(idleness());
}

// -- leaving -------------------------------------------------------------------------------

// The deposit refused his epoch as stale (docs/CLUSTER.md "Fencing"): a
// newer placement holds him, maybe on another node. The state held here is
// the stale one: he leaves at once and writes nothing more. What waits is
// answered not_here (the front re-resolves it once, then 503 + Retry-After);
// the commander is told he left, as after a freeze with nothing written.
void user_state::leave_fenced() {
  auto adopted = std::move(adoptions_after_wake);
  adoptions_after_wake.clear();
  for (auto& [cid, promise] : adopted)
    promise.deliver(make_error(errc::not_here, "a newer placement holds the user"));
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
  // He is not placed here any more; his channels are the newer placement's business.
  self->send(commander, frozen_atom::value, user_name, owner_epoch, std::vector<channel_binding>{});
  note(registry::user_state::frozen);
  retire();
}

// His parcel says he lives in another group (the commander was told, and
// places him there): he leaves without writing anything (his parcel stays as
// it is). Adoptions that waited for the wake are answered with this actor,
// unsaved: a request sent to it once it is gone is re-resolved by the front.
void user_state::leave_for_group() {
  auto waiting = std::move(adoptions_after_wake);
  adoptions_after_wake.clear();
  for (auto& [cid, promise] : waiting)
    promise.deliver(where());
  note(registry::user_state::frozen);
  retire();
}

// His parcel could not be read: what waits gets 503, he stops; the parcel
// stays in the deposit for the next try.
void user_state::leave_not_woken() {
  for (auto& call : backlog)
    respond(call.to, error_response(503, "the user could not be woken, retry", 1));
  backlog.clear();
  for (auto& pm : message_backlog)
    pm.to.deliver(tell_reply::of(tell_outcome::result::unavailable, "the recipient could not be woken"));
  message_backlog.clear();
  note(registry::user_state::frozen);  // he still is
  self->quit(make_error(errc::wake_failed));
}

// A guest whose only connection left, or a user who froze: answer what
// waits (not here: the front asks the commander again), stop.
void user_state::retire() {
  for (auto& call : backlog) {
    http_response moved;
    moved.route = route_note::not_here;
    respond(call.to, std::move(moved));
  }
  backlog.clear();
  for (auto& pm : message_backlog)  // the commander routes them again, to where he is next
    pm.to.deliver(tell_reply{tell_reply::not_here, "the recipient left this worker"});
  message_backlog.clear();
  // His phase is terminal already: no census note for each detach.
  while (!connections.empty())
    detach(std::string(connections.front().cid));
  self->quit();
}

}  // namespace troupe
