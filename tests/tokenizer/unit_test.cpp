// Tokenizer parts that need no model file: UTF-8 repair, NFC, the byte map, the split regexes,
// BPE merge order on hand-made vocabularies, added/control tokens, decoding and streaming.
// Expected values come from outside references where one exists: Python's
// bytes.decode("utf-8", "replace") for U+FFFD repair, the Python `regex` module (same Unicode
// classes as Oniguruma) for the splits, and hand-worked BPE merges on tiny vocabularies.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ds::tokenizer {
namespace {

// ---- UTF-8 ----

TEST(Utf8, ReplacesMaximalSubpartsLikePython) {
  // (input, bytes.decode("utf-8", "replace") in Python 3)
  const std::pair<std::string, std::string> cases[] = {
      {"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},   // surrogate: ED alone, then two stray bytes
      {"a\xf0\x9f\x98", "a\uFFFD"},             // cut-off 4-byte sequence: one replacement
      {"\xe2\x82" "A", "\uFFFD" "A"},
      {"\xc0\x80", "\uFFFD\uFFFD"},             // overlong
      {"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},  // above U+10FFFF
      {"\xe0\x80\xaf", "\uFFFD\uFFFD\uFFFD"},
      {"ok\xff", "ok\uFFFD"},
      {"\xf0\x9f\x98\x80\x80", "\U0001F600\uFFFD"},
      {"plain \u00e9\u4e16\U0001F600", "plain \u00e9\u4e16\U0001F600"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(sanitize_utf8(in), want) << "input bytes " << in.size();
    EXPECT_EQ(find_invalid_utf8(in).has_value(), in != want);
  }
}

TEST(Utf8, ValidateNamesTheByteOffset) {
  Status s = validate_utf8("abc\xff" "def", "stdin");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("stdin"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("byte 3"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("0xff"), std::string::npos) << s.error().message;
  EXPECT_TRUE(validate_utf8("h\u00e9llo").ok());
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xe2"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xe2\x82"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("a\xe2\x82\xac"), 0u);  // complete
  EXPECT_EQ(utf8_incomplete_tail("a\xe2" "A"), 0u);      // broken, not incomplete
  EXPECT_EQ(utf8_incomplete_tail("a\x80"), 0u);          // stray continuation
  EXPECT_EQ(utf8_incomplete_tail("a\xed\xa0"), 0u);      // surrogate prefix can never complete
}

// ---- NFC ----

std::string utf8proc_nfc(const std::string& s) {
  utf8proc_uint8_t* r = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  std::string out(reinterpret_cast<char*>(r));
  std::free(r);
  return out;
}

TEST(Nfc, KnownCompositions) {
  EXPECT_EQ(nfc("cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(nfc("\u212b"), "\u00c5");                // Angstrom sign (singleton)
  EXPECT_EQ(nfc("A\u030a"), "\u00c5");
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");    // Hangul jamo L V T
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");          // LV syllable (inert) + T jamo
  EXPECT_EQ(nfc("a\u0307\u0323"), "\u1ea1\u0307");   // canonical reordering, then composition
  EXPECT_EQ(nfc("\u304b\u3099"), "\u304c");          // kana + combining voiced mark
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
}

TEST(Nfc, ChunkedEqualsWholeStringOnRandomText) {
  // nfc() copies runs of NFC-inert characters and normalises only the chunks in between; the
  // result must equal utf8proc's NFC of the whole string.
  const uint32_t alphabet[] = {'a', 'e', 'A', ' ', 0xe9, 0x300, 0x301, 0x323, 0x307, 0x30a, 0x212b, 0x1100,
                               0x1161, 0x11a8, 0xac00, 0x304b, 0x3099, 0x4e16, 0x41e, 0x308, 0x1f600,
                               0xf900, 0x0958, 0x0f73, 0x344, 0x0915, 0x094d, 0x093c, 0x1b35, 0x1b05};
  std::mt19937 rng(7);
  for (int t = 0; t < 3000; t++) {
    std::string s;
    int len = (int)(rng() % 12);
    for (int i = 0; i < len; i++) append_utf8(alphabet[rng() % std::size(alphabet)], s);
    ASSERT_EQ(nfc(s), utf8proc_nfc(s)) << "case " << t;
  }
}

// ---- byte map ----

TEST(ByteMap, Gpt2Table) {
  const ByteMap& bm = ByteMap::get();
  EXPECT_EQ(bm.byte_to_utf8[' '], "\u0120");   // 'Ġ'
  EXPECT_EQ(bm.byte_to_utf8['\n'], "\u010a");  // 'Ċ'
  EXPECT_EQ(bm.byte_to_utf8['A'], "A");
  EXPECT_EQ(bm.byte_to_utf8[0xad], "\u0143");  // soft hyphen is the last of the 68 remapped bytes
  std::string all;
  for (int b = 0; b < 256; b++) all.push_back((char)b);
  std::string enc = byte_level_encode(all);
  auto dec = byte_level_decode(enc);
  ASSERT_TRUE(dec.has_value());
  EXPECT_EQ(*dec, all);
  EXPECT_FALSE(byte_level_decode(" ").has_value());  // a raw space is not in the map
}

// ---- pre-tokenizer ----

std::vector<std::string> split(const PreTokenizer& p, std::string_view s) {
  std::vector<std::string> out;
  for (auto v : p.split(s)) out.emplace_back(v);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Qwen2MatchesPythonRegex) {
  auto p = PreTokenizer::create("qwen2");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(split(*p, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(*p, "I'm HE'LL they'RE"), (Pieces{"I", "'m", " HE", "'LL", " they", "'RE"}));
  EXPECT_EQ(split(*p, "  x"), (Pieces{" ", " x"}));
  EXPECT_EQ(split(*p, "a  \n\n  b"), (Pieces{"a", "  \n\n", " ", " b"}));
  EXPECT_EQ(split(*p, "12345 3.14"), (Pieces{"1", "2", "3", "4", "5", " ", "3", ".", "1", "4"}));
  EXPECT_EQ(split(*p, "x = a[i]++;\n\n"), (Pieces{"x", " =", " a", "[i", "]++;\n\n"}));
  EXPECT_EQ(split(*p, "  \t\n  end  "), (Pieces{"  \t\n", " ", " end", "  "}));
  EXPECT_EQ(split(*p, "(hello)!!\r\n\r\n"), (Pieces{"(hello", ")!!\r\n\r\n"}));
  EXPECT_EQ(split(*p, "\u20ac100 \u2014ok"), (Pieces{"\u20ac", "1", "0", "0", " \u2014", "ok"}));
  EXPECT_EQ(split(*p, "\u00a0a\u2009b\u3000c"), (Pieces{"\u00a0a", "\u2009b", "\u3000c"}));
  // (?i:'s): Unicode case folding makes "'ſ" (long s) a contraction, as Oniguruma does.
  EXPECT_EQ(split(*p, "\u00c5\u017fT'\u017f"), (Pieces{"\u00c5\u017fT", "'\u017f"}));
  // Devanagari: the virama and vowel sign are marks, not letters, for qwen2.
  EXPECT_EQ(split(*p, "\u0928\u092e\u0938\u094d\u0924\u0947"),
            (Pieces{"\u0928\u092e\u0938", "\u094d\u0924", "\u0947"}));
  EXPECT_TRUE(p->split("").empty());
}

TEST(PreTokenizer, Qwen35KeepsMarksInWords) {
  auto p = PreTokenizer::create("qwen35");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(split(*p, "\u0928\u092e\u0938\u094d\u0924\u0947"), (Pieces{"\u0928\u092e\u0938\u094d\u0924\u0947"}));
  EXPECT_EQ(split(*p, "I'm HE'LL"), (Pieces{"I", "'m", " HE", "'LL"}));
}

TEST(PreTokenizer, WhitespaceIsOnigurumas) {
  // U+180E is a format character (Cf) since Unicode 6.3: not \s for Oniguruma, though PCRE2's \s
  // lists it. U+0085 (NEL) is White_Space and \s for both.
  EXPECT_EQ(onig_compatible_pattern(R"(\s+(?!\S)|[^\s\p{L}])"),
            R"([\t-\r\x{85}\p{Z}]+(?![^\t-\r\x{85}\p{Z}])|[^\t-\r\x{85}\p{Z}\p{L}])");
  auto p = PreTokenizer::create("qwen2");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(split(*p, "a \u180e"), (Pieces{"a", " \u180e"}));  // punctuation-like run
  EXPECT_EQ(split(*p, "a\u0085\u0085b"), (Pieces{"a", "\u0085", "\u0085b"}));
}

TEST(PreTokenizer, UnsupportedNameIsAnError) {
  auto p = PreTokenizer::create("llama3");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("'llama3'"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("qwen35"), std::string::npos) << p.error().message;
}

TEST(PreTokenizer, PiecesCoverLongInputs) {
  auto p = PreTokenizer::create("qwen35");
  ASSERT_TRUE(p.ok());
  std::string s(200000, ' ');
  s += "x";
  s += std::string(100000, 'a');
  auto pieces = p->split(s);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), 199999u);
  EXPECT_EQ(pieces[1], " x" + std::string(100000, 'a'));
}

// ---- hand-made vocabularies ----

// 256 byte tokens (id = byte), then one token per merge result, then `extra` (text, type).
Vocab byte_vocab(const std::vector<std::pair<std::string, std::string>>& merges,
                 const std::vector<std::pair<std::string, int>>& extra = {}) {
  Vocab v;
  v.pre = "qwen2";
  for (int b = 0; b < 256; b++) v.tokens.push_back(ByteMap::get().byte_to_utf8[b]);
  v.types.assign(256, 1);
  for (const auto& [a, b] : merges) {
    std::string ea = byte_level_encode(a), eb = byte_level_encode(b);
    v.merges.push_back(ea + " " + eb);
    if (std::find(v.tokens.begin(), v.tokens.end(), ea + eb) == v.tokens.end()) {
      v.tokens.push_back(ea + eb);
      v.types.push_back(1);
    }
  }
  for (const auto& [t, ty] : extra) {
    v.tokens.push_back(t);
    v.types.push_back(ty);
  }
  return v;
}

Tokenizer make(Vocab v) {
  auto t = Tokenizer::from_vocab(std::move(v));
  EXPECT_TRUE(t.ok()) << t.error().message;
  return std::move(t).value();
}

std::vector<std::string> texts(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.token_bytes(id));
  return out;
}

TEST(Bpe, LowestRankFirstThenLeftmost) {
  // ranks: 0 "b c", 1 "a b", 2 "a bc", 3 "ab c"
  Tokenizer t = make(byte_vocab({{"b", "c"}, {"a", "b"}, {"a", "bc"}, {"ab", "c"}}));
  // "abc": b+c (rank 0) first, then a+bc -> "abc" (via rank 2, never ab+c)
  auto ids = t.encode("abc");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(t.token_bytes(ids[0]), "abc");
  EXPECT_EQ(*t.token_id(byte_level_encode("abc")), ids[0]);
  EXPECT_EQ(texts(t, t.encode("abab")), (Pieces{"ab", "ab"}));
  EXPECT_EQ(texts(t, t.encode("cab")), (Pieces{"c", "ab"}));

  // Equal ranks: the leftmost pair merges first, so "aaa" -> "aa" "a", "aaaaa" -> "aaaa" "a".
  Tokenizer u = make(byte_vocab({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(texts(u, u.encode("aaa")), (Pieces{"aa", "a"}));
  EXPECT_EQ(texts(u, u.encode("aaaaa")), (Pieces{"aaaa", "a"}));
  EXPECT_EQ(texts(u, u.encode("aaaaaaa")), (Pieces{"aaaa", "aa", "a"}));
}

TEST(Bpe, MergeMapFirstInsertWins) {
  MergeMap m;
  for (int i = 0; i < 1000; i++) EXPECT_TRUE(m.insert(i, i + 1, i, 5000 + i));
  EXPECT_FALSE(m.insert(3, 4, 999, 1));
  EXPECT_EQ(m.find(3, 4)->rank, 3);
  EXPECT_EQ(m.find(3, 4)->id, 5003);
  EXPECT_EQ(m.find(4, 3), nullptr);
  EXPECT_EQ(m.size(), 1000u);
}

TEST(Bpe, PieceCacheEvictsWhenFull) {
  PieceCache c(4);
  std::vector<int32_t> out;
  for (int i = 0; i < 10; i++) {
    std::string k = std::to_string(i);
    k.insert(k.begin(), 'k');  // (not "k" + ...: GCC 12 -Wrestrict false positive)
    int32_t ids[2] = {i, -i};
    c.insert(k, PieceCache::hash(k), ids, 2);
    EXPECT_LE(c.size(), 4u);
  }
  EXPECT_TRUE(c.lookup("k9", PieceCache::hash("k9"), out));
  EXPECT_EQ(out, (std::vector<int32_t>{9, -9}));
  EXPECT_FALSE(c.lookup("k0", PieceCache::hash("k0"), out));
}

// ---- added tokens ----

constexpr int kControl = 3, kUser = 4, kUnused = 5;

Vocab special_vocab() {
  return byte_vocab({{"<", "|"}, {"h", "i"}, {" ", "hi"}},
                    {{"<|c|>", kControl}, {"<u>", kUser}, {"|c|", kUser}, {"<|cc|>", kControl},
                     {"[PAD0]", kUnused}, {"<|c", kUser}});
}

TEST(Added, ControlOnlyWithParseSpecialUserAlways) {
  Tokenizer t = make(special_vocab());
  const int32_t c = *t.token_id("<|c|>"), u = *t.token_id("<u>"), cc = *t.token_id("<|cc|>");
  auto with = t.encode("hi<|c|> hi<u><|cc|>", true);
  EXPECT_EQ(with, (std::vector<int32_t>{*t.token_id("hi"), c, *t.token_id(byte_level_encode(" hi")), u, cc}));
  auto without = t.encode("hi<|c|> hi<u><|cc|>", false);
  for (int32_t id : without) EXPECT_FALSE(t.is_control(id)) << id;
  EXPECT_NE(std::find(without.begin(), without.end(), u), without.end());
  EXPECT_EQ(t.decode(without), "hi<|c|> hi<u><|cc|>");
  EXPECT_EQ(t.decode(with), "hi<|c|> hi<u><|cc|>");
  EXPECT_EQ(t.decode(with, /*skip_control=*/true), "hi hi<u>");
}

TEST(Added, LeftmostLongestAndConsumedControlText) {
  Tokenizer t = make(special_vocab());
  // "<|c" (user) and "<|c|>" (control) both start at 0: the longest wins. Without special
  // parsing the control match is consumed as text (Hugging Face's rule), so neither "<|c" nor the
  // user token "|c|" inside it is cut out.
  auto with = t.encode("<|c|>", true);
  EXPECT_EQ(with, (std::vector<int32_t>{*t.token_id("<|c|>")}));
  auto without = t.encode("<|c|>", false);
  EXPECT_EQ(t.decode(without), "<|c|>");
  EXPECT_EQ(std::count(without.begin(), without.end(), *t.token_id("|c|")), 0);
  EXPECT_EQ(std::count(without.begin(), without.end(), *t.token_id("<|c")), 0);
  // Outside a control token's text, the user token matches.
  auto plain = t.encode("<|cx |c|", false);
  EXPECT_EQ(plain.front(), *t.token_id("<|c"));
  EXPECT_EQ(plain.back(), *t.token_id("|c|"));
}

TEST(Added, ControlTokensCannotBeInjected) {
  // Random mixes of control-token text and fragments never give a control or unused id without
  // special parsing.
  Tokenizer t = make(special_vocab());
  const char* parts[] = {"<|c|>", "<|cc|>", "<", "|", "c", ">", "<u>", "[PAD0]", " hi", "\xff"};
  std::mt19937 rng(3);
  for (int k = 0; k < 2000; k++) {
    std::string s;
    for (int i = 0; i < 8; i++) s += parts[rng() % std::size(parts)];
    for (int32_t id : t.encode(s, false)) {
      ASSERT_FALSE(t.is_control(id)) << s;
      ASSERT_NE(t.token_type(id), TokenType::Unused) << s;
    }
    for (int32_t id : t.encode(s, true)) ASSERT_NE(t.token_type(id), TokenType::Unused) << s;
  }
}

TEST(Added, MergesIntoControlTokensAreIgnored) {
  // A vocabulary whose merges would build a control token: BPE must not produce it.
  Vocab v = byte_vocab({{"a", "b"}});
  v.types[256] = kControl;  // "ab" is a control token now
  Tokenizer t = make(std::move(v));
  EXPECT_EQ(texts(t, t.encode("ab", false)), (Pieces{"a", "b"}));
  EXPECT_EQ(t.encode("ab", true), (std::vector<int32_t>{256}));  // the control token's text
}

TEST(Decode, UnusedAndOutOfRangeIdsDecodeToNothing) {
  Tokenizer t = make(special_vocab());
  const int32_t pad = *t.token_id("[PAD0]");
  std::vector<int32_t> ids = {'h', pad, -1, t.n_vocab(), 1 << 30, 'i'};
  EXPECT_EQ(t.decode(ids), "hi");
  EXPECT_FALSE(t.valid_id(-1));
  EXPECT_EQ(t.token_type(t.n_vocab()), TokenType::Undefined);
}

// ---- encode/decode round trips and streaming ----

std::string random_utf8(std::mt19937& rng, int max_len) {
  static const uint32_t pool[] = {'a', 'b', 'c', 'h', 'i', ' ', '\n', '\t', '<', '|', '>', '\'', 's', '1', '.',
                                  0xe9, 0x301, 0x323, 0x4e16, 0xac00, 0x11a8, 0x1f600, 0x212b, 0x3000,
                                  0x180e, 0x85, 0x94d, 0x928, 0xfffd, 0x10ffff};
  std::string s;
  int len = (int)(rng() % (max_len + 1));
  for (int i = 0; i < len; i++) {
    uint32_t cp = (rng() % 4 == 0) ? (uint32_t)(rng() % 0x110000) : pool[rng() % std::size(pool)];
    if (cp >= 0xd800 && cp < 0xe000) cp = 'x';  // surrogates are not characters
    append_utf8(cp, s);
  }
  return s;
}

TEST(RoundTrip, DecodeEncodeIsNfcOnRandomText) {
  Tokenizer t = make(byte_vocab({{"h", "i"}, {" ", "hi"}, {"a", "b"}, {"ab", "c"}}, {{"<u>", kUser}, {"<|c|>", kControl}}));
  std::mt19937 rng(11);
  for (int k = 0; k < 3000; k++) {
    std::string s = random_utf8(rng, 24);
    ASSERT_EQ(t.decode(t.encode(s, false)), nfc(s)) << "case " << k;
    ASSERT_EQ(t.decode(t.encode(s, true)), nfc(s)) << "case " << k;
  }
}

TEST(RoundTrip, InvalidUtf8IsRepairedNotFatal) {
  Tokenizer t = make(byte_vocab({{"h", "i"}}));
  std::mt19937 rng(5);
  for (int k = 0; k < 2000; k++) {
    std::string s;
    int len = (int)(rng() % 16);
    for (int i = 0; i < len; i++) s.push_back((char)(rng() % 256));
    auto ids = t.encode(s);
    ASSERT_EQ(ids, t.encode(sanitize_utf8(s)));
    ASSERT_EQ(t.decode(ids), nfc(sanitize_utf8(s)));
  }
  EXPECT_EQ(t.decode(t.encode("hi\xff")), "hi\uFFFD");
  const std::string nul("a\0e\u0301\0", 6);  // NUL bytes are text like any other
  EXPECT_EQ(t.decode(t.encode(nul)), std::string("a\0\u00e9\0", 5));
}

TEST(Stream, ConcatenationEqualsOneShotDecode) {
  Tokenizer t = make(special_vocab());
  std::mt19937 rng(9);
  for (int k = 0; k < 3000; k++) {
    // Random ids (mostly single bytes, so characters split over tokens and broken sequences occur).
    std::vector<int32_t> ids;
    int len = (int)(rng() % 20);
    for (int i = 0; i < len; i++) ids.push_back((int32_t)(rng() % (t.n_vocab() + 2)) - 1);
    for (bool skip : {false, true}) {
      StreamDecoder sd(t, skip);
      std::string all;
      for (int32_t id : ids) {
        std::string piece = sd.feed(id);
        ASSERT_FALSE(find_invalid_utf8(piece).has_value());
        all += piece;
        ASSERT_LE(sd.pending_bytes(), 3u);
      }
      all += sd.flush();
      ASSERT_EQ(all, t.decode(ids, skip)) << "case " << k;
      ASSERT_EQ(sd.pending_bytes(), 0u);
    }
  }
}

TEST(Stream, HoldsASplitCharacterUntilComplete) {
  Tokenizer t = make(byte_vocab({}));
  StreamDecoder sd(t);
  // U+20AC EURO SIGN = E2 82 AC, one byte token each
  EXPECT_EQ(sd.feed(0xe2), "");
  EXPECT_EQ(sd.feed(0x82), "");
  EXPECT_EQ(sd.feed(0xac), "\u20ac");
  EXPECT_EQ(sd.feed(0xe2), "");
  EXPECT_EQ(sd.flush(), "\uFFFD");  // dangling at the end
  EXPECT_EQ(sd.feed('x'), "x");
}

TEST(Concurrency, ParallelEncodesAgree) {
  Tokenizer t = make(byte_vocab({{"h", "i"}, {" ", "hi"}, {"a", "b"}}));
  std::mt19937 rng(1);
  std::vector<std::string> inputs;
  for (int i = 0; i < 200; i++) inputs.push_back(random_utf8(rng, 40));
  std::vector<std::vector<int32_t>> want;
  for (auto& s : inputs) want.push_back(t.encode(s));
  std::vector<std::thread> th;
  std::vector<int> bad(4, 0);
  for (int w = 0; w < 4; w++) {
    th.emplace_back([&, w] {
      for (int rep = 0; rep < 5; rep++)
        for (size_t i = 0; i < inputs.size(); i++) bad[w] += t.encode(inputs[i]) != want[i];
    });
  }
  for (auto& x : th) x.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

// ---- vocabulary errors ----

TEST(VocabErrors, ClearMessages) {
  auto expect_err = [](Vocab v, const std::string& needle) {
    auto t = Tokenizer::from_vocab(std::move(v));
    ASSERT_FALSE(t.ok()) << needle;
    EXPECT_NE(t.error().message.find(needle), std::string::npos) << t.error().message;
  };
  Vocab v = byte_vocab({{"a", "b"}});
  v.model = "llama";
  expect_err(v, "'llama'");
  v = byte_vocab({});
  v.pre = "gpt-4o";
  expect_err(v, "'gpt-4o'");
  v = byte_vocab({});
  v.tokens.erase(v.tokens.begin() + ' ');
  v.types.pop_back();
  expect_err(v, "byte 0x20");
  v = byte_vocab({});
  v.merges.push_back("a");
  expect_err(v, "merge 0");
  v = byte_vocab({});
  v.merges.push_back("a zz");
  expect_err(v, "'zz'");
  v = byte_vocab({});
  v.types.push_back(1);
  expect_err(v, "257 token types for 256 tokens");
  v = byte_vocab({});
  v.types[7] = 9;
  expect_err(v, "type 9");
  v = byte_vocab({});
  v.eos_id = 256;
  expect_err(v, "eos id 256");
  expect_err(Vocab{}, "no tokens");
}

TEST(Ids, EosAndStopIds) {
  Vocab v = byte_vocab({}, {{"<|endoftext|>", kControl}, {"<|im_end|>", kControl}});
  v.eos_id = 257;
  Tokenizer t = make(std::move(v));
  EXPECT_EQ(t.eos_id(), 257);
  EXPECT_EQ(t.stop_ids(), (std::vector<int32_t>{257, 256}));
  EXPECT_FALSE(t.bos_id().has_value());
  Tokenizer u = make(byte_vocab({}));
  EXPECT_EQ(u.eos_id(), -1);
  EXPECT_TRUE(u.stop_ids().empty());
}

}  // namespace
}  // namespace ds::tokenizer
