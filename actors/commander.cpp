#include "actors/commander.hpp"

#include "actors/budgets.hpp"
#include "actors/commander_state.hpp"
#include "actors/errors.hpp"
#include "config/channel_settings.hpp"
#include "config/group_settings.hpp"
#include "config/limits_settings.hpp"
#include "registry/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace troupe {

const char* commander_state::name = "troupe.commander";

// -- commander_effects ---------------------------------------------------------------------

void commander_state::arm_hold_budget() {
  self->delayed_send(self, std::chrono::milliseconds(static_cast<std::int64_t>(ctx->limits().hold_seconds * 1000)),
                     tick_atom::value, std::uint64_t{0});
}

void commander_state::ask_scan(std::size_t slot) {
  self->request(handles[slot], ctx->hold_timeout(), scan_atom::value)
    .then(
      [this, slot](std::vector<std::string>& users, std::vector<std::uint64_t>& epochs) {
        for (auto& user : core->scan_answered(slot, users, epochs))
          spdlog::error("commander: takeover: user {} reported by two workers; the first keeps him",
                        registry::redact(user));
      },
      [this, slot](caf::error& err) {
        auto& s = core->slots()[slot];
        spdlog::warn("commander: takeover: worker {} of {} did not tell its users: {}", s.name, s.node,
                     self->system().render(err));
        core->scan_failed(slot);
      });
}

void commander_state::proceed(waiter_id w) {
  auto x = take(w);
  if (x.told)
    return tell(std::move(x.msg), std::move(*x.told), false);
  resolve_now(std::move(*x.placement), x.cid, x.minted);
}

void commander_state::refuse(waiter_id w, const std::string& why) {
  auto x = take(w);
  if (x.told)
    x.told->deliver(tell_reply::of(tell_outcome::result::unavailable, "the commander is taking over; retry"));
  else
    x.placement->deliver(make_error(errc::unavailable, why));
}

void commander_state::attach(waiter_id w, const std::string& user, const std::string& cid) {
  place(std::move(*take(w).placement), user, cid, {}, true);
}

void commander_state::attach_without_growth(waiter_id w, const std::string& group) {
  auto x = take(w);
  place(std::move(*x.placement), x.user, x.cid, std::move(x.parcel), x.wake, group, false);
}

void commander_state::resolve(waiter_id w, const std::string& cid) {
  resolve_now(std::move(*take(w).placement), cid, false);
}

void commander_state::route_tell(waiter_id w) {
  auto x = take(w);
  tell(std::move(x.msg), std::move(*x.told), false);
}

// Unknown here (a stranger, or anybody after a restart): his connection
// parcel says whose it is.
void commander_state::read_connection(const std::string& cid) {
  self->request(deposit, ctx->hold_timeout(), get_atom::value, parcel_kind::connection, cid)
    .then(
      [this, cid](std::vector<store::parcel>& found) {
        std::string user;
        if (!found.empty()) {
          try {
            store::connection_record rec;
            store::unpack(found.front().payload, rec);
            if (rec.cid == cid && (registry::valid_user_name(rec.user) || rec.user == registry::guest_name(cid)))
              user = rec.user;
          } catch (const std::exception& e) {
            spdlog::error("commander: the parcel of connection {} does not decode ({}); a new guest",
                          registry::redact(cid), e.what());
          }
        }
        core->connection_read(cid, std::move(user));
      },
      [this, cid](caf::error& err) {
        spdlog::error("commander: looking up connection {} failed: {}", registry::redact(cid),
                      self->system().render(err));
        core->connection_unread(cid);
      });
}

// Asks `group` for one more worker; it registers it (workers_atom, which
// arrives first) and answers; the arrivals that waited are placed again,
// without growing a second time.
void commander_state::grow(const std::string& group) {
  auto handle = local_groups.at(group);
  auto over = [this, group](std::optional<caf::error> failed) {
    if (failed)
      spdlog::warn("commander: group {} did not grow: {}; {} arrival(s) placed without it", group,
                   self->system().render(*failed), core->growing(group));
    core->growth_over(group);
  };
  self->request(handle, ctx->hold_timeout(), grow_atom::value)
    .then(
      [this, group, handle, over](const worker_handle& grown) {
        // Its registration went first, but through the commander link in a
        // cluster it may come second: then its workers are asked for here.
        if (std::find(handles.begin(), handles.end(), grown) != handles.end())
          return over(std::nullopt);
        self->request(handle, ctx->request_timeout(), workers_atom::value)
          .then(
            [this, group, over](std::vector<worker_handle>& workers) {
              register_workers(group, ctx->node_name, workers);
              over(std::nullopt);
            },
            [over](caf::error& err) { over(err); });
      },
      [over](caf::error& err) { over(err); });
}

