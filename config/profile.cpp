#include "config/profile.hpp"

#include "config/recipe_fields.hpp"
#include "registry/ids.hpp"

#include <openssl/sha.h>
#include <toml.hpp>

#include <charconv>
#include <fstream>
#include <sstream>

namespace troupe::config {

using namespace detail;

namespace {

constexpr std::size_t max_profile_bytes = 1 << 20;

// A TOML document as the same JSON (a date or time, which no key takes, is refused).
nlohmann::json as_json(const toml::value& v, const std::string& label) {
  if (v.is_table()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [k, item] : v.as_table(std::nothrow))
      out[k] = as_json(item, label);
    return out;
  }
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& item : v.as_array(std::nothrow))
      out.push_back(as_json(item, label));
    return out;
  }
  if (v.is_string())
    return v.as_string(std::nothrow).str;
  if (v.is_boolean())
    return v.as_boolean(std::nothrow);
  if (v.is_integer())
    return v.as_integer(std::nothrow);
  if (v.is_floating())
    return v.as_floating(std::nothrow);
  throw recipe_error("", label + ": a date or time, which no key takes");
}

std::string json_text(const nlohmann::json& v, const std::string& key, const std::string& label) {
  auto refuse = [&](const std::string& what) { return recipe_error(key, label + ": " + key, what); };
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_boolean())
    return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer())
    return v.dump();
  if (v.is_number_float())
    return number(v.get<double>());
  if (v.is_array()) {
    std::string out;
    for (auto& item : v) {
      if (!item.is_string())
        throw refuse("expected an array of strings");
      auto s = item.get<std::string>();
      if (s.find(',') != std::string::npos)
        throw refuse("an item holds a comma, which a profile cannot carry (" + quote(s) + ")");
      out += (out.empty() ? "" : ",") + s;
    }
    return out;
  }
  throw refuse("expected a string, number, boolean or array of strings");
}

// Walks SECTION.KEY and group.NAME.KEY of a profile's object.
void walk(const nlohmann::json& root, const std::string& label, profile_entries& out) {
  for (auto& [section, body] : root.items()) {
    if (!body.is_object())
      throw recipe_error(section, label + ": " + section, "expected a table of keys ([" + section + "])");
    for (auto& [name, value] : body.items()) {
      std::string key = section + "." + name;
      if (section == "group") {
        if (!value.is_object())
          throw recipe_error(key, label + ": " + key, "expected a table of the group's keys ([group." + name + "])");
        for (auto& [gkey, gvalue] : value.items())
          out.emplace_back(key + "." + gkey, json_text(gvalue, key + "." + gkey, label));
        continue;
      }
      if (value.is_object())
        throw recipe_error(key, label + ": " + key, "expected a value, got a table");
      out.emplace_back(key, json_text(value, key, label));
    }
  }
}

bool valid_profile_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name.front() == '.')
    return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

template <class S>
void flatten_section(const S& s, const std::vector<field<S>>& fields, const std::string& prefix, bool hide,
                     nlohmann::json& out) {
  for (auto& f : fields)
    std::visit(
      [&](auto ptr) {
        const auto& v = s.*ptr;
        if (f.secret && hide) {
          out[prefix + "." + f.name] = "***";
          return;
        }
        out[prefix + "." + f.name] = v;
      },
      f.ptr);
}

}  // namespace

profile_entries parse_profile(const std::string& text, profile_format format, const std::string& label) {
  if (text.size() > max_profile_bytes)
    throw recipe_error("", label + ": larger than " + std::to_string(max_profile_bytes) + " bytes");
  profile_entries out;
  if (format == profile_format::json) {
    nlohmann::json root;
    try {
      root = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw recipe_error("", label + ": not JSON: " + std::string(e.what()));
    }
    if (!root.is_object())
      throw recipe_error("", label + ": expected a JSON object of sections");
    walk(root, label, out);
    return out;
  }
  toml::value root;
  try {
    std::istringstream in(text);
    root = toml::parse(in, label);
  } catch (const toml::exception& e) {
    auto what = std::string(e.what());
    throw recipe_error("", label + ":" + std::to_string(e.location().line()) + ": " + what.substr(0, what.find('\n')));
  } catch (const std::exception& e) {
    throw recipe_error("", label + ": " + std::string(e.what()));
  }
  walk(as_json(root, label), label, out);
  return out;
}

