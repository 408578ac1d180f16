#include "actors/commander.hpp"

#include "actors/budgets.hpp"
#include "actors/deposit.hpp"
#include "actors/kept_channels.hpp"
#include "actors/remote_watches.hpp"
#include "actors/errors.hpp"
#include "registry/epoch_source.hpp"
#include "registry/ids.hpp"
#include "registry/placement_index.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <unordered_set>
#include <unordered_map>

namespace troupe {

namespace {

using placement_promise = caf::typed_response_promise<placement>;
using steady = std::chrono::steady_clock;

struct held_resolve {
  std::string cid;
  placement_promise promise;
};

// One worker the commander places users on: a slot of the placement index.
struct worker_slot {
  worker_handle handle;
  std::string node;   // the member it runs on
  std::string name;   // <group>-w<n>
  std::string group;
  steady::time_point since;  // registered (a worker younger than worker_min_life_seconds is never retired)
};

// An arrival waiting for its group to grow (docs/SUPERVISION.md "Groups and placement").
struct growth_waiter {
  placement_promise promise;
  std::string user;
  std::string cid;
  store::bytes parcel;
  bool wake;
};

// A request that arrived before the commander knew where everybody lives (a
// takeover): carried out once it does, or refused after the hold budget.
struct deferred_request {
  std::function<void()> go;
  std::function<void(caf::error)> refuse;
};

struct commander_state {
  static const char* name;

  commander_handle::stateful_pointer<commander_state> self = nullptr;
  std::optional<actor_gauge> gauge;
  node_context_ptr ctx;
  deposit_handle deposit;
  std::string default_group;            // where a newcomer is born (recipe.default_group())
  std::vector<worker_slot> slots;       // the workers of every group on every member, by slot
  std::map<std::string, std::vector<std::size_t>> node_slots;  // member → its slots
  // (member, group) → the slot of each of the group's worker positions (no_slot: none there now).
  static constexpr std::size_t no_slot = static_cast<std::size_t>(-1);
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> group_slots;
  // The groups of this node, learned from their registrations: they grow and retire workers.
  std::map<std::string, group_handle> local_groups;
  // Arrivals that wait for their group to start one more worker (one grow at a time per group).
  std::map<std::string, std::vector<growth_waiter>> growing;
  // When each group last sent an admission report (its CPU is quiet while none comes).
  std::map<std::string, steady::time_point> last_admission_report;
  // Users whose parcel named another group (relocate_atom): where their next attach goes.
  std::unordered_map<std::string, std::pair<std::string, steady::time_point>> relocations;
  bool taking_over = false;
  rate_limited_log carry_log{spdlog::level::info, std::chrono::seconds(10)};
  rate_limited_log budget_log{spdlog::level::err, std::chrono::seconds(10)};  // a request past its budget, or failed
  std::optional<registry::placement_index> index;
  // A takeover: members whose workers have not registered yet, scans of
  // workers' users still out, and what waits for them.
  std::set<std::string> expected_nodes;
  std::size_t scans_pending = 0;
  std::vector<deferred_request> until_ready;
  // Users writing their parcels: their resolves wait here until frozen or thaw.
  std::unordered_map<std::string, std::vector<held_resolve>> departing;
  // Messages for them wait here too (at most limits.user_queue_length each).
  std::unordered_map<std::string, std::vector<std::pair<user_message, caf::typed_response_promise<tell_reply>>>>
    departing_tells;
  // Connections unknown here whose parcel is being looked up: resolves wait here.
  std::unordered_map<std::string, std::vector<placement_promise>> lookups;
  // Of those, the ids a login or logout retired meanwhile: whatever their parcel
  // said when it was read, they are strangers now (bounded by `lookups`).
  std::unordered_set<std::string> retired_in_lookup;
  // The global store next to this commander (linked: they stop together).
  global_store_handle global_store;

  // Requests to workers on other members, settled at their member's verdict.
  remote_watches remote;

  // Watches a request to the worker of `slot`: 0 (nothing to watch) when it
  // runs on this member, whose death ends the commander too.
  std::uint64_t watch_remote(std::size_t slot, std::function<void()> at_verdict) {
    const auto& node = slots[slot].handle.node();
    return node == self->node() ? 0 : remote.watch(node, std::move(at_verdict));
  }

  bool unwatch(std::uint64_t id) { return remote.settle(id); }

  // The channels of users who froze with pages bound to open sockets: for
  // their next placements (at most 4 × channel.max_sockets bindings).
  std::optional<kept_channels> frozen_channels;

  // Fencing (docs/CLUSTER.md "Fencing"): each placement's owner epoch, under
  // a commander generation the deposit gave this commander when it started.
  registry::epoch_source epochs;
  bool asking_generation = false;

  // Asks the deposit for a new generation. `await`: placements wait in the
  // mailbox until it is known (no thread blocks), so no epoch is ever given
  // under an old generation.
  void obtain_generation() {
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
          }
          else
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
  std::optional<std::uint64_t> next_owner_epoch() {
    auto epoch = epochs.next();
    if (!epoch || epochs.wants_new_generation())
      obtain_generation();
    return epoch;
  }

  // -- readiness (a takeover) ------------------------------------------------------------

  bool ready() const { return index && expected_nodes.empty() && scans_pending == 0; }

  // Runs `go` now, or once ready (refused after the hold budget).
  void when_ready(std::function<void()> go, std::function<void(caf::error)> refuse) {
    if (ready())
      return go();
    until_ready.push_back({std::move(go), std::move(refuse)});
  }

  void check_ready() {
    if (!ready())
      return;
    auto waiting = std::move(until_ready);
    until_ready.clear();
    for (auto& w : waiting)
      w.go();
  }

  // The hold budget of a takeover is over: go on with what is known (a member
  // that did not register is counted as gone; its users wake elsewhere).
  void end_takeover_wait() {
    if (!expected_nodes.empty() || scans_pending)
      spdlog::warn("commander: takeover: {} member(s) and {} worker scan(s) did not answer within the hold budget; "
                   "going on without them", expected_nodes.size(), scans_pending);
    expected_nodes.clear();
    scans_pending = 0;
    if (ready())
      return check_ready();
    auto waiting = std::move(until_ready);
    until_ready.clear();
    for (auto& w : waiting)
      w.refuse(make_error(errc::unavailable, "the commander is still taking over; retry"));
  }

