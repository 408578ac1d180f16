#include "registry/ip_network.hpp"

#include "registry/url.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace troupe::registry {

namespace {

// The address's bytes (IPv4-mapped IPv6 as IPv4), or nullopt.
std::optional<ip_network> parse_address(std::string_view text) {
  if (text.empty() || text.size() > 45)  // the longest IPv6 text form
    return std::nullopt;
  std::string s(text);
  ip_network a;
  if (::inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.prefix = 32;
    return a;
  }
  if (::inet_pton(AF_INET6, s.c_str(), a.bytes.data()) != 1)
    return std::nullopt;
  static constexpr unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(mapped, mapped + 12, a.bytes.begin())) {
    std::copy(a.bytes.begin() + 12, a.bytes.end(), a.bytes.begin());
    std::fill(a.bytes.begin() + 4, a.bytes.end(), 0);
    a.prefix = 32;
    return a;
  }
  a.v6 = true;
  a.prefix = 128;
  return a;
}

// One hop of X-Forwarded-For ("203.0.113.7", "2001:db8::1") or a Forwarded
// node ("203.0.113.7:80", "\"[2001:db8::1]:4711\"") as a bare address, or "".
std::string_view hop_address(std::string_view node) {
  node = registry::trim_ows(node);
  if (node.size() >= 2 && node.front() == '"' && node.back() == '"')
    node = node.substr(1, node.size() - 2);
  if (!node.empty() && node.front() == '[') {  // [v6] or [v6]:port
    auto close = node.find(']');
    return close == std::string_view::npos ? std::string_view{} : node.substr(1, close - 1);
  }
  if (std::count(node.begin(), node.end(), ':') == 1)  // v4:port
    node = node.substr(0, node.find(':'));
  return node;
}

// The for= values of a Forwarded header, in order.
std::vector<std::string_view> forwarded_for(std::string_view header) {
  std::vector<std::string_view> out;
  while (!header.empty()) {
    auto comma = header.find(',');
    auto element = header.substr(0, comma);
    std::string_view found;
    while (!element.empty()) {
      auto semi = element.find(';');
      auto pair = registry::trim_ows(element.substr(0, semi));
      if (pair.size() > 4 && (pair[0] == 'f' || pair[0] == 'F') && (pair[1] == 'o' || pair[1] == 'O') &&
          (pair[2] == 'r' || pair[2] == 'R') && pair[3] == '=')
        found = pair.substr(4);
      element = semi == std::string_view::npos ? std::string_view{} : element.substr(semi + 1);
    }
    out.push_back(found);  // an element without for=: a hop that says nothing (ends the walk)
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
  }
  return out;
}

std::vector<std::string_view> split_commas(std::string_view header) {
  std::vector<std::string_view> out;
  while (!header.empty()) {
    auto comma = header.find(',');
    out.push_back(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
  }
  return out;
}

}  // namespace

std::optional<ip_network> parse_network(std::string_view text) {
  auto slash = text.find('/');
  auto net = parse_address(text.substr(0, slash));
  if (!net)
    return std::nullopt;
  if (slash == std::string_view::npos)
    return net;
  auto bits = text.substr(slash + 1);
  unsigned prefix = 0;
  auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
  unsigned max = net->v6 ? 128 : 32;
  // A mapped IPv4 network written as IPv6 ("::ffff:10.0.0.0/104") is refused: write it as IPv4.
  if (bits.empty() || ec != std::errc{} || end != bits.data() + bits.size() || prefix > max ||
      (!net->v6 && text.substr(0, slash).find(':') != std::string_view::npos))
    return std::nullopt;
  net->prefix = prefix;
  return net;
}

bool contains(const ip_network& net, std::string_view address) {
  auto a = parse_address(address);
  if (!a || a->v6 != net.v6)
    return false;
  unsigned whole = net.prefix / 8, rest = net.prefix % 8;
  if (!std::equal(net.bytes.begin(), net.bytes.begin() + whole, a->bytes.begin()))
    return false;
  if (rest == 0)
    return true;
  auto mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (net.bytes[whole] & mask) == (a->bytes[whole] & mask);
}

bool in_any(const std::vector<ip_network>& nets, std::string_view address) {
  return std::any_of(nets.begin(), nets.end(), [&](const ip_network& n) { return contains(n, address); });
}

std::string client_address(const std::string& peer, const std::vector<ip_network>& trusted,
                           std::string_view forwarded, std::string_view x_forwarded_for) {
  if (trusted.empty() || !in_any(trusted, peer))
    return peer;
  auto hops = !registry::trim_ows(forwarded).empty() ? forwarded_for(forwarded) : split_commas(x_forwarded_for);
  std::string client = peer;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    auto address = hop_address(*it);
    if (!parse_address(address))
      break;  // not an address: nothing left of it is believable
    client = std::string(address);
    if (!in_any(trusted, address))
      break;
  }
  return client;
}

}  // namespace troupe::registry