void commander_state::release_guest(std::size_t slot, const std::string& user) {
  self->send(handles[slot], release_atom::value, user);
}

void commander_state::remove_parcel(bool connection, const std::string& key) {
  remove_deposit_parcel(connection ? parcel_kind::connection : parcel_kind::user, key);
}

void commander_state::keep_channels(const std::string& user) {
  frozen_channels->keep(user, std::move(notice_channels));
  notice_channels.clear();
}

// -- placements ------------------------------------------------------------------------------

// Asks the deposit for a new generation. `await`: placements wait in the
// mailbox until it is known (no thread blocks), so no epoch is ever given
// under an old generation.
void commander_state::obtain_generation() {
  if (asking_generation || !deposit)
    return;
  asking_generation = true;
  self->request(deposit, ctx->request_timeout(), generation_atom::value)
    .await(
      [this](std::uint64_t generation) {
        asking_generation = false;
        if (epochs.start(generation)) {
          spdlog::info("commander: generation {} (owner epochs from {})", generation, epochs.make(generation, 1));
          // Fencing tokens share the scheme: a later commander's are above every earlier one's.
          self->send(global_store, generation_atom::value, generation);
        } else
          spdlog::error("commander: the deposit gave generation {}, not above {}; kept", generation,
                        epochs.generation());
      },
      [this](caf::error& err) {
        asking_generation = false;
        spdlog::critical("commander: the deposit gave no generation ({}); users are not placed until it does",
                         self->system().render(err));
      });
}

// The owner epoch of a new placement; nullopt (asked again) without a generation.
std::optional<std::uint64_t> commander_state::next_owner_epoch() {
  auto epoch = epochs.next();
  if (!epoch || epochs.wants_new_generation())
    obtain_generation();
  return epoch;
}

std::uint64_t commander_state::watch_remote(std::size_t slot, std::function<void()> at_verdict) {
  const auto& node = handles[slot].node();
  return node == self->node() ? 0 : remote.watch(node, std::move(at_verdict));
}

void commander_state::register_workers(const std::string& group, const std::string& node,
                                       std::vector<worker_handle>& workers) {
  std::vector<bool> present;
  for (auto& w : workers)
    present.push_back(static_cast<bool>(w));
  // A worker that just admitted a newcomer rests, so that its load shows in its CPU temperature first
  // (with CPU admission on; without it, the least loaded worker is simply the best).
  std::optional<steady::duration> rest;
  if (auto* g = ctx->group(group); g && g->cpu_admission_close_percent > 0)
    rest = std::chrono::duration_cast<steady::duration>(
      std::chrono::duration<double>(g->worker_admission_interval_seconds));
  auto changes = core->place_workers(group, node, present, steady::now(), rest);
  for (auto& [position, slot] : changes.replaced)
    handles[slot] = workers[position];
  for (auto& [position, slot] : changes.added)
    handles.push_back(workers[position]);  // slots are appended in order
  core->workers_registered(node, changes.added);
}

// A member is down: its users wake elsewhere, its actors' leases are released.
void commander_state::node_down(const caf::node_id& node) {
  std::string name;
  for (std::size_t slot = 0; slot < handles.size() && name.empty(); ++slot)
    if (handles[slot].node() == node && !core->slots_of(core->slots()[slot].node).empty())
      name = core->slots()[slot].node;
  if (!name.empty()) {
    if (auto users = core->member_down(name)) {
      ctx->metrics.node_failovers.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("commander: member {} is down: its {} user(s) wake elsewhere on their next request", name, *users);
    }
  }
  self->send(global_store, node_down_atom::value, node);
  frozen_channels->forget_if([&](const channel_binding& b) { return b.socket.hub.node() == node; });
  // After its users left the index: an attach that waited on it places him on a live worker.
  auto due = remote.release(node);
  if (!due.empty())
    spdlog::info("commander: {} request(s) in flight to the member declared down answered or placed again now",
                 due.size());
  for (auto& f : due)
    f();
}