  // -- workers across members ----------------------------------------------------------

  // The workers of `group` on `node`, by position: a position seen before
  // keeps its slot (a replaced worker: its users stay placed there), a new
  // one (the group grew, or a member joined) appends a slot, and one that is
  // empty now (a retired worker) or gone retires its slot.
  void register_workers(const std::string& group, const std::string& node, std::vector<worker_handle>& workers) {
    auto now = steady::now();
    auto& mine = group_slots[{node, group}];
    std::vector<std::size_t> added;
    for (std::size_t i = 0; i < std::max(mine.size(), workers.size()); ++i) {
      bool present = i < workers.size() && workers[i];
      if (i < mine.size() && mine[i] != no_slot && !index->retired(mine[i])) {
        if (present) {
          slots[mine[i]].handle = workers[i];  // a worker was replaced: same slot
        } else {
          retire_node_slots({mine[i]});
          mine[i] = no_slot;
        }
        continue;
      }
      if (i >= mine.size())
        mine.push_back(no_slot);
      if (!present)
        continue;
      std::size_t slot = index ? index->add_slots(1, group) : (index.emplace(1, group), 0);
      slots.push_back(worker_slot{workers[i], node, group + "-w" + std::to_string(i + 1), group, now});
      node_slots[node].push_back(slot);
      mine[i] = slot;
      added.push_back(slot);
    }
    // A worker that just admitted a newcomer rests, so that its load shows in its CPU temperature first
    // (with CPU admission on; without it, the least loaded worker is simply the best).
    if (auto* g = ctx->recipe.group(group); g && index && g->cpu_admission_close_percent > 0)
      index->set_admission_interval(group, std::chrono::duration_cast<steady::duration>(
                                             std::chrono::duration<double>(g->worker_admission_interval_seconds)));
    if (expected_nodes.erase(node) || taking_over) {
      // A takeover: learn who lives on these workers before placing anybody.
      for (auto slot : added) {
        ++scans_pending;
        self->request(slots[slot].handle, ctx->hold_timeout(), scan_atom::value)
          .then(
            [this, slot](std::vector<std::string>& users, std::vector<std::uint64_t>& epochs) {
              for (std::size_t i = 0; i < users.size(); ++i)
                if (!index->place_at(users[i], slot, i < epochs.size() ? epochs[i] : 0))
                  spdlog::error("commander: takeover: user {} reported by two workers; the first keeps him",
                                registry::redact(users[i]));
              if (scans_pending)
                --scans_pending;
              check_ready();
            },
            [this, slot](caf::error& err) {
              spdlog::warn("commander: takeover: worker {} of {} did not tell its users: {}", slots[slot].name,
                           slots[slot].node, self->system().render(err));
              if (scans_pending)
                --scans_pending;
              check_ready();
            });
      }
    }
    check_ready();
  }

  void retire_node_slots(const std::vector<std::size_t>& mine) {
    for (auto slot : mine)
      for (auto& user : index->retire_slot(slot))
        end_departure(user, true);  // he is gone: held requests wake him elsewhere
  }

