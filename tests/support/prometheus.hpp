// Reading Prometheus text exposition in tests and benchmarks.
#pragma once

#include <optional>
#include <sstream>
#include <string>

namespace troupe::test {

// The value of the sample `name` with exactly `labels` ("" for none; else the text
// between the braces, e.g. state="active"), or nullopt. `name` may also carry its
// labels itself ("troupe_users{state=\"active\"}") with `labels` left empty.
inline std::optional<double> prometheus_sample(const std::string& text, const std::string& name,
                                               const std::string& labels = "") {
  const std::string series = labels.empty() ? name : name + "{" + labels + "}";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.rfind(series, 0) != 0 || line.size() <= series.size() || line[series.size()] != ' ')
      continue;
    try {
      return std::stod(line.substr(series.size() + 1));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace troupe::test