profile_entries read_profile(const std::string& folder, const std::string& name) {
  if (!valid_profile_name(name))
    throw recipe_error("orchestration.profile_name",
                       quote(name) + " is not a profile name (letters, digits, '-', '_', '.'; not starting with '.')");
  if (folder.empty())
    throw profile_not_found("orchestration.profiles_path",
                            "no profile " + quote(name) + ": orchestration.profiles_path is not set");
  std::string path = folder + "/" + name + ".toml";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw profile_not_found("orchestration.profile_name", "no profile " + quote(name) + " (" + path + " is not there)");
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_profile_bytes)
      break;
  }
  if (in.bad())
    throw recipe_error("orchestration.profile_name", "cannot read " + path);
  return parse_profile(text, profile_format::toml, path);
}

nlohmann::json flatten(const recipe& r, bool hide_secrets) {
  nlohmann::json out = nlohmann::json::object();
  flatten_section(r.node, node_fields(), "node", hide_secrets, out);
  flatten_section(r.limits, limits_fields(), "limits", hide_secrets, out);
  flatten_section(r.deposit, deposit_fields(), "deposit", hide_secrets, out);
  flatten_section(r.commander, commander_fields(), "commander", hide_secrets, out);
  flatten_section(r.cluster, cluster_fields(), "cluster", hide_secrets, out);
  flatten_section(r.channel, channel_fields(), "channel", hide_secrets, out);
  flatten_section(r.log, log_fields(), "log", hide_secrets, out);
  flatten_section(r.orchestration, orchestration_fields(), "orchestration", hide_secrets, out);
  for (auto& g : r.groups)
    flatten_section(g, group_fields(), "group." + g.name, hide_secrets, out);
  for (std::size_t i = 0; i < r.cors.size(); ++i)
    flatten_section(r.cors[i], cors_fields(), "cors[" + std::to_string(i + 1) + "]", hide_secrets, out);
  for (std::size_t i = 0; i < r.statics.size(); ++i)
    flatten_section(r.statics[i], static_fields(), "static[" + std::to_string(i + 1) + "]", hide_secrets, out);
  return out;
}

std::string settings_digest(const recipe& r) {
  auto text = flatten(r, false).dump();  // the keys sorted: one text per composition
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), md);
  return registry::hex_of(md, sizeof md);
}

nlohmann::json settings_with_levels(const recipe_sources& sources) {
  // Each level's composition on top of the ones below it: a key belongs to the
  // highest level that changed it.
  static const char* const names[] = {"default", "recipe", "profile", "environment", "set"};
  std::vector<nlohmann::json> stages;
  nlohmann::json shown;
  recipe_sources partial;
  for (int level = 0; level < 5; ++level) {
    if (level == 1) partial.file = sources.file;
    if (level == 2) partial.profile = sources.profile;
    if (level == 3) partial.env = sources.env;
    if (level == 4) partial.sets = sources.sets;
    recipe r;
    auto problems = compose_recipe(partial, r);
    if (!problems.empty()) {
      if (level == 4)
        throw problems.front();
      stages.push_back(stages.empty() ? nlohmann::json::object() : stages.back());  // an invalid middle: judged whole at the end
      continue;
    }
    stages.push_back(flatten(r, false));  // secrets compared as they are, shown hidden below
    if (level == 4)
      shown = flatten(r, true);
  }
  nlohmann::json out = nlohmann::json::object();
  for (auto& [key, value] : shown.items()) {
    const char* level = names[0];
    for (int l = 1; l < 5; ++l) {
      auto below = stages[static_cast<std::size_t>(l - 1)].find(key);
      auto here = stages[static_cast<std::size_t>(l)].find(key);
      if (here != stages[static_cast<std::size_t>(l)].end() &&
          (below == stages[static_cast<std::size_t>(l - 1)].end() || *below != *here))
        level = names[l];
    }
    out[key] = {{"value", value}, {"level", level}};
  }
  return out;
}

}  // namespace troupe::config
