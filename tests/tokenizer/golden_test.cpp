// The tokenizer against Hugging Face `tokenizers` 0.23 (fixtures/tokenizer/golden-*.jsonl):
// every text must give exactly `ids` without special parsing, `ids_with_specials` with it, and
// decoding `ids_with_specials` must give `decoded`, one-shot and streamed. Plus properties on the
// real vocabularies and the errors from_gguf gives for unsupported files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "gguf/gguf.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ds::tokenizer {
namespace {


// Loaded once per binary: the full vocabulary takes a fraction of a second.
const Tokenizer& load(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[path];
  if (!slot) {
    auto f = gguf::File::open(path);
    if (!f.ok()) throw std::runtime_error(f.error().message);
    auto t = Tokenizer::from_gguf(*f);
    if (!t.ok()) throw std::runtime_error(t.error().message);
    slot = std::make_unique<Tokenizer>(std::move(t).value());
  }
  return *slot;
}

std::string model_file() { return test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf"); }

struct Case {
  std::string text, decoded;
  std::vector<int32_t> ids, ids_with_specials;
};

std::vector<Case> read_golden(const std::string& name) {
  std::ifstream in(test::fixture("tokenizer/" + name));
  EXPECT_TRUE(in.good()) << name;
  std::vector<Case> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    out.push_back({j.at("text"), j.at("decoded"), j.at("ids"), j.at("ids_with_specials")});
  }
  return out;
}

void check_golden(const Tokenizer& tok, const std::string& golden) {
  auto cases = read_golden(golden);
  ASSERT_EQ(cases.size(), 243u) << golden;
  int failures = 0;
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    auto plain = tok.encode(c.text, false);
    auto special = tok.encode(c.text, true);
    std::string decoded = tok.decode(c.ids_with_specials);
    StreamDecoder sd(tok);
    std::string streamed;
    for (int32_t id : c.ids_with_specials) streamed += sd.feed(id);
    streamed += sd.flush();
    const bool ok = plain == c.ids && special == c.ids_with_specials && decoded == c.decoded && streamed == c.decoded;
    EXPECT_EQ(plain, c.ids) << golden << " case " << i << ": " << nlohmann::json(c.text).dump();
    EXPECT_EQ(special, c.ids_with_specials) << golden << " case " << i << ": " << nlohmann::json(c.text).dump();
    EXPECT_EQ(decoded, c.decoded) << golden << " case " << i;
    EXPECT_EQ(streamed, c.decoded) << golden << " case " << i;
    if (!ok && ++failures >= 5) FAIL() << "stopping after 5 failing cases";
  }
}

TEST(Golden, Qwen3) {
  const Tokenizer& t = load(test::vocab_gguf("vocab-qwen3"));
  EXPECT_EQ(t.pre_tokenizer_name(), "qwen2");
  check_golden(t, "golden-qwen3.jsonl");
}

TEST(Golden, Qwen35Regex) {
  const Tokenizer& t = load(test::vocab_gguf("vocab-qwen35re"));
  EXPECT_EQ(t.pre_tokenizer_name(), "qwen35");
  check_golden(t, "golden-qwen35re.jsonl");
}

TEST(Golden, SmallVocabOfTinyModel) {
  const Tokenizer& t = load(model_file());
  EXPECT_EQ(t.n_vocab(), 4032);
  check_golden(t, "golden-small.jsonl");
}

