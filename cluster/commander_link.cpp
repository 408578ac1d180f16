#include "cluster/commander_link.hpp"

#include "actors/errors.hpp"
#include "cluster/agent.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <deque>
#include <map>
#include <unordered_map>

namespace troupe::cluster {

namespace {

struct held_message {
  caf::response_promise promise;
  caf::message content;
  std::chrono::steady_clock::time_point until;
};

// A request forwarded to the current target, not answered yet. Forwarded as
// a request of the link's own (not delegated), so that a target that goes
// away with it — its member stalled, then declared down — does not leave it
// waiting for its timeout: at the next leader notice a resolve goes to the
// new target (placing is safe to repeat) and anything else is answered
// "outcome unknown" (it may have been carried out).
struct forwarded_request {
  caf::response_promise promise;
  caf::message resend;  // the resolve itself, kept to send again; empty for anything else
};

// Which actor of the leader a link forwards to.
using link_target = caf::actor leader_notice::*;

struct link_state {
  static const char* name;
  caf::actor current;                                 // its target now; invalid during a takeover
  std::deque<held_message> held;
  std::unordered_map<std::uint64_t, forwarded_request> in_flight;
  std::uint64_t last_forward = 0;
  std::map<std::string, caf::message> registrations;  // group → its last workers message
  bool ticking = false;
};

const char* link_state::name = "troupe.commander_link";

// Sends `msg` to the current target: a notice as it is (from its sender), a
// request as one of the link's own whose answer goes back through `rp`.
void forward(caf::stateful_actor<link_state>* self, caf::response_promise rp, caf::message msg,
             std::chrono::milliseconds timeout) {
  auto& st = self->state;
  if (rp.async()) {  // a notice: passed on with its sender (the commander tells a group by it)
    rp.delegate(st.current, std::move(msg));
    return;
  }
  auto id = ++st.last_forward;
  caf::message resend = msg.match_element<resolve_atom>(0) ? msg : caf::message{};
  st.in_flight.emplace(id, forwarded_request{rp, std::move(resend)});
  auto answered = self->request(st.current, timeout, std::move(msg));
  // One handler for any answer: CAF hands a response the handler does not
  // match to it as sec::unexpected_response carrying the answer as context.
  self->add_multiplexed_response_handler(answered.id(), caf::behavior{[self, id](caf::error& err) {
                                           auto i = self->state.in_flight.find(id);
                                           if (i == self->state.in_flight.end())
                                             return;  // answered already, at a leader change
                                           auto promise = std::move(i->second.promise);
                                           self->state.in_flight.erase(i);
                                           if (err == caf::sec::unexpected_response && !err.context().empty())
                                             promise.deliver(err.context());
                                           else
                                             promise.deliver(std::move(err));
                                         }});
}

caf::behavior link_impl(caf::stateful_actor<link_state>* self, std::string node_name, std::chrono::milliseconds hold,
                        std::size_t max_held, link_target target, std::chrono::milliseconds forward_timeout) {
  self->set_default_handler([=](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
    auto& st = self->state;
    auto msg = x.move_content_to_message();
    if (msg.match_elements<workers_atom, std::string, std::string, std::vector<worker_handle>>())
      st.registrations[msg.get_as<std::string>(1)] = msg;
    auto rp = self->make_response_promise();
    if (st.current) {
      forward(self, rp, std::move(msg), forward_timeout);
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
      // What the old target had not answered: a resolve goes to the new one
      // (held until there is one), anything else is answered now.
      auto unanswered = std::move(st.in_flight);
      st.in_flight.clear();
      std::size_t again = 0;
      for (auto& [id, f] : unanswered) {
        if (!f.resend.empty()) {
          st.held.push_back({std::move(f.promise), std::move(f.resend), std::chrono::steady_clock::now() + hold});
          ++again;
        } else {
          f.promise.deliver(make_error(errc::unavailable, "the commander went away while handling this request: "
                                                          "its outcome is unknown"));
        }
      }
      if (!unanswered.empty())
        spdlog::info("cluster: the {} changed with {} request(s) unanswered: {} sent again, the others failed "
                     "(outcome unknown)", target == &leader_notice::commander ? "commander" : "global store",
                     unanswered.size(), again);
      if (again && !st.ticking) {
        st.ticking = true;
        self->delayed_send(self, std::chrono::milliseconds(100), tick_atom::value);
      }
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
        forward(self, std::move(h.promise), std::move(h.content), forward_timeout);
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
                                std::size_t max_held, std::chrono::milliseconds forward_timeout) {
  return sys.spawn(link_impl, std::move(node_name), hold, max_held, &leader_notice::commander, forward_timeout);
}

caf::actor spawn_global_store_link(caf::actor_system& sys, std::string node_name, std::chrono::milliseconds hold,
                                   std::size_t max_held, std::chrono::milliseconds forward_timeout) {
  return sys.spawn(link_impl, std::move(node_name), hold, max_held, &leader_notice::global_store, forward_timeout);
}

}  // namespace troupe::cluster
