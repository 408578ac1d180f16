#include "transport/channel_actor.hpp"

#include "actors/user.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <vector>

namespace troupe {

namespace {

struct binding {
  std::string cid;
  std::string page;
  caf::actor user;
};

struct channel_state {
  static const char* name;
  channel_link link;
  // A socket carries the pages of one connection, a handful: a vector.
  std::vector<binding> bound;

  binding* find(const std::string& page) {
    auto i = std::find_if(bound.begin(), bound.end(), [&](const binding& b) { return b.page == page; });
    return i == bound.end() ? nullptr : &*i;
  }
};

const char* channel_state::name = "troupe.channel";

channel_handle::behavior_type channel_impl(channel_handle::stateful_pointer<channel_state> self, channel_link link) {
  self->state.link = std::move(link);
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    // The socket went: its bindings go with it, in their users' records too.
    for (auto& b : self->state.bound)
      self->send(caf::actor_cast<user_handle>(b.user), unbind_atom::value, b.cid, b.page,
                 caf::actor_cast<caf::actor>(self));
    self->state.bound.clear();
    self->quit(msg.reason);
  });
  return {
    [=](bind_atom, std::string& cid, std::string& page, caf::actor& user) {
      auto& st = self->state;
      if (auto* b = st.find(page)) {
        b->cid = std::move(cid);
        b->user = std::move(user);
      } else {
        st.bound.push_back(binding{std::move(cid), std::move(page), std::move(user)});
      }
    },
    [=](unbind_atom, const std::string& page) {
      auto& v = self->state.bound;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const binding& b) { return b.page == page; }), v.end());
    },
    [=](push_atom, channel_push& p) -> bool {
      auto& st = self->state;
      auto* b = st.find(p.page);
      if (!b || b->cid != p.cid)  // not this socket's page (gone, rebound, another connection's)
        return false;
      std::size_t dropped = 0;
      auto r = st.link.outbox->offer(std::move(p.frame), &dropped);
      if (dropped && st.link.metrics)
        st.link.metrics->channel.overflow_drops.fetch_add(dropped, std::memory_order_relaxed);
      using res = channel_outbox::offer_result;
      if (r == res::overflow && st.link.metrics)
        st.link.metrics->channel.overflow_closes.fetch_add(1, std::memory_order_relaxed);
      if (r == res::queued || r == res::overflow)
        st.link.wake();
      return r == res::queued;
    },
  };
}

}  // namespace

channel_handle spawn_channel_actor(caf::actor_system& sys, channel_link link) {
  return sys.spawn(channel_impl, std::move(link));
}

}  // namespace troupe
