// The CORS policy of [[cors]]: which origins, methods and headers a preflight
// allows, and what the answers to cross-origin requests carry.
#include "transport/cors.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cors_test_file {

using namespace troupe;

std::vector<std::pair<std::string, std::string>> pairs(const std::vector<http_header>& headers) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& h : headers)
    out.emplace_back(h.name, h.value);
  return out;
}

cors_policy shop_policy() {
  config::cors_settings shop;
  shop.origins = {"https://shop.example", "http://localhost:3000"};
  shop.methods = {"GET", "POST", "PUT"};
  shop.headers = {"Content-Type", "X-Troupe-Page"};
  shop.max_age_seconds = 120;
  shop.credentials = true;
  config::cors_settings anyone;
  anyone.origins = {"*"};
  anyone.methods = {"GET"};
  anyone.headers = {};
  return cors_policy({shop, anyone});
}

TEST(cors, a_named_origin_gets_its_entry_with_credentials) {
  auto policy = shop_policy();
  auto a = policy.preflight("https://shop.example", "PUT", "content-type, X-Troupe-Page");
  ASSERT_TRUE(a.allowed) << a.why;
  EXPECT_EQ(pairs(a.headers), (std::vector<std::pair<std::string, std::string>>{
                                {"Vary", "Origin"},
                                {"Access-Control-Allow-Origin", "https://shop.example"},
                                {"Access-Control-Allow-Credentials", "true"},
                                {"Access-Control-Allow-Methods", "GET, POST, PUT"},
                                {"Access-Control-Allow-Headers", "Content-Type, X-Troupe-Page"},
                                {"Access-Control-Max-Age", "120"}}));
  EXPECT_EQ(pairs(policy.answer_headers("http://localhost:3000")),
            (std::vector<std::pair<std::string, std::string>>{{"Vary", "Origin"},
                                                               {"Access-Control-Allow-Origin", "http://localhost:3000"},
                                                               {"Access-Control-Allow-Credentials", "true"}}));
}

TEST(cors, any_other_origin_falls_to_the_wildcard_entry) {
  auto policy = shop_policy();
  auto a = policy.preflight("https://other.example", "GET", "");
  ASSERT_TRUE(a.allowed) << a.why;
  EXPECT_EQ(a.headers[1].value, "*");
  EXPECT_EQ(pairs(policy.answer_headers("https://other.example")),
            (std::vector<std::pair<std::string, std::string>>{{"Vary", "Origin"}, {"Access-Control-Allow-Origin", "*"}}));
  auto post = policy.preflight("https://other.example", "POST", "");
  EXPECT_FALSE(post.allowed);
  EXPECT_NE(post.why.find("method POST"), std::string::npos) << post.why;
  auto header = policy.preflight("https://other.example", "GET", "X-Secret");
  EXPECT_FALSE(header.allowed);
  EXPECT_NE(header.why.find("X-Secret"), std::string::npos) << header.why;
}

TEST(cors, refusals_carry_no_allow_headers) {
  config::cors_settings only;
  only.origins = {"https://shop.example"};
  cors_policy policy({only});
  for (auto [origin, method, headers] : std::vector<std::tuple<const char*, const char*, const char*>>{
         {"https://evil.example", "GET", ""},
         {"https://shop.example.evil", "GET", ""},
         {"https://SHOP.example", "GET", ""},
         {"http://shop.example", "GET", ""},
         {"https://shop.example", "DELETE", ""},
         {"https://shop.example", "get", ""},
         {"https://shop.example", "POST", "Content-Type, Authorization"}}) {
    auto a = policy.preflight(origin, method, headers);
    EXPECT_FALSE(a.allowed) << origin << " " << method << " " << headers;
    EXPECT_EQ(pairs(a.headers), (std::vector<std::pair<std::string, std::string>>{{"Vary", "Origin"}}));
  }
  EXPECT_EQ(pairs(policy.answer_headers("https://evil.example")),
            (std::vector<std::pair<std::string, std::string>>{{"Vary", "Origin"}}));
  EXPECT_EQ(pairs(policy.answer_headers("")), (std::vector<std::pair<std::string, std::string>>{{"Vary", "Origin"}}));
  EXPECT_TRUE(cors_policy().answer_headers("https://shop.example").empty()) << "no [[cors]]: nothing at all";
}

}  // namespace cors_test_file
