#include "transport/channel_actor.hpp"

#include "actors/user.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace troupe {

namespace {

struct binding {
  std::string cid;
  std::string page;
  channel_owner_handle user;
};

struct socket_entry {
  channel_link_ptr link;
  // A socket carries the pages of one connection, a handful: a vector.
  std::vector<binding> bound;

  binding* find(const std::string& page) {
    auto i = std::find_if(bound.begin(), bound.end(), [&](const binding& b) { return b.page == page; });
    return i == bound.end() ? nullptr : &*i;
  }
};

struct hub_state {
  static const char* name;
  node_metrics* metrics = nullptr;
  std::unordered_map<std::uint64_t, socket_entry> sockets;

  socket_entry* find(std::uint64_t socket) {
    auto i = sockets.find(socket);
    return i == sockets.end() ? nullptr : &i->second;
  }
};

const char* hub_state::name = "troupe.channel_hub";

channel_hub_handle::behavior_type hub_impl(channel_hub_handle::stateful_pointer<hub_state> self,
                                           node_metrics* metrics) {
  self->state.metrics = metrics;
  // A socket's bindings go with it, in their users' records too.
  auto forget = [self](std::uint64_t socket, socket_entry& e) {
    channel_ref ref{self, socket};
    for (auto& b : e.bound)
      self->send(b.user, unbind_atom::value, b.cid, b.page, ref);
  };
  self->set_exit_handler([self, forget](const caf::exit_msg& msg) {
    for (auto& [socket, e] : self->state.sockets)
      forget(socket, e);
    self->state.sockets.clear();
    self->quit(msg.reason);
  });
  return {
    [=](bind_atom, std::uint64_t socket, std::string& cid, std::string& page, channel_owner_handle& user) {
      auto* e = self->state.find(socket);
      if (!e)  // closed meanwhile: the user learns it as from any socket that goes
        return self->send(user, unbind_atom::value, cid, page, channel_ref{self, socket});
      if (auto* b = e->find(page)) {
        b->cid = std::move(cid);
        b->user = std::move(user);
      } else {
        e->bound.push_back(binding{std::move(cid), std::move(page), std::move(user)});
      }
    },
    [=](unbind_atom, std::uint64_t socket, const std::string& page) {
      if (auto* e = self->state.find(socket))
        e->bound.erase(std::remove_if(e->bound.begin(), e->bound.end(), [&](const binding& b) { return b.page == page; }),
                       e->bound.end());
    },
    [=](push_atom, channel_push& p) -> bool {
      auto& st = self->state;
      auto* e = st.find(p.socket);
      auto* b = e ? e->find(p.page) : nullptr;
      if (!b || b->cid != p.cid)  // not this socket's page (gone, rebound, another connection's)
        return false;
      std::size_t dropped = 0;
      auto r = e->link->outbox->offer(ws_frame(std::move(p.frame), p.kind, p.close_code), &dropped);
      if (dropped)
        st.metrics->channel.overflow_drops.fetch_add(dropped, std::memory_order_relaxed);
      using res = channel_outbox::offer_result;
      if (r == res::overflow)
        st.metrics->channel.overflow_closes.fetch_add(1, std::memory_order_relaxed);
      if (r == res::queued || r == res::overflow)
        e->link->wake();
      return r == res::queued;
    },
    [=](socket_open_atom, std::uint64_t socket, channel_link_ptr& link) {
      self->state.sockets[socket].link = std::move(link);
    },
    [=](socket_closed_atom, std::uint64_t socket) {
      auto& sockets = self->state.sockets;
      if (auto i = sockets.find(socket); i != sockets.end()) {
        forget(socket, i->second);
        sockets.erase(i);
      }
    },
  };
}

}  // namespace

channel_hub_handle spawn_channel_hub(caf::actor_system& sys, node_metrics& metrics) {
  // Hidden: the actor system's shutdown never waits for it (its front stops it, and it holds nothing to save).
  return sys.spawn<caf::hidden>(hub_impl, &metrics);
}

}  // namespace troupe