  // A member is down: its users wake elsewhere, its actors' leases are released.
  void node_down(const caf::node_id& node) {
    std::string name;
    for (auto& [n, mine] : node_slots)
      if (!mine.empty() && slots[mine.front()].handle.node() == node)
        name = n;
    if (!name.empty()) {
      auto& mine = node_slots[name];
      std::size_t users = 0;
      for (auto slot : mine)
        users += index->loads()[slot];
      retire_node_slots(mine);
      node_slots.erase(name);
      for (auto i = group_slots.begin(); i != group_slots.end();)
        i = i->first.first == name ? group_slots.erase(i) : std::next(i);
      ctx->metrics.node_failovers.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("commander: member {} is down: its {} user(s) wake elsewhere on their next request", name, users);
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
    if (!name.empty() && expected_nodes.erase(name))
      check_ready();
  }

  // Places `user` (unless he is placed) and has his worker give him `cid`;
  // held while he is being frozen. A newcomer goes to `group` ("": the
  // default group) unless his parcel sent him elsewhere (relocations); when
  // no worker of that group admits him, the group grows once (`may_grow`)
  // or he is refused.
  void attach(placement_promise promise, const std::string& user, const std::string& cid, store::bytes parcel,
              bool wake, std::string group = {}, bool may_grow = true) {
    if (auto d = departing.find(user); d != departing.end()) {
      d->second.push_back({cid, std::move(promise)});
      return;
    }
    if (auto r = relocations.find(user); r != relocations.end()) {
      group = std::move(r->second.first);
      relocations.erase(r);
    }
    if (group.empty() || !ctx->recipe.group(group))
      group = default_group;
    // A newcomer (created or woken) past limits.max_live_users is refused;
    // users already live keep being served.
    if (!index->worker_of(user) && index->users() >= ctx->recipe.limits.max_live_users) {
      ctx->metrics.live_user_refusals.fetch_add(1, std::memory_order_relaxed);
      promise.deliver(make_error(errc::too_many_users, "the node is at its limit of live users"));
      return;
    }
    auto epoch = next_owner_epoch();
    if (!epoch) {
      promise.deliver(make_error(errc::unavailable, "no owner epoch yet: the deposit gave no commander generation"));
      return;
    }
    const bool newly_placed = !index->worker_of(user);
    auto slot = index->place(user, *epoch, group, steady::now());
    if (!slot)
      return no_worker_admits(std::move(promise), user, cid, std::move(parcel), wake, group, may_grow);
    std::vector<channel_binding> channels;
    if (newly_placed)
      channels = placed_with_channels(user);
    if (slots[*slot].handle.node() == self->node()) {
      promise.delegate(slots[*slot].handle, attach_atom::value,
                       attach_order{user, cid, std::move(parcel), wake, *epoch, std::move(channels)});
      return;
    }
    attach_order order{user, cid, parcel, wake, *epoch, std::move(channels)};
    auto watch = watch_remote(*slot, [this, promise, user, cid, parcel = std::move(parcel), wake, group]() mutable {
      attach(std::move(promise), user, cid, std::move(parcel), wake, group);  // he is no longer placed there
    });
    self->request(slots[*slot].handle, ctx->hold_timeout(), attach_atom::value, std::move(order))
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

  placement_promise promise() { return self->make_response_promise<placement>(); }

  // The channels he froze with, for the placement that starts him again; their
  // connections are routed to him again too (a sweep may have let them go).
  std::vector<channel_binding> placed_with_channels(const std::string& user) {
    auto channels = frozen_channels->take(user);
    for (auto& b : channels)
      if (!index->user_of(b.cid))
        index->bind(b.cid, user);
    return channels;
  }

  // No worker of `group` admits a newcomer: the group starts one more (the
  // arrival waits for it, within the hold budget) unless it is at
  // worker_max_number or not on this node; else he is refused with what the
  // closed workers reported (docs/SUPERVISION.md "Groups and placement").
  void no_worker_admits(placement_promise promise, const std::string& user, const std::string& cid,
                        store::bytes parcel, bool wake, const std::string& group, bool may_grow) {
    const auto degraded = static_cast<std::uint8_t>(refusal_reason::degraded);
    auto closure = index->closure(group, degraded);
    auto* settings = ctx->recipe.group(group);
    if (closure.in_service > 0 && closure.degraded == closure.in_service) {
      // Degraded: a new worker would fail like the others (helper B's recovery reopens them).
      ctx->metrics.admission_rejections[degraded].fetch_add(1, std::memory_order_relaxed);
      promise.deliver(make_refusal(errc::group_degraded, group + ": the group is degraded",
                                   std::max<std::uint32_t>(1, closure.retry_after)));
      return;
    }
    auto local = local_groups.find(group);
    if (may_grow && settings && local != local_groups.end() &&
        closure.in_service < static_cast<std::size_t>(settings->max_workers())) {
      auto& waiting = growing[group];
      waiting.push_back({std::move(promise), user, cid, std::move(parcel), wake});
      if (waiting.size() == 1)
        grow(group, local->second);
      return;
    }
    if (closure.closed == 0) {  // nothing closed: every worker of his group is drained or gone
      promise.deliver(make_error(errc::unavailable, "no worker of group " + group + " in service"));
      return;
    }
    auto reason = closure.reason < refusal_reasons ? static_cast<refusal_reason>(closure.reason) : refusal_reason::cpu;
    ctx->metrics.admission_rejections[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
    promise.deliver(make_refusal(errc::admission_refused,
                                 group + ": every worker is closed (" + to_string(reason) + ")",
                                 std::max<std::uint32_t>(1, closure.retry_after)));
  }

  // Asks `group` for one more worker; it registers it (workers_atom, which
  // arrives first) and answers; the arrivals that waited are placed again,
  // without growing a second time.
  void grow(const std::string& group, const group_handle& handle) {
    auto retry = [this, group](std::optional<caf::error> failed) {
      auto waiting = std::move(growing[group]);
      growing.erase(group);
      if (failed)
        spdlog::warn("commander: group {} did not grow: {}; {} arrival(s) placed without it", group,
                     self->system().render(*failed), waiting.size());
      for (auto& w : waiting)
        attach(std::move(w.promise), w.user, w.cid, std::move(w.parcel), w.wake, group, false);
    };
    self->request(handle, ctx->hold_timeout(), grow_atom::value)
      .then(
        [this, group, handle, retry](const worker_handle& grown) {
          // Its registration went first, but through the commander link in a
          // cluster it may come second: then its workers are asked for here.
          bool known = std::any_of(slots.begin(), slots.end(), [&](auto& s) { return s.handle == grown; });
          if (known)
            return retry(std::nullopt);
          self->request(handle, ctx->request_timeout(), workers_atom::value)
            .then(
              [this, group, retry](std::vector<worker_handle>& workers) {
                register_workers(group, ctx->node_name, workers);
                retry(std::nullopt);
              },
              [retry](caf::error& err) { retry(err); });
        },
        [retry](caf::error& err) { retry(err); });
  }

  // What a worker admits now (its group forwarded its report).
  void on_admission(const admission_report& report) {
    for (std::size_t slot = 0; slot < slots.size(); ++slot) {
      if (index->retired(slot) || slots[slot].handle.address() != report.worker)
        continue;
      last_admission_report[slots[slot].group] = steady::now();
      index->set_admission(slot, report.admits, report.reason, report.retry_after);
      return;
    }
  }

  // -- retirement -------------------------------------------------------------------

  // How often workers beyond their group's minimum are checked for retirement
  // (only when a group may grow at all).
  std::optional<std::chrono::milliseconds> retirement_period() const {
    std::optional<double> shortest;
    for (auto& g : ctx->recipe.groups)
      if (g.max_workers() > g.workers) {
        double s = std::min(g.worker_min_life_seconds, g.cpu_retirement_quiet_seconds) / 2;
        shortest = shortest ? std::min(*shortest, s) : s;
      }
    if (!shortest)
      return std::nullopt;
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::clamp(*shortest, 0.25, 10.0) * 1000));
  }

  void schedule_retirement() {
    if (auto period = retirement_period())
      self->delayed_send(self, *period, retire_atom::value);
  }

  // A worker of this node beyond its group's `workers`, with no user, older
  // than worker_min_life_seconds, is retired once the group's CPU was quiet
  // (no admission report) for cpu_retirement_quiet_seconds: its slot first
  // (no user is placed there again), then the group stops it (not a restart).
  void check_retirement() {
    auto now = steady::now();
    for (auto& g : ctx->recipe.groups) {
      auto local = local_groups.find(g.name);
      auto positions = group_slots.find({ctx->node_name, g.name});
      if (!index || local == local_groups.end() || positions == group_slots.end())
        continue;
      if (auto r = last_admission_report.find(g.name);
          r != last_admission_report.end() && now - r->second < std::chrono::duration<double>(g.cpu_retirement_quiet_seconds))
        continue;
      auto& mine = positions->second;
      std::size_t live = 0;
      for (auto slot : mine)  // a drained worker (out of service) is not counted: it stops by itself
        live += slot != no_slot && index->in_service(slot);
      for (std::size_t i = mine.size(); i-- > 0 && live > static_cast<std::size_t>(std::max(1, g.workers));) {
        auto slot = mine[i];
        if (slot == no_slot || !index->in_service(slot) || index->loads()[slot] > 0 ||
            now - slots[slot].since < std::chrono::duration<double>(g.worker_min_life_seconds))
          continue;
        index->retire_slot(slot);
        mine[i] = no_slot;
        --live;
        spdlog::info("commander: worker {} retired (no users, group {} quiet; {} worker(s) left)", slots[slot].name,
                     g.name, live);
        self->send(local->second, retire_atom::value, slots[slot].handle);
      }
    }
    schedule_retirement();
  }

  // A user whose parcel names another group goes there on his next attach,
  // which comes at once (the front asks again); an entry whose client never
  // came back is forgotten after the hold budget.
  void relocate(const std::string& user, std::uint64_t epoch, const std::string& group) {
    if (!is_current(user, epoch))
      return;
    auto now = steady::now();
    if (relocations.size() >= 1024) {
      auto horizon = now - std::chrono::duration_cast<steady::duration>(
                             std::chrono::duration<double>(std::max(1.0, ctx->recipe.limits.hold_seconds)));
      for (auto r = relocations.begin(); r != relocations.end();)
        r = r->second.second < horizon ? relocations.erase(r) : std::next(r);
    }
    relocations[user] = {group, now};
    end_departure(user, true);  // he left without writing; requests held for him go to his group
  }

  // The group a login into `to_user` goes to, asked of the hook of the type
  // the guest runs (`from_group`'s); "" for the default group.
  std::string login_group(const std::string& from_group, const std::string& to_user) const {
    auto* from = ctx->recipe.group(from_group);
    if (!from)
      return {};
    auto routed = ctx->apps.login_group(from->user_type, to_user);
    if (!routed || !ctx->recipe.group(*routed))
      return {};
    return *routed;
  }

  // A new connection id; nullopt (logged) only if OpenSSL fails.
  std::optional<std::string> mint() {
    try {
      return ctx->cids->mint();
    } catch (const std::exception& e) {
      spdlog::error("commander: no connection id could be minted: {}", e.what());
      return std::nullopt;
    }
  }

  void resolve(placement_promise p, const std::string& cid, bool minted) {
    if (auto user = index->user_of(cid))
      return attach(std::move(p), *user, cid, {}, true);
    if (minted) {  // a first visit: nothing of his can be in the deposit
      index->bind(cid, registry::guest_name(cid));
      return attach(std::move(p), registry::guest_name(cid), cid, {}, false);
    }
    // Unknown here (a stranger, or anybody after a restart): his connection
    // parcel says whose it is. One read per connection, however many requests.
    auto [waiting, first] = lookups.try_emplace(cid);
    waiting->second.push_back(std::move(p));
    if (!first)
      return;
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
          if (user.empty() || retired_in_lookup.erase(cid))  // no parcel (or a dead id): his guest
            user = registry::guest_name(cid);
          if (!index->user_of(cid))  // a login may have bound it meanwhile
            index->bind(cid, user);
          auto waiting = std::move(lookups[cid]);
          lookups.erase(cid);
          for (auto& p : waiting)
            attach(std::move(p), *index->user_of(cid), cid, {}, true);
        },
        [this, cid](caf::error& err) {
          spdlog::error("commander: looking up connection {} failed: {}", registry::redact(cid),
                        self->system().render(err));
          retired_in_lookup.erase(cid);
          auto waiting = std::move(lookups[cid]);
          lookups.erase(cid);
          for (auto& p : waiting)
            p.deliver(make_error(errc::unavailable, "deposit lookup failed"));
        });
  }