// Places `user` (unless he is placed) and has his worker give him `cid`;
// held while he is being frozen. A newcomer goes to `group` ("": the
// default group) unless his parcel sent him elsewhere (relocations); when
// no worker of that group admits him, the group grows once (`may_grow`)
// or he is refused.
void commander_state::place(placement_promise promise, const std::string& user, const std::string& cid,
                            store::bytes parcel, bool wake, std::string group, bool may_grow) {
  if (core->departing(user)) {
    core->hold_resolve(user, enlist({promise, {}, {}, cid}), cid);
    return;
  }
  if (auto relocated = core->take_relocation(user))
    group = std::move(*relocated);
  if (group.empty() || !ctx->group(group))
    group = default_group;
  // A newcomer (created or woken) past limits.max_live_users is refused;
  // users already live keep being served.
  if (!index().worker_of(user) && index().users() >= ctx->limits().max_live_users) {
    ctx->metrics.live_user_refusals.fetch_add(1, std::memory_order_relaxed);
    promise.deliver(make_error(errc::too_many_users, "the node is at its limit of live users"));
    return;
  }
  auto epoch = next_owner_epoch();
  if (!epoch) {
    promise.deliver(make_error(errc::unavailable, "no owner epoch yet: the deposit gave no commander generation"));
    return;
  }
  const bool newly_placed = !index().worker_of(user);
  auto slot = index().place(user, *epoch, group, steady::now());
  if (!slot)
    return no_worker_admits(std::move(promise), user, cid, std::move(parcel), wake, group, may_grow);
  std::vector<channel_binding> channels;
  if (newly_placed)
    channels = placed_with_channels(user);
  if (handles[*slot].node() == self->node()) {
    promise.delegate(handles[*slot], attach_atom::value,
                     attach_order{user, cid, std::move(parcel), wake, *epoch, std::move(channels)});
    return;
  }
  attach_order order{user, cid, parcel, wake, *epoch, std::move(channels)};
  auto watch = watch_remote(*slot, [this, promise, user, cid, parcel = std::move(parcel), wake, group]() mutable {
    place(std::move(promise), user, cid, std::move(parcel), wake, group);  // he is no longer placed there
  });
  self->request(handles[*slot], ctx->hold_timeout(), attach_atom::value, std::move(order))
    .then(
      [this, watch, promise](placement& p) mutable {
        if (unwatch(watch))
          promise.deliver(std::move(p));
      },
      [this, watch, promise](caf::error& err) mutable {
        if (unwatch(watch))
          promise.deliver(std::move(err));
      });
}

// The channels he froze with, for the placement that starts him again; their
// connections are routed to him again too (a sweep may have let them go).
std::vector<channel_binding> commander_state::placed_with_channels(const std::string& user) {
  auto channels = frozen_channels->take(user);
  for (auto& b : channels)
    if (!index().user_of(b.cid))
      index().bind(b.cid, user);
  return channels;
}

