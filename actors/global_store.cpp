#include "actors/global_store.hpp"

#include "actors/errors.hpp"
#include "actors/rate_limited_log.hpp"
#include "config/commander_settings.hpp"
#include "config/limits_settings.hpp"
#include "registry/epoch_source.hpp"
#include "registry/lease_table.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <functional>
#include <iterator>
#include <optional>
#include <unordered_map>

namespace troupe {

// The store's whole interface: its public one and the timers it sends itself
// (private: no other actor can send them).
using global_store_actor = global_store_handle::extend<
  /// Lease TTLs and waits are due (timer generation, from 1).
  caf::reacts_to<tick_atom, std::uint64_t>,
  /// What waited for the snapshot or the generation is refused past the hold budget.
  caf::reacts_to<tick_atom>>;

namespace {

using global_promise = caf::typed_response_promise<detail::global_reply>;
using steady = std::chrono::steady_clock;

// A requester waiting for a lease: how to answer him, and since when he waits.
struct lease_waiter {
  global_promise promise;
  steady::time_point asked;
};

using global_table = registry::lease_table<lease_waiter>;

// A request that came before the store could serve it (its snapshot not read
// yet, or a lease before the commander's generation is known): served once it
// can, refused once `until` passed.
struct deferred_op {
  detail::global_op op;
  caf::strong_actor_ptr sender;  // a lease's holder
  global_promise promise;
  steady::time_point until;
};

struct global_store_state {
  static const char* name;

  global_store_actor::stateful_pointer<global_store_state> self = nullptr;
  node_context_ptr ctx;
  deposit_handle deposit;
  std::optional<global_table> global;
  // A takeover reads the snapshot first; no lease is granted before the
  // commander's generation sets the tokens' floor. What comes meanwhile waits.
  bool loaded = true;
  bool floor_known = false;
  std::deque<deferred_op> deferred;
  bool deferral_ticking = false;
  std::unordered_map<caf::actor_addr, std::string> holders;  // monitored holder → its name in the table
  std::uint64_t timer_generation = 0;
  std::optional<steady::time_point> timer_due;
  // The store's writes, one at a time (each a whole snapshot: a later one must
  // not land before an earlier one is settled). With durability "reply" the
  // requesters of staged changes wait for the batch that writes them (bounded:
  // a user has one request at a time); a flush (the soft quit) waits too.
  using flushed = std::function<void(const caf::error&)>;
  struct staged_waiter {
    global_promise promise;
    std::string key;
    bool depends;  // read a value of the batch being written: refused with it
  };
  std::vector<staged_waiter> staged_waiters, writing_waiters;
  std::vector<flushed> staged_flushes;
  bool writing_global = false;
  rate_limited_log refused_log{spdlog::level::err, std::chrono::seconds(10)};

  // -- start: the snapshot and the tokens' floor -----------------------------------------

  void load_global() {
    loaded = false;
    self->request(deposit, ctx->hold_timeout(), get_atom::value, parcel_kind::user, global_snapshot_key)
      .then(
        [this](std::vector<store::parcel>& found) {
          try {
            if (!found.empty()) {
              global_snapshot values;
              store::unpack(found.front().payload, values);
              for (auto& [key, value] : values)
                global->set(key, std::move(value));
            }
            loaded = true;
            count_global();
            serve_deferred();
          } catch (const std::exception& e) {
            spdlog::critical("global store: takeover: the snapshot does not decode: {}", e.what());
          }
        },
        [this](caf::error& err) {
          spdlog::error("global store: takeover: the snapshot cannot be read: {}; retrying",
                        self->system().render(err));
          load_global();
        });
  }

  void on_generation(std::uint64_t generation) {
    // Fencing tokens share the owner epochs' scheme: a later commander's are above every earlier one's.
    global->tokens_above(registry::epoch_source::make(generation, 0));
    floor_known = true;
    serve_deferred();
  }

