// Profiles in a cluster (issue 27, docs/config.md "Profiles in a cluster"):
// an apply made through any member becomes the cluster's next generation,
// stored in the deposit by the leader and acknowledged by every member; a
// member that joins later receives the generation in force; when the
// leader's member is killed, the next leader continues from the stored
// generation and the members follow it.
#include "../support/cluster_fixture.hpp"
#include "../support/test_support.hpp"

#include "store/deposit.hpp"
#include "store/parcel.hpp"

#include <fstream>
#include <iterator>

namespace profiles_cluster_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

const std::string token = "profiles-cluster-" + random_token(16);
headers_t bearer() { return {{"Authorization", "Bearer " + token}}; }

const std::string freeze_key = "group.default.user_idle_freeze_minutes";

class ProfilesCluster : public ::testing::Test {
protected:
  void TearDown() override {
    if (HasFailure())
      std::cerr << "\n==== cluster diagnostics (test failed) ====\n" << cluster_.diagnostics() << std::endl;
  }

  uint16_t port(std::size_t i) { return cluster_.member(i).port(); }

  response admin(std::size_t i, const std::string& method, const std::string& path, const std::string& body = {}) {
    http_client c(port(i));
    headers_t h = bearer();
    if (!body.empty())
      h.push_back({"Content-Type", "application/json"});
    return c.request(method, path, body, h, milliseconds(15000));
  }

  json status(std::size_t i) {
    auto r = admin(i, "GET", "/_troupe/orchestration/status");
    return r.status == 200 ? r.json() : json();
  }

  // Whether member i's status lists `expected` members, every one acknowledging `generation`.
  bool all_acknowledge(std::size_t i, std::size_t expected, std::uint64_t generation, std::string* seen) {
    auto s = status(i);
    *seen = s.dump();
    if (!s.is_object() || s.value("generation", 0u) != generation || s["members"].size() != expected)
      return false;
    for (auto& m : s["members"])
      if (m.value("acknowledged", false) != true || m["generation"] != generation)
        return false;
    return true;
  }

  // Member i's own settings in force: (generation, the idle freeze, its level).
  std::tuple<std::uint64_t, double, std::string> freeze_on(std::size_t i) {
    auto r = admin(i, "GET", "/_troupe/config");
    if (r.status != 200)
      return {0, -1, ""};
    auto c = r.json();
    return {c.value("generation", 0u), c["settings"][freeze_key]["value"].get<double>(),
            c["settings"][freeze_key]["level"].get<std::string>()};
  }

  // The record the leader keeps in the shared deposit.
  json stored_record() {
    auto path = troupe::store::filesystem_parcel_path(cluster_.deposit_dir(), troupe::store::parcel_kind::user,
                                                      "%orchestration");
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return json();
    troupe::store::bytes raw{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto p = troupe::store::decode(raw);
    return json::parse(std::string(p.payload.begin(), p.payload.end()));
  }

  cluster_fixture cluster_{cluster_fixture::options{{"--admin-token", token}, milliseconds(20000)}};
};

}  // namespace

