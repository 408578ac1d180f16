#include "config/recipe_reference.hpp"

#include "config/recipe_fields.hpp"

namespace troupe::config {

using namespace detail;

namespace {

const char* type_of(std::size_t variant_index) {
  switch (variant_index) {
    case 0: return "string";
    case 1: return "integer";
    case 2: return "integer";
    case 3: return "number";
    case 4: return "boolean";
    default: return "array of strings";
  }
}

template <class S>
std::string default_of(const field<S>& f) {
  // Read in the lambda below (GCC 12 does not see it: -Wunused-but-set-variable).
  [[maybe_unused]] static const S defaults{};
  return std::visit(
    [](auto ptr) -> std::string {
      const auto& v = defaults.*ptr;
      using T = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<T, std::string>)
        return "`\"" + v + "\"`";
      else if constexpr (std::is_same_v<T, bool>)
        return v ? "`true`" : "`false`";
      else if constexpr (std::is_same_v<T, std::vector<std::string>>)
        return v.empty() ? "`[]`" : "`[…]`";
      else
        return "`" + number(static_cast<double>(v)) + "`";
    },
    f.ptr);
}

std::string range_of(const rule& r) {
  if (r.choices) {
    std::string out, c = r.choices;
    std::size_t at = 0;
    while (at <= c.size()) {
      auto bar = c.find('|', at);
      out += (out.empty() ? "" : " ") + ("`" + c.substr(at, bar - at) + "`");
      if (bar == std::string::npos)
        break;
      at = bar + 1;
    }
    return out;
  }
  if (r.nonempty)
    return "non-empty";
  switch (r.lower) {
    case rule::at_least:
      return r.has_hi ? number(r.lo) + "–" + number(r.hi) : "≥ " + number(r.lo);
    case rule::greater_than:
      return "> " + number(r.lo) + (r.has_hi ? ", ≤ " + number(r.hi) : "");
    case rule::none: break;
  }
  return "";
}

template <class S>
void rows(std::string& out, const std::vector<field<S>>& fields, const std::string& prefix) {
  for (auto& f : fields) {
    out += "| `" + prefix + f.name + "` | " + type_of(f.ptr.index()) + " | " + default_of(f) + " | " +
           range_of(f.check) + " | " + (f.hot ? "**hot**" : "restart") + (f.secret ? ", secret" : "") + " |\n";
  }
}

}  // namespace

std::string reference_markdown() {
  std::string out = "| Key | Type | Default | Range | Applied |\n|---|---|---|---|---|\n";
  rows(out, node_fields(), "node.");
  rows(out, limits_fields(), "limits.");
  rows(out, deposit_fields(), "deposit.");
  rows(out, commander_fields(), "commander.");
  rows(out, cluster_fields(), "cluster.");
  rows(out, channel_fields(), "channel.");
  rows(out, log_fields(), "log.");
  rows(out, orchestration_fields(), "orchestration.");
  rows(out, group_fields(), "group.NAME.");
  rows(out, cors_fields(), "cors[N].");
  rows(out, static_fields(), "static[N].");
  return out;
}

}  // namespace troupe::config