  // A guest whose connection leaves him is forgotten here and by his worker
  // (he retires by himself once his reply is out), and so is any parcel of
  // his: his id is dead, and whoever presents it later is a new guest with nothing.
  void release_guest(const std::string& user) {
    if (!registry::is_guest(user))
      return;
    if (auto slot = index->worker_of(user)) {
      self->send(slots[*slot].handle, release_atom::value, user);
      index->remove(user);
    }
    remove_parcel(parcel_kind::user, user);
  }

  void remove_parcel(parcel_kind kind, const std::string& key) {
    self->request(deposit, ctx->request_timeout(), remove_atom::value, kind, key)
      .then([](bool) {},
            [this, kind, key](caf::error& err) {
              spdlog::error("commander: the parcel of {} {} could not be removed: {}",
                            kind == parcel_kind::user ? "user" : "connection", registry::redact(key),
                            self->system().render(err));
            });
  }

  // Login and logout rotate the connection id: `old_cid` (of `from_user`) is
  // dead — unbound, its parcel removed — and `new_cid` (the client's new
  // cookie, just minted) is bound to `to_user`.
  void rotate(const std::string& old_cid, const std::string& from_user, const std::string& new_cid,
              const std::string& to_user) {
    index->unbind(old_cid);
    if (lookups.count(old_cid))
      retired_in_lookup.insert(old_cid);
    if (from_user != registry::guest_name(old_cid))  // a guest's own connection has no parcel
      remove_parcel(parcel_kind::connection, old_cid);
    release_guest(from_user);
    index->bind(new_cid, to_user);
  }

  // A freeze ended: frozen (he is no longer placed; held requests wake him)
  // or failed (he stays; held requests go to him where he is).
  bool is_current(const std::string& user, std::uint64_t epoch) const {
    if (index && index->is_current(user, epoch))
      return true;
    if (index && index->worker_of(user))
      spdlog::debug("commander: a notice of {}'s placement at owner epoch {} is stale; ignored", registry::redact(user),
                    epoch);
    return false;
  }

  void end_departure(const std::string& user, bool frozen) {
    if (frozen)
      index->remove(user);
    auto d = departing.find(user);
    if (d == departing.end())
      return;
    auto held = std::move(d->second);
    departing.erase(d);
    for (auto& h : held)
      attach(std::move(h.promise), user, h.cid, {}, true);
    release_tells(user);
  }

  // -- messages between users (README "Messages between users") -----------------------

  using tell_promise = caf::typed_response_promise<tell_reply>;

  // His worker may wake him (the claim, within hold_seconds) before his handler runs.
  caf::duration tell_budget() const {
    return node_context::to_duration(ctx->recipe.limits.request_timeout_seconds + ctx->recipe.limits.hold_seconds);
  }