  bool can_serve(const detail::global_op& op) const {
    return loaded && (floor_known || op.what != detail::global_op::kind::lease);
  }

  void defer(detail::global_op& op, caf::strong_actor_ptr sender, global_promise promise) {
    if (deferred.size() >= ctx->limits().max_inflight) {
      detail::global_reply out;
      out.refusal = to_string(registry::lease_refusal::queue_full);
      promise.deliver(std::move(out));
      return;
    }
    auto hold = std::chrono::milliseconds(static_cast<std::int64_t>(ctx->limits().hold_seconds * 1000));
    deferred.push_back({std::move(op), std::move(sender), std::move(promise), self->clock().now() + hold});
    if (!deferral_ticking) {
      deferral_ticking = true;
      self->delayed_send(self, std::chrono::milliseconds(100), tick_atom::value);
    }
  }

  // Serves, in their order, what waited and can be served now; the rest keeps waiting.
  void serve_deferred() {
    std::deque<deferred_op> waiting;
    waiting.swap(deferred);
    for (auto& d : waiting) {
      if (can_serve(d.op))
        serve(d.op, std::move(d.sender), std::move(d.promise));
      else
        deferred.push_back(std::move(d));
    }
  }

  // What waited past the hold budget is refused: nothing of it was applied.
  void on_deferral_tick() {
    auto now = self->clock().now();  // the actor clock: a test coordinator moves it
    for (auto i = deferred.begin(); i != deferred.end();) {
      if (i->until > now) {
        ++i;
        continue;
      }
      detail::global_reply out;
      out.refusal = to_string(registry::lease_refusal::wait_expired);
      i->promise.deliver(std::move(out));
      i = deferred.erase(i);
    }
    deferral_ticking = !deferred.empty();
    if (deferral_ticking)
      self->delayed_send(self, std::chrono::milliseconds(100), tick_atom::value);
  }

  // -- leases and their holders ----------------------------------------------------------

  void count_global() {
    ctx->metrics.global_keys.store(static_cast<std::int64_t>(global->keys()), std::memory_order_relaxed);
    ctx->metrics.global_leases_active.store(static_cast<std::int64_t>(global->leases()), std::memory_order_relaxed);
  }

  // Answers the waiters an event decided (granted or refused).
  void deliver(std::vector<global_table::outcome>& outcomes, steady::time_point now) {
    for (auto& o : outcomes) {
      detail::global_reply r;
      if (o.granted) {
        r.found = o.granted->value.has_value();
        r.value = o.granted->value.value_or(std::string{});
        r.token = o.granted->token;
        ctx->metrics.global_leases_granted.fetch_add(1, std::memory_order_relaxed);
        ctx->metrics.global_lease_wait_seconds.observe(std::chrono::duration<double>(now - o.waiter.asked).count());
      } else {
        r.refusal = to_string(o.refused);
      }
      o.waiter.promise.deliver(std::move(r));
    }
    outcomes.clear();
    count_global();
    schedule_lease_timer(now);
  }

  void schedule_lease_timer(steady::time_point now) {
    auto due = global->next_deadline();
    if (!due || (timer_due && *timer_due <= *due))
      return;
    timer_due = *due;
    auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(*due - now) + std::chrono::milliseconds(1);
    self->delayed_send(self, std::max(delay, std::chrono::milliseconds(1)), tick_atom::value, ++timer_generation);
  }

  void on_lease_timer(std::uint64_t generation) {
    if (generation != timer_generation)
      return;
    timer_due.reset();
    auto now = steady::now();
    std::vector<global_table::outcome> next;
    auto reclaimed = global->expire(now, next);
    if (reclaimed) {
      ctx->metrics.global_reclaimed_ttl.fetch_add(reclaimed, std::memory_order_relaxed);
      spdlog::warn("global store: {} lease(s) past their TTL reclaimed", reclaimed);
    }
    deliver(next, now);
  }

