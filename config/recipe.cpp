#include "config/recipe.hpp"

#include "config/recipe_fields.hpp"


#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <variant>

#include <toml.hpp>

extern char** environ;

namespace troupe::config {

using namespace detail;

namespace {

// ---------------------------------------------------------------------------
// Assignment from a TOML value (the file) and from text (env, --set).

/// Raised while assigning; the caller turns it into a recipe_error with its label.
struct bad_value {
  std::string problem;
};

const char* expected(int*) { return "expected an integer"; }
const char* expected(std::uint64_t*) { return "expected an integer"; }
const char* expected(double*) { return "expected a number"; }
const char* expected(std::string*) { return "expected a string"; }
const char* expected(bool*) { return "expected a boolean (true or false)"; }
const char* expected(std::vector<std::string>*) { return "expected an array of strings"; }

std::string toml_type(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean: return "a boolean";
    case toml::value_t::integer: return "an integer";
    case toml::value_t::floating: return "a float";
    case toml::value_t::string: return "a string";
    case toml::value_t::offset_datetime:
    case toml::value_t::local_datetime:
    case toml::value_t::local_date:
    case toml::value_t::local_time: return "a date/time";
    case toml::value_t::array: return "an array";
    case toml::value_t::table: return "a table";
    default: return "nothing";
  }
}

/// Stores the integer `v` into an integer member, refusing what it cannot hold.
template <class T>
void store_integer(T& out, std::int64_t v, const rule& r) {
  if constexpr (std::is_same_v<T, std::uint64_t>) {
    if (v < 0) {
      double lo = r.lower == rule::none ? 0 : r.lo;
      throw bad_value{"must be at least " + number(std::max(lo, 0.0)) + " (got " + std::to_string(v) + ")"};
    }
    out = static_cast<std::uint64_t>(v);
  } else {
    if (v < INT_MIN || v > INT_MAX) {
      std::string bound = v < 0 ? "must be at least " + std::to_string(r.lower == rule::none ? INT_MIN : static_cast<long long>(r.lo))
                                : "must be at most " + std::to_string(r.has_hi ? static_cast<long long>(r.hi) : INT_MAX);
      throw bad_value{bound + " (got " + std::to_string(v) + ")"};
    }
    out = static_cast<int>(v);
  }
}

void store_double(double& out, double v) {
  if (!std::isfinite(v)) throw bad_value{"must be a finite number (got " + number(v) + ")"};
  out = v;
}

template <class S>
void assign_toml(S& s, const field<S>& f, const toml::value& v) {
  std::visit(
    [&](auto ptr) {
      auto& out = s.*ptr;
      using T = std::decay_t<decltype(out)>;
      auto wrong = [&] { return bad_value{std::string(expected(&out)) + ", got " + toml_type(v)}; };
      if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string()) throw wrong();
        out = v.as_string(std::nothrow).str;
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        if (!v.is_array()) throw wrong();
        std::vector<std::string> items;
        for (auto& item : v.as_array(std::nothrow)) {
          if (!item.is_string()) throw bad_value{"expected an array of strings, got " + toml_type(item) + " in it"};
          items.push_back(item.as_string(std::nothrow).str);
        }
        out = std::move(items);
      } else if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) throw wrong();
        out = v.as_boolean(std::nothrow);
      } else if constexpr (std::is_same_v<T, double>) {
        if (v.is_integer()) out = static_cast<double>(v.as_integer(std::nothrow));
        else if (v.is_floating()) store_double(out, v.as_floating(std::nothrow));
        else throw wrong();
      } else {
        if (!v.is_integer()) throw wrong();
        store_integer(out, v.as_integer(std::nothrow), f.check);
      }
    },
    f.ptr);
}