  // A message for user `msg.to`: to his worker if he is live; if not, he is
  // woken (placed like a request's wake) only when the deposit has his
  // parcel — a message never creates anybody. Held while he is being frozen.
  // `again`: this is its second routing (he had left the actor first asked).
  void tell(user_message msg, tell_promise promise, bool again) {
    using R = tell_outcome::result;
    if (!registry::valid_user_name(msg.to)) {
      promise.deliver(tell_reply::of(R::invalid, "not a user name"));
      return;
    }
    if (hold_tell(msg, promise))
      return;
    if (index->worker_of(msg.to))
      return place_for_tell(std::move(msg), std::move(promise), again);
    auto to = msg.to;
    self->request(deposit, ctx->hold_timeout(), get_atom::value, parcel_kind::user, to)
      .then(
        [this, msg, promise, again](std::vector<store::parcel>& found) mutable {
          if (found.empty() && !index->worker_of(msg.to) && !departing.count(msg.to)) {
            promise.deliver(tell_reply::of(R::unknown_user, "no user " + msg.to + " (never seen, or expired)"));
            return;
          }
          if (!hold_tell(msg, promise))
            place_for_tell(std::move(msg), std::move(promise), again);
        },
        [promise](caf::error& err) mutable {
          promise.deliver(tell_reply::of(R::unavailable, is(err, errc::bad_state)
                                                           ? "the recipient's stored state is quarantined"
                                                           : "the deposit did not answer; retry"));
        });
  }

  // He is being frozen: the message waits for the outcome (bounded).
  bool hold_tell(user_message& msg, tell_promise& promise) {
    if (!departing.count(msg.to))
      return false;
    auto& held = departing_tells[msg.to];
    if (held.size() >= ctx->recipe.limits.user_queue_length)
      promise.deliver(tell_reply::of(tell_outcome::result::unavailable, "the recipient has too many messages waiting"));
    else
      held.emplace_back(std::move(msg), std::move(promise));
    return true;
  }

  void place_for_tell(user_message msg, tell_promise promise, bool again) {
    using R = tell_outcome::result;
    std::string group;
    if (auto r = relocations.find(msg.to); r != relocations.end() && !index->worker_of(msg.to)) {
      group = std::move(r->second.first);
      relocations.erase(r);
    }
    if (group.empty() || !ctx->recipe.group(group))
      group = default_group;
    if (!index->worker_of(msg.to) && index->users() >= ctx->recipe.limits.max_live_users) {
      ctx->metrics.live_user_refusals.fetch_add(1, std::memory_order_relaxed);
      promise.deliver(tell_reply::of(R::unavailable, "the node is at its limit of live users"));
      return;
    }
    auto epoch = next_owner_epoch();
    if (!epoch) {
      promise.deliver(tell_reply::of(R::unavailable, "no owner epoch yet"));
      return;
    }
    const bool newly_placed = !index->worker_of(msg.to);
    auto slot = index->place(msg.to, *epoch, group, steady::now());
    if (!slot) {  // a message does not grow a group: the sender may retry
      promise.deliver(tell_reply::of(R::unavailable, "no worker of group " + group + " admits the recipient now"));
      return;
    }
    attach_order order{msg.to, {}, {}, true, *epoch, {}};
    if (newly_placed)
      order.channels = placed_with_channels(msg.to);
    // A message is a change: one in flight to a member that dies may have been handled there.
    auto watch = watch_remote(*slot, [promise]() mutable {
      promise.deliver(tell_reply::of(R::unavailable, "the recipient's member went down with the message: it may or "
                                                     "may not have been delivered"));
    });
    self->request(slots[*slot].handle, tell_budget(), tell_atom::value,
                  std::move(order), msg)
      .then(
        [this, watch, msg, promise, again](tell_reply& r) mutable {
          if (!unwatch(watch))
            return;
          if (r.result == tell_reply::not_here && !again)
            return tell(std::move(msg), std::move(promise), true);
          promise.deliver(std::move(r));
        },
        [this, watch, promise](caf::error&) mutable {
          if (unwatch(watch))
            promise.deliver(tell_reply::of(R::unavailable, "the recipient's worker did not answer"));
        });
  }

  // His freeze ended (or he was dropped): what waited for him is routed afresh.
  void release_tells(const std::string& user) {
    auto d = departing_tells.find(user);
    if (d == departing_tells.end())
      return;
    auto held = std::move(d->second);
    departing_tells.erase(d);
    for (auto& [msg, promise] : held)
      tell(std::move(msg), std::move(promise), false);
  }

  // Soft quit: every worker freezes all its users (within the freeze budget),
  // then the global store is written; answers (frozen, not saved). Writes the
  // deposit refuses are retried and parked in the fallback by the deposit
  // actor itself: what comes back as not saved here is really lost.
  caf::result<std::uint64_t, std::vector<std::string>> quit(const std::string& node) {
    using names = std::vector<std::string>;
    auto promise = self->make_response_promise<std::uint64_t, names>();
    auto total = std::make_shared<std::uint64_t>(0);
    auto not_saved = std::make_shared<names>();
    // Its workers take no new user (the last in service of a single node stays: nobody else could).
    std::vector<std::size_t> mine;
    if (auto n = node_slots.find(node); n != node_slots.end())
      mine = n->second;
    for (auto slot : mine)
      index->set_in_service(slot, false);
    // After every user froze (they may commit on their way out), the global
    // store — when the commander runs on the quitting node.
    auto finish = [this, promise, total, not_saved, node]() mutable {
      if (node != ctx->node_name) {
        promise.deliver(*total, std::move(*not_saved));
        return;
      }
      auto failed = [this, promise, total, not_saved](const caf::error& err) mutable {
        spdlog::error("soft quit: the global store could not be written: {}", self->system().render(err));
        not_saved->push_back("the global store");
        promise.deliver(*total, std::move(*not_saved));
      };
      self->request(global_store, node_context::to_duration(ctx->recipe.node.shutdown_freeze_seconds), flush_atom::value)
        .then([promise, total, not_saved](bool) mutable { promise.deliver(*total, std::move(*not_saved)); }, failed);
    };
    if (mine.empty()) {
      finish();
      return promise;
    }
    auto pending = std::make_shared<std::size_t>(mine.size());
    auto budget = node_context::to_duration(ctx->recipe.node.shutdown_freeze_seconds);
    for (auto slot : mine)
      self->request(slots[slot].handle, budget, quit_atom::value)
        .then(
          [finish, total, not_saved, pending](std::uint64_t n, names& failed) mutable {
            *total += n;
            not_saved->insert(not_saved->end(), failed.begin(), failed.end());
            if (--*pending == 0)
              finish();
          },
          [this, finish, not_saved, pending, name = slots[slot].name](caf::error& err) mutable {
            spdlog::error("soft quit: worker {} did not answer: {}", name, self->system().render(err));
            not_saved->push_back("the users of worker " + name);
            if (--*pending == 0)
              finish();
          });
    return promise;
  }

