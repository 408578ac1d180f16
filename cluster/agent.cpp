#include "cluster/agent.hpp"

#include "actors/errors.hpp"
#include "config/recipe.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <random>

namespace troupe::cluster {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<member_hello>("troupe.member_hello");
  cfg.add_message_type<std::vector<member_hello>>("troupe.member_hellos");
  cfg.add_message_type<leader_notice>("troupe.leader_notice");
  cfg.add_message_type<join_reply>("troupe.join_reply");
  cfg.add_message_type<member_status>("troupe.member_status");
  cfg.add_message_type<std::vector<member_status>>("troupe.member_statuses");
  cfg.add_message_type<agent_handle>("troupe.agent_handle");
}

std::uint64_t new_incarnation() {
  std::random_device rd;
  std::uint64_t x = 0;
  while (x == 0)
    x = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return x;
}

namespace {

// The agent's whole interface: what members and its node send it, and its
// own timers (private): the heartbeat period, and a rejoin attempt.
using agent_actor = agent_handle::extend<caf::reacts_to<tick_atom>, caf::reacts_to<join_atom>>;

struct agent_state {
  static const char* name;

  agent_actor::stateful_pointer<agent_state> self = nullptr;
  agent_config cfg;
  std::optional<membership> mem;
  std::unordered_map<std::string, agent_handle> agents;          // member name → its agent
  std::unordered_map<std::string, census_handle> censuses;       // member name → its census
  std::unordered_map<caf::actor_addr, std::string> watched;      // monitored agent → member name
  leader_notice leader;                                          // who leads (commander invalid: none yet)
  caf::actor own_commander;                                      // when this node leads
  bool led_before = false;                                       // a leader with a commander was known before
  // The commander this agent started goes down with the agent (node shutdown).
  std::shared_ptr<caf::actor> started = std::make_shared<caf::actor>();
  bool joined = false;
  bool joining = false;
  std::vector<caf::typed_response_promise<bool>> ready;

  steady::time_point now() const { return steady::now(); }

  member_hello hello_of(const member_record& r) const {
    member_hello h{r.name, r.incarnation, r.address, r.seq, {}, {}};
    if (r.name == mem->self().name) {
      h.agent = self;
      h.census = cfg.census;
    } else if (auto a = agents.find(r.name); a != agents.end()) {
      h.agent = a->second;
      if (auto c = censuses.find(r.name); c != censuses.end())
        h.census = c->second;
    }
    return h;
  }

  member_record record_of(const member_hello& h) const { return {h.name, h.incarnation, h.address, h.seq}; }

  void tell_leader() {
    for (auto& l : cfg.leader_listeners)
      caf::anon_send(l, leader_atom::value, leader);
    if (cfg.orchestrator) {
      // A takeover continues the stored settings generation; the cluster's first leader starts its own.
      const bool takeover = led_before || !cfg.join.empty();
      caf::anon_send(cfg.orchestrator, settings_leader_atom::value, leader.name,
                     leader.commander ? leader.orchestrator : settings_leader_handle{}, takeover);
    }
    if (leader.commander)
      led_before = true;
  }

  void tell_node_down(const caf::node_id& node) {
    for (auto& l : cfg.down_listeners)
      caf::anon_send(l, node_down_atom::value, node);
  }

  void keep(const member_hello& h) {
    if (!h.agent || h.name == mem->self().name)
      return;
    agents[h.name] = h.agent;
    if (h.census)
      censuses[h.name] = h.census;
    if (watched.emplace(h.agent.address(), h.name).second)
      self->monitor(h.agent);
  }

  // The members up, but this one.
  template <class F>
  void for_each_peer(F f) {
    for (auto& m : mem->members())
      if (m.up && m.record.name != mem->self().name)
        if (auto a = agents.find(m.record.name); a != agents.end())
          f(m.record, a->second);
  }