template <class S>
void assign_text(S& s, const field<S>& f, const std::string& text) {
  std::visit(
    [&](auto ptr) {
      auto& out = s.*ptr;
      using T = std::decay_t<decltype(out)>;
      const char* b = text.data();
      const char* e = b + text.size();
      if constexpr (std::is_same_v<T, std::string>) {
        out = text;
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        // A list in an environment variable or --set: comma-separated, spaces around items ignored.
        std::vector<std::string> items;
        std::string_view rest = text;
        while (!rest.empty()) {
          auto comma = rest.find(',');
          auto item = rest.substr(0, comma);
          while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
          while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
          if (item.empty()) throw bad_value{"an empty item in the list " + quote(text)};
          items.emplace_back(item);
          rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        }
        out = std::move(items);
      } else if constexpr (std::is_same_v<T, bool>) {
        if (text == "true")
          out = true;
        else if (text == "false")
          out = false;
        else
          throw bad_value{"expected true or false (got " + quote(text) + ")"};
      } else if constexpr (std::is_same_v<T, double>) {
        double d = 0;
        auto res = std::from_chars(b, e, d);
        if (text.empty() || res.ec == std::errc::invalid_argument || res.ptr != e)
          throw bad_value{"expected a number (got " + quote(text) + ")"};
        if (res.ec == std::errc::result_out_of_range)
          throw bad_value{"must be a finite number (got " + quote(text) + ")"};
        store_double(out, d);
      } else {
        std::int64_t i = 0;
        auto res = std::from_chars(b, e, i);
        if (text.empty() || res.ec == std::errc::invalid_argument || res.ptr != e)
          throw bad_value{"expected an integer (got " + quote(text) + ")"};
        if (res.ec == std::errc::result_out_of_range)
          throw bad_value{"out of range (got " + quote(text) + ")"};
        store_integer(out, i, f.check);
      }
    },
    f.ptr);
}

// ---------------------------------------------------------------------------
// The file.

std::string at_line(const toml::value& v) {
  auto line = v.location().line();
  return line > 0 ? " (line " + std::to_string(line) + ")" : "";
}

/// A table's entries in the order they appear in the file.
std::vector<const std::pair<const std::string, toml::value>*> in_file_order(const toml::value& table) {
  std::vector<const std::pair<const std::string, toml::value>*> out;
  for (auto& kv : table.as_table(std::nothrow)) out.push_back(&kv);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) {
    auto la = a->second.location(), lb = b->second.location();
    if (la.line() != lb.line()) return la.line() < lb.line();
    if (la.column() != lb.column()) return la.column() < lb.column();
    return a->first < b->first;
  });
  return out;
}

template <class S>
void apply_table(S& s, const std::vector<field<S>>& fields, const toml::value& table,
                 const std::string& prefix, const char* skip = nullptr) {
  for (auto* kv : in_file_order(table)) {
    const std::string& name = kv->first;
    if (skip && name == skip) continue;
    std::string key = prefix + "." + name;
    auto* f = find_field(fields, name);
    if (!f) throw recipe_error(key, "unknown key" + suggestion(fields, name, prefix) + at_line(kv->second));
    try {
      assign_toml(s, *f, kv->second);
    } catch (const bad_value& bad) {
      throw recipe_error(key, bad.problem + at_line(kv->second));
    }
  }
}

template <class S>
void apply_section(S& s, const std::vector<field<S>>& fields, const toml::value& v, const std::string& section) {
  if (!v.is_table())
    throw recipe_error(section, "expected a table ([" + section + "]), got " + toml_type(v) + at_line(v));
  apply_table(s, fields, v, section);
}

std::vector<group_settings> read_groups(const toml::value& v) {
  if (!v.is_array())
    throw recipe_error("group", "expected an array of tables ([[group]]), got " + toml_type(v) + at_line(v));
  const auto& entries = v.as_array(std::nothrow);
  std::vector<group_settings> groups;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& t = entries[i];
    std::string where = "group[" + std::to_string(i + 1) + "]";
    if (!t.is_table()) throw recipe_error(where, "expected a table ([[group]]), got " + toml_type(t) + at_line(t));
    group_settings g;
    const auto& table = t.as_table(std::nothrow);
    auto name = table.find("name");
    if (name == table.end()) {
      if (entries.size() > 1)
        throw recipe_error(where + ".name", "required when there is more than one [[group]]" + at_line(t));
    } else {
      if (!name->second.is_string())
        throw recipe_error(where + ".name", "expected a string, got " + toml_type(name->second) + at_line(name->second));
      g.name = name->second.as_string(std::nothrow).str;
      if (!valid_group_name(g.name))
        throw recipe_error(where + ".name", std::string("must be ") + group_name_rule + " (got " + quote(g.name) + ")" +
                                              at_line(name->second));
      for (auto& other : groups)
        if (other.name == g.name)
          throw recipe_error("group." + g.name + ".name", "two [[group]] entries have this name" + at_line(name->second));
    }
    apply_table(g, group_fields(), t, "group." + g.name, "name");
    groups.push_back(std::move(g));
  }
  return groups;
}


