#include "transport/forwarder.hpp"

#include "actors/errors.hpp"
#include "actors/user.hpp"
#include "config/limits_settings.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace troupe {

// -- forward_table ----------------------------------------------------------------------

forward_table::forward_table(std::uint64_t max_pending, clock::duration down_memory, std::size_t max_idle_watches)
  : max_pending_(max_pending), down_memory_(down_memory), max_idle_watches_(max_idle_watches) {}

forward_table::added forward_table::add(const target_ref& target, const caf::actor_addr& addr, local_reply& slot,
                                        clock::time_point now) {
  if (auto d = down_until_.find(target.node); d != down_until_.end()) {
    if (now < d->second)
      return {admission::node_down};
    down_until_.erase(d);
  }
  if (by_id_.size() >= max_pending_)
    return {admission::full};
  auto id = ++next_id_;
  by_id_.emplace(id, record{std::move(slot), target.node, target.id});
  auto [w, fresh] = by_node_[target.node].try_emplace(target.id);
  if (fresh) {
    w->second.addr = addr;
    ++watched_;
  } else if (w->second.ids.empty()) {
    --idle_watches_;
  }
  w->second.ids.insert(id);
  return {admission::accepted, id, fresh};
}

std::optional<local_reply> forward_table::take(std::uint64_t id) {
  auto r = by_id_.find(id);
  if (r == by_id_.end())
    return std::nullopt;
  auto slot = std::move(r->second.slot);
  if (auto n = by_node_.find(r->second.node); n != by_node_.end())
    if (auto w = n->second.find(r->second.target); w != n->second.end()) {
      w->second.ids.erase(id);
      if (w->second.ids.empty())
        ++idle_watches_;  // still watched: the next request to him costs no monitor
    }
  by_id_.erase(r);
  return slot;
}

reply_slot* forward_table::find(std::uint64_t id) {
  auto r = by_id_.find(id);
  return r == by_id_.end() ? nullptr : r->second.slot.get();
}

forward_table::failed forward_table::fail_target(const target_ref& target) {
  failed out;
  auto n = by_node_.find(target.node);
  if (n == by_node_.end())
    return out;
  auto w = n->second.find(target.id);
  if (w == n->second.end())
    return out;
  if (w->second.ids.empty())
    --idle_watches_;
  release(w->second.ids, out);
  out.unwatched.push_back(std::move(w->second.addr));
  n->second.erase(w);
  --watched_;
  if (n->second.empty())
    by_node_.erase(n);
  return out;
}

forward_table::failed forward_table::fail_node(const caf::node_id& node, bool declared, clock::time_point now) {
  failed out;
  if (declared) {
    // Only the latest few declarations matter (a node refused for a moment): bounded.
    constexpr std::size_t max_down_nodes = 1024;
    if (down_until_.size() >= max_down_nodes)
      for (auto i = down_until_.begin(); i != down_until_.end();)
        i = now >= i->second ? down_until_.erase(i) : std::next(i);
    if (down_until_.size() < max_down_nodes)
      down_until_[node] = now + down_memory_;
  }
  auto n = by_node_.find(node);
  if (n == by_node_.end())
    return out;
  for (auto& [aid, w] : n->second) {
    if (w.ids.empty())
      --idle_watches_;
    release(w.ids, out);
    out.unwatched.push_back(std::move(w.addr));
    --watched_;
  }
  by_node_.erase(n);
  return out;
}

void forward_table::release(const std::unordered_set<std::uint64_t>& ids, failed& out) {
  for (auto id : ids)
    if (auto r = by_id_.find(id); r != by_id_.end()) {
      out.released.push_back(std::move(r->second.slot));
      by_id_.erase(r);
    }
}