  void publish_serving() {
    if (cfg.metrics) {
      std::int64_t up = 0, down = 0;
      for (auto& m : mem->members())
        (m.up ? up : down) += 1;
      cfg.metrics->cluster_members_up.store(joined ? up : 0, std::memory_order_relaxed);
      cfg.metrics->cluster_members_down.store(down, std::memory_order_relaxed);
      cfg.metrics->cluster_fenced.store(joined ? 0 : 1, std::memory_order_relaxed);
    }
    if (!cfg.serving)
      return;
    // Served until the lease on the beats a quorum confirmed runs out, less a
    // heartbeat of margin (membership::lease_base); renewed at every tick.
    auto t = now();
    auto base = joined && mem->has_quorum(t) ? mem->lease_base(t) : std::nullopt;
    auto left = base ? std::chrono::duration_cast<std::chrono::milliseconds>(*base + cfg.failure_timeout -
                                                                              cfg.heartbeat_interval - t)
                     : std::chrono::milliseconds(0);
    cfg.serving->until_ms.store(left.count() > 0 ? troupe::serving_signal::now_ms() + left.count() : 0,
                                std::memory_order_relaxed);
  }

  // -- leadership -------------------------------------------------------------------

  // Called after every change of the membership: the oldest live member runs
  // the commander; everybody else is told (and learns its handle).
  void review_leadership() {
    if (!joined || mem->fenced())
      return;
    if (mem->leads()) {
      if (own_commander)
        return;
      spdlog::warn("cluster: node {} is the oldest live member: it starts the commander", mem->self().name);
      std::vector<std::string> up;
      for (auto& m : mem->members())
        if (m.up)
          up.push_back(m.record.name);
      auto actors = cfg.start_commander(std::move(up));
      own_commander = actors.commander;
      *started = own_commander;
      leader = leader_notice{mem->self().name, mem->self().incarnation, own_commander, actors.global_store,
                             cfg.orchestrator};
      tell_leader();
      for_each_peer([&](auto&, auto& a) { self->send(a, leader_atom::value, leader); });
      return;
    }
    auto* l = mem->leader();
    if (l && (l->name != leader.name || l->incarnation != leader.incarnation) && leader.commander) {
      // The leader we knew is gone; the next one will tell us its commander.
      leader = leader_notice{l->name, l->incarnation, {}, {}};
      tell_leader();
    }
  }

  void on_leader(leader_notice& n) {
    if (!mem->find(n.name) && n.name != mem->self().name)
      return;
    if (n.name == leader.name && n.incarnation == leader.incarnation && n.commander == leader.commander)
      return;
    leader = std::move(n);
    spdlog::info("cluster: the commander runs on {}", leader.name);
    tell_leader();
  }

  // -- failures ---------------------------------------------------------------------

  void member_down(const member_record& r) {
    spdlog::warn("cluster: member {} ({}) declared down", r.name, r.address);
    caf::node_id node;
    if (auto a = agents.find(r.name); a != agents.end()) {
      node = a->second.node();
      watched.erase(a->second.address());
      self->demonitor(a->second.address());
      agents.erase(a);
    }
    censuses.erase(r.name);
    if (node) {
      tell_node_down(node);
      if (own_commander)
        caf::anon_send(own_commander, node_down_atom::value, node);
    }
    for_each_peer([&](auto&, auto& a) { self->send(a, down_atom::value, r.name, r.incarnation); });
  }

  void apply(check_verdict v) {
    for (auto& r : v.declared_down)
      member_down(r);
    if (v.fenced)
      fence(v.paused ? "it did not run for a failure timeout or more (stopped, suspended or starved): "
                       "the others have declared it down"
                     : "it lost contact with the majority of the cluster");
    else
      review_leadership();
    publish_serving();
  }