/// The entries of an array of tables `[[name]]` without names, each addressed as name[N].
template <class S>
std::vector<S> read_entries(const toml::value& v, const std::string& name, const std::vector<field<S>>& fields) {
  if (!v.is_array())
    throw recipe_error(name, "expected an array of tables ([[" + name + "]]), got " + toml_type(v) + at_line(v));
  std::vector<S> entries;
  const auto& tables = v.as_array(std::nothrow);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const auto& t = tables[i];
    std::string where = name + "[" + std::to_string(i + 1) + "]";
    if (!t.is_table())
      throw recipe_error(where, "expected a table ([[" + name + "]]), got " + toml_type(t) + at_line(t));
    S entry;
    apply_table(entry, fields, t, where);
    entries.push_back(std::move(entry));
  }
  return entries;
}


// `file`: the recipe's path; a relative root is relative to its directory.
std::vector<static_settings> read_statics(const toml::value& v, const std::string& file) {
  auto mounts = read_entries(v, "static", static_fields());
  for (auto& s : mounts)
    if (!s.root.empty() && s.root.front() != '/') {
      std::error_code ec;
      auto dir = std::filesystem::absolute(file, ec).parent_path();
      s.root = (dir / s.root).lexically_normal().string();
    }
  return mounts;
}

/// toml11's first line without its "[error] " and "toml::function: " prefixes.
std::string first_line(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  if (starts_with(line, "[error] ")) line.erase(0, 8);
  if (starts_with(line, "toml::")) {
    auto colon = line.find(": ");
    if (colon != std::string::npos) line.erase(0, colon + 2);
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line.empty() ? "syntax error" : line;
}

std::string read_whole_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec) throw recipe_error("", path + ": cannot read the recipe file (" + ec.message() + ")");
  if (fs::is_directory(st)) throw recipe_error("", path + ": cannot read the recipe file (it is a directory)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw recipe_error("", path + ": cannot read the recipe file (cannot open it)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw recipe_error("", path + ": cannot read the recipe file (read error)");
  return text.str();
}

/// The offset of the first byte of `text` that is not part of well-formed
/// UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), npos if none.
std::size_t first_invalid_utf8(const std::string& text) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    unsigned char c = byte(i);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || c == 0xC0 || c == 0xC1 || c > 0xF4 || i + n > text.size()) return i;
    for (std::size_t k = 1; k < n; ++k)
      if ((byte(i + k) >> 6) != 0x2) return i;
    if (n >= 3) {
      unsigned char c1 = byte(i + 1);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
        return i;
    }
    i += n;
  }
  return std::string::npos;
}