std::vector<caf::actor_addr> forward_table::sweep_idle_watches() {
  std::vector<caf::actor_addr> out;
  if (idle_watches_ <= max_idle_watches_)
    return out;
  // All the idle ones at once: a sweep costs O(watched), so it comes only
  // after max_idle_watches more targets went idle (amortized O(1) each).
  out.reserve(idle_watches_);
  for (auto n = by_node_.begin(); n != by_node_.end();) {
    for (auto w = n->second.begin(); w != n->second.end();)
      if (w->second.ids.empty()) {
        out.push_back(std::move(w->second.addr));
        w = n->second.erase(w);
        --watched_;
      } else {
        ++w;
      }
    n = n->second.empty() ? by_node_.erase(n) : std::next(n);
  }
  idle_watches_ = 0;
  return out;
}

std::size_t forward_table::pending_to(const caf::node_id& node) const {
  auto n = by_node_.find(node);
  if (n == by_node_.end())
    return 0;
  std::size_t count = 0;
  for (auto& [aid, w] : n->second)
    count += w.ids.size();
  return count;
}

bool forward_table::watching(const target_ref& target) const {
  auto n = by_node_.find(target.node);
  return n != by_node_.end() && n->second.count(target.id) > 0;
}

// -- the actor ------------------------------------------------------------------------------