  // This node must not serve any more: its users freeze and leave (the
  // deposit refuses the writes of those another member holds now), its
  // commander stops, and it rejoins as a new incarnation that starts empty.
  void fence(const std::string& why) {
    if (!joined)
      return;
    spdlog::error("cluster: node {} fences itself: {}; its users freeze and leave, and it rejoins as a new member",
                  mem->self().name, why);
    joined = false;
    if (cfg.serving)
      cfg.serving->until_ms.store(0);
    for (auto& l : cfg.fence_listeners)
      caf::anon_send(l, fence_atom::value);
    if (own_commander) {
      caf::anon_send_exit(own_commander, caf::exit_reason::user_shutdown);
      own_commander = nullptr;
    }
    leader = {};
    tell_leader();
    for (auto& [addr, name] : watched)
      self->demonitor(addr);
    watched.clear();
    self->delayed_send(self, std::chrono::seconds(1), join_atom::value);
  }

  // -- joining ----------------------------------------------------------------------

  // Where to rejoin: the configured member, then every member we knew.
  std::vector<std::string> join_candidates() const {
    std::vector<std::string> out;
    if (!cfg.join.empty())
      out.push_back(cfg.join);
    for (auto& m : mem->members())
      if (m.record.name != mem->self().name && m.record.address != cfg.join)
        out.push_back(m.record.address);
    return out;
  }

  void fail_join(const std::string& why, bool first) {
    joining = false;
    if (first) {
      for (auto& p : ready)
        p.deliver(make_error(errc::unavailable, why));
      ready.clear();
      return;
    }
    spdlog::warn("cluster: rejoining failed ({}); trying again in 1 s", why);
    self->delayed_send(self, std::chrono::seconds(1), join_atom::value);
  }

  void join(std::vector<std::string> candidates, bool first) {
    if (candidates.empty())
      return fail_join("no member to join", first);
    joining = true;
    auto address = candidates.front();
    candidates.erase(candidates.begin());
    std::pair<std::string, std::uint16_t> hp;
    try {
      hp = config::split_listen(address, "cluster.join");
    } catch (const std::exception& e) {
      return fail_join(e.what(), first);
    }
    auto next = [this, candidates, first](const std::string& why) {
      if (!candidates.empty() && !first)
        return join(candidates, first);
      fail_join(why, first);
    };
    self->request(cfg.connector, cfg.join_timeout, caf::connect_atom::value, hp.first, hp.second)
      .then(
        [this, address, next, first](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>&) {
          if (!ptr)
            return next("nothing is published at " + address);
          auto contact = caf::actor_cast<agent_handle>(ptr);
          auto me = hello_of(mem->self());
          auto asked = now();
          self->request(contact, cfg.join_timeout, join_atom::value, cfg.cluster_name, me)
            .then([this, first, asked](join_reply& r) { on_joined(r, first, asked); },
                  [this, address, next](caf::error& err) {
                    next(address + " refused the join: " + self->system().render(err));
                  });
        },
        [this, address, next](caf::error& err) { next("cannot reach " + address + ": " + self->system().render(err)); });
  }

  void on_joined(join_reply& r, bool first, steady::time_point asked) {
    std::vector<member_record> records;
    for (auto& h : r.members)
      records.push_back(record_of(h));
    mem->joined(records, now(), asked);
    agents.clear();
    for (auto& h : r.members)
      keep(h);
    // The full mesh: a direct connection to every member (the handles we got
    // route through the member that admitted us until then).
    for (auto& h : r.members) {
      if (h.name == mem->self().name || !h.agent)
        continue;
      try {
        auto hp = config::split_listen(h.address, "cluster.join");
        self->request(cfg.connector, cfg.join_timeout, caf::connect_atom::value, hp.first, hp.second)
          .then([](caf::node_id&, caf::strong_actor_ptr&, std::set<std::string>&) {},
                [this, name = h.name](caf::error& err) {
                  spdlog::warn("cluster: no direct connection to member {}: {}", name, self->system().render(err));
                });
      } catch (const std::exception& e) {
        spdlog::warn("cluster: member {} has a bad address: {}", h.name, e.what());
      }
    }
    joined = true;
    joining = false;
    spdlog::info("cluster: node {} joined {} (age {}; {} member(s) up)", mem->self().name, cfg.cluster_name,
                 mem->self().seq, mem->up_count());
    leader = {};
    on_leader(r.leader);
    review_leadership();
    publish_serving();
    for (auto& p : ready)
      p.deliver(true);
    ready.clear();
  }

