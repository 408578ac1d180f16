#include "transport/cors.hpp"

#include "registry/url.hpp"

#include <algorithm>

namespace troupe {

namespace {

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (auto& i : items)
    out.append(out.empty() ? "" : ", ").append(i);
  return out;
}

// Allow-Origin and what goes with it, for an allowed origin.
void allow_origin(const config::cors_settings& entry, std::string_view origin, std::vector<http_header>& out) {
  bool any = !entry.credentials && std::find(entry.origins.begin(), entry.origins.end(), "*") != entry.origins.end();
  out.push_back({"Access-Control-Allow-Origin", any ? std::string("*") : std::string(origin)});
  if (entry.credentials)
    out.push_back({"Access-Control-Allow-Credentials", "true"});
}

}  // namespace

const config::cors_settings* cors_policy::match(std::string_view origin) const {
  if (origin.empty())
    return nullptr;
  for (auto& e : entries_)
    for (auto& o : e.origins)
      if (o == "*" || o == origin)  // an origin is compared as the browser serialized it
        return &e;
  return nullptr;
}

cors_policy::preflight_answer cors_policy::preflight(std::string_view origin, std::string_view method,
                                                     std::string_view request_headers) const {
  preflight_answer a;
  // Every answer depends on the Origin: a cache between must keep them apart.
  a.headers.push_back({"Vary", "Origin"});
  auto* entry = match(origin);
  if (!entry) {
    a.why = "origin " + std::string(origin) + " is not allowed ([[cors]] origins)";
    return a;
  }
  if (std::find(entry->methods.begin(), entry->methods.end(), method) == entry->methods.end()) {
    a.why = "method " + std::string(method) + " is not allowed for origin " + std::string(origin) +
            " ([[cors]] methods: " + comma_list(entry->methods) + ")";
    return a;
  }
  while (!request_headers.empty()) {
    auto comma = request_headers.find(',');
    auto name = registry::trim_ows(request_headers.substr(0, comma));
    request_headers = comma == std::string_view::npos ? std::string_view{} : request_headers.substr(comma + 1);
    if (name.empty())
      continue;
    if (std::none_of(entry->headers.begin(), entry->headers.end(), [&](auto& h) { return registry::iequals(h, name); })) {
      a.why = "header " + std::string(name) + " is not allowed for origin " + std::string(origin) +
              " ([[cors]] headers: " + comma_list(entry->headers) + ")";
      return a;
    }
  }
  a.allowed = true;
  allow_origin(*entry, origin, a.headers);
  a.headers.push_back({"Access-Control-Allow-Methods", comma_list(entry->methods)});
  if (!entry->headers.empty())
    a.headers.push_back({"Access-Control-Allow-Headers", comma_list(entry->headers)});
  a.headers.push_back({"Access-Control-Max-Age", std::to_string(entry->max_age_seconds)});
  return a;
}

std::vector<http_header> cors_policy::answer_headers(std::string_view origin) const {
  std::vector<http_header> out;
  if (entries_.empty())
    return out;
  out.push_back({"Vary", "Origin"});
  if (auto* entry = match(origin))
    allow_origin(*entry, origin, out);
  return out;
}

}  // namespace troupe
