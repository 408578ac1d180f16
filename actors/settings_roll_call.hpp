#pragma once
/// \file
/// The leader orchestrator's roll call (actors/orchestrator.hpp): which
/// members receive the cluster's generations and what each answered to the
/// last one it was given. The plain logic behind
/// GET /_troupe/orchestration/status's `members` in a cluster.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace troupe {

class settings_roll_call {
public:
  /// Member `node` subscribed (again: what it had answered is forgotten).
  void join(const std::string& node) { members_[node] = {}; }
  /// Member `node` is gone (its orchestrator went down).
  void leave(const std::string& node) { members_.erase(node); }
  void clear() { members_.clear(); }
  bool has(const std::string& node) const { return members_.count(node) != 0; }

  /// Member `node` answered: its generation in force now, its outcome
  /// (applied | unchanged | rejected) and, when rejected, why.
  void answered(const std::string& node, std::uint64_t generation, const std::string& outcome,
                const std::string& detail) {
    if (auto m = members_.find(node); m != members_.end())
      m->second = {generation, outcome, detail};
  }
  /// Member `node` did not answer (why: the error).
  void unanswered(const std::string& node, const std::string& why) { answered(node, 0, "unanswered", why); }

  /// Every member with its generation and whether it acknowledged `in_force`:
  /// the leader `self` first (it is in force there by definition), then the
  /// others by name. A member that has not answered yet shows generation null.
  nlohmann::json members(const std::string& self, std::uint64_t in_force) const {
    auto out = nlohmann::json::array();
    out.push_back({{"node", self}, {"generation", in_force}, {"acknowledged", true}, {"outcome", "leader"}});
    for (auto& [node, m] : members_) {
      nlohmann::json one{{"node", node},
                         {"generation", m.outcome.empty() || m.generation == 0 ? nlohmann::json() : nlohmann::json(m.generation)},
                         {"acknowledged", m.generation == in_force && m.outcome != "rejected"},
                         {"outcome", m.outcome.empty() ? "pending" : m.outcome}};
      if (!m.detail.empty())
        one["detail"] = m.detail;
      out.push_back(std::move(one));
    }
    return out;
  }

private:
  struct answer {
    std::uint64_t generation = 0;
    std::string outcome;  // "" = not answered yet
    std::string detail;
  };
  std::map<std::string, answer> members_;
};

}  // namespace troupe