  caf::result<join_reply> on_join_request(const std::string& cluster, member_hello& h) {
    if (!joined)
      return make_error(errc::unavailable, "this member is not in the cluster right now");
    if (cluster != cfg.cluster_name)
      return make_error(errc::refused, "this is cluster \"" + cfg.cluster_name + "\", not \"" + cluster + "\"");
    auto admitted = mem->admit(record_of(h), now());
    if (!admitted)
      return make_error(errc::refused, "a live member is called " + h.name);
    h.seq = admitted->seq;
    keep(h);
    spdlog::info("cluster: member {} ({}) admitted, age {}", h.name, h.address, h.seq);
    for_each_peer([&](auto& r, auto& a) {
      if (r.name != h.name)
        self->send(a, member_atom::value, h);
    });
    join_reply out;
    for (auto& m : mem->members())
      if (m.up)
        out.members.push_back(hello_of(m.record));
    out.leader = leader;
    return out;
  }

  void on_member(member_hello& h) {
    if (!joined)
      return;
    if (mem->learn(record_of(h), now())) {
      spdlog::info("cluster: member {} ({}) joined, age {}", h.name, h.address, h.seq);
      keep(h);
      review_leadership();
      if (own_commander)  // the newcomer learns who leads
        if (auto a = agents.find(h.name); a != agents.end())
          self->send(a->second, leader_atom::value, leader);
    }
  }

  // -- heartbeats -------------------------------------------------------------------

  void on_tick() {
    self->delayed_send(self, cfg.heartbeat_interval, tick_atom::value);
    if (!joined)
      return;
    const auto stamp = membership::stamp_of(now());
    for_each_peer([&](auto& r, auto& a) {
      self->send(a, beat_atom::value, mem->self().name, mem->self().incarnation, stamp, mem->echo_for(r.name));
    });
    apply(mem->check(now()));
  }

  void on_beat(const std::string& name, std::uint64_t incarnation, std::int64_t stamp, std::int64_t echo) {
    if (!joined)
      return;
    if (mem->heard(name, incarnation, now(), stamp, echo))
      return;
    // A member we declared down (or an old incarnation) is still talking: tell it.
    if (auto sender = caf::actor_cast<agent_handle>(self->current_sender()))
      self->send(sender, down_atom::value, name, incarnation);
  }

  // Whether the message being handled comes from the agent of a member up
  // here: a verdict from a member this one declared down (it was stopped and
  // judges from a stale view) must not take down a live member.
  bool from_live_member() {
    auto sender = self->current_sender();
    for (auto& [name, a] : agents)
      if (a.address() == sender) {
        auto* v = mem->find(name);
        return v && v->up;
      }
    return false;
  }

  void on_down_notice(const std::string& name, std::uint64_t incarnation) {
    if (!joined)
      return;
    if (!from_live_member()) {
      spdlog::warn("cluster: a verdict that {} is down came from no live member; ignored", name);
      return;
    }
    if (name == mem->self().name) {
      if (incarnation == mem->self().incarnation) {
        mem->declared_down(name, incarnation);
        fence("the cluster declared it down");
      }
      return;
    }
    if (mem->declared_down(name, incarnation)) {
      auto* v = mem->find(name);
      member_down(v->record);
      review_leadership();
      publish_serving();
    }
  }

  void on_down(caf::down_msg& dm) {
    auto w = watched.find(dm.source);
    if (w == watched.end())
      return;
    auto name = w->second;
    watched.erase(w);
    if (!joined)
      return;
    if (auto* v = mem->find(name)) {
      mem->lost(name, v->record.incarnation);
      apply(mem->check(now()));
    }
  }

