#include "actors/response_headers.hpp"

#include "registry/url.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace troupe {

namespace {

// A field value: visible characters, spaces, tabs and obs-text; no control character.
bool is_field_value(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

// RFC 6265 §4.1.1 cookie-octet, optionally between double quotes.
bool is_cookie_value(std::string_view s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"')
    s = s.substr(1, s.size() - 2);
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u == 0x21 || (u >= 0x23 && u <= 0x2b) || (u >= 0x2d && u <= 0x3a) || (u >= 0x3c && u <= 0x5b) ||
           (u >= 0x5d && u <= 0x7e);
  });
}

// An attribute's value (Path, Domain): a field value without ';'.
bool is_attribute_value(std::string_view s) {
  return is_field_value(s) && s.find(';') == std::string_view::npos;
}

// Hop-by-hop (RFC 9110 §7.6.1) and framing headers: the front writes these itself.
constexpr std::array<std::string_view, 8> platform_headers = {
  "Connection", "Content-Length", "Transfer-Encoding", "Keep-Alive", "TE", "Trailer", "Upgrade", "Proxy-Connection"};

std::string quoted_name(std::string_view name) {
  return registry::is_http_token(name) ? "\"" + std::string(name) + "\"" : "(a name that is not a token)";
}

}  // namespace

std::string header_problem(std::string_view name, std::string_view value) {
  if (!registry::is_http_token(name))
    return "a header name must be a token (letters, digits and !#$%&'*+-.^_`|~)";
  for (auto owned : platform_headers)
    if (registry::iequals(name, owned))
      return "header " + quoted_name(name) + " is the platform's (hop-by-hop or framing)";
  if (!is_field_value(value))
    return "the value of header " + quoted_name(name) + " holds a control character (CR, LF, NUL, …)";
  if (registry::iequals(name, "Set-Cookie")) {
    auto cookie_name = value.substr(0, value.find('='));
    while (!cookie_name.empty() && (cookie_name.back() == ' ' || cookie_name.back() == '\t'))
      cookie_name.remove_suffix(1);
    while (!cookie_name.empty() && (cookie_name.front() == ' ' || cookie_name.front() == '\t'))
      cookie_name.remove_prefix(1);  // browsers trim the name on both sides
    if (registry::iequals(cookie_name, platform_cookie))
      return "the cookie " + std::string(platform_cookie) + " is the platform's";
  }
  return {};
}

set_cookie make_set_cookie(std::string_view name, std::string_view value, const cookie_attributes& a) {
  set_cookie out;
  if (!registry::is_http_token(name))
    out.problem = "a cookie name must be a token";
  else if (registry::iequals(name, platform_cookie))
    out.problem = "the cookie " + std::string(platform_cookie) + " is the platform's";
  else if (!is_cookie_value(value))
    out.problem = "the value of cookie " + quoted_name(name) +
                  " holds a character a cookie cannot carry (space, \", comma, ;, \\ or a control character)";
  else if (!is_attribute_value(a.path))
    out.problem = "the Path of cookie " + quoted_name(name) + " holds ';' or a control character";
  else if (!is_attribute_value(a.domain) || a.domain.find(' ') != std::string::npos)
    out.problem = "the Domain of cookie " + quoted_name(name) + " holds a space, ';' or a control character";
  std::string_view same_site;
  for (std::string_view known : {"Strict", "Lax", "None"})
    if (registry::iequals(a.same_site, known))
      same_site = known;
  if (out.problem.empty() && !a.same_site.empty() && same_site.empty())
    out.problem = "the SameSite of cookie " + quoted_name(name) + " must be Strict, Lax or None";
  if (out.problem.empty() && same_site == "None" && !a.secure)
    out.problem = "cookie " + quoted_name(name) + " has SameSite=None without Secure (browsers drop it)";
  if (!out.problem.empty())
    return out;
  out.line.reserve(name.size() + value.size() + 64);
  out.line.append(name).append("=").append(value);
  if (a.max_age)
    out.line.append("; Max-Age=").append(std::to_string(std::max<std::int64_t>(0, *a.max_age)));
  if (!a.path.empty())
    out.line.append("; Path=").append(a.path);
  if (!a.domain.empty())
    out.line.append("; Domain=").append(a.domain);
  if (a.secure)
    out.line.append("; Secure");
  if (a.http_only)
    out.line.append("; HttpOnly");
  if (!same_site.empty())
    out.line.append("; SameSite=").append(same_site);
  return out;
}

std::string take_headers(response& in, std::string& content_type, std::vector<http_header>& out) {
  if (!in.invalid.empty())
    return in.invalid;
  for (auto& [name, value] : in.headers)
    if (auto problem = header_problem(name, value); !problem.empty())
      return problem;
  out.reserve(out.size() + in.headers.size());
  for (auto& [name, value] : in.headers) {
    if (registry::iequals(name, "Content-Type"))
      content_type = std::move(value);
    else
      out.push_back(http_header{std::move(name), std::move(value)});
  }
  in.headers.clear();
  return {};
}

}  // namespace troupe
