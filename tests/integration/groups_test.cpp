// Several [[group]]s on a real node (issue 13, docs/SUPERVISION.md "Groups and
// placement"): the default group election, the notes sample's login routing
// hook (staff_* → group "staff"), a user with a past waking in his group after
// a restart that elected another default, and both groups in the census.
#include "../support/test_support.hpp"

#include <fstream>

namespace groups_test_file {

using namespace troupe::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

const std::string token = "groups-token-" + random_token(10);
const headers_t auth{{"Authorization", "Bearer " + token}};

// Two groups of the notes type; `default_group` elects where newcomers are born.
std::string recipe(const std::string& dir, const std::string& default_group) {
  auto path = dir + "/groups-" + default_group + ".toml";
  std::ofstream f(path);
  f << "[commander]\ndefault_group = \"" << default_group << "\"\n\n"
    << "[[group]]\nname = \"staff\"\nuser_type = \"notes\"\n"
    // Adoptions wait for the wake here: a user relocated from staff answers them too.
    << "durability = \"interval\"\n\n"
    << "[[group]]\nname = \"main\"\nuser_type = \"notes\"\n";
  return path;
}

class Groups : public node_test {
protected:
  node_process& start_with(const std::string& deposit, const std::string& default_group) {
    return start_on(deposit, {"--admin-token", token, "--config", recipe(config_.path, default_group)});
  }
  static std::string worker_of(http_client& c) {
    auto r = c.get("/api/whoami");
    EXPECT_STATUS(r, 200);
    return r.json().value("worker", "");
  }
  static long long incr(http_client& c) { return count_of(c.post("/api/counter/incr")); }
  scratch_dir config_{"troupe-groups-cfg-"};
};

}  // namespace

TEST_F(Groups, ANewcomerIsBornInTheElectedGroupAndTheHookRoutesStaffLogins) {
  scratch_dir deposit;
  start_with(deposit.path, "main");  // the second group
  http_client guest(port()), ann(port()), bob(port());
  EXPECT_EQ(worker_of(guest), "main-w1") << node().diagnostics();
  ASSERT_EQ(incr(ann), 1);
  ASSERT_STATUS(ann.post_json("/api/login", {{"user", "staff_ann"}}), 200);
  EXPECT_EQ(worker_of(ann), "staff-w1") << "the notes hook routes staff_* to group staff";
  EXPECT_EQ(count_of(ann.get("/api/counter")), 1) << "same user_type: the guest's store is carried";
  ASSERT_STATUS(bob.post_json("/api/login", {{"user", "bob"}}), 200);
  EXPECT_EQ(worker_of(bob), "main-w1");
  // Both groups in the census, each with its worker.
  http_client admin(port());
  auto groups = admin.get("/_troupe/census?kind=group", auth);
  ASSERT_STATUS(groups, 200);
  std::map<std::string, json> by_name;
  auto rows = groups.json()["actors"];
  for (auto& row : rows)
    by_name[row["name"].get<std::string>()] = row;
  ASSERT_EQ(by_name.size(), 2u) << groups.body;
  EXPECT_EQ(by_name["staff"]["workers"], json::array({"worker:staff-w1"}));
  EXPECT_EQ(by_name["main"]["workers"], json::array({"worker:main-w1"}));
}

TEST_F(Groups, AUserWithAPastWakesInHisGroupAfterARestartThatElectedAnother) {
  scratch_dir deposit;
  start_with(deposit.path, "main");
  http_client bob(port()), ann(port());
  ASSERT_STATUS(bob.post_json("/api/login", {{"user", "bob"}}), 200);
  ASSERT_EQ(incr(bob), 1);
  ASSERT_EQ(incr(bob), 2);
  ASSERT_STATUS(ann.post_json("/api/login", {{"user", "staff_ann"}}), 200);
  ASSERT_EQ(incr(ann), 1);
  ASSERT_EQ(worker_of(bob), "main-w1");
  node().terminate();  // the soft quit freezes both, their parcels naming their groups
  auto code = node().wait_exit(milliseconds(10000));
  ASSERT_TRUE(code.has_value());
  ASSERT_EQ(*code, 0);

  start_with(deposit.path, "staff");  // newcomers are born in staff now
  http_client b2(port()), a2(port()), newcomer(port());
  b2.set_cookie(*bob.cookie());
  a2.set_cookie(*ann.cookie());
  EXPECT_EQ(count_of(b2.get("/api/counter")), 2) << node().diagnostics();
  EXPECT_EQ(worker_of(b2), "main-w1") << "his parcel says main: he stays there";
  EXPECT_EQ(incr(b2), 3);
  EXPECT_EQ(count_of(a2.get("/api/counter")), 1);
  EXPECT_EQ(worker_of(a2), "staff-w1");
  EXPECT_EQ(worker_of(newcomer), "staff-w1") << "a newcomer is born in the default group";
}

}  // namespace groups_test_file