void apply_file(recipe& r, const std::string& path, const std::optional<std::string>& read_before) {
  std::string text = read_before ? *read_before : read_whole_file(path);
  // A TOML file is UTF-8. Checked here because toml11 3.7 reads past the end of
  // its buffer while reporting some invalid UTF-8 (ToruNiina/toml11#199, found
  // by fuzz/recipe_fuzz).
  if (auto bad = first_invalid_utf8(text); bad != std::string::npos) {
    auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    throw recipe_error("", path + ":" + std::to_string(line) + ": not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
  }
  toml::value root;
  try {
    std::istringstream in(text);
    root = toml::parse(in, path);
  } catch (const toml::exception& e) {
    throw recipe_error("", path + ":" + std::to_string(e.location().line()) + ": " + first_line(e.what()));
  } catch (const std::exception& e) {
    throw recipe_error("", path + ": " + first_line(e.what()));
  }
  for (auto* kv : in_file_order(root)) {
    const std::string& name = kv->first;
    const toml::value& v = kv->second;
    if (name == "node") apply_section(r.node, node_fields(), v, name);
    else if (name == "limits") apply_section(r.limits, limits_fields(), v, name);
    else if (name == "deposit") apply_section(r.deposit, deposit_fields(), v, name);
    else if (name == "commander") apply_section(r.commander, commander_fields(), v, name);
    else if (name == "cluster") apply_section(r.cluster, cluster_fields(), v, name);
    else if (name == "channel") apply_section(r.channel, channel_fields(), v, name);
    else if (name == "log") apply_section(r.log, log_fields(), v, name);
    else if (name == "orchestration") apply_section(r.orchestration, orchestration_fields(), v, name);
    else if (name == "group") r.groups = read_groups(v);
    else if (name == "cors") r.cors = read_entries(v, "cors", cors_fields());
    else if (name == "static") r.statics = read_statics(v, path);
    else throw recipe_error(name, std::string("unknown key (the recipe has ") + sections + ")" + at_line(v));
  }
}

// ---------------------------------------------------------------------------
// --set and the environment.

template <class S>
void assign_labelled(S& s, const field<S>& f, const std::string& text, const std::string& key,
                     const std::string& label) {
  try {
    assign_text(s, f, text);
  } catch (const bad_value& bad) {
    throw recipe_error(key, label, bad.problem);
  }
}

/// Applies `value` to the section key `section.name`; false if there is no such key.
template <class S>
bool set_in(S& s, const std::vector<field<S>>& fields, const std::string& section, const std::string& name,
            const std::string& value, const std::string& label) {
  auto* f = find_field(fields, name);
  if (!f) return false;
  assign_labelled(s, *f, value, section + "." + name, label);
  return true;
}

template <class S>
[[noreturn]] void unknown(const std::vector<field<S>>& fields, const std::string& key, const std::string& name,
                          const std::string& prefix, const std::string& label) {
  throw recipe_error(key, label, "unknown key" + suggestion(fields, name, prefix));
}

// Sets the dotted `key` (SECTION.KEY or group.NAME.KEY) to `value`; `label` says where it came from.
void apply_key(recipe& r, const std::string& key, const std::string& value, const std::string& label) {
  std::vector<std::string> parts;
  for (std::size_t pos = 0;;) {
    auto dot = key.find('.', pos);
    parts.push_back(key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }

  if (parts.size() == 2) {
    const auto& sec = parts[0];
    const auto& name = parts[1];
    if (sec == "node") {
      if (!set_in(r.node, node_fields(), sec, name, value, label)) unknown(node_fields(), key, name, sec, label);
      return;
    }
    if (sec == "limits") {
      if (!set_in(r.limits, limits_fields(), sec, name, value, label)) unknown(limits_fields(), key, name, sec, label);
      return;
    }
    if (sec == "deposit") {
      if (!set_in(r.deposit, deposit_fields(), sec, name, value, label)) unknown(deposit_fields(), key, name, sec, label);
      return;
    }
    if (sec == "commander") {
      if (!set_in(r.commander, commander_fields(), sec, name, value, label))
        unknown(commander_fields(), key, name, sec, label);
      return;
    }
    if (sec == "cluster") {
      if (!set_in(r.cluster, cluster_fields(), sec, name, value, label)) unknown(cluster_fields(), key, name, sec, label);
      return;
    }
    if (sec == "channel") {
      if (!set_in(r.channel, channel_fields(), sec, name, value, label)) unknown(channel_fields(), key, name, sec, label);
      return;
    }
    if (sec == "log") {
      if (!set_in(r.log, log_fields(), sec, name, value, label)) unknown(log_fields(), key, name, sec, label);
      return;
    }
    if (sec == "orchestration") {
      if (!set_in(r.orchestration, orchestration_fields(), sec, name, value, label))
        unknown(orchestration_fields(), key, name, sec, label);
      return;
    }
    if (sec == "group") throw recipe_error(key, label, "unknown key (a group's key is group.NAME.KEY)");
  }
  if (parts.size() == 3 && parts[0] == "group") {
    const auto& gname = parts[1];
    const auto& name = parts[2];
    if (!valid_group_name(gname))
      throw recipe_error(key, label, quote(gname) + " is not a group name (" + group_name_rule + ")");
    auto* f = find_field(group_fields(), name);
    if (!f) unknown(group_fields(), key, name, "group." + gname, label);
    if (name == "name") throw recipe_error(key, label, "a group's name is not settable here; declare the group in the recipe file");
    auto it = std::find_if(r.groups.begin(), r.groups.end(), [&](auto& g) { return g.name == gname; });
    if (it == r.groups.end()) {
      // A --set naming a group that does not exist creates it, with the defaults.
      group_settings g;
      g.name = gname;
      r.groups.push_back(std::move(g));
      it = std::prev(r.groups.end());
    }
    assign_labelled(*it, *f, value, key, label);
    return;
  }
  throw recipe_error(key, label, std::string("unknown key (the recipe has ") + sections + ")");
}

void apply_set(recipe& r, const std::string& arg) {
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) throw recipe_error(arg.substr(0, eq), "--set " + arg, "expected KEY=VALUE");
  std::string key = arg.substr(0, eq);
  apply_key(r, key, arg.substr(eq + 1), "--set " + key);
}

/// Applies `value` if `var` (lowercased, without TROUPE_) is `section_key` for a key of `fields`.
template <class S>
bool env_in(S& s, const std::vector<field<S>>& fields, const std::string& section, const std::string& rest,
            const std::string& value, const std::string& var) {
  if (!starts_with(rest, section + "_")) return false;
  return set_in(s, fields, section, rest.substr(section.size() + 1), value, var);
}

void apply_env(recipe& r, const std::string& var, const std::string& value) {
  static const std::string prefix = "TROUPE_";
  if (!starts_with(var, prefix)) return;
  std::string rest = lower(var.substr(prefix.size()));

  if (env_in(r.node, node_fields(), "node", rest, value, var)) return;
  if (env_in(r.limits, limits_fields(), "limits", rest, value, var)) return;
  if (env_in(r.deposit, deposit_fields(), "deposit", rest, value, var)) return;
  if (env_in(r.commander, commander_fields(), "commander", rest, value, var)) return;
  if (env_in(r.cluster, cluster_fields(), "cluster", rest, value, var)) return;
  if (env_in(r.channel, channel_fields(), "channel", rest, value, var)) return;
  if (env_in(r.log, log_fields(), "log", rest, value, var)) return;
  if (env_in(r.orchestration, orchestration_fields(), "orchestration", rest, value, var)) return;

  if (starts_with(rest, "group_")) {
    // group_<name>_<key>: names may contain '_', so try every existing group
    // and take the longest name that leaves a known key.
    group_settings* best = nullptr;
    const field<group_settings>* best_f = nullptr;
    for (auto& g : r.groups) {
      std::string head = "group_" + g.name + "_";
      if (!starts_with(rest, head)) continue;
      auto* f = find_field(group_fields(), rest.substr(head.size()));
      if (f && (!best || g.name.size() > best->name.size())) best = &g, best_f = f;
    }
    if (best) {
      std::string key = "group." + best->name + "." + best_f->name;
      if (std::string(best_f->name) == "name")
        throw recipe_error(key, var, "a group's name is not settable here; declare the group in the recipe file");
      assign_labelled(*best, *best_f, value, key, var);
      return;
    }
  }

  for (const char* sec : {"node_", "limits_", "deposit_", "commander_", "cluster_", "orchestration_", "group_"}) {
    if (starts_with(rest, sec)) {
      std::string groups;
      for (auto& g : r.groups) groups += (groups.empty() ? "" : ", ") + g.name;
      throw recipe_error(var, std::string("matches no recipe key") +
                                (std::string(sec) == "group_" ? " (groups: " + groups + ")" : ""));
    }
  }
  // Any other TROUPE_* variable is not the recipe's business.
}

}  // namespace