  std::vector<member_status> statuses() const {
    std::vector<member_status> out;
    auto t = now();
    auto* l = mem->leader();
    for (auto& m : mem->members()) {
      member_status s{m.record.name, m.record.incarnation, m.record.address, m.record.seq, m.up ? "up" : "down",
                      -1, l && l->name == m.record.name, {}, {}};
      if (m.record.name == mem->self().name) {
        s.state = mem->fenced() || !joined ? "fenced" : "self";
        s.node = self->node();
        s.census = cfg.census;
      } else {
        if (auto c = censuses.find(m.record.name); c != censuses.end())
          s.census = c->second;
        if (m.last_heard != steady::time_point{})
          s.heartbeat_age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - m.last_heard).count();
        if (auto a = agents.find(m.record.name); a != agents.end())
          s.node = a->second.node();
      }
      out.push_back(std::move(s));
    }
    return out;
  }
};

const char* agent_state::name = "troupe.cluster_agent";

agent_actor::behavior_type agent_impl(agent_actor::stateful_pointer<agent_state> self, agent_config cfg) {
  auto& st = self->state;
  st.self = self;
  st.mem.emplace(cfg.self, cfg.failure_timeout);
  st.cfg = std::move(cfg);
  self->set_down_handler([self](caf::down_msg& dm) { self->state.on_down(dm); });
  self->attach_functor([started = st.started] {
    if (*started)
      caf::anon_send_exit(*started, caf::exit_reason::user_shutdown);
  });
  return {
    [self](join_atom, const std::string& cluster, member_hello& h) { return self->state.on_join_request(cluster, h); },
    [self](member_atom, member_hello& h) { self->state.on_member(h); },
    [self](beat_atom, const std::string& name, std::uint64_t inc, std::int64_t stamp, std::int64_t echo) {
      self->state.on_beat(name, inc, stamp, echo);
    },
    [self](down_atom, const std::string& name, std::uint64_t inc) { self->state.on_down_notice(name, inc); },
    [self](leader_atom, leader_notice& n) {
      if (self->state.joined)
        self->state.on_leader(n);
    },
    [self](members_atom) { return self->state.statuses(); },
    [self](ready_atom, const std::string& address) -> caf::result<bool> {
      auto& st = self->state;
      if (st.joined)
        return true;
      auto p = self->make_response_promise<bool>();
      st.ready.push_back(p);
      if (st.joining)
        return p;
      // This member's address is known now that it is published.
      auto me = st.mem->self();
      me.address = address;
      st.mem.emplace(me, st.cfg.failure_timeout);
      self->send(self, tick_atom::value);
      if (st.cfg.join.empty()) {
        st.mem->start_alone(st.now());
        st.joined = true;
        spdlog::info("cluster: node {} starts cluster {} at {}", me.name, st.cfg.cluster_name, address);
        st.review_leadership();
        st.publish_serving();
        p.deliver(true);
        st.ready.clear();
        return p;
      }
      st.join({st.cfg.join}, true);
      return p;
    },
    [self](tick_atom) { self->state.on_tick(); },
    [self](join_atom) {
      // A rejoin attempt after fencing: a new incarnation, empty.
      auto& st = self->state;
      if (st.joined || st.joining)
        return;
      auto candidates = st.join_candidates();
      auto me = st.mem->self();
      me.incarnation = new_incarnation();
      me.seq = 0;
      auto old = std::move(*st.mem);
      st.mem.emplace(me, st.cfg.failure_timeout);
      for (auto& m : old.members())
        if (m.record.name != me.name)
          st.mem->learn(m.record, st.now());  // remembered only as places to rejoin through
      spdlog::info("cluster: node {} rejoins as incarnation {:x}", me.name, me.incarnation);
      st.join(candidates, false);
    },
  };
}

}  // namespace

agent_handle spawn_agent(caf::actor_system& sys, agent_config config) {
  return sys.spawn(agent_impl, std::move(config));
}

}  // namespace troupe::cluster
