// The JSON matcher byte by byte: valid documents are taken whole and complete, invalid ones are refused
// exactly at the first byte that cannot continue a valid document; the whitespace and depth bounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <random>
#include <string>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace ds::grammar {
namespace {

// The index of the first refused byte, or -1 when every byte is taken.
int refused_at(const Grammar& g, const std::string& doc) {
  Matcher m(g);
  for (size_t i = 0; i < doc.size(); i++)
    if (!m.advance(static_cast<uint8_t>(doc[i]))) return static_cast<int>(i);
  return -1;
}

bool accepts(const Grammar& g, const std::string& doc) {
  Matcher m(g);
  return m.advance(doc) && m.complete();
}

TEST(Matcher, AcceptsValidDocuments) {
  Grammar any;
  const char* docs[] = {
      "0", "-0", "-0.0e-0", "1E+10", "123.456e789", "0.5", "-12", "true", "false", "null", "\"\"",
      "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u00e9\\u20AC\"", "\"\\ud83d\\ude00\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
      "\"\xed\x9f\xbf\xf4\x8f\xbf\xbf\"",  // U+D7FF and U+10FFFF, the last before the surrogates and the very last
      "{}", "[]", "[[]]", "{\"a\":{}}", "[{},[],{\"\":[]}]", "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}",
      " {\n  \"a\" : [ 1 , 2 ]\n}", "[1,-1,0.1,1e1]", "{\"a\":0}", "[0]",
  };
  for (const char* d : docs) EXPECT_TRUE(accepts(any, d)) << d;
}

TEST(Matcher, RefusesAtTheRightByte) {
  Grammar any;
  struct Case {
    std::string doc;
    int at;
  };
  const Case cases[] = {
      {"01", 1},            // leading zero
      {"-01", 2},
      {"-", -1},            // incomplete, not refused (checked below)
      {"1.", -1},
      {"1.e5", 2},          // digits after the point
      {"1e", -1},
      {"1e+", -1},
      {"1e+a", 3},
      {"+1", 0},
      {".5", 0},
      {"[1,]", 3},          // trailing comma
      {"{\"a\":1,}", 7},
      {"{,}", 1},
      {"[,1]", 1},
      {"{\"a\" 1}", 5},     // missing colon
      {"{1:2}", 1},         // non-string key
      {"\"\\x\"", 2},       // bad escape
      {"\"\\u12G4\"", 5},
      {"\"a\nb\"", 2},      // raw control character
      {"\"\t\"", 1},
      {"\"\\udc00\"", 4},   // a lone low surrogate (refused at its second hex digit)
      {"\"\\ud800x\"", 7},  // a high surrogate must be followed by \u
      {"\"\\ud800\"", 7},   // ... even at the end of the string
      {"\"\\ud800\\u0041\"", 9},  // ... and by a low one
      {"\"\\ud800\\udb00\"", 10},
      {"\"\xc0\xaf\"", 1},   // overlong 2-byte form
      {"\"\xe0\x80\xaf\"", 2},  // overlong 3-byte form
      {"\"\xf0\x80\x80\xaf\"", 2},
      {"\"\xed\xa0\x80\"", 2},  // UTF-8 encoded surrogate
      {"\"\xf4\x90\x80\x80\"", 2},  // past U+10FFFF
      {"\"\xf5\"", 1},
      {"\"\x80\"", 1},       // continuation byte without a lead
      {"\"\xc3\x41\"", 2},   // lead without its continuation
      {"tru ", 3},
      {"nul", -1},
      {"truex", 4},
      {"{}x", 2},           // nothing after the document
      {"{} ", 2},           // not even whitespace
      {"[1]]", 3},
      {"[1 2]", 3},
      {"]", 0},
  };
  for (const Case& c : cases) EXPECT_EQ(refused_at(any, c.doc), c.at) << c.doc;
  for (const char* incomplete : {"-", "1.", "1e", "1e+", "nul", "[1", "{\"a\":", "\"ab", "\"\\ud800"}) {
    Matcher m(any);
    EXPECT_TRUE(m.advance(std::string(incomplete))) << incomplete;
    EXPECT_FALSE(m.complete()) << incomplete;
  }
}

TEST(Matcher, RefusedByteLeavesTheStateUnchanged) {
  Grammar any;
  Matcher m(any);
  ASSERT_TRUE(m.advance(std::string("[1")));
  const std::string before = m.key();
  EXPECT_FALSE(m.advance(uint8_t('x')));
  EXPECT_EQ(m.key(), before);
  EXPECT_TRUE(m.advance(std::string("2]")));
  EXPECT_TRUE(m.complete());
}

TEST(Matcher, NumbersEndWhereTheParentTakesOver) {
  Grammar any;
  Matcher m(any);
  ASSERT_TRUE(m.advance(std::string("12")));
  EXPECT_TRUE(m.complete());  // a top-level number may end here ...
  EXPECT_TRUE(m.advance(uint8_t('3')));  // ... or go on
  EXPECT_FALSE(m.advance(uint8_t(' ')));  // but nothing follows the document
}

TEST(Matcher, BoundsWhitespace) {
  Grammar any;
  EXPECT_EQ(refused_at(any, "[\n\n1]"), 2);  // one line break per gap
  EXPECT_EQ(refused_at(any, "[\r\n1]"), 2);
  EXPECT_TRUE(accepts(any, "\n\n[]"));  // two line breaks before the document ("</think>\n\n")
  EXPECT_EQ(refused_at(any, "\n\n\n[]"), 2);
  EXPECT_EQ(refused_at(any, std::string("[") + std::string(Matcher::kMaxGap, ' ') + " 1]"), Matcher::kMaxGap + 1);
  EXPECT_TRUE(accepts(any, std::string("[\n") + std::string(Matcher::kMaxGap - 1, ' ') + "1 ,\n 2\n]"));
}

TEST(Matcher, BoundsDepth) {
  Grammar any;
  const std::string deep(Matcher::kMaxDepth, '[');
  EXPECT_EQ(refused_at(any, deep), -1);
  EXPECT_EQ(refused_at(any, deep + "["), Matcher::kMaxDepth);
  EXPECT_TRUE(accepts(any, deep + std::string(Matcher::kMaxDepth, ']')));
}

TEST(Matcher, JsonObjectIsAnObjectAtTheTop) {
  Grammar g = any_object();
  EXPECT_TRUE(accepts(g, "{\"a\":[1,{\"b\":null}]}"));
  EXPECT_EQ(refused_at(g, "[]"), 0);
  EXPECT_EQ(refused_at(g, "\"x\""), 0);
  EXPECT_EQ(refused_at(g, "1"), 0);
  EXPECT_EQ(refused_at(g, "  1"), 2);
}

}  // namespace
}  // namespace ds::grammar

