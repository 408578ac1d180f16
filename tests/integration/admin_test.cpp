// The admin surface: public health, token-protected metrics (Prometheus text), 404 for
// all of /_troupe/ (health aside) when no admin token is configured.
#include "../support/prometheus.hpp"
#include "../support/test_support.hpp"

#include <regex>
#include <sstream>

namespace admin_test_file {

using namespace troupe::test;
using nlohmann::json;

namespace {

class Admin : public node_test {};

const std::string token = "s3cret-admin-token-" + random_token(12);


headers_t bearer(const std::string& t) { return {{"Authorization", "Bearer " + t}}; }

}  // namespace

TEST_F(Admin, HealthIsPublic) {
  start();
  http_client c(port());
  auto r = c.get("/_troupe/health");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json(), json({{"status", "ok"}})) << r.body;
}

TEST_F(Admin, HealthIsPublicWithATokenToo) {
  start({"--admin-token", token});
  http_client c(port());
  auto r = c.get("/_troupe/health");
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.json().value("status", ""), "ok") << r.body;
}

TEST_F(Admin, WithoutATokenTheAdminSurfaceIs404) {
  start();
  http_client c(port());
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics"), 404));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", bearer("anything")), 404));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/console"), 404));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/whatever"), 404));
}

TEST_F(Admin, MetricsNeedTheBearerToken) {
  start({"--admin-token", token});
  http_client c(port());
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics"), 401));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", bearer("wrong")), 401));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", bearer(token + "x")), 401));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", bearer(token.substr(0, 5))), 401));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", bearer("")), 401));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", {{"Authorization", "Basic " + token}}), 401));
  EXPECT_TRUE(is_json_error(c.get("/_troupe/metrics", {{"Authorization", token}}), 401));
  // The token never shows up in a reply.
  auto r = c.get("/_troupe/metrics", bearer("wrong"));
  EXPECT_EQ(r.body.find(token), std::string::npos);
  // Everything else under /_troupe/ is protected as well.
  EXPECT_TRUE(is_json_error(c.get("/_troupe/whatever"), 401));
  EXPECT_EQ(c.get("/_troupe/whatever", bearer(token)).status, 404);
}

TEST_F(Admin, MetricsArePrometheusText) {
  start({"--admin-token", token});
  // Some traffic: 5 requests answered 200, one 404, one page.
  http_client u(port());
  for (int i = 0; i < 4; ++i)
    ASSERT_STATUS(u.post("/api/counter/incr"), 200);
  ASSERT_STATUS(u.get("/api/counter", {{"X-Troupe-Page", "tab1"}}), 200);
  ASSERT_EQ(u.get("/api/nope").status, 404);

  http_client c(port());
  auto r = c.get("/_troupe/metrics", bearer(token));
  ASSERT_STATUS(r, 200);
  EXPECT_EQ(r.get("Content-Type").rfind("text/plain", 0), 0u) << r.describe();
  const std::string& t = r.body;

  auto ok = prometheus_sample(t, "troupe_http_requests_total{code=\"200\"}");
  ASSERT_TRUE(ok) << "no troupe_http_requests_total{code=\"200\"} sample in:\n" << t;
  EXPECT_GE(*ok, 5.0) << t;
  auto nf = prometheus_sample(t, "troupe_http_requests_total{code=\"404\"}");
  ASSERT_TRUE(nf) << "no troupe_http_requests_total{code=\"404\"} sample in:\n" << t;
  EXPECT_GE(*nf, 1.0) << t;

  for (const char* kind : {"user", "connection", "page", "worker", "group"}) {
    auto v = prometheus_sample(t, std::string("troupe_actors{kind=\"") + kind + "\"}");
    EXPECT_TRUE(v) << "no troupe_actors{kind=\"" << kind << "\"} sample in:\n" << t;
  }
  auto users = prometheus_sample(t, "troupe_actors{kind=\"user\"}");
  if (users) {
    EXPECT_GE(*users, 1.0);
  }
  auto workers = prometheus_sample(t, "troupe_actors{kind=\"worker\"}");
  if (workers) {
    EXPECT_GE(*workers, 1.0);
  }
  auto groups = prometheus_sample(t, "troupe_actors{kind=\"group\"}");
  if (groups) {
    EXPECT_GE(*groups, 1.0);
  }
  auto active = prometheus_sample(t, "troupe_users{state=\"active\"}");
  ASSERT_TRUE(active) << "no troupe_users{state=\"active\"} sample in:\n" << t;
  EXPECT_GE(*active, 1.0);

  // Counters count: three more 200s show up.
  for (int i = 0; i < 3; ++i)
    ASSERT_STATUS(u.get("/api/counter"), 200);
  auto r2 = c.get("/_troupe/metrics", bearer(token));
  ASSERT_STATUS(r2, 200);
  auto ok2 = prometheus_sample(r2.body, "troupe_http_requests_total{code=\"200\"}");
  ASSERT_TRUE(ok2);
  EXPECT_GE(*ok2, *ok + 3.0);
}

}  // namespace admin_test_file
