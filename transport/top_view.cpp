#include "transport/top_view.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace troupe {

using nlohmann::json;

namespace {

// Decodes the code point at `s[i]`, advancing `i`; -1 for a byte that is not valid UTF-8.
long next_code_point(std::string_view s, std::size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + static_cast<std::size_t>(len) > s.size()) {
    ++i;
    return -1;
  }
  long cp = len == 1 ? b : b & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if ((c >> 6) != 0x2) {
      ++i;
      return -1;
    }
    cp = (cp << 6) | (c & 0x3f);
  }
  i += static_cast<std::size_t>(len);
  return cp;
}

// A small wcwidth: the ranges that matter in names and labels.
int cells_of(long cp) {
  if (cp < 0)
    return 1;
  if (cp == 0 || (cp >= 0x300 && cp <= 0x36f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0xfe00 && cp <= 0xfe0f) ||
      (cp >= 0x1ab0 && cp <= 0x1aff) || (cp >= 0x20d0 && cp <= 0x20ff))
    return 0;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
    return 1;  // control characters are not printed as such; count them as one
  bool wide = (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0x303e) || (cp >= 0x3041 && cp <= 0x33ff) ||
              (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0xa000 && cp <= 0xa4cf) ||
              (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) ||
              (cp >= 0xff00 && cp <= 0xff60) || (cp >= 0xffe0 && cp <= 0xffe6) ||
              (cp >= 0x1f300 && cp <= 0x1f64f) || (cp >= 0x1f900 && cp <= 0x1f9ff) ||
              (cp >= 0x20000 && cp <= 0x3fffd);
  return wide ? 2 : 1;
}

std::string str_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint64_t u64_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<std::uint64_t>() : 0;
}

}  // namespace

int display_width(std::string_view utf8) {
  int w = 0;
  for (std::size_t i = 0; i < utf8.size();)
    w += cells_of(next_code_point(utf8, i));
  return w;
}

std::string fit_cells(std::string_view utf8, int width, bool right) {
  if (width <= 0)
    return {};
  int total = display_width(utf8);
  std::string out;
  if (total <= width) {
    std::string pad(static_cast<std::size_t>(width - total), ' ');
    return right ? pad + std::string(utf8) : std::string(utf8) + pad;
  }
  int used = 0;
  for (std::size_t i = 0; i < utf8.size();) {
    std::size_t at = i;
    long cp = next_code_point(utf8, i);
    int w = cells_of(cp);
    if (used + w > width - 1)
      break;
    out += cp < 0 ? std::string("?") : std::string(utf8.substr(at, i - at));
    used += w;
  }
  out += std::string(static_cast<std::size_t>(width - 1 - used), ' ');  // a wide one that did not fit
  out += "\xE2\x80\xA6";  // …
  return out;
}

std::string human_duration_us(double us) {
  char buf[32];
  if (us < 0)
    return "-";
  if (us < 1000)
    std::snprintf(buf, sizeof buf, "%.0f \xC2\xB5s", us);
  else if (us < 1e6)
    std::snprintf(buf, sizeof buf, us < 1e4 ? "%.2f ms" : "%.1f ms", us / 1000);
  else
    std::snprintf(buf, sizeof buf, us < 1e7 ? "%.2f s" : "%.1f s", us / 1e6);
  return buf;
}

std::pair<int, int> terminal_size(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
    return {ws.ws_col, ws.ws_row};
  auto env = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    int n = v ? std::atoi(v) : 0;
    return n > 0 ? n : fallback;
  };
  return {env("COLUMNS", 80), env("LINES", 24)};
}

top_view::top_view(int width, int height) {
  resize(width, height);
}

void top_view::resize(int width, int height) {
  width_ = std::max(20, width);
  height_ = std::max(5, height);
}

bool top_view::key(char k) noexcept {
  switch (k) {
    case 'h': order_ = order::handled_rate; break;
    case 'm': order_ = order::mailbox; break;
    case 's': order_ = order::service; break;
    default: return false;
  }
  sort_rows();
  return true;
}

bool top_view::parse_order(std::string_view name, order& out) noexcept {
  if (name == "handled")
    out = order::handled_rate;
  else if (name == "mailbox")
    out = order::mailbox;
  else if (name == "service")
    out = order::service;
  else
    return false;
  return true;
}