namespace ds::grammar {
namespace {

// Differential: random mutations of valid documents, judged by the matcher and by nlohmann's parser (RFC 8259 with
// UTF-8 validation). Documents whose whitespace our bounds refuse (two whitespace bytes in a row, whitespace at the
// end) are left out; everything else must get the same verdict.
TEST(Matcher, AgreesWithAParserOnMutatedDocuments) {
  Grammar any;
  const std::vector<std::string> seeds = {
      "{\"a\": [1, -2.5e+3, true, null], \"b\": {\"c\": \"x\\u00e9\\ud83d\\ude00\\n\"}}", "[0, 0.0, -0, 1E9, \"\xc3\xa9\xe2\x82\xac\"]",
      "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "{\"\": {}, \"k\": [[], [{}]]}", "123", "false",
  };
  const std::string alphabet = "{}[],:\"\\ 0123456789-+.eEtrufalsn\x01\x7f\xc3\xa9\xed\xa0\x80\xf4\x90uUdD";
  std::mt19937 rng(12345);
  int agreed = 0, valid = 0;
  for (int iter = 0; iter < 20000; iter++) {
    std::string d = seeds[rng() % seeds.size()];
    const int edits = 1 + rng() % 3;
    for (int e = 0; e < edits && !d.empty(); e++) {
      const size_t pos = rng() % (d.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: d.insert(d.begin() + pos, c); break;
        case 1: if (pos < d.size()) d.erase(d.begin() + pos); break;
        default: if (pos < d.size()) d[pos] = c; break;
      }
    }
    bool ws_run = false;
    for (size_t i = 0; i + 1 < d.size(); i++)
      if (std::isspace(static_cast<unsigned char>(d[i])) && std::isspace(static_cast<unsigned char>(d[i + 1]))) ws_run = true;
    if (ws_run || d.empty() || std::isspace(static_cast<unsigned char>(d.back()))) continue;
    const bool parser = nlohmann::json::accept(d);
    Matcher m(any);
    const bool ours = m.advance(d) && m.complete();
    EXPECT_EQ(ours, parser) << "document: " << d;
    agreed += ours == parser;
    valid += parser;
  }
  EXPECT_GT(valid, 100);  // the mutations leave enough valid documents to compare
  EXPECT_GT(agreed, 5000);
}

}  // namespace
}  // namespace ds::grammar