TEST_F(ProfilesCluster, EveryMemberAcknowledgesALateJoinerReceivesAndATakeoverContinuesTheStoredGeneration) {
  cluster_.start(3);
  std::string seen;
  ASSERT_TRUE(eventually([&] { return all_acknowledge(0, 3, 1, &seen); }, milliseconds(15000))) << seen;
  EXPECT_EQ(status(0)["leader"], "n1");

  // Through n2, which is not the leader: relayed, applied, stored, published.
  auto r = admin(1, "POST", "/_troupe/orchestration/apply", R"({"group":{"default":{"user_idle_freeze_minutes":7}}})");
  ASSERT_STATUS(r, 200);
  auto applied = r.json();
  EXPECT_EQ(applied["outcome"], "applied");
  EXPECT_EQ(applied["generation"], 2);
  ASSERT_EQ(applied["changed_settings"].size(), 1u);
  EXPECT_EQ(applied["changed_settings"][0]["key"], freeze_key);
  for (std::size_t i : {0, 1, 2})
    EXPECT_TRUE(eventually([&] { return all_acknowledge(i, 3, 2, &seen); }, milliseconds(10000)))
      << "n" << i + 1 << " answers the cluster's status: " << seen;
  for (std::size_t i : {0, 1, 2}) {
    auto [generation, minutes, level] = freeze_on(i);
    EXPECT_EQ(generation, 2u) << "n" << i + 1;
    EXPECT_EQ(minutes, 7) << "n" << i + 1;
    EXPECT_EQ(level, "profile") << "n" << i + 1;
  }
  auto record = stored_record();
  EXPECT_EQ(record.value("generation", 0u), 2u) << record.dump();
  EXPECT_EQ(record.value("source", ""), "inline") << record.dump();

  // The same values again, through n3: nothing changes, not the generation.
  r = admin(2, "POST", "/_troupe/orchestration/apply", R"({"group":{"default":{"user_idle_freeze_minutes":7}}})");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json()["outcome"], "unchanged");
  EXPECT_EQ(r.json()["generation"], 2);

  // A member joining later receives the generation in force.
  auto late = cluster_.add();
  EXPECT_TRUE(eventually([&] { return std::get<0>(freeze_on(late)) == 2u; }, milliseconds(10000)));
  EXPECT_EQ(std::get<1>(freeze_on(late)), 7);
  EXPECT_TRUE(eventually([&] { return all_acknowledge(0, 4, 2, &seen); }, milliseconds(10000))) << seen;

  // The leader's member dies: n2 leads, from the stored generation, and the next apply is generation 3 everywhere.
  cluster_.kill9(0);
  ASSERT_TRUE(eventually([&] { return status(1).value("leader", json()) == "n2"; }, milliseconds(20000)))
    << status(1).dump();
  EXPECT_EQ(status(1)["generation"], 2);
  ASSERT_TRUE(eventually([&] {
    r = admin(2, "POST", "/_troupe/orchestration/apply", R"({"group":{"default":{"user_idle_freeze_minutes":9}}})");
    return r.status == 200;
  }, milliseconds(15000))) << r.describe();
  EXPECT_EQ(r.json()["generation"], 3);
  for (std::size_t i : {1, 2, 3})
    EXPECT_TRUE(eventually([&] { return all_acknowledge(i, 3, 3, &seen); }, milliseconds(10000)))
      << "n" << i + 1 << ": " << seen;
  EXPECT_EQ(std::get<1>(freeze_on(late)), 9);
  EXPECT_TRUE(eventually([&] { return stored_record().value("generation", 0u) == 3u; }, milliseconds(5000)));
}

TEST_F(ProfilesCluster, AProfileThatAMemberCannotComposeIsRefusedByTheLeaderAndNothingChanges) {
  cluster_.start(2);
  std::string seen;
  ASSERT_TRUE(eventually([&] { return all_acknowledge(1, 2, 1, &seen); }, milliseconds(15000))) << seen;
  auto r = admin(1, "POST", "/_troupe/orchestration/apply", R"({"limits":{"max_inflight":5},"group":{"nope":{"guest_idle_seconds":1}}})");
  ASSERT_STATUS(r, 400);
  auto body = r.json();
  EXPECT_EQ(body["outcome"], "rejected");
  EXPECT_GE(body["violations"].size(), 2u) << body.dump();
  for (std::size_t i : {0, 1})
    EXPECT_EQ(status(i)["generation"], 1) << "n" << i + 1;
  // The leader, to which n2 relayed it, logged the refusal with its violations.
  auto log = admin(0, "GET", "/_troupe/orchestration/log");
  ASSERT_STATUS(log, 200);
  EXPECT_NE(log.body.find("refused"), std::string::npos) << log.body;
  EXPECT_NE(log.body.find("needs a restart"), std::string::npos) << log.body;
}

// A member cut off from its majority serves nothing and applies nothing.
// Two members, the oldest stopped: an even split, and the side with the
// oldest lives (docs/CLUSTER.md "Fencing"), so n2 fences itself.
TEST_F(ProfilesCluster, AMemberWithoutItsMajorityAnswers503AndAppliesNothing) {
  cluster_.start(2);
  std::string seen;
  ASSERT_TRUE(eventually([&] { return all_acknowledge(1, 2, 1, &seen); }, milliseconds(15000))) << seen;
  cluster_.pause(0);
  ASSERT_TRUE(eventually([&] {
    return metric(port(1), bearer(), "troupe_cluster_members", "state=\"self_fenced\"") == 1;
  }, milliseconds(15000))) << "n2 without n1 fences itself";
  auto r = admin(1, "POST", "/_troupe/orchestration/apply", R"({"group":{"default":{"guest_idle_seconds":9}}})");
  EXPECT_EQ(r.status, 503) << r.describe();
  EXPECT_NE(r.body.find("not serving"), std::string::npos) << r.describe();
  EXPECT_EQ(status(1)["generation"], 1) << "nothing was applied";
  cluster_.resume(0);
}

}  // namespace profiles_cluster_test_file