  // -- operator actions -----------------------------------------------------------------

  using drop_promise = caf::typed_response_promise<std::string, std::uint64_t>;

  // An operator drops `user`: his actor stops without freezing (if live), his
  // parcel and those of the connections bound to him here are removed, and the
  // connections become new guests. His resolves are held meanwhile.
  caf::result<std::string, std::uint64_t> drop(const std::string& user) {
    if (!index)
      return make_error(errc::unavailable, "no workers registered yet");
    if (departing.count(user))
      return make_error(errc::busy, "he is being frozen or dropped; retry");
    auto promise = self->make_response_promise<std::string, std::uint64_t>();
    departing.try_emplace(user);
    auto fail = [this, promise, user](caf::error err) mutable {
      end_departure(user, false);
      promise.deliver(std::move(err));
    };
    if (auto slot = index->worker_of(user)) {
      // His member going down drops him as surely: his actor went with it.
      auto watch = watch_remote(*slot, [this, promise, user]() { finish_drop(promise, user, "inactive"); });
      self->request(slots[*slot].handle, ctx->request_timeout(), drop_atom::value, user)
        .then(
          [this, watch, promise, user](bool) {
            if (unwatch(watch))
              finish_drop(promise, user, "active");
          },
          [this, watch, promise, user, fail](caf::error& err) mutable {
            if (!unwatch(watch))
              return;
            if (is(err, errc::no_such_user))  // placed, but his actor is gone (crashed for good)
              return finish_drop(promise, user, "inactive");
            fail(std::move(err));
          });
      return promise;
    }
    // Not live: frozen, if the deposit has his parcel (he is not woken to know).
    self->request(deposit, ctx->request_timeout(), get_atom::value, parcel_kind::user, user)
      .then(
        [this, promise, user, fail](std::vector<store::parcel>& found) mutable {
          if (found.empty() && index->unbind_user(user).empty())
            return fail(make_error(errc::no_such_user, user));
          finish_drop(promise, user, "frozen");
        },
        [this, promise, user, fail](caf::error& err) mutable {
          if (is(err, errc::bad_state))  // his parcel is quarantined: the drop lifts that too
            return finish_drop(promise, user, "quarantined");
          fail(std::move(err));
        });
    return promise;
  }

  void finish_drop(drop_promise promise, const std::string& user, const std::string& was) {
    frozen_channels->take(user);  // his pages are not his any more
    auto cids = index->unbind_user(user);
    index->remove(user);
    // Removes are ordered after every write he made (the deposit flushes first).
    self->request(deposit, ctx->request_timeout(), remove_atom::value, parcel_kind::user, user)
      .then([](bool) {},
            [this, user](caf::error& err) {
              spdlog::error("commander: the parcel of dropped user {} could not be removed: {}",
                            registry::redact(user), self->system().render(err));
            });
    for (auto& cid : cids)
      self->request(deposit, ctx->request_timeout(), remove_atom::value, parcel_kind::connection, cid)
        .then([](bool) {},
              [this, cid](caf::error& err) {
                spdlog::error("commander: the parcel of connection {} could not be removed: {}",
                              registry::redact(cid), self->system().render(err));
              });
    if (ctx->census)
      self->send(ctx->census, drop_atom::value, user);
    spdlog::info("commander: user {} dropped ({}; {} connection(s))", registry::redact(user), was, cids.size());
    promise.deliver(was, static_cast<std::uint64_t>(cids.size()));
    // Requests held meanwhile start afresh: their connections are strangers now.
    auto held = std::move(departing[user]);
    departing.erase(user);
    for (auto& h : held)
      resolve(std::move(h.promise), h.cid, false);
    release_tells(user);
  }

  // An operator drains worker `name` of the placing group: it gets no new
  // user, its users freeze, it stops; answers (frozen, failed).
  caf::result<std::uint64_t, std::uint64_t> drain(const std::string& name) {
    if (!index)
      return make_error(errc::unavailable, "no workers registered yet");
    // A worker is named <group>-w<n>, or <member>/<group>-w<n> where several members have one.
    std::optional<std::size_t> slot;
    std::size_t matches = 0;
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (!index->retired(i) && (slots[i].name == name || slots[i].node + "/" + slots[i].name == name)) {
        slot = i;
        ++matches;
      }
    if (!slot)
      return make_error(errc::no_such_user, "no worker called " + name);
    if (matches > 1)
      return make_error(errc::bad_request, "several members have a worker called " + name + "; name it MEMBER/" + name);
    if (!index->in_service(*slot))
      return make_error(errc::refused, "worker " + name + " is drained or being drained");
    if (!index->set_in_service(*slot, false))
      return make_error(errc::refused, "worker " + name + " is the last of group " + slots[*slot].group + " in service");
    auto promise = self->make_response_promise<std::uint64_t, std::uint64_t>();
    auto s = *slot;
    auto watch = watch_remote(s, [promise]() mutable {
      promise.deliver(make_error(errc::unavailable, "the worker's member went down while it was being drained"));
    });
    self->request(slots[s].handle, drain_answer_budget(ctx->recipe), drain_atom::value)
      .then(
        [this, watch, promise, s](std::uint64_t frozen, std::uint64_t failed) mutable {
          if (!unwatch(watch))
            return;
          if (failed)
            index->set_in_service(s, true);
          promise.deliver(frozen, failed);
        },
        [this, watch, promise, s](caf::error& err) mutable {
          if (!unwatch(watch))
            return;
          // Not drained (it failed, or did not answer within its budget): back in service.
          budget_log("commander: the drain of worker {} did not complete: {}; it is back in service",
                     slots[s].name, self->system().render(err));
          index->set_in_service(s, true);
          promise.deliver(std::move(err));
        });
    return promise;
  }

