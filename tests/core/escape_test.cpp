#include <gtest/gtest.h>

#include "core/escape.h"

namespace ds {

TEST(Quote, JsonAsPythonJsonDumps) {
  // json.dumps(s, ensure_ascii=False) for each input.
  EXPECT_EQ(quoted("plain", QuoteStyle::Json), "\"plain\"");
  EXPECT_EQ(quoted("a\"b\\c\nd\re\tf\bg\fh", QuoteStyle::Json), R"("a\"b\\c\nd\re\tf\bg\fh")");
  EXPECT_EQ(quoted(std::string("\x01\x1f\x7f", 3), QuoteStyle::Json), "\"\\u0001\\u001f\x7f\"");
  EXPECT_EQ(quoted(std::string("\0", 1), QuoteStyle::Json), "\"\\u0000\"");
  EXPECT_EQ(quoted("caf\xc3\xa9 \xf0\x9f\x98\x80", QuoteStyle::Json), "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
  EXPECT_EQ(quoted("bad \xff byte", QuoteStyle::Json), "\"bad \xff byte\"");  // surrogateescape round trip
  EXPECT_EQ(quoted("", QuoteStyle::Json), "\"\"");
}

TEST(Quote, JsonAsciiAsPythonEnsureAscii) {
  // json.dumps(s) (ensure_ascii=True); invalid bytes as surrogateescape code points U+DC80..U+DCFF.
  EXPECT_EQ(quoted("caf\xc3\xa9", QuoteStyle::JsonAscii), R"("caf\u00e9")");
  EXPECT_EQ(quoted("\xe2\x82\xac", QuoteStyle::JsonAscii), R"("\u20ac")");
  EXPECT_EQ(quoted("\xf0\x9f\x98\x80", QuoteStyle::JsonAscii), R"("\ud83d\ude00")");
  EXPECT_EQ(quoted("\x7f", QuoteStyle::JsonAscii), R"("\u007f")");
  EXPECT_EQ(quoted("a\xff", QuoteStyle::JsonAscii), R"("a\udcff")");
  EXPECT_EQ(quoted("\xc0\xaf", QuoteStyle::JsonAscii), R"("\udcc0\udcaf")");          // overlong '/'
  EXPECT_EQ(quoted("\xed\xa0\x80", QuoteStyle::JsonAscii), R"("\udced\udca0\udc80")");  // encoded surrogate
  EXPECT_EQ(quoted("\xe2\x82", QuoteStyle::JsonAscii), R"("\udce2\udc82")");          // cut short
  EXPECT_EQ(quoted("\xf4\x90\x80\x80", QuoteStyle::JsonAscii), R"("\udcf4\udc90\udc80\udc80")");  // > U+10FFFF
  EXPECT_EQ(quoted("q\"\n", QuoteStyle::JsonAscii), R"("q\"\n")");
}

TEST(Quote, DisplayKeepsBytesAndShowsControls) {
  EXPECT_EQ(quoted("a\"b\\c\nd\re\tf", QuoteStyle::Display), R"("a\"b\\c\nd\re\tf")");
  EXPECT_EQ(quoted(std::string("\x01\b\f\x7f", 4), QuoteStyle::Display), R"("\x01\x08\x0c\x7f")");
  EXPECT_EQ(quoted("\xc4\xa0 \xff", QuoteStyle::Display), "\"\xc4\xa0 \xff\"");
}

}  // namespace ds
