#pragma once
/// \file
/// The census's register and its documents, without an actor: what each member
/// said last (census_note), who went down, the JSON of a query or of one actor
/// in detail, and the queries waiting for their members' probes. The census
/// actor (actors/census.cpp) keeps only the glue — monitoring, sending the
/// probes, their timeout, the cluster's fan-out — so a unit test drives this
/// class directly (tests/actors/census_book_test.cpp).

#include "actors/census.hpp"
#include "registry/census_model.hpp"
#include "registry/short_name.hpp"

#include <caf/expected.hpp>
#include <caf/actor_control_block.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

class orchestration_log;

class census_book {
public:
  using json = nlohmann::json;
  using done_fn = std::function<void(json&&)>;

  /// A query waiting for its probes: the document, and where each live
  /// actor's answer goes in it.
  struct pending_query {
    done_fn done;
    json doc;
    struct target {
      json::json_pointer at;
      bool detail;
    };
    std::unordered_map<std::uint64_t, std::vector<target>> targets;  ///< by actor id
  };

  /// The probes a started query needs sent: its number, and each member with
  /// whether it is asked in detail.
  struct probes {
    std::uint64_t query = 0;
    std::vector<std::pair<caf::strong_actor_ptr, bool>> members;
  };

  /// The largest page of one query.
  static constexpr std::uint32_t max_limit = 1000;
  /// The orchestration log's lines in a console snapshot.
  static constexpr std::size_t console_log_lines = 20;

  census_book(node_context_ptr ctx, std::shared_ptr<orchestration_log> log);

  // -- membership ----------------------------------------------------------------------

  /// Member `actor` (reachable at `handle`) says what it is now. True: first
  /// sight of it (the actor monitors it).
  bool note(std::uint64_t actor, caf::strong_actor_ptr handle, const census_note& note);
  /// Member `actor` went down: a user is live no more, a worker or group row
  /// goes unless a newer actor took its name meanwhile.
  void down(std::uint64_t actor);
  /// Users found frozen in the deposit at start (`last`: the scan ended).
  void scanned(const std::vector<std::string>& names, bool last);
  /// User `name` was dropped: forgotten, frozen or not.
  void drop(const std::string& name);

  // -- documents -----------------------------------------------------------------------

  /// The census document for `q`; its live rows are recorded in `pq` as probe
  /// targets under `base`. `part`: another member asks for this member's part
  /// (a window up to registry::max_cluster_window; an unknown worker selects none).
  caf::expected<json> census_json(const census_query& q, pending_query& pq, const std::string& base,
                                  bool part = false) const;
  /// One actor by id; a live one is recorded in `pq` to be probed in detail
  /// (its figures land at `at`). errc::no_such_user when unknown.
  caf::expected<json> detail_json(const std::string& id, pending_query& pq, const std::string& at) const;
  /// The node's row: its name, uptime, memory, CPU and threads.
  json node_json() const;
  json health_json() const;
  json scan_json() const;
  /// The orchestration log's last `n` lines.
  json log_json(std::size_t n) const;
  /// The console's rates and per-route figures (this node's newest sample only:
  /// the console keeps its own chart, so every patch stays small).
  void add_console_figures(json& doc) const;
  /// Once a second: the node's counters into its rate history.
  void sample_history() const;
  /// Appends an operator action to the orchestration log.
  void record(const orchestration_entry& e) const;
  /// The settings in force: the generation is stamped on every later line
  /// that names none; the three are the census's `settings`.
  void settings_in_force(std::uint64_t generation, std::string source, std::string profile) {
    settings_generation_ = generation;
    settings_source_ = std::move(source);
    settings_profile_ = std::move(profile);
  }
  /// {generation, source, active_profile (null: none)}.
  json settings_json() const;

  static json query_json(const census_query& q);
  static std::string dump(const json& j);

  // -- probes --------------------------------------------------------------------------

  /// Takes `pq` to answer through `done` once every target answered or timed
  /// out: the probes to send, or nothing when no live target is left (`done`
  /// has run then).
  std::optional<probes> start(pending_query&& pq, done_fn done);
  /// Actor `actor`'s answer to its probe: its figures into the document; the
  /// query's `done` runs when it was the last one awaited.
  void probe_answered(std::uint64_t actor, const actor_probe& p);
  /// Query `query`'s time is up: whoever did not answer is marked "timeout".
  void probe_timeout(std::uint64_t query);
  /// Queries waiting for probes.
  std::size_t pending() const noexcept { return pending_.size(); }

private:
  struct member {
    actor_kind kind;
    registry::short_name name;  // one per live user: a guest's name inline, no allocation (S5)
    caf::strong_actor_ptr handle;
  };
  struct worker_info {
    std::string group;
    std::uint64_t actor = 0;
    std::uint8_t state = 0;  // 0 in service, 1 draining
    std::uint32_t restarts = 0;
  };
  struct group_info {
    std::string user_type;
    std::uint64_t actor = 0;
    std::uint32_t restarts = 0;
    std::uint8_t state = 0;  // 0 serving, else a registry::degradation
  };

  json totals_json() const;
  json worker_row(const std::string& name, const worker_info& w) const;
  json group_row(const std::string& name, const group_info& g) const;
  json user_row(const std::string& name, const registry::user_entry& e) const;
  void finish(std::unordered_map<std::uint64_t, pending_query>::iterator q);

  node_context_ptr ctx_;
  std::shared_ptr<orchestration_log> log_;
  std::uint64_t settings_generation_ = 1;
  std::string settings_source_ = "boot", settings_profile_;
  registry::census_model model_;
  std::unordered_map<std::uint64_t, member> members_;  // by actor id
  std::map<std::string, worker_info> workers_;
  std::map<std::string, group_info> groups_;
  std::uint64_t commander_actor_ = 0;
  bool scan_done_ = false;
  std::int64_t scan_found_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::uint64_t next_query_ = 0;
  std::unordered_map<std::uint64_t, pending_query> pending_;
};

}  // namespace troupe
