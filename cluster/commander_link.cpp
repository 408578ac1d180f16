#include "cluster/commander_link.hpp"

#include "actors/errors.hpp"
#include "cluster/agent.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <deque>
#include <map>

namespace troupe::cluster {

namespace {

struct held_message {
  caf::response_promise promise;
  caf::message content;
  std::chrono::steady_clock::time_point until;
};

// Which actor of the leader a link forwards to.
using link_target = caf::actor leader_notice::*;

struct link_state {
  static const char* name;
  caf::actor current;                                 // its target now; invalid during a takeover
  std::deque<held_message> held;
  std::map<std::string, caf::message> registrations;  // group → its last workers message
  bool ticking = false;
};

const char* link_state::name = "troupe.commander_link";

caf::behavior link_impl(caf::stateful_actor<link_state>* self, std::string node_name, std::chrono::milliseconds hold,
                        std::size_t max_held, link_target target) {
  self->set_default_handler([=](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
    auto& st = self->state;
    auto msg = x.move_content_to_message();
    if (msg.match_elements<workers_atom, std::string, std::string, std::vector<worker_handle>>())
      st.registrations[msg.get_as<std::string>(1)] = msg;
    auto rp = self->make_response_promise();
    if (st.current) {
      rp.delegate(st.current, std::move(msg));
      return rp;
    }
    if (st.held.size() >= max_held) {
      rp.deliver(make_error(errc::unavailable, "the commander is moving to another member; retry"));
      return rp;
    }
    st.held.push_back({rp, std::move(msg), std::chrono::steady_clock::now() + hold});
    if (!st.ticking) {
      st.ticking = true;
      self->delayed_send(self, std::chrono::milliseconds(100), tick_atom::value);
    }
    return rp;
  });
  return {
    [=](leader_atom, leader_notice& n) {
      auto& st = self->state;
      if (n.*target == st.current)
        return;
      st.current = n.*target;
      if (!st.current) {
        if (target == &leader_notice::commander)
          spdlog::warn("cluster: no commander right now (a takeover, or this node rejoins): placements wait");
        return;
      }
      // A new commander learns this node's workers first, then what waited.
      for (auto& [group, m] : st.registrations)
        self->send(st.current, m);
      auto held = std::move(st.held);
      st.held.clear();
      for (auto& h : held)
        h.promise.delegate(st.current, std::move(h.content));
      if (!held.empty())
        spdlog::info("cluster: {} message(s) held during the takeover went to the {} on {}", held.size(),
                     target == &leader_notice::commander ? "commander" : "global store", n.name);
    },
    [=](tick_atom) {
      auto& st = self->state;
      auto now = std::chrono::steady_clock::now();
      while (!st.held.empty() && st.held.front().until <= now) {
        st.held.front().promise.deliver(make_error(errc::unavailable, "no commander within the hold budget; retry"));
        st.held.pop_front();
      }
      st.ticking = !st.held.empty();
      if (st.ticking)
        self->delayed_send(self, std::chrono::milliseconds(100), tick_atom::value);
    },
  };
}

}  // namespace

caf::actor spawn_commander_link(caf::actor_system& sys, std::string node_name, std::chrono::milliseconds hold,
                                std::size_t max_held) {
  return sys.spawn(link_impl, std::move(node_name), hold, max_held, &leader_notice::commander);
}

caf::actor spawn_global_store_link(caf::actor_system& sys, std::string node_name, std::chrono::milliseconds hold,
                                   std::size_t max_held) {
  return sys.spawn(link_impl, std::move(node_name), hold, max_held, &leader_notice::global_store);
}

}  // namespace troupe::cluster