  void on_down(caf::down_msg& dm) {
    auto h = holders.find(dm.source);
    if (h == holders.end())
      return;
    auto name = std::move(h->second);
    holders.erase(h);
    auto now = steady::now();
    std::vector<global_table::outcome> next;
    if (auto reclaimed = global->holder_down(name, now, next)) {
      ctx->metrics.global_reclaimed_holder_down.fetch_add(reclaimed, std::memory_order_relaxed);
      spdlog::warn("global store: holder {} went down; {} lease(s) reclaimed, nothing applied", name, reclaimed);
    }
    deliver(next, now);
  }

  // A member is down: the leases its actors held go back (their down
  // messages may never come over a connection that is gone).
  void node_down(const caf::node_id& node) {
    std::vector<caf::actor_addr> gone;
    for (auto& [addr, holder] : holders)
      if (addr.node() == node)
        gone.push_back(addr);
    for (auto& addr : gone) {
      caf::down_msg dm{addr, caf::make_error(caf::exit_reason::remote_link_unreachable)};
      on_down(dm);
    }
  }

  // -- writes ---------------------------------------------------------------------------

  bool reply_durability() const { return ctx->commander().durability == "reply"; }

  // Writes the store once no earlier write is in flight: what was staged, for
  // the requesters and flushes waiting for it.
  void write_global() {
    if (writing_global || (staged_waiters.empty() && staged_flushes.empty()))
      return;
    writing_global = true;
    writing_waiters = std::move(staged_waiters);
    staged_waiters.clear();
    auto flushes = std::make_shared<std::vector<flushed>>(std::move(staged_flushes));
    staged_flushes.clear();
    store::parcel p;
    p.writer_node = ctx->node_name;
    p.writer_worker = "global_store";
    p.cause = store::parcel_cause::checkpoint;
    p.payload = store::pack(global->begin_batch());
    self->request(deposit, std::chrono::seconds(30), put_atom::value, parcel_kind::user, global_snapshot_key,
                  std::move(p))
      .then([this, flushes](std::uint64_t) { global_written(caf::error{}, *flushes); },
            [this, flushes](caf::error& err) { global_written(err, *flushes); });
  }

  // A write of the store ended. Refused by the deposit (its previous parcel
  // stands): the batch's changes are dropped and their requesters told to
  // retry. Not answered: it may have landed, so the changes are kept (the next
  // write carries them) and their requesters told the outcome is unknown.
  // A refused batch takes with it the changes staged since that read its
  // values (a lease granted on a value it carried, and what was derived from it).
  void global_written(const caf::error& err, std::vector<flushed>& flushes) {
    bool refused = err && is(err, errc::deposit_failed);
    auto refused_keys = global->settle(!refused);
    writing_global = false;
    auto waiters = std::move(writing_waiters);
    writing_waiters.clear();
    if (refused && !refused_keys.empty()) {
      std::sort(refused_keys.begin(), refused_keys.end());
      auto keep = std::partition(staged_waiters.begin(), staged_waiters.end(), [&](const staged_waiter& w) {
        return !w.depends || !std::binary_search(refused_keys.begin(), refused_keys.end(), w.key);
      });
      std::move(keep, staged_waiters.end(), std::back_inserter(waiters));
      staged_waiters.erase(keep, staged_waiters.end());
    }
    if (err) {
      if (refused)
        ctx->metrics.changes_rolled_back.fetch_add(waiters.size(), std::memory_order_relaxed);
      if (!waiters.empty())
        refused_log("global store: {} change(s) {}: {}", waiters.size(),
                    refused ? "refused by the deposit, not applied" : "of unknown outcome (the deposit did not answer), kept",
                    self->system().render(err));
    }
    for (auto& w : waiters) {
      detail::global_reply r;
      if (err)
        r.refusal = to_string(refused ? registry::lease_refusal::not_durable
                                      : registry::lease_refusal::durability_unknown);
      w.promise.deliver(std::move(r));
    }
    for (auto& f : flushes)
      f(err);
    count_global();
    write_global();
  }

