#pragma once
/// \file
/// The cluster's membership as one member sees it: who the members are, how
/// old each is, who was heard from lately, who is down, who leads (hosts the
/// commander), and whether this member may serve at all (it fences itself
/// when it lost contact with the majority). Plain data owned by the member's
/// agent actor; no clocks of its own (every call is given `now`), so a unit
/// test drives it through any history (docs/CLUSTER.md "Membership").

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::cluster {

using steady = std::chrono::steady_clock;

/// One member of the cluster, as the members tell each other about it.
struct member_record {
  std::string name;              ///< node.name: unique among live members
  std::uint64_t incarnation = 0; ///< random per start (and per rejoin): a member that comes back is a new one
  std::string address;           ///< HOST:PORT of its cluster listener
  std::uint64_t seq = 0;         ///< join order (age): the member that admitted it gave it the next number
};

/// What this member knows of one other (or itself).
struct member_view {
  member_record record;
  bool up = true;
  steady::time_point last_heard{};
  /// The send time of this member's latest heartbeat that it confirmed
  /// receiving (its beats echo our stamps); {}: none yet. It cannot declare
  /// this member down before acked + the failure timeout.
  steady::time_point acked{};
  std::int64_t peer_stamp = 0;  ///< its latest heartbeat's stamp: echoed back in ours
};

/// The outcome of a check: members newly declared down, and whether this
/// member must stop serving (fence itself) because it is on the minority side.
struct check_verdict {
  std::vector<member_record> declared_down;
  bool fenced = false;
  /// Why fenced: true when this member itself did not run (no check) for a
  /// failure timeout or more — SIGSTOP, a suspended VM, a starved process.
  /// The others have declared it down meanwhile, but the heartbeats they sent
  /// before, read only now, would make them look heard: its silence decides.
  bool paused = false;
};

class membership {
public:
  /// `self` is this member (its seq is set by start_alone or joined).
  membership(member_record self, std::chrono::milliseconds failure_timeout);

  /// This member starts a new cluster: it is the oldest (seq 1).
  void start_alone(steady::time_point now);

  /// This member was admitted: `members` (itself among them, with its seq) is
  /// the list the admitting member sent; `asked`: when the join was sent
  /// (nobody can time this member before that: it counts as acknowledged).
  void joined(const std::vector<member_record>& members, steady::time_point now, steady::time_point asked = {});

  /// Admits `newcomer` (sent to this member by a joining node): gives it the
  /// next seq and returns the record to tell everybody. A newcomer with the
  /// name of a live member of another incarnation is refused (nullopt):
  /// two nodes must never share a name. One with a down member's name
  /// replaces it (that member came back as a new incarnation).
  std::optional<member_record> admit(member_record newcomer, steady::time_point now);

  /// Another member told us about a member (a newcomer, or its list).
  /// Returns true when it is new to us (we must connect to it).
  bool learn(const member_record& m, steady::time_point now);

  /// A heartbeat (or any message) from `name`/`incarnation`. Returns false
  /// when that member is not known as up (down, or an old incarnation): the
  /// sender must be told it is down (it must fence itself and rejoin).
  /// `stamp`: the sender's own clock at sending (echoed back by our next
  /// beat); `echo`: the stamp of our latest beat it had received (0: none).
  bool heard(const std::string& name, std::uint64_t incarnation, steady::time_point now, std::int64_t stamp = 0,
             std::int64_t echo = 0);

  /// The stamp to echo to `name` in our next beat (0: none heard).
  std::int64_t echo_for(const std::string& name) const;

  /// The right to serve (docs/CLUSTER.md "Fencing"): the latest send time T
  /// of this member's heartbeats such that the members up that confirmed a
  /// beat sent at T or later (this one included) form a quorum (a majority,
  /// or half with the oldest). None of them can declare it down before
  /// T + failure timeout, so it may serve until then (less a margin). nullopt
  /// when fenced or without such a quorum. A member that was stopped holds
  /// only old confirmations: it serves nothing until the others confirm its
  /// new beats — and they answer a member they declared down with its verdict.
  std::optional<steady::time_point> lease_base(steady::time_point now) const;

  /// A heartbeat stamp (steady clock, ns), and back.
  static std::int64_t stamp_of(steady::time_point t);
  static steady::time_point from_stamp(std::int64_t stamp);

  /// Its connection is gone (a CAF down message: kill -9, closed socket):
  /// it counts as unreachable from now on; check() decides.
  void lost(const std::string& name, std::uint64_t incarnation);

  /// Another member declared `name`/`incarnation` down: so do we (no quorum
  /// arithmetic: one member's verdict is everybody's). Returns true when it
  /// was up here. Declaring this member itself down fences it.
  bool declared_down(const std::string& name, std::uint64_t incarnation);

  /// Declares down every member not heard from within the failure timeout —
  /// unless this member cannot reach the majority of the members up before,
  /// in which case it fences itself instead (an even split: the side with the
  /// oldest member lives). Idempotent; call it every heartbeat: a gap of a
  /// failure timeout or more since the previous call (this member did not
  /// run) fences it too, while other members are up (check_verdict::paused);
  /// after a gap of over half of it, it declares nobody down that round (its
  /// own view is what is stale).
  check_verdict check(steady::time_point now);

  /// This member lost its standing (fenced): it must rejoin as a new incarnation.
  bool fenced() const noexcept { return fenced_; }

  /// The oldest member up (lowest seq, then name): where the commander runs.
  const member_record* leader() const;

  /// True when this member is the leader.
  bool leads() const;

  /// True when this member heard from a majority of the members up (itself
  /// included) within the failure timeout, and is not fenced.
  bool has_quorum(steady::time_point now) const;

  const member_record& self() const noexcept { return members_.front().record; }
  const std::vector<member_view>& members() const noexcept { return members_; }
  const member_view* find(const std::string& name) const;

  /// Members up, this one included.
  std::size_t up_count() const;

private:
  member_view* find_mutable(const std::string& name);
  bool reachable(const member_view& m, steady::time_point now) const;
  struct reach {
    bool majority;  // this member reaches a majority of those up
    bool all;       // and every one of them
  };
  reach reach_of(steady::time_point now) const;

  std::vector<member_view> members_;  // members_[0] is this member
  std::chrono::milliseconds failure_timeout_;
  std::optional<steady::time_point> last_check_;
  std::uint64_t max_seq_ = 0;
  bool fenced_ = false;
};

/// Orders members by age: lower seq first, then name (two members admitted
/// at once by different members may share a seq).
bool older(const member_record& a, const member_record& b);

}  // namespace troupe::cluster