// No worker of `group` admits a newcomer: the group starts one more (the
// arrival waits for it, within the hold budget) unless it is at
// worker_max_number or not on this node; else he is refused with what the
// closed workers reported (docs/SUPERVISION.md "Groups and placement").
void commander_state::no_worker_admits(placement_promise promise, const std::string& user, const std::string& cid,
                                       store::bytes parcel, bool wake, const std::string& group, bool may_grow) {
  const auto degraded = static_cast<std::uint8_t>(refusal_reason::degraded);
  auto closure = index().closure(group, degraded);
  auto* settings = ctx->group(group);
  if (closure.in_service > 0 && closure.degraded == closure.in_service) {
    // Degraded: a new worker would fail like the others (helper B's recovery reopens them).
    ctx->metrics.admission_rejections[degraded].fetch_add(1, std::memory_order_relaxed);
    promise.deliver(make_refusal(errc::group_degraded, group + ": the group is degraded",
                                 std::max<std::uint32_t>(1, closure.retry_after)));
    return;
  }
  // Past the machine's memory alarm nothing grows: a new worker would hold memory the machine has not got.
  const bool machine_full = closure.reason == static_cast<std::uint8_t>(refusal_reason::machine_memory);
  if (may_grow && !machine_full && settings && local_groups.count(group) &&
      closure.in_service < static_cast<std::size_t>(settings->max_workers())) {
    commander_waiter w{promise, {}, user, cid};
    w.parcel = std::move(parcel);
    w.wake = wake;
    core->await_growth(group, enlist(std::move(w)));
    return;
  }
  if (closure.closed == 0) {  // nothing closed: every worker of his group is drained or gone
    promise.deliver(make_error(errc::unavailable, "no worker of group " + group + " in service"));
    return;
  }
  auto reason = closure.reason < refusal_reasons ? static_cast<refusal_reason>(closure.reason) : refusal_reason::cpu;
  ctx->metrics.admission_rejections[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  promise.deliver(make_refusal(errc::admission_refused, group + ": every worker is closed (" + to_string(reason) + ")",
                               std::max<std::uint32_t>(1, closure.retry_after)));
}

// What a worker admits now (its group forwarded its report).
void commander_state::on_admission(const admission_report& report) {
  for (std::size_t slot = 0; slot < handles.size(); ++slot) {
    if (index().retired(slot) || handles[slot].address() != report.worker)
      continue;
    last_admission_report[core->slots()[slot].group] = steady::now();
    index().set_admission(slot, report.admits, report.reason, report.retry_after);
    return;
  }
}

// The group a login into `to_user` goes to, asked of the hook of the type
// the guest runs (`from_group`'s); "" for the default group.
std::string commander_state::login_group(const std::string& from_group, const std::string& to_user) const {
  auto* from = ctx->group(from_group);
  if (!from)
    return {};
  auto routed = ctx->apps.login_group(from->user_type, to_user);
  if (!routed || !ctx->group(*routed))
    return {};
  return *routed;
}

// A new connection id; nullopt (logged) only if OpenSSL fails.
std::optional<std::string> commander_state::mint() {
  try {
    return ctx->cids->mint();
  } catch (const std::exception& e) {
    spdlog::error("commander: no connection id could be minted: {}", e.what());
    return std::nullopt;
  }
}

// The capacity guards on new guests (docs/SUPERVISION.md "Capacity guards"),
// as the health actor of this member judged them in its last sample.
std::optional<refusal_reason> commander_state::guest_guard() const {
  if (ctx->health.deposit_low_space.load(std::memory_order_relaxed))
    return refusal_reason::low_space;
  if (ctx->health.commander_memory_high.load(std::memory_order_relaxed))
    return refusal_reason::commander_memory;
  return std::nullopt;
}

void commander_state::resolve_now(placement_promise p, const std::string& cid, bool minted) {
  if (auto user = index().user_of(cid))
    return place(std::move(p), *user, cid, {}, true);
  if (minted) {  // a first visit: nothing of his can be in the deposit
    if (auto why = guest_guard()) {
      ctx->metrics.admission_rejections[static_cast<std::size_t>(*why)].fetch_add(1, std::memory_order_relaxed);
      p.deliver(make_refusal(errc::admission_refused,
                             *why == refusal_reason::low_space
                               ? "the deposit is low on space: no new guest is admitted (deposit.low_space_percent)"
                               : "the node holds its commander's memory limit: no new guest is admitted "
                                 "(limits.commander_memory_max_percent)",
                             guest_guard_retry_after));
      return;
    }
    index().bind(cid, registry::guest_name(cid));
    return place(std::move(p), registry::guest_name(cid), cid, {}, false);
  }
  // One read per connection, however many requests.
  core->look_up(cid, enlist({p, {}, {}, cid}));
}

// Guards on the front (docs/http.md "Guards"): his name and type, without
// waking him. A user who is not live is given the type of the group his
// login would route him to (his parcel, unread, names the same one unless
// the recipe moved him since; his actor judges again anyway).
caf::result<placement> commander_state::whois(const std::string& cid) {
  auto user = index().user_of(cid);
  if (!user)
    return make_error(errc::no_such_user, "this connection is not known");
  placement who;
  who.user = *user;
  who.cid = cid;
  std::string group = default_group;
  if (auto slot = index().worker_of(who.user))
    group = index().group_of(*slot);
  else if (auto routed = login_group(default_group, who.user); !routed.empty())
    group = routed;
  if (auto* g = ctx->group(group))
    who.type = g->user_type;
  return who;
}

caf::result<placement> commander_state::login(login_request& req) {
  if (!core->accepts_rotation())
    return make_error(errc::unavailable, "the commander is taking over; retry");
  if (!registry::valid_user_name(req.to_user))
    return make_error(errc::bad_request, "invalid user name");
  auto minted = mint();
  if (!minted)
    return make_error(errc::unavailable, "no connection id could be minted");
  auto& cid = *minted;
  // Where the guest lives decides whose hook routes him (before the rotation forgets the guest).
  auto from_slot = index().worker_of(req.from_user);
  std::string from_group = from_slot ? index().group_of(*from_slot) : default_group;
  auto to_group = login_group(from_group, req.to_user);
  core->rotate(req.cid, req.from_user, cid, req.to_user);
  bool live = index().worker_of(req.to_user).has_value();
  if (live && !req.parcel.empty()) {
    ctx->metrics.login_guest_store_dropped_live.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("login of connection {} into {}: he is live, his resident state wins; "
                 "the guest's store ({} bytes) is dropped",
                 registry::redact(cid), req.to_user, req.parcel.size());
    req.parcel.clear();
  }
  auto* from = ctx->group(from_group);
  auto* to = ctx->group(to_group.empty() ? default_group : to_group);
  if (!live && !req.parcel.empty() && from && to && from->user_type != to->user_type) {
    // Another actor type cannot load the guest's store.
    ctx->metrics.login_carries_dropped.fetch_add(1, std::memory_order_relaxed);
    carry_log("login of connection {} into {}: his group {} runs {}, not the guest's {}; the guest's store "
              "({} bytes) is dropped",
              registry::redact(cid), registry::redact(req.to_user), to->name, to->user_type, from->user_type,
              req.parcel.size());
    req.parcel.clear();
  }
  // Not live: he may be frozen (his parcel wins over the carried store, and his group over the hook's) or new.
  auto p = promise();
  place(p, req.to_user, cid, std::move(req.parcel), true, to_group);
  return p;
}

void commander_state::remove_deposit_parcel(parcel_kind kind, const std::string& key) {
  self->request(deposit, ctx->request_timeout(), remove_atom::value, kind, key)
    .then([](bool) {},
          [this, kind, key](caf::error& err) {
            spdlog::error("commander: the parcel of {} {} could not be removed: {}",
                          kind == parcel_kind::user ? "user" : "connection", registry::redact(key),
                          self->system().render(err));
          });
}

namespace {

commander_actor::behavior_type commander_impl(commander_actor::stateful_pointer<commander_state> self,
                                               node_context_ptr ctx, deposit_handle deposit,
                                               global_store_handle global_store, commander_start start) {
  auto& st = self->state;
  st.self = self;
  st.gauge.emplace(ctx->metrics, actor_kind::commander);
  st.ctx = std::move(ctx);
  st.deposit = std::move(deposit);
  st.default_group = st.ctx->default_group().name;
  st.frozen_channels.emplace(4 * std::max<std::uint64_t>(1, st.ctx->channel().max_sockets));
  st.global_store = std::move(global_store);
  self->link_to(st.global_store);
  commander_policy policy;
  policy.user_queue_length = st.ctx->limits().user_queue_length;
  policy.relocation_horizon = std::chrono::duration_cast<commander_core::steady::duration>(
    std::chrono::duration<double>(std::max(1.0, st.ctx->limits().hold_seconds)));
  st.core.emplace(policy, st);
  st.core->start(start.expected_nodes);
  if (!start.expected_nodes.empty())
    spdlog::warn("commander: taking over on {}: waiting for {} member(s) to tell their users", st.ctx->node_name,
                 st.core->expected().size());
  st.obtain_generation();
  st.schedule_sweep();
  st.schedule_retirement();
  if (st.ctx->census) {
    census_note n;
    n.kind = static_cast<std::uint8_t>(actor_kind::commander);
    n.name = "commander";
    self->send(st.ctx->census, note_atom::value, std::move(n));
  }
  return {
    [=](resolve_atom, const std::string& cid, bool minted) -> caf::result<placement> {
      auto& st = self->state;
      if (st.core->phase() == commander_phase::unstaffed)
        return make_error(errc::unavailable, "no workers registered yet");
      if (!st.ctx->cids->verify(cid))  // the front minted it or verified it: defence in depth
        return make_error(errc::bad_request, "not a connection id this node minted");
      auto p = st.promise();
      if (st.core->serving())
        st.resolve_now(p, cid, minted);
      else
        st.core->admit(st.enlist({p, {}, {}, cid, minted}));
      return p;
    },
    [=](whois_atom, const std::string& cid) -> caf::result<placement> { return self->state.whois(cid); },
    [=](login_atom, login_request& req) { return self->state.login(req); },
    [=](logout_atom, const std::string& cid, const std::string& from_user) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.core->accepts_rotation())
        return make_error(errc::unavailable, "the commander is taking over; retry");
      // A new id for a new guest: nothing of his can be in the deposit.
      auto minted = st.mint();
      if (!minted)
        return make_error(errc::unavailable, "no connection id could be minted");
      auto& new_cid = *minted;
      auto fresh = registry::guest_name(new_cid);
      st.core->rotate(cid, from_user, new_cid, fresh);
      auto p = st.promise();
      st.place(p, fresh, new_cid, {}, false);
      return p;
    },
    [=](tell_atom, user_message& msg) -> caf::result<tell_reply> {
      auto& st = self->state;
      if (st.core->phase() == commander_phase::unstaffed)
        return tell_reply::of(tell_outcome::result::unavailable, "no workers registered yet");
      auto p = self->make_response_promise<tell_reply>();
      if (st.core->serving()) {
        st.tell(std::move(msg), p, false);
      } else {
        commander_waiter w;
        w.told = p;
        w.msg = std::move(msg);
        st.core->admit(st.enlist(std::move(w)));
      }
      return p;
    },
    [=](workers_atom, const std::string& group, const std::string& node, std::vector<worker_handle>& workers) {
      auto& st = self->state;
      if (!st.ctx->group(group) || (workers.empty() && !st.core->knows_group(node, group)))
        return;
      // A group of this node registering itself: the one that grows and retires its workers.
      // (Not the commander link replaying it after a takeover: only a group answers grow_atom.)
      if (auto sender = self->current_sender(); sender && node == st.ctx->node_name && sender->node() == self->node())
        if (auto* a = dynamic_cast<caf::local_actor*>(sender->get()); a && std::strcmp(a->name(), "troupe.group") == 0)
          st.local_groups[group] = caf::actor_cast<group_handle>(sender);
      st.register_workers(group, node, workers);
    },
    [=](node_down_atom, const caf::node_id& node) { self->state.node_down(node); },
    [=](freeze_atom, const std::string& user) { return self->state.freeze(user); },
    [=](push_atom, const std::string& user, std::string& path, std::string& data) {
      return self->state.push(user, path, data);
    },
    // Notices name the placement they are about (its owner epoch): one from a
    // stale placement (a fenced member's user, placed again elsewhere since)
    // changes nothing.
    [=](freezing_atom, const std::string& user, std::uint64_t epoch) {
      self->state.core->freezing_notice(user, epoch);
    },
    [=](frozen_atom, const std::string& user, std::uint64_t epoch, std::vector<channel_binding>& channels) {
      self->state.notice_channels = std::move(channels);  // kept if the notice counts
      self->state.core->frozen_notice(user, epoch);
      self->state.notice_channels.clear();
    },
    [=](release_atom, const std::string& user) { self->state.core->guest_released(user); },
    [=](thaw_atom, const std::string& user, std::uint64_t epoch) { self->state.core->thaw_notice(user, epoch); },
    [=](quit_atom, const std::string& node) { return self->state.quit(node); },
    [=](drop_atom, const std::string& user) { return self->state.drop(user); },
    [=](drain_atom, const std::string& worker) { return self->state.drain(worker); },
    [=](tick_atom) { self->state.sweep(); },
    [=](tick_atom, std::uint64_t) { self->state.core->hold_budget_over(); },
    [=](admission_atom, admission_report& report) {
      if (self->state.core->staffed())
        self->state.on_admission(report);
    },
    [=](relocate_atom, const std::string& user, std::uint64_t epoch, const std::string& group) {
      self->state.core->relocate_notice(user, epoch, group, commander_core::steady::now());
    },
    [=](retire_atom) { self->state.check_retirement(); },
  };
}

}  // namespace

commander_handle spawn_commander(caf::actor_system& sys, node_context_ptr ctx, deposit_handle deposit,
                                 global_store_handle global_store, commander_start start) {
  return sys.spawn(commander_impl, std::move(ctx), std::move(deposit), std::move(global_store), std::move(start));
}

}  // namespace troupe