  // Writes the whole store after every change staged so far; `done(error)`.
  void flush_global(flushed done) {
    staged_flushes.push_back(std::move(done));
    write_global();
  }

  // -- the operations -------------------------------------------------------------------

  // A change staged (durability "reply"): acknowledged once its batch is durable.
  void staged(registry::lease_refusal r, const std::string& key, bool depends, global_promise& promise) {
    if (r != registry::lease_refusal::none) {
      if (r == registry::lease_refusal::not_durable)  // a doomed lease's commit
        ctx->metrics.changes_rolled_back.fetch_add(1, std::memory_order_relaxed);
      detail::global_reply out;
      out.refusal = to_string(r);
      promise.deliver(std::move(out));
      return;
    }
    staged_waiters.push_back({promise, key, depends});
    write_global();
  }

  // Carries out `op` for `sender` (a lease's holder) and answers `promise`.
  void serve(detail::global_op& op, caf::strong_actor_ptr sender, global_promise promise) {
    if (!can_serve(op))
      return defer(op, std::move(sender), std::move(promise));
    using kind = detail::global_op::kind;
    detail::global_reply out;
    auto now = steady::now();
    auto refusal = [&](registry::lease_refusal r) {
      out.refusal = r == registry::lease_refusal::none ? "" : to_string(r);
      return r == registry::lease_refusal::none;
    };
    auto answer = [&] { promise.deliver(std::move(out)); };
    // A change applied now (durability "freeze"): acknowledged at once.
    auto applied = [&] {
      count_global();
      answer();
    };
    std::vector<global_table::outcome> next;
    switch (op.what) {
      case kind::get:
        if (refusal(global->check_key(op.key)))
          if (auto v = global->get(op.key)) {
            out.found = true;
            out.value = std::move(*v);
          }
        return answer();
      case kind::set:
        if (reply_durability()) {
          bool depends = false;
          auto r = global->stage_set(op.key, std::move(op.value), depends);
          return staged(r, op.key, depends, promise);
        }
        if (!refusal(global->set(op.key, std::move(op.value))))
          return answer();
        return applied();
      case kind::erase:
        if (reply_durability()) {
          bool depends = false;
          auto r = global->stage_erase(op.key, depends);
          return staged(r, op.key, depends, promise);
        }
        if (!refusal(global->erase(op.key)))
          return answer();
        return applied();
      case kind::lease: {
        if (!sender) {
          out.refusal = "anonymous requesters cannot hold leases";
          return answer();
        }
        auto addr = sender->address();
        auto name = to_string(addr);
        registry::lease_refusal refused;
        auto granted = global->for_update(op.key, name, std::chrono::milliseconds(op.ttl_ms),
                                          now + std::chrono::milliseconds(std::max<std::int64_t>(0, op.wait_ms)),
                                          lease_waiter{promise, now}, now, refused);
        if (refused != registry::lease_refusal::none) {
          out.refusal = to_string(refused);
          return answer();
        }
        if (holders.emplace(addr, name).second)
          self->monitor(addr);  // a holder that goes down gives its leases back
        if (granted) {
          out.found = granted->value.has_value();
          out.value = granted->value.value_or(std::string{});
          out.token = granted->token;
          ctx->metrics.global_leases_granted.fetch_add(1, std::memory_order_relaxed);
          ctx->metrics.global_lease_wait_seconds.observe(0);
          promise.deliver(std::move(out));
        }
        count_global();
        schedule_lease_timer(now);
        return;
      }
      case kind::commit: {
        auto value = op.has_value ? std::optional<std::string>(std::move(op.value)) : std::nullopt;
        if (reply_durability()) {  // the lease ends now; the answer waits for the write
          bool depends = false;
          auto r = global->stage_commit(op.key, op.token, std::move(value), now, next, depends);
          deliver(next, now);
          return staged(r, op.key, depends, promise);
        }
        auto r = global->commit(op.key, op.token, std::move(value), now, next);
        deliver(next, now);
        if (!refusal(r))
          return answer();
        return applied();
      }
      case kind::abort:
        refusal(global->abort(op.key, op.token, now, next));
        deliver(next, now);
        return answer();
    }
    answer();
  }

