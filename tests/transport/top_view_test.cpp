#include "transport/top_view.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace top_view_test_file {

using namespace troupe;
using nlohmann::json;

namespace {

json user(const std::string& name, std::uint64_t handled, std::uint64_t mailbox, std::uint64_t service_us) {
  return {{"id", "user:" + name}, {"kind", "user"}, {"name", name},     {"state", "active"},
          {"parent", "worker:default-w1"},          {"handled", handled}, {"mailbox", mailbox},
          {"service_us", service_us}};
}

json census(std::vector<json> rows) {
  return {{"node", {{"name", "n1"}, {"uptime_seconds", 12.0}, {"rss_bytes", 1 << 20}, {"cpu_seconds", 0.5}}},
          {"health", {{"status", "ok"}}},
          {"totals", {{"users", {{"all", rows.size()}, {"active", rows.size()}, {"frozen", 0}}}, {"guests", 0}, {"named", rows.size()}}},
          {"matched", rows.size()},
          {"actors", rows}};
}

std::vector<std::string> names(const top_view& v) {
  std::vector<std::string> out;
  for (auto& r : v.rows())
    out.push_back(r.name);
  return out;
}

}  // namespace

TEST(top_view, display_width_counts_code_points_and_wide_characters_as_two) {
  EXPECT_EQ(display_width("alice"), 5);
  EXPECT_EQ(display_width("Zoë"), 3);               // ë: two bytes, one cell
  EXPECT_EQ(display_width("e\xCC\x81"), 1);         // e + combining acute
  EXPECT_EQ(display_width("\xE7\x94\xB0\xE4\xB8\xAD"), 4);  // 田中: two wide characters
  EXPECT_EQ(display_width("\xF0\x9F\x98\x80"), 2);  // an emoji
  EXPECT_EQ(display_width("\xFF" "a"), 2);          // a byte that is not UTF-8: one cell
  EXPECT_EQ(display_width("guest_abcdefgh\xE2\x80\xA6"), 15);
}

TEST(top_view, fit_cells_pads_and_cuts_by_display_width) {
  EXPECT_EQ(fit_cells("ab", 4), "ab  ");
  EXPECT_EQ(fit_cells("ab", 4, true), "  ab");
  EXPECT_EQ(fit_cells("Zoë", 5), "Zoë  ");  // padded to 5 cells, not 5 bytes
  EXPECT_EQ(display_width(fit_cells("abcdefgh", 5)), 5);
  EXPECT_EQ(fit_cells("abcdefgh", 5), "abcd\xE2\x80\xA6");
  // 田中太郎 in 5 cells: 田中 (4) and the ellipsis; a wide one never straddles the edge.
  EXPECT_EQ(fit_cells("\xE7\x94\xB0\xE4\xB8\xAD\xE5\xA4\xAA\xE9\x83\x8E", 5), "\xE7\x94\xB0\xE4\xB8\xAD\xE2\x80\xA6");
  EXPECT_EQ(display_width(fit_cells("\xE7\x94\xB0\xE4\xB8\xAD\xE5\xA4\xAA", 4)), 4);
}

TEST(top_view, sub_millisecond_times_are_shown_in_microseconds) {
  EXPECT_EQ(human_duration_us(850), "850 \xC2\xB5s");
  EXPECT_EQ(human_duration_us(0), "0 \xC2\xB5s");
  EXPECT_EQ(human_duration_us(1500), "1.50 ms");
  EXPECT_EQ(human_duration_us(25'000), "25.0 ms");
  EXPECT_EQ(human_duration_us(2'500'000), "2.50 s");
}

TEST(top_view, sorts_by_handled_per_second_then_mailbox_or_service_on_a_key) {
  top_view v(100, 30);
  v.update(census({user("a", 100, 0, 900), user("b", 10, 5, 50), user("c", 50, 1, 20'000)}), 0);
  // The first frame has no rate yet: handled in all decides.
  EXPECT_EQ(names(v), (std::vector<std::string>{"a", "c", "b"}));
  // One second later b handled 300, a none: b is the busiest now.
  v.update(census({user("a", 100, 0, 900), user("b", 310, 5, 50), user("c", 60, 1, 20'000)}), 1.0);
  EXPECT_EQ(names(v), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_DOUBLE_EQ(v.rows()[0].handled_rate, 300);
  EXPECT_TRUE(v.key('m'));
  EXPECT_EQ(names(v), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_TRUE(v.key('s'));
  EXPECT_EQ(names(v), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_FALSE(v.key('x'));
  top_view::order o{};
  EXPECT_TRUE(top_view::parse_order("mailbox", o));
  EXPECT_EQ(o, top_view::order::mailbox);
  EXPECT_FALSE(top_view::parse_order("name", o));
}

TEST(top_view, a_frame_fits_the_terminal_and_aligns_by_display_width) {
  std::vector<json> rows;
  rows.push_back(user("\xE7\x94\xB0\xE4\xB8\xAD", 5, 0, 400));  // 田中
  rows.push_back(user("Zo\xC3\xAB", 4, 0, 3000));
  for (int i = 0; i < 40; ++i)
    rows.push_back(user("u" + std::to_string(i), 1, 0, 10));
  for (auto [w, h] : {std::pair{80, 24}, std::pair{50, 10}, std::pair{200, 8}}) {
    top_view v(w, h);
    v.update(census(rows), 0);
    auto frame = v.frame();
    EXPECT_LE(static_cast<int>(frame.size()), h);
    for (auto& line : frame)
      EXPECT_LE(display_width(line), w) << line;
    // Rows line up: the column after the name starts at the same cell on every row.
    auto header = frame[3];
    auto state_at = display_width(header.substr(0, header.find("STATE")));
    for (std::size_t i = 4; i < frame.size(); ++i) {
      auto at = frame[i].find("active");
      ASSERT_NE(at, std::string::npos) << frame[i];
      EXPECT_EQ(display_width(frame[i].substr(0, at)), state_at) << frame[i];
    }
  }
  top_view v(120, 10);
  v.update(census(rows), 0);
  auto frame = v.frame();
  EXPECT_NE(frame[4].find("400 \xC2\xB5s"), std::string::npos) << frame[4];  // 田中's service time
  EXPECT_NE(frame[3].find("HANDLED/S"), std::string::npos);
}

TEST(top_view, terminal_size_falls_back_to_columns_and_lines_then_80x24) {
  // fd -1 is no terminal.
  ::setenv("COLUMNS", "132", 1);
  ::setenv("LINES", "40", 1);
  EXPECT_EQ(terminal_size(-1), (std::pair<int, int>{132, 40}));
  ::unsetenv("COLUMNS");
  ::unsetenv("LINES");
  EXPECT_EQ(terminal_size(-1), (std::pair<int, int>{80, 24}));
}

}  // namespace top_view_test_file