namespace {

// Idle watches kept per pending request allowed (at least this many in all).
constexpr std::size_t min_idle_watches = 1024;

struct forwarder_state {
  static inline const char* name = "troupe.forwarder";
  node_context_ptr ctx;
  std::optional<forward_table> table;
  node_down_hook on_node_down;
  std::chrono::milliseconds default_timeout{30000};
  std::uint32_t retry_after = 1;
};

using forwarder_pointer = forwarder_handle::stateful_pointer<forwarder_state>;

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// Counts the requests failed, then fails them: their slots go undelivered (the front re-resolves).
void release(forwarder_pointer self, forward_table::failed& f) {
  auto& st = self->state;
  st.ctx->metrics.forwarded.target_down.fetch_add(f.released.size(), std::memory_order_relaxed);
  st.ctx->metrics.forwarded.pending.store(static_cast<std::int64_t>(st.table->pending()), std::memory_order_relaxed);
  f.released.clear();
  for (auto& addr : f.unwatched)
    self->demonitor(addr);
}

void demonitor_all(forwarder_pointer self, const std::vector<caf::actor_addr>& targets) {
  for (auto& addr : targets)
    self->demonitor(addr);
}

// The answer (or the error) of forwarded request `id`.
void on_answer(forwarder_pointer self, std::uint64_t id, http_response&& r) {
  auto& st = self->state;
  if (r.deferred_ms > 0) {  // its handler deferred it: the front waits that long; the answer comes as a message
    if (auto* slot = st.table->find(id))
      slot->extend(std::chrono::milliseconds(r.deferred_ms));
    return;  // still pending: its target's down message fails it as any other
  }
  auto slot = st.table->take(id);
  if (!slot)
    return;  // failed already (its target went down): the front has re-resolved
  st.ctx->metrics.forwarded.answered.fetch_add(1, std::memory_order_relaxed);
  st.ctx->metrics.forwarded.pending.store(static_cast<std::int64_t>(st.table->pending()), std::memory_order_relaxed);
  (*slot)->deliver(std::move(r));
  demonitor_all(self, st.table->sweep_idle_watches());
}

void on_error(forwarder_pointer self, std::uint64_t id, const caf::error& err) {
  auto& st = self->state;
  auto slot = st.table->take(id);
  if (!slot)
    return;
  auto& m = st.ctx->metrics.forwarded;
  m.pending.store(static_cast<std::int64_t>(st.table->pending()), std::memory_order_relaxed);
  if (err == caf::sec::request_timeout) {
    m.timed_out.fetch_add(1, std::memory_order_relaxed);
    (*slot)->deliver(error_response(504, "the request was not answered in time"));
  } else if (err == caf::sec::request_receiver_down || err == caf::exit_reason::remote_link_unreachable) {
    // The target is gone: released undelivered, the front re-resolves once.
    m.target_down.fetch_add(1, std::memory_order_relaxed);
    slot->reset();
  } else {
    m.failed.fetch_add(1, std::memory_order_relaxed);
    (*slot)->deliver(error_response(502, "the user's node could not serve the request"));
  }
  demonitor_all(self, st.table->sweep_idle_watches());
}

forwarder_handle::behavior_type forwarder_impl(forwarder_pointer self, node_context_ptr ctx,
                                               node_down_hook on_node_down) {
  auto& st = self->state;
  const auto& limits = ctx->limits();
  auto hold = std::chrono::milliseconds(static_cast<std::int64_t>(limits.hold_seconds * 1000));
  st.table.emplace(limits.max_forwarded_requests, hold,
                   std::max<std::size_t>(min_idle_watches, limits.max_forwarded_requests));
  st.default_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(limits.request_timeout_seconds * 1000));
  st.retry_after = static_cast<std::uint32_t>(std::max(1.0, limits.hold_seconds));
  st.ctx = std::move(ctx);
  st.on_node_down = std::move(on_node_down);
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    auto node = msg.source.node();
    // A proxy killed because its node's connection is gone: every target on
    // that node is gone with it (their down messages follow; nothing is left for them).
    auto f = msg.reason == caf::exit_reason::remote_link_unreachable
               ? st.table->fail_node(node, false, forward_table::clock::now())
               : st.table->fail_target({node, msg.source.id()});
    release(self, f);
  });
  return {
    [self](http_atom, user_handle& target, local_reply& slot) {
      auto& st = self->state;
      if (!target || !slot)
        return;  // nothing to serve, or nobody waits: a null target drops the slot (re-resolve)
      http_request req = slot->request();  // one copy, for the wire
      auto addr = target.address();
      auto a = st.table->add({target.node(), target.id()}, addr, slot, forward_table::clock::now());
      auto& m = st.ctx->metrics.forwarded;
      switch (a.outcome) {
        case forward_table::admission::full:
          m.refused.fetch_add(1, std::memory_order_relaxed);
          return slot->deliver(error_response(
            503, "too many requests in flight to other nodes (limits.max_forwarded_requests), retry", st.retry_after));
        case forward_table::admission::node_down: {
          // Never sent: "not here", so the front re-resolves it once whatever its method.
          m.target_down.fetch_add(1, std::memory_order_relaxed);
          http_response not_here;
          not_here.status = 503;
          not_here.route = route_note::not_here;
          return slot->deliver(std::move(not_here));
        }
        case forward_table::admission::accepted:
          break;
      }
      m.pending.store(static_cast<std::int64_t>(st.table->pending()), std::memory_order_relaxed);
      if (a.watch)
        self->monitor(target);  // a proxy already dead answers with a down message at once
      auto timeout = st.default_timeout;
      if (req.deadline_ms > 0)
        timeout = std::chrono::milliseconds(std::max<std::int64_t>(1, req.deadline_ms - unix_now_ms()));
      auto id = a.id;
      req.answer_to = forwarder_handle{self};
      req.answer_ref = id;
      self->request(target, timeout, http_atom::value, std::move(req))
        .then([self, id](http_response& r) { on_answer(self, id, std::move(r)); },
              [self, id](caf::error& err) { on_error(self, id, err); });
    },
    [self](http_atom, std::uint64_t id, http_response& r) { on_answer(self, id, std::move(r)); },
    [self](node_down_atom, const caf::node_id& node) {
      auto& st = self->state;
      auto f = st.table->fail_node(node, true, forward_table::clock::now());
      auto failed = f.released.size();
      if (st.on_node_down)  // before the re-resolves: none of them finds a route to the dead node
        st.on_node_down(node);
      release(self, f);
      if (failed > 0)
        spdlog::info("forwarder: node {} is down: {} request(s) in flight to it failed at once", to_string(node),
                     failed);
    },
  };
}

}  // namespace

forwarder_handle spawn_forwarder(caf::actor_system& sys, node_context_ptr ctx, node_down_hook on_node_down) {
  return sys.spawn(forwarder_impl, std::move(ctx), std::move(on_node_down));
}

}  // namespace troupe
