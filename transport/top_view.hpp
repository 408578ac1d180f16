#pragma once
/// \file
/// `troupe census --top`'s screen, as plain data: the users of a census
/// document sorted by activity (handled/s, mailbox or service time), laid out
/// to fit a terminal of W×H cells, every column aligned by display width
/// (UTF-8 code points; East Asian wide characters take 2 cells), durations
/// under a millisecond in µs. No terminal I/O here: census_cli draws the frames.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {

/// The cells `utf8` takes in a terminal: one per code point, two for East
/// Asian wide and fullwidth ones, none for combining marks and zero-width
/// characters; a byte that is not valid UTF-8 counts as one cell.
int display_width(std::string_view utf8);

/// `utf8` made exactly `width` cells wide: cut on a character boundary (with
/// "…" as the last cell) when wider, padded with spaces (on the left when
/// `right`) when narrower. A wide character that would straddle the edge is
/// replaced by a space.
std::string fit_cells(std::string_view utf8, int width, bool right = false);

/// A duration for people: "850 µs" under a millisecond, "12.3 ms", "1.25 s".
std::string human_duration_us(double us);

/// The terminal's size in cells: TIOCGWINSZ on `fd`, else $COLUMNS × $LINES,
/// else 80 × 24.
std::pair<int, int> terminal_size(int fd);

class top_view {
public:
  enum class order { handled_rate, mailbox, service };

  /// A screen of `width` × `height` cells (at least 20 × 5).
  top_view(int width, int height);

  void resize(int width, int height);
  void sort_by(order o) noexcept { order_ = o; }
  order sorted_by() const noexcept { return order_; }
  /// 'h', 'm', 's' switch the order (true when `key` was one of them).
  bool key(char k) noexcept;
  /// "handled" | "mailbox" | "service" → the order; false for anything else.
  static bool parse_order(std::string_view name, order& out) noexcept;

  /// Takes a census document (GET /_troupe/census); handled/s is measured
  /// against the previous one, `seconds` earlier (the first has none yet).
  void update(const nlohmann::json& census, double seconds);

  /// The screen: at most `height` lines, none wider than `width` cells.
  std::vector<std::string> frame() const;

  struct row {
    std::string id, name, state, worker;
    bool guest = false;
    bool probed = false;      ///< the census had its live figures
    double handled_rate = -1; ///< per second; < 0: not known yet
    std::uint64_t handled = 0, mailbox = 0, service_us = 0;
  };
  /// The rows in their display order (all of them, not only those that fit).
  const std::vector<row>& rows() const noexcept { return rows_; }

private:
  void sort_rows();

  int width_, height_;
  order order_ = order::handled_rate;
  std::vector<row> rows_;
  std::map<std::string, std::uint64_t> previous_handled_;  // by id, from the last update
  std::string header_, totals_;
  std::int64_t matched_ = 0;
  bool have_previous_ = false;
};

}  // namespace troupe