TEST(Vocab, Qwen3SpecialIds) {
  // Ids from Qwen3's tokenizer_config.json; eos / padding from the GGUF's own keys.
  const Tokenizer& t = load(test::vocab_gguf("vocab-qwen3"));
  EXPECT_EQ(t.n_vocab(), 151936);
  EXPECT_EQ(t.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(t.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_id("<think>"), 151667);
  EXPECT_EQ(t.eos_id(), 151645);
  EXPECT_EQ(t.pad_id(), 151643);
  EXPECT_FALSE(t.bos_id().has_value());
  EXPECT_TRUE(t.is_control(151644));
  EXPECT_EQ(t.token_type(151667), TokenType::UserDefined);
  EXPECT_EQ(t.token_type(151935), TokenType::Unused);
  EXPECT_EQ(t.stop_ids(), (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(t.token_text(9707), "Hello");
  EXPECT_EQ(t.token_bytes(21927), " Hello");
  EXPECT_EQ(t.token_text(21927), "\u0120Hello");
}

std::string random_text(std::mt19937& rng) {
  // Mixed scripts, combining marks, whitespace runs, special-token fragments, any code point.
  static const char* frags[] = {"the", " cat", "  ", "\n", "\r\n", "\t", "'s", "'LL", "123", "...", "<|im_end|>",
                                "<think>", "<|", "e\u0301", "\u0928\u094d", "\u4e16\u754c", "\ud55c",
                                "\U0001F600", "\u200d", "\u00a0", "\u180e", "\u212b", "\uac00\u11a8"};
  std::string s;
  int n = (int)(rng() % 16);
  for (int i = 0; i < n; i++) {
    if (rng() % 3 == 0) {
      uint32_t cp = rng() % 0x110000;
      if (cp >= 0xd800 && cp < 0xe000) cp = 'z';
      append_utf8(cp, s);
    } else {
      s += frags[rng() % std::size(frags)];
    }
  }
  return s;
}

TEST(Properties, DecodeEncodeIsNfcAndStreamsMatch) {
  for (const std::string& path : {model_file(), test::vocab_gguf("vocab-qwen35re")}) {
    const Tokenizer& t = load(path);
    std::mt19937 rng(2024);
    for (int k = 0; k < 1500; k++) {
      std::string s = random_text(rng);
      auto ids = t.encode(s, false);
      // User tokens (<think>) split the text before NFC, as in Hugging Face; no fragment here
      // starts with a combining mark, so that equals NFC of the whole text.
      ASSERT_EQ(t.decode(ids), nfc(s)) << path << " case " << k << ": " << nlohmann::json(s).dump();
      StreamDecoder sd(t);
      std::string streamed;
      for (int32_t id : ids) {
        std::string piece = sd.feed(id);
        ASSERT_FALSE(find_invalid_utf8(piece)) << "case " << k;
        streamed += piece;
      }
      streamed += sd.flush();
      ASSERT_EQ(streamed, t.decode(ids)) << "case " << k;
      for (int32_t id : t.encode(s, true)) ASSERT_NE(t.token_type(id), TokenType::Unused);
    }
  }
}

// A vocabulary-only GGUF from the tiny model's tokenizer keys, with some keys replaced.
std::vector<uint8_t> edited_vocab(const std::map<std::string, gguf::Value>& set, const std::vector<std::string>& drop = {}) {
  auto f = gguf::File::open(model_file());
  EXPECT_TRUE(f.ok());
  gguf::Writer w;
  for (const auto& kv : f->metadata()) {
    if (kv.key.rfind("tokenizer.ggml.", 0) != 0) continue;
    if (std::find(drop.begin(), drop.end(), kv.key) != drop.end()) continue;
    w.set(kv.key, kv.value);
  }
  for (const auto& [k, v] : set) w.set(k, v);
  return w.to_bytes();
}

Result<Tokenizer> from_bytes(std::vector<uint8_t> b) {
  auto f = gguf::File::from_bytes(std::move(b), "edited.gguf");
  if (!f.ok()) return f.error();
  return Tokenizer::from_gguf(*f);
}

void expect_error(Result<Tokenizer> r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

TEST(FromGguf, EditedVocabularyStillLoads) {
  auto t = from_bytes(edited_vocab({}));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->encode("Hello world"), load(model_file()).encode("Hello world"));
}

TEST(FromGguf, UnsupportedOrBrokenFilesGiveClearErrors) {
  expect_error(from_bytes(edited_vocab({{"tokenizer.ggml.model", gguf::Value::make_str("llama")}})), "'llama'");
  expect_error(from_bytes(edited_vocab({{"tokenizer.ggml.pre", gguf::Value::make_str("llama-bpe")}})), "'llama-bpe'");
  expect_error(from_bytes(edited_vocab({}, {"tokenizer.ggml.pre"})), "tokenizer.ggml.pre is missing");
  expect_error(from_bytes(edited_vocab({}, {"tokenizer.ggml.merges"})), "tokenizer.ggml.merges");
  expect_error(from_bytes(edited_vocab({{"tokenizer.ggml.eos_token_id", gguf::Value::make_u32(99999)}})),
               "eos id 99999");
  expect_error(from_bytes(edited_vocab({{"tokenizer.ggml.token_type", gguf::Value::make_i32_array({1, 1})}})),
               "2 token types for 4032 tokens");
  expect_error(from_bytes(edited_vocab({{"tokenizer.ggml.tokens", gguf::Value::make_u32(3)}})),
               "tokenizer.ggml.tokens");
  // Every error names the file.
  expect_error(from_bytes(edited_vocab({{"tokenizer.ggml.model", gguf::Value::make_str("t5")}})), "edited.gguf");
}

}  // namespace
}  // namespace ds::tokenizer