  // The store as JSON for /_troupe/global: keys, sizes, leases (times in unix seconds).
  std::string describe_global() const {
    auto steady_now = steady::now();
    auto wall_now = std::chrono::system_clock::now();
    auto unix = [&](steady::time_point t) {
      return std::chrono::duration<double>((wall_now + (t - steady_now)).time_since_epoch()).count();
    };
    nlohmann::json keys = nlohmann::json::array();
    global->for_each([&](const std::string& key, const std::string* value, const global_table::lease* held,
                         std::size_t waiting) {
      nlohmann::json k{{"key", key}, {"bytes", value ? value->size() : 0}, {"present", value != nullptr},
                       {"waiting", waiting}};
      if (held)
        k["lease"] = {{"holder", held->holder}, {"token", held->token}, {"since", unix(held->since)},
                      {"until", unix(held->until)}};
      if (waiting > 0) {
        // Who waits, in the order they will be granted (the lease each asked for).
        nlohmann::json queue = nlohmann::json::array();
        global->for_each_waiter(key, [&](const std::string& holder, steady::duration ttl) {
          queue.push_back({{"holder", holder},
                           {"ttl_ms", std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count()}});
        });
        k["queue"] = std::move(queue);
      }
      keys.push_back(std::move(k));
    });
    return nlohmann::json{{"keys", std::move(keys)}, {"count", global->keys()}, {"leases", global->leases()}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
};

const char* global_store_state::name = "troupe.global_store";

global_store_actor::behavior_type global_store_impl(global_store_actor::stateful_pointer<global_store_state> self,
                                                     node_context_ptr ctx, deposit_handle deposit,
                                                     global_store_start start) {
  auto& st = self->state;
  st.self = self;
  st.ctx = std::move(ctx);
  st.deposit = std::move(deposit);
  auto& cc = st.ctx->commander();
  st.global.emplace(global_table::limits{256, cc.global_max_value_bytes, cc.global_max_waiters,
                                         std::chrono::milliseconds(
                                           static_cast<std::int64_t>(cc.global_max_lease_seconds * 1000))});
  for (auto& [key, value] : start.values)
    st.global->set(key, std::move(value));
  st.count_global();
  if (start.load_from_deposit)
    st.load_global();
  self->set_down_handler([=](caf::down_msg& dm) { self->state.on_down(dm); });
  return {
    [=](global_atom, detail::global_op& op) -> caf::result<detail::global_reply> {
      auto sender = self->current_sender();  // first: the promise takes it over
      auto promise = self->make_response_promise<detail::global_reply>();
      self->state.serve(op, std::move(sender), promise);
      return promise;
    },
    [=](global_atom) { return self->state.describe_global(); },
    [=](generation_atom, std::uint64_t generation) { self->state.on_generation(generation); },
    [=](flush_atom) -> caf::result<bool> {
      auto promise = self->make_response_promise<bool>();
      self->state.flush_global([promise](const caf::error& err) mutable {
        if (err)
          promise.deliver(err);
        else
          promise.deliver(true);
      });
      return promise;
    },
    [=](node_down_atom, const caf::node_id& node) { self->state.node_down(node); },
    [=](tick_atom, std::uint64_t generation) { self->state.on_lease_timer(generation); },
    [=](tick_atom) { self->state.on_deferral_tick(); },
  };
}

}  // namespace

global_store_handle spawn_global_store(caf::actor_system& sys, node_context_ptr ctx, deposit_handle deposit,
                                       global_store_start start) {
  return sys.spawn(global_store_impl, std::move(ctx), std::move(deposit), std::move(start));
}

}  // namespace troupe
