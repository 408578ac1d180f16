// IP networks and the client address behind trusted proxies (node.trusted_proxies).
#include "registry/ip_network.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ip_network_test_file {

using namespace troupe::registry;

std::vector<ip_network> nets(std::initializer_list<const char*> texts) {
  std::vector<ip_network> out;
  for (auto t : texts)
    out.push_back(*parse_network(t));
  return out;
}

TEST(ip_network, parses_networks_and_refuses_what_is_none) {
  for (auto ok : {"10.0.0.0/8", "127.0.0.1", "127.0.0.1/32", "0.0.0.0/0", "::1", "::1/128", "2001:db8::/32", "::/0",
                  "10.1.2.3/8"})
    EXPECT_TRUE(parse_network(ok)) << ok;
  for (auto bad : {"", "10.0.0.0/", "10.0.0.0/33", "::1/129", "10.0.0/8", "10.0.0.0/8/8", "10.0.0.0/-1", "10.0.0.0/x",
                   "host.example", "10.0.0.0 /8", " 10.0.0.0/8", "::ffff:10.0.0.0/104", "1.2.3.4:80"})
    EXPECT_FALSE(parse_network(bad)) << bad;
}

TEST(ip_network, contains_by_prefix) {
  auto ten = *parse_network("10.0.0.0/8");
  EXPECT_TRUE(contains(ten, "10.255.1.2"));
  EXPECT_FALSE(contains(ten, "11.0.0.1"));
  EXPECT_TRUE(contains(ten, "::ffff:10.1.2.3")) << "an IPv4-mapped address is its IPv4 address";
  EXPECT_FALSE(contains(ten, "::1"));
  EXPECT_FALSE(contains(ten, "not an address"));
  auto odd = *parse_network("192.168.4.0/22");
  EXPECT_TRUE(contains(odd, "192.168.7.255"));
  EXPECT_FALSE(contains(odd, "192.168.8.0"));
  auto v6 = *parse_network("2001:db8::/33");
  EXPECT_TRUE(contains(v6, "2001:db8:7fff::1"));
  EXPECT_FALSE(contains(v6, "2001:db8:8000::1"));
  EXPECT_FALSE(contains(v6, "10.0.0.1"));
  EXPECT_TRUE(contains(*parse_network("0.0.0.0/0"), "203.0.113.9"));
  EXPECT_TRUE(contains(*parse_network("127.0.0.1"), "127.0.0.1"));
  EXPECT_FALSE(contains(*parse_network("127.0.0.1"), "127.0.0.2"));
}

TEST(ip_network, the_client_is_the_peer_unless_the_peer_is_a_trusted_proxy) {
  auto proxies = nets({"10.0.0.0/8", "::1"});
  // No trusted proxies, or a peer that is not one: the headers are anybody's words.
  EXPECT_EQ(client_address("203.0.113.5", {}, "for=198.51.100.1", "198.51.100.1"), "203.0.113.5");
  EXPECT_EQ(client_address("203.0.113.5", proxies, "for=198.51.100.1", "198.51.100.1"), "203.0.113.5");
  // From a trusted proxy: the right-most address that is not a trusted proxy.
  EXPECT_EQ(client_address("10.0.0.2", proxies, "", "198.51.100.1"), "198.51.100.1");
  EXPECT_EQ(client_address("10.0.0.2", proxies, "", "6.6.6.6, 198.51.100.1, 10.0.0.9"), "198.51.100.1")
    << "what the client wrote itself (6.6.6.6) is left of the first untrusted hop";
  EXPECT_EQ(client_address("10.0.0.2", proxies, "", "10.0.0.7, 10.0.0.9"), "10.0.0.7") << "all trusted: the left-most";
  EXPECT_EQ(client_address("10.0.0.2", proxies, "", ""), "10.0.0.2") << "no header: the proxy itself";
  EXPECT_EQ(client_address("10.0.0.2", proxies, "", "unknown"), "10.0.0.2");
  EXPECT_EQ(client_address("10.0.0.2", proxies, "", "garbage, 10.0.0.9"), "10.0.0.9");
  EXPECT_EQ(client_address("::1", proxies, "", "2001:db8::7"), "2001:db8::7");
  // Forwarded (RFC 7239) wins over X-Forwarded-For; quoted, bracketed, with ports.
  EXPECT_EQ(client_address("10.0.0.2", proxies, "for=198.51.100.1;proto=https", "6.6.6.6"), "198.51.100.1");
  EXPECT_EQ(client_address("10.0.0.2", proxies, "For=\"[2001:db8::1]:4711\", for=10.0.0.9", ""), "2001:db8::1");
  EXPECT_EQ(client_address("10.0.0.2", proxies, "for=198.51.100.1:8080", ""), "198.51.100.1");
  EXPECT_EQ(client_address("10.0.0.2", proxies, "proto=https;by=10.0.0.2", "6.6.6.6"), "10.0.0.2")
    << "a Forwarded element without for= says nothing of the client";
  EXPECT_EQ(client_address("10.0.0.2", proxies, "for=_hidden", ""), "10.0.0.2");
  EXPECT_EQ(client_address("10.0.0.2", proxies, "for=\"\r\n\"", ""), "10.0.0.2");
}

}  // namespace ip_network_test_file