  // Expired parcels leave the deposit now and then (run on the deposit's thread).
  void schedule_sweep() {
    auto& c = ctx->recipe.commander;
    double hours = std::min(c.user_expiry_hours, c.guest_expiry_hours) / 10;
    auto period = std::chrono::seconds(std::clamp<std::int64_t>(static_cast<std::int64_t>(hours * 3600), 1, 3600));
    self->delayed_send(self, period, tick_atom::value);
  }

  void sweep() {
    if (index) {
      if (auto n = index->forget_unplaced_connections())
        spdlog::debug("commander: forgot {} connection binding(s) of users no longer live", n);
      ctx->metrics.connections_bound.store(static_cast<std::int64_t>(index->connections()), std::memory_order_relaxed);
    }
    auto& c = ctx->recipe.commander;
    self->request(deposit, expiry_sweep_budget, sweep_atom::value, c.user_expiry_hours, c.guest_expiry_hours)
      .then(
        [this](std::uint64_t n) {
          ctx->metrics.users_expired.fetch_add(n, std::memory_order_relaxed);
          ctx->metrics.users_frozen.fetch_sub(static_cast<std::int64_t>(n), std::memory_order_relaxed);
          if (n)
            spdlog::info("commander: {} expired user(s) removed from the deposit", n);
          schedule_sweep();
        },
        [this](caf::error& err) {  // failed, or no answer within its budget: the next one is scheduled all the same
          budget_log("commander: the expiry sweep failed: {}", self->system().render(err));
          schedule_sweep();
        });
  }
};

const char* commander_state::name = "troupe.commander";

commander_handle::behavior_type commander_impl(commander_handle::stateful_pointer<commander_state> self,
                                               node_context_ptr ctx, caf::actor deposit,
                                               global_store_handle global_store, commander_start start) {
  auto& st = self->state;
  st.self = self;
  st.gauge.emplace(ctx->metrics, actor_kind::commander);
  st.ctx = std::move(ctx);
  st.deposit = caf::actor_cast<deposit_handle>(deposit);
  st.default_group = st.ctx->recipe.default_group().name;
  st.frozen_channels.emplace(4 * std::max<std::uint64_t>(1, st.ctx->recipe.channel.max_sockets));
  st.global_store = std::move(global_store);
  self->link_to(st.global_store);
  if (!start.expected_nodes.empty()) {
    // A takeover: the members' workers and their users first; placements
    // wait for them (for at most the hold budget).
    st.expected_nodes.insert(start.expected_nodes.begin(), start.expected_nodes.end());
    st.taking_over = true;
    self->delayed_send(self, std::chrono::milliseconds(static_cast<std::int64_t>(st.ctx->recipe.limits.hold_seconds * 1000)),
                       tick_atom::value, std::uint64_t{0});
    spdlog::warn("commander: taking over on {}: waiting for {} member(s) to tell their users", st.ctx->node_name,
                 st.expected_nodes.size());
  }
  st.obtain_generation();
  st.schedule_sweep();
  st.schedule_retirement();
  if (st.ctx->census) {
    census_note n;
    n.kind = static_cast<std::uint8_t>(actor_kind::commander);
    n.name = "commander";
    self->send(st.ctx->census, note_atom::value, std::move(n));
  }
  auto unavailable = [] { return make_error(errc::unavailable, "no workers registered yet"); };
  return {
    [=](resolve_atom, const std::string& cid, bool minted) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.index && st.expected_nodes.empty())
        return unavailable();
      if (!st.ctx->cids->verify(cid))  // the front minted it or verified it: defence in depth
        return make_error(errc::bad_request, "not a connection id this node minted");
      auto p = st.promise();
      st.when_ready([self, p, cid, minted] { self->state.resolve(p, cid, minted); },
                    [p](caf::error err) mutable { p.deliver(std::move(err)); });
      return p;
    },
    [=](login_atom, login_request& req) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.ready())
        return make_error(errc::unavailable, "the commander is taking over; retry");
      if (!registry::valid_user_name(req.to_user))
        return make_error(errc::bad_request, "invalid user name");
      auto minted = st.mint();
      if (!minted)
        return make_error(errc::unavailable, "no connection id could be minted");
      auto& cid = *minted;
      // Where the guest lives decides whose hook routes him (before the rotation forgets the guest).
      auto from_slot = st.index->worker_of(req.from_user);
      std::string from_group = from_slot ? st.index->group_of(*from_slot) : st.default_group;
      auto to_group = st.login_group(from_group, req.to_user);
      st.rotate(req.cid, req.from_user, cid, req.to_user);
      bool live = st.index->worker_of(req.to_user).has_value();
      if (live && !req.parcel.empty()) {
        st.ctx->metrics.login_guest_store_dropped_live.fetch_add(1, std::memory_order_relaxed);
        spdlog::info("login of connection {} into {}: he is live, his resident state wins; "
                     "the guest's store ({} bytes) is dropped",
                     registry::redact(cid), req.to_user, req.parcel.size());
        req.parcel.clear();
      }
      auto* from = st.ctx->recipe.group(from_group);
      auto* to = st.ctx->recipe.group(to_group.empty() ? st.default_group : to_group);
      if (!live && !req.parcel.empty() && from && to && from->user_type != to->user_type) {
        // Another actor type cannot load the guest's store.
        st.ctx->metrics.login_carries_dropped.fetch_add(1, std::memory_order_relaxed);
        st.carry_log("login of connection {} into {}: his group {} runs {}, not the guest's {}; the guest's store "
                     "({} bytes) is dropped",
                     registry::redact(cid), registry::redact(req.to_user), to->name, to->user_type, from->user_type,
                     req.parcel.size());
        req.parcel.clear();
      }
      // Not live: he may be frozen (his parcel wins over the carried store, and his group over the hook's) or new.
      auto p = st.promise();
      st.attach(p, req.to_user, cid, std::move(req.parcel), true, to_group);
      return p;
    },
    [=](logout_atom, const std::string& cid, const std::string& from_user) -> caf::result<placement> {
      auto& st = self->state;
      if (!st.ready())
        return make_error(errc::unavailable, "the commander is taking over; retry");
      // A new id for a new guest: nothing of his can be in the deposit.
      auto minted = st.mint();
      if (!minted)
        return make_error(errc::unavailable, "no connection id could be minted");
      auto& new_cid = *minted;
      auto fresh = registry::guest_name(new_cid);
      st.rotate(cid, from_user, new_cid, fresh);
      auto p = st.promise();
      st.attach(p, fresh, new_cid, {}, false);
      return p;
    },
    [=](tell_atom, user_message& msg) -> caf::result<tell_reply> {
      auto& st = self->state;
      if (!st.index && st.expected_nodes.empty())
        return tell_reply::of(tell_outcome::result::unavailable, "no workers registered yet");
      auto p = self->make_response_promise<tell_reply>();
      st.when_ready([self, p, msg]() mutable { self->state.tell(std::move(msg), std::move(p), false); },
                    [p](caf::error) mutable {
                      p.deliver(tell_reply::of(tell_outcome::result::unavailable, "the commander is taking over; retry"));
                    });
      return p;
    },
    [=](workers_atom, const std::string& group, const std::string& node, std::vector<worker_handle>& workers) {
      auto& st = self->state;
      if (!st.ctx->recipe.group(group) || (workers.empty() && !st.group_slots.count({node, group})))
        return;
      // A group of this node registering itself: the one that grows and retires its workers.
      // (Not the commander link replaying it after a takeover: only a group answers grow_atom.)
      if (auto sender = self->current_sender(); sender && node == st.ctx->node_name && sender->node() == self->node())
        if (auto* a = dynamic_cast<caf::local_actor*>(sender->get()); a && std::strcmp(a->name(), "troupe.group") == 0)
          st.local_groups[group] = caf::actor_cast<group_handle>(sender);
      st.register_workers(group, node, workers);
    },
    [=](node_down_atom, const caf::node_id& node) { self->state.node_down(node); },
    [=](freeze_atom, const std::string& user) -> caf::result<bool> {
      auto& st = self->state;
      auto slot = st.index ? st.index->worker_of(user) : std::nullopt;
      if (!slot)
        return make_error(errc::no_such_user, user);
      auto promise = self->make_response_promise<bool>();
      auto watch = st.watch_remote(*slot, [promise]() mutable {
        promise.deliver(make_error(errc::unavailable, "his member went down before he was frozen"));
      });
      if (watch == 0)
        return promise.delegate(st.slots[*slot].handle, freeze_atom::value, user);
      self->request(st.slots[*slot].handle, st.ctx->request_timeout(), freeze_atom::value, user)
        .then(
          [self, watch, promise](bool frozen) mutable {
            if (self->state.unwatch(watch))
              promise.deliver(frozen);
          },
          [self, watch, promise](caf::error& err) mutable {
            if (self->state.unwatch(watch))
              promise.deliver(std::move(err));
          });
      return promise;
    },
    [=](push_atom, const std::string& user, std::string& path,
        std::string& data) -> caf::result<std::uint32_t, std::uint32_t> {
      auto& st = self->state;
      auto slot = st.index ? st.index->worker_of(user) : std::nullopt;
      if (!slot || st.departing.count(user))  // frozen, unknown or leaving: not woken for a push
        return {std::uint32_t{0}, std::uint32_t{1}};
      auto promise = self->make_response_promise<std::uint32_t, std::uint32_t>();
      auto watch = st.watch_remote(*slot, [promise]() mutable { promise.deliver(std::uint32_t{0}, std::uint32_t{1}); });
      if (watch == 0)
        return promise.delegate(st.slots[*slot].handle, push_atom::value, user, std::move(path), std::move(data));
      self->request(st.slots[*slot].handle, node_context::timer_millis(st.ctx->recipe.channel.push_timeout_seconds),
                    push_atom::value, user, std::move(path), std::move(data))
        .then(
          [self, watch, promise](std::uint32_t delivered, std::uint32_t missed) mutable {
            if (self->state.unwatch(watch))
              promise.deliver(delivered, missed);
          },
          [self, watch, promise](caf::error&) mutable {
            if (self->state.unwatch(watch))
              promise.deliver(std::uint32_t{0}, std::uint32_t{1});
          });
      return promise;
    },
    // Notices name the placement they are about (its owner epoch): one from a
    // stale placement (a fenced member's user, placed again elsewhere since)
    // changes nothing.
    [=](freezing_atom, const std::string& user, std::uint64_t epoch) {
      if (self->state.is_current(user, epoch))
        self->state.departing.try_emplace(user);
    },
    [=](frozen_atom, const std::string& user, std::uint64_t epoch, std::vector<channel_binding>& channels) {
      if (!self->state.is_current(user, epoch))
        return;
      self->state.frozen_channels->keep(user, std::move(channels));  // before the held requests wake him
      self->state.end_departure(user, true);
    },
    [=](release_atom, const std::string& user) {
      // A guest who never had a state retired: his connection needs no entry
      // here (the cookie alone names him), so the index does not grow with
      // every visitor.
      auto& st = self->state;
      if (!st.index || !registry::is_guest(user) || st.index->worker_of(user) || st.departing.count(user))
        return;
      auto cid = user.substr(6);  // guest_<cid>: one lookup, never a scan of every connection
      if (auto owner = st.index->user_of(cid); owner && *owner == user)
        st.index->unbind(cid);
    },
    [=](thaw_atom, const std::string& user, std::uint64_t epoch) {
      if (self->state.is_current(user, epoch))
        self->state.end_departure(user, false);
    },
    [=](quit_atom, const std::string& node) { return self->state.quit(node); },
    [=](drop_atom, const std::string& user) { return self->state.drop(user); },
    [=](drain_atom, const std::string& worker) { return self->state.drain(worker); },
    [=](tick_atom) { self->state.sweep(); },
    [=](tick_atom, std::uint64_t) { self->state.end_takeover_wait(); },
    [=](admission_atom, admission_report& report) {
      if (self->state.index)
        self->state.on_admission(report);
    },
    [=](relocate_atom, const std::string& user, std::uint64_t epoch, const std::string& group) {
      self->state.relocate(user, epoch, group);
    },
    [=](retire_atom) { self->state.check_retirement(); },
  };
}

}  // namespace

commander_handle spawn_commander(caf::actor_system& sys, node_context_ptr ctx, caf::actor deposit,
                                 global_store_handle global_store, commander_start start) {
  return sys.spawn(commander_impl, std::move(ctx), std::move(deposit), std::move(global_store), std::move(start));
}

}  // namespace troupe
