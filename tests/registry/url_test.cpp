#include "registry/url.hpp"

#include <gtest/gtest.h>

namespace url_test_file {

using namespace troupe::registry;

TEST(url, percent_decodes_strictly) {
  EXPECT_EQ(percent_decode("user%3Aalice"), "user:alice");
  EXPECT_EQ(percent_decode("a+b"), "a+b");
  EXPECT_EQ(percent_decode("a+b", true), "a b");
  EXPECT_EQ(percent_decode("%c3%BC"), "\xc3\xbc");
  EXPECT_FALSE(percent_decode("bad%2"));
  EXPECT_FALSE(percent_decode("bad%zz"));
  EXPECT_EQ(hex_digit('F'), 15);
  EXPECT_EQ(hex_digit('g'), -1);
}

TEST(url, parses_query_strings_in_order) {
  auto q = parse_query("kind=user&prefix=al%20x&&state=");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ((*q)[1], std::make_pair(std::string("prefix"), std::string("al x")));
  EXPECT_EQ((*q)[2].second, "");
  EXPECT_FALSE(parse_query("a=%zz"));
}

TEST(url, percent_decode_keeps_a_bad_escape_literally_when_asked) {
  auto keep = [](std::string_view s, bool plus = true) { return percent_decode(s, plus, bad_escape::keep); };
  EXPECT_EQ(keep("user%3Aalice"), "user:alice");
  EXPECT_EQ(keep("a+b"), "a b");
  EXPECT_EQ(keep("a+b", false), "a+b");
  EXPECT_EQ(keep("bad%zz"), "bad%zz");
  EXPECT_EQ(keep("bad%2"), "bad%2");
  EXPECT_EQ(keep("100%"), "100%");
  EXPECT_EQ(keep("%%41"), "%A");       // the first '%' is kept, the escape after it decoded
  EXPECT_EQ(keep("%4+1"), "%4 1");     // what follows a kept '%' is ordinary text
  EXPECT_EQ(keep("%c3%BC"), "\xc3\xbc");
  // The refusing mode refuses exactly these.
  EXPECT_FALSE(percent_decode("100%"));
  EXPECT_FALSE(percent_decode("%%41"));
  EXPECT_FALSE(percent_decode("%4+1", true));
}

namespace {

// The application's decoder as it was before there was one percent_decode
// (actors/app.cpp): '+' a space, a malformed escape kept as written.
std::string lenient_before(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%' && i + 2 < in.size() && hex_digit(in[i + 1]) >= 0 && hex_digit(in[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(in[i + 1]) * 16 + hex_digit(in[i + 2]));
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

// The admin surface's decoder as it was (registry/url.cpp): nullopt on a malformed escape.
std::optional<std::string> strict_before(std::string_view s, bool plus_is_space) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size())
        return std::nullopt;
      int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0)
        return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(plus_is_space && c == '+' ? ' ' : c);
    }
  }
  return out;
}

}  // namespace

TEST(url, each_caller_decodes_as_it_did_before) {
  // Every string of up to 4 characters over an alphabet that has every case in it.
  const std::string alphabet = "%+aF9g";
  std::vector<std::string> all{""};
  for (int len = 1; len <= 4; ++len) {
    std::vector<std::string> longer;
    for (auto& s : all)
      if (s.size() == static_cast<std::size_t>(len - 1))
        for (char c : alphabet)
          longer.push_back(s + c);
    all.insert(all.end(), longer.begin(), longer.end());
  }
  ASSERT_GT(all.size(), 1500u);
  for (auto& s : all) {
    EXPECT_EQ(percent_decode(s, true, bad_escape::keep), lenient_before(s)) << s;
    EXPECT_EQ(percent_decode(s, false), strict_before(s, false)) << s;
    EXPECT_EQ(percent_decode(s, true), strict_before(s, true)) << s;
  }
}

TEST(Utf8Prefix, CutsAtTheLimitButNeverInsideACharacter) {
  EXPECT_EQ(utf8_prefix("short", 123), "short");
  EXPECT_EQ(utf8_prefix("abcdef", 3), "abc");
  const std::string e_acute = "\xC3\xA9";        // é: 2 bytes
  const std::string euro = "\xE2\x82\xAC";       // €: 3 bytes
  EXPECT_EQ(utf8_prefix("a" + e_acute, 2), "a");  // the 2nd byte would split é
  EXPECT_EQ(utf8_prefix("a" + e_acute, 3), "a" + e_acute);
  EXPECT_EQ(utf8_prefix(euro + euro, 5), euro);
  EXPECT_EQ(utf8_prefix(euro, 2), "");
  EXPECT_EQ(utf8_prefix("", 0), "");
  // Every cut of a long mixed text is a whole-character prefix of it, at most the limit.
  std::string text;
  for (int i = 0; i < 50; ++i)
    text += "x" + e_acute + euro;
  for (std::size_t max = 0; max <= 130; ++max) {
    auto p = utf8_prefix(text, max);
    EXPECT_LE(p.size(), max);
    EXPECT_GT(p.size() + 3, std::min(max, text.size()));
    EXPECT_TRUE(p.empty() || (static_cast<unsigned char>(text[p.size()]) & 0xC0) != 0x80) << max;
  }
}

}  // namespace url_test_file