void top_view::update(const json& census, double seconds) {
  std::map<std::string, std::uint64_t> handled_now;
  rows_.clear();
  if (census.contains("actors") && census["actors"].is_array())
    for (auto& a : census["actors"]) {
      if (!a.is_object())
        continue;
      row r;
      r.id = str_of(a, "id");
      r.name = str_of(a, "name");
      r.state = str_of(a, "state");
      r.worker = str_of(a, "parent");
      if (r.worker.rfind("worker:", 0) == 0)
        r.worker = r.worker.substr(7);
      r.guest = a.value("guest", false) || r.id.rfind("user:guest_", 0) == 0;
      r.probed = a.contains("handled") && a["handled"].is_number();
      r.handled = u64_of(a, "handled");
      r.mailbox = u64_of(a, "mailbox");
      r.service_us = u64_of(a, "service_us");
      if (r.probed) {
        handled_now[r.id] = r.handled;
        auto was = previous_handled_.find(r.id);
        if (have_previous_ && seconds > 0 && was != previous_handled_.end())
          r.handled_rate = static_cast<double>(r.handled >= was->second ? r.handled - was->second : r.handled) / seconds;
      }
      rows_.push_back(std::move(r));
    }
  previous_handled_ = std::move(handled_now);
  have_previous_ = true;
  matched_ = census.value("matched", std::int64_t{0});
  // The node's line and its totals.
  const json empty = json::object();
  auto& node = census.contains("node") && census["node"].is_object() ? census["node"] : empty;
  auto& health = census.contains("health") && census["health"].is_object() ? census["health"] : empty;
  auto& totals = census.contains("totals") && census["totals"].is_object() ? census["totals"] : empty;
  auto& users = totals.contains("users") && totals["users"].is_object() ? totals["users"] : empty;
  char line[256];
  std::snprintf(line, sizeof line, "node %s  up %.0f s  rss %.1f MiB  cpu %.1f s  health %s",
                str_of(node, "name").c_str(), node.value("uptime_seconds", 0.0),
                static_cast<double>(u64_of(node, "rss_bytes")) / 1048576.0, node.value("cpu_seconds", 0.0),
                str_of(health, "status").c_str());
  header_ = line;
  std::snprintf(line, sizeof line, "users %lld (named %lld, guests %lld; active %lld, frozen %lld)  connections %lld",
                static_cast<long long>(users.value("all", 0LL)), static_cast<long long>(totals.value("named", 0LL)),
                static_cast<long long>(totals.value("guests", 0LL)), static_cast<long long>(users.value("active", 0LL)),
                static_cast<long long>(users.value("frozen", 0LL)),
                static_cast<long long>(totals.value("connections", 0LL)));
  totals_ = line;
  sort_rows();
}

void top_view::sort_rows() {
  auto key = [this](const row& r) -> std::pair<double, double> {
    switch (order_) {
      case order::handled_rate:  // then by handled in all: the first frame has no rate yet
        return {r.handled_rate, static_cast<double>(r.handled)};
      case order::mailbox:
        return {static_cast<double>(r.mailbox), r.handled_rate};
      case order::service:
        return {static_cast<double>(r.service_us), r.handled_rate};
    }
    return {0, 0};
  };
  std::stable_sort(rows_.begin(), rows_.end(), [&](const row& a, const row& b) {
    if (a.probed != b.probed)
      return a.probed;  // rows without live figures (frozen users) last
    auto ka = key(a), kb = key(b);
    if (ka != kb)
      return ka > kb;
    return a.name < b.name;
  });
}

std::vector<std::string> top_view::frame() const {
  struct column {
    const char* title;
    int width;  // 0: the name column, which takes what is left
    bool right;
  };
  // Dropped from the right when the terminal is too narrow for them all.
  std::vector<column> cols{{"NAME", 0, false},      {"STATE", 10, false},  {"HANDLED/S", 9, true},
                           {"MAILBOX", 7, true},    {"SERVICE", 10, true}, {"PER REQ", 9, true},
                           {"HANDLED", 9, true},    {"WORKER", 16, false}};
  constexpr int min_name = 12;
  auto fixed = [&] {
    int w = 0;
    for (auto& c : cols)
      w += c.width + 1;  // one space after each column
    return w;
  };
  while (cols.size() > 1 && fixed() + min_name > width_)
    cols.pop_back();
  int name_width = std::max(1, width_ - fixed());
  auto cell = [&](const column& c, const std::string& text) {
    return fit_cells(text, c.width ? c.width : name_width, c.right);
  };
  auto trim = [](std::string s) {
    while (!s.empty() && s.back() == ' ')
      s.pop_back();
    return s;
  };
  std::vector<std::string> out;
  out.push_back(trim(fit_cells(header_, width_)));
  out.push_back(trim(fit_cells(totals_, width_)));
  const char* sorted = order_ == order::handled_rate ? "handled/s" : order_ == order::mailbox ? "mailbox" : "service";
  std::string help = std::to_string(rows_.size()) + " of " + std::to_string(matched_) + " users, sorted by " + sorted +
                     " (keys: h handled/s, m mailbox, s service, q quit)";
  out.push_back(trim(fit_cells(help, width_)));
  std::string head;
  for (std::size_t i = 0; i < cols.size(); ++i)
    head += cell(cols[i], cols[i].title) + (i + 1 < cols.size() ? " " : "");
  out.push_back(trim(head));
  for (auto& r : rows_) {
    if (static_cast<int>(out.size()) >= height_)
      break;
    std::string line;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      std::string t = cols[i].title, v;
      if (t == "NAME")
        v = r.name;  // a guest's shows as guest_<id>…
      else if (t == "STATE")
        v = r.state;
      else if (t == "WORKER")
        v = r.worker.empty() ? "-" : r.worker;
      else if (!r.probed)
        v = "-";
      else if (t == "HANDLED/S") {
        char b[32];
        std::snprintf(b, sizeof b, r.handled_rate >= 100 ? "%.0f" : "%.1f", r.handled_rate);
        v = r.handled_rate < 0 ? "-" : b;
      } else if (t == "MAILBOX")
        v = std::to_string(r.mailbox);
      else if (t == "SERVICE")
        v = human_duration_us(static_cast<double>(r.service_us));
      else if (t == "PER REQ")
        v = r.handled ? human_duration_us(static_cast<double>(r.service_us) / static_cast<double>(r.handled)) : "-";
      else if (t == "HANDLED")
        v = std::to_string(r.handled);
      line += cell(cols[i], v) + (i + 1 < cols.size() ? " " : "");
    }
    out.push_back(trim(line));
  }
  return out;
}

}  // namespace troupe