// ---------------------------------------------------------------------------

const group_settings& recipe::default_group() const {
  if (auto g = commander.default_group.empty() ? nullptr : group(commander.default_group))
    return *g;
  return groups.front();
}

const group_settings* recipe::group(const std::string& name) const {
  for (auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

std::vector<recipe_error> compose_recipe(const recipe_sources& sources, recipe& out) {
  std::vector<recipe_error> problems;
  auto attempt = [&](auto&& step) {
    try {
      step();
    } catch (const recipe_error& e) {
      problems.push_back(e);
    }
  };
  recipe r;
  if (!sources.file.empty()) {
    attempt([&] { apply_file(r, sources.file, sources.file_text); });
    if (!problems.empty())
      return problems;
  }
  for (auto& entry : sources.profile)  // (no structured bindings: a lambda may not capture them before C++20)
    attempt([&] {
      const auto& key = entry.first;
      if (starts_with(key, "orchestration."))  // which profile is in force is not a profile's to say
        throw recipe_error(key, "profile " + key, "a profile cannot set the orchestration section");
      apply_key(r, key, entry.second, "profile " + key);
    });
  for (auto& variable : sources.env)
    attempt([&] { apply_env(r, variable.first, variable.second); });
  for (auto& s : sources.sets)
    attempt([&] { apply_set(r, s); });
  // "default" first if present; the others keep their order.
  std::stable_partition(r.groups.begin(), r.groups.end(), [](auto& g) { return g.name == "default"; });
  for (auto& e : check_recipe(r))
    problems.push_back(e);
  if (problems.empty())
    out = std::move(r);
  return problems;
}

recipe load_recipe(const recipe_sources& sources) {
  recipe r;
  auto problems = compose_recipe(sources, r);
  if (!problems.empty())
    throw problems.front();
  return r;
}

std::string read_recipe_file(const std::string& path) { return read_whole_file(path); }

std::vector<std::pair<std::string, std::string>> troupe_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    if (!starts_with(entry, "TROUPE_")) continue;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace troupe::config
