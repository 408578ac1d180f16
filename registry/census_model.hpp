#pragma once
/// \file
/// The census model: every user a node knows (live or frozen), ordered by
/// name, with the node's and each worker's counts kept exact as users come,
/// change and go. Plain data, owned by one actor (the census), no locks.
/// Queries are paged and filtered (prefix, worker, state). The users are an
/// order-statistics tree (libstdc++'s policy-based red-black tree), so a page
/// at any offset, and the count of a prefix, cost O(log n); only a page that
/// filters by worker or state walks the rows it skips.

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <nlohmann/json.hpp>

#include "registry/ids.hpp"
#include "registry/short_name.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::registry {

/// A user's state in the census. `resting`: idle, his actor stopped and his
/// state kept encoded by his worker, in memory (group.rest_idle_seconds).
enum class user_state : std::uint8_t { active, unfreezing, departing, frozen, resting };

constexpr std::size_t user_state_count = 5;

const char* to_string(user_state s) noexcept;

/// "active" → user_state::active, …; nullopt for anything else.
std::optional<user_state> user_state_from(std::string_view text) noexcept;

/// Users counted by state.
struct state_counts {
  std::array<std::int64_t, user_state_count> by{};

  std::int64_t all() const noexcept;
  std::int64_t operator[](user_state s) const noexcept { return by[static_cast<std::size_t>(s)]; }
};

/// What the census knows of one user between probes.
struct user_entry {
  user_state state = user_state::active;
  std::uint16_t worker = no_worker;  ///< worker number (census_model::worker_name); none when frozen
  std::uint32_t connections = 0;
  std::uint32_t pages = 0;
  std::uint32_t restarts = 0;
  std::uint64_t actor = 0;  ///< the live actor's id, 0 when he has none (frozen, resting)

  static constexpr std::uint16_t no_worker = 0xffff;
};

/// Aggregates of a set of users (the node, one worker).
struct user_aggregate {
  state_counts users;
  std::int64_t guests = 0;  ///< of `users`, the guests (no login yet): shown apart from named users
  std::int64_t connections = 0;
  std::int64_t pages = 0;
};

class census_model {
public:
  struct filter {
    std::string prefix;                ///< names starting with it
    std::optional<std::uint16_t> worker;
    std::optional<user_state> state;
  };

  struct row {
    const short_name* name;
    const user_entry* entry;
  };

  struct page {
    std::vector<row> rows;
    std::int64_t matched = 0;          ///< rows the filter selects, in all
    std::optional<std::string> next;   ///< cursor of the following page
  };

  /// The number of worker `name`, given on first sight (workers keep their number).
  std::uint16_t worker_number(const std::string& name);
  /// The worker's number if it was ever seen.
  std::optional<std::uint16_t> find_worker(const std::string& name) const;
  const std::string& worker_name(std::uint16_t number) const { return workers_.at(number); }
  std::size_t worker_count() const noexcept { return workers_.size(); }

  /// A live user says what he is now (inserted on first sight).
  void update(const std::string& name, const user_entry& now);

  /// His actor `actor` is gone: a frozen user stays known (without an actor),
  /// anybody else leaves. A newer actor of the same name is left alone.
  void actor_down(const std::string& name, std::uint64_t actor);

  /// A user found frozen in the deposit: known as frozen unless already known.
  void add_frozen(const std::string& name);

  /// Forgets a user whatever his state (he was dropped).
  void erase(const std::string& name);

  const user_entry* find(const std::string& name) const;

  /// The rows `f` selects, from `after` (exclusive, when given) or else from
  /// row `offset`, at most `limit` of them.
  page query(const filter& f, std::size_t offset, std::size_t limit, const std::string& after = {}) const;

  const user_aggregate& totals() const noexcept { return totals_; }
  /// Aggregates of the live users on worker `number`.
  const user_aggregate& worker_totals(std::uint16_t number) const;

private:
  void account(std::string_view name, const user_entry& e, int sign);
  bool matches(const filter& f, std::string_view name, const user_entry& e) const;
  std::int64_t count_matching(const filter& f) const;

  // Keyed by short_name: a guest's name inline, no allocation per user (issue 14, S5).
  using tree = __gnu_pbds::tree<short_name, user_entry, std::less<short_name>, __gnu_pbds::rb_tree_tag,
                                __gnu_pbds::tree_order_statistics_node_update>;
  /// Rows whose name starts with `prefix`: [first, last) as ranks.
  std::pair<std::size_t, std::size_t> prefix_ranks(const std::string& prefix) const;

  tree users_;
  std::vector<std::string> workers_;
  std::vector<user_aggregate> worker_totals_;
  user_aggregate totals_;
};

// -- the cluster's census ---------------------------------------------------------------
//
// A census on any member answers for the whole cluster: it asks every live
// member's census for its part of the query and merges the parts here (plain
// JSON in, JSON out: no actor involved). docs/census.md "Across a cluster".

/// The most rows one member lists for a cluster page (`offset + limit`): a
/// page deeper than that is asked for with the `after` cursor.
constexpr std::uint64_t max_cluster_window = 10000;

/// One member as the cluster knows it (its agent's facts).
struct census_member {
  std::string name;
  std::string state;                         ///< self | up | down | fenced | unreachable
  std::optional<std::uint64_t> incarnation;  ///< none for a lone node
  std::string address;                       ///< its cluster address, "" for a lone node
  std::uint64_t age = 0;                     ///< its join order (lower: older)
  bool leader = false;                       ///< the commander runs there
  std::int64_t heartbeat_age_ms = -1;        ///< since last heard (-1: never, or itself)
};

/// One member's part of a query.
struct census_part {
  census_member member;
  /// Its census document for the member query (cluster_member_query), or null
  /// when it did not answer (down, unreachable).
  nlohmann::json doc;
  /// When `doc` is null: its facts from its last answer (node, health, totals,
  /// groups, workers), null when it never answered.
  nlohmann::json last_known;
  /// Seconds since `last_known` was answered.
  double last_known_age_seconds = 0;
};

/// What the merge needs of the operator's query.
struct census_window {
  std::string kind = "user";   ///< user | worker | group
  std::uint64_t offset = 0;
  std::uint32_t limit = 100;
};

/// The facts of a member's census document kept for when it stops answering.
nlohmann::json census_facts(const nlohmann::json& doc);

/// Merges the parts into the cluster's census (`nodes`, `totals`, `groups`,
/// `workers`, `matched`, `actors`, `next`), on top of `base` (the answering
/// node's own `node`, `health`, `scan`, `query`). Each member's document must
/// answer its first `offset + limit` rows (offset 0, the same filters and
/// cursor); the merge orders their union by name and keeps the window. Rows
/// and workers are tagged with their `node`; worker ids become
/// `worker:<node>/<name>` (the name the commander's drain takes).
nlohmann::json merge_census(nlohmann::json base, const std::vector<census_part>& parts, const census_window& w);

/// One row (user, worker or group, as its member's census shows it) tagged
/// with the member `node` it comes from, its worker ids qualified.
nlohmann::json tag_member_row(nlohmann::json row, const std::string& node);

/// A member's `nodes` entry: its facts and, from `doc` (or its last known
/// facts), its health, totals, groups and workers.
nlohmann::json node_entry(const census_part& part, bool qualify);

}  // namespace troupe::registry
