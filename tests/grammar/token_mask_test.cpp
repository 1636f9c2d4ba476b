// Token masks on the real Qwen3 vocabulary (151k tokens): the trie walk gives exactly the set that checking
// every token on its own gives, in several states; special tokens never, end-of-generation only when complete.
// Also measures the cost of one mask (printed; the cached path too).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/fake_backend.h"
#include "engine/token_trie.h"
#include "engine/tokenizer_codec.h"
#include "gguf/gguf.h"
#include "grammar/schema.h"
#include "grammar/token_mask.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

namespace ds::grammar {
namespace {


struct Vocab {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<engine::TokenizerCodec> codec;
  std::unique_ptr<TokenTrie> trie;
};

const Vocab& qwen3() {
  static Vocab v = [] {
    Vocab v;
    auto f = gguf::File::open(test::vocab_gguf("vocab-qwen3"));
    if (!f.ok()) throw std::runtime_error(f.error().message);
    auto t = tokenizer::Tokenizer::from_gguf(*f);
    if (!t.ok()) throw std::runtime_error(t.error().message);
    v.tok = std::make_unique<tokenizer::Tokenizer>(std::move(t).value());
    v.codec = std::make_unique<engine::TokenizerCodec>(*v.tok);
    v.trie = engine::make_token_trie(*v.codec);
    return v;
  }();
  return v;
}

// Every token checked on its own.
Mask brute_force(const engine::TextCodec& codec, const Matcher& m) {
  Mask out((codec.n_vocab() + 63) / 64, 0);
  for (int32_t t = 0; t < codec.n_vocab(); t++) {
    bool ok;
    if (codec.is_eog(t)) {
      ok = m.complete();
    } else if (codec.is_special(t) || codec.is_control(t)) {
      ok = false;
    } else {
      const std::string b = codec.token_bytes(t);
      Matcher c = m;
      ok = !b.empty() && c.advance(b);
    }
    if (ok) out[t >> 6] |= uint64_t(1) << (t & 63);
  }
  return out;
}

int32_t count(const Mask& m) {
  int32_t n = 0;
  for (uint64_t w : m) n += __builtin_popcountll(w);
  return n;
}

Grammar schema_grammar() {
  auto r = compile_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "minLength": 3, "maxLength": 10}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
      "n": {"type": "integer"}}, "required": ["name", "n"]})"),
                          "schema");
  return std::get<Grammar>(std::move(r));
}

// {"k": string} with maxLength 3, 4, ... (n of them): anyOf branches the first bytes cannot tell apart, all
// followed inside the string.
Grammar string_alternatives(int n) {
  nlohmann::ordered_json alts = nlohmann::ordered_json::array();
  for (int i = 0; i < n; i++)
    alts.push_back({{"type", "object"}, {"properties", {{"k", {{"type", "string"}, {"maxLength", 3 + i}}}}}});
  return std::get<Grammar>(compile_schema(nlohmann::ordered_json{{"anyOf", alts}}, "schema"));
}

TEST(TokenMask, TrieWalkEqualsEveryTokenAlone) {
  const Vocab& v = qwen3();
  ASSERT_GT(v.codec->n_vocab(), 150000);
  const Grammar obj = any_object(), sch = schema_grammar(), alts = string_alternatives(4);
  struct State {
    const Grammar* g;
    std::string prefix;
  };
  const State states[] = {
      {&obj, ""},                               // the start: '{' and whitespace only
      {&obj, "{\"key\": \"some va"},            // inside a string
      {&obj, "{\"a\": 1, "},                    // between object members
      {&obj, "{\"a\": 12"},                     // inside a number
      {&obj, "{\"a\": [true, {\"b\": \"\\u00"},  // inside a \u escape
      {&obj, "{\"a\": \"\xe2\x82"},              // inside a UTF-8 sequence
      {&obj, "{\"a\": {}}"},                    // complete: only end-of-generation tokens
      {&sch, "{\""},                             // a declared key
      {&sch, "{\"name\": \"xyz\", "},            // the next declared keys
      {&sch, "{\"name\": \"xyz\", \"tags\": [\"a\","},
      {&sch, "{\"name\": \"x"},            // a string below its minLength: no closing quote yet
      {&sch, "{\"name\": \"abcdefgh"},     // two characters left: longer tokens are out
      {&sch, "{\"name\": \"abc\xc3\xa9\\u00e9x\u00e9"},  // ... counting UTF-8 and escapes as one each
      {&alts, "{\"k\": \"ab"},    // four stacks inside strings of maxLength 3, 4, 5, 6
      {&alts, "{\"k\": \"abcd"},  // two of them full: tokens of 1 and 2 characters
      {&alts, "{\"k\": \"abcd\xc3\xa9"},
  };
  for (const State& s : states) {
    Matcher m(*s.g);
    ASSERT_TRUE(m.advance(s.prefix)) << s.prefix;
    Mask trie;
    v.trie->mask(m, trie);
    const Mask brute = brute_force(*v.codec, m);
    EXPECT_EQ(trie, brute) << s.prefix << ": trie " << count(trie) << " tokens, brute force " << count(brute);
    EXPECT_GT(count(trie), 0) << s.prefix;
    for (int32_t t = 0; t < v.codec->n_vocab(); t++)
      if (v.codec->is_special(t) && !v.codec->is_eog(t)) ASSERT_FALSE(allowed(trie, t)) << s.prefix << " token " << t;
  }
  // The complete document allows exactly the end-of-generation tokens.
  Matcher done(obj);
  ASSERT_TRUE(done.advance(std::string("{}")));
  Mask m;
  v.trie->mask(done, m);
  for (int32_t t = 0; t < v.codec->n_vocab(); t++) EXPECT_EQ(allowed(m, t), v.codec->is_eog(t)) << t;
}

// The whole path on the real vocabulary: the engine on the fake backend (random logits over 151,936 tokens) with the
// Qwen3 codec writes instances of a schema whose every choice is bounded, greedy and sampled; multi-byte tokens
// ("},", "\":", runs of spaces, UTF-8 pieces) cross the document's structure.
TEST(TokenMask, EngineWritesInstancesWithTheQwen3Vocabulary) {
  const Vocab& v = qwen3();
  engine::FakeBackendOptions o;
  o.n_vocab = v.codec->n_vocab();
  o.n_ctx = 2048;
  o.n_slots = 2;
  engine::FakeBackend fb(o);
  engine::EngineConfig ec;
  ec.warm_up = false;
  engine::Engine eng(fb, *v.codec, ec);
  eng.start();
  auto r = compile_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "ok": {"type": "boolean"}, "name": {"type": "string", "maxLength": 6},
      "tags": {"type": "array", "items": {"enum": ["x", "yz"]}, "maxItems": 2}, "n": {"enum": [1, 20, 300]}},
      "required": ["ok", "name", "tags", "n"], "additionalProperties": false})"),
                          "schema");
  auto c = std::make_shared<Constraint>(std::get<Grammar>(std::move(r)));
  for (int seed = 0; seed < 4; seed++) {
    engine::GenerationRequest g;
    g.prompt = {1000 + seed, 2000, 3000};
    g.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
    g.sampling.seed = seed;
    g.max_tokens = 1000;
    g.constraint = c;
    auto sub = eng.submit(std::move(g));
    ASSERT_EQ(sub.status, engine::SubmitStatus::Ok) << sub.message;
    std::string text;
    engine::FinishReason fin = engine::FinishReason::None;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (fin == engine::FinishReason::None && std::chrono::steady_clock::now() < deadline) {
      std::vector<engine::Event> evs;
      sub.handle->wait(evs, std::chrono::milliseconds(50));
      for (auto& e : evs) {
        text += e.text;
        if (e.finish != engine::FinishReason::None) fin = e.finish;
      }
    }
    EXPECT_EQ(fin, engine::FinishReason::Stop) << text;
    const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_EQ(j.size(), 4u) << text;
    EXPECT_TRUE(j["ok"].is_boolean()) << text;
    ASSERT_TRUE(j["name"].is_string()) << text;
    size_t chars = 0;
    for (unsigned char ch : j["name"].get<std::string>()) chars += (ch & 0xC0) != 0x80;
    EXPECT_LE(chars, 6u) << text;  // code points
    ASSERT_TRUE(j["tags"].is_array()) << text;
    EXPECT_LE(j["tags"].size(), 2u) << text;
    for (auto& t : j["tags"]) EXPECT_TRUE(t == "x" || t == "yz") << text;
    EXPECT_TRUE(j["n"] == 1 || j["n"] == 20 || j["n"] == 300) << text;
    std::printf("seed %d: %s\n", seed, nlohmann::json(text).dump().c_str());
  }
  eng.stop();
}

TEST(TokenMask, CacheKeepsTriesApart) {
  // Two small vocabularies; token 2 ends generation in both. One constraint serves both without mixing them up.
  TokenTrie a({"{", "x", "", "}"}, {}, {2});
  TokenTrie b({"[", "{}", "", "{"}, {}, {2});
  Constraint c(any_object());
  Matcher m(c.grammar());
  const Mask ma = *c.mask(a, m), mb = *c.mask(b, m);
  EXPECT_TRUE(allowed(ma, 0) && !allowed(ma, 1) && !allowed(ma, 2) && !allowed(ma, 3));
  EXPECT_TRUE(!allowed(mb, 0) && allowed(mb, 1) && !allowed(mb, 2) && allowed(mb, 3));
  EXPECT_EQ(*c.mask(a, m), ma);  // from the cache, still a's
  Matcher done(c.grammar());
  ASSERT_TRUE(done.advance(std::string("{}")));
  const Mask md = *c.mask(b, done);
  EXPECT_TRUE(allowed(md, 2) && !allowed(md, 0) && !allowed(md, 1) && !allowed(md, 3));  // only the end
}

TEST(TokenMask, ApplyMaskSetsTheRestToMinusInfinity) {
  Mask m(3, 0);  // 130 tokens: bits for 0, 63, 64, 129
  m[0] = 1 | uint64_t(1) << 63;
  m[1] = 1;
  m[2] = 2;
  std::vector<float> logits(140, 1.0f);  // the model pads its vocabulary to 140
  EXPECT_TRUE(apply_mask(m, 130, logits));
  for (int t = 0; t < 140; t++) {
    const bool keep = t == 0 || t == 63 || t == 64 || t == 129;
    EXPECT_EQ(logits[t], keep ? 1.0f : -std::numeric_limits<float>::infinity()) << t;
  }
  std::fill(m.begin(), m.end(), ~uint64_t(0));
  std::fill(logits.begin(), logits.end(), 2.0f);
  EXPECT_TRUE(apply_mask(m, 130, logits));
  EXPECT_EQ(logits[129], 2.0f);
  EXPECT_EQ(logits[130], -std::numeric_limits<float>::infinity());
  std::fill(m.begin(), m.end(), 0);
  EXPECT_FALSE(apply_mask(m, 130, logits));
}

TEST(TokenMask, CostPerStep) {
  const Vocab& v = qwen3();
  const Grammar obj = any_object();
  auto lim = compile_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"s": {"type": "string",
      "maxLength": 200}}})"), "schema");
  const Grammar limited = std::get<Grammar>(std::move(lim));
  struct State {
    const char* what;
    const Grammar* g;
    const char* prefix;
  };
  const State states[] = {
      {"inside a string", &obj, "{\"key\": \"some va"},
      {"inside a string with maxLength", &limited, "{\"s\": \"some va"},
      {"inside a UTF-8 character", &obj, "{\"k\": \"\xe4"},
      {"between object members", &obj, "{\"a\": 1, "},
      {"after a colon", &obj, "{\"a\":"},
      {"inside a number", &obj, "{\"a\": 12"},
      {"the start", &obj, ""},
  };
  for (const State& s : states) {
    Matcher m(*s.g);
    ASSERT_TRUE(m.advance(std::string(s.prefix)));
    Mask out;
    const int reps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; i++) v.trie->mask(m, out);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    Constraint c(*s.g);
    c.mask(*v.trie, m);  // fills the cache
    const auto t1 = std::chrono::steady_clock::now();
    Mask cached;
    for (int i = 0; i < reps; i++) cached = *c.mask(*v.trie, m);
    const double ms_cached =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count() / reps;
    EXPECT_EQ(cached, out);
    std::vector<float> row(v.codec->n_vocab(), 0.5f);
    const auto t2 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; i++) apply_mask(*c.mask(*v.trie, m), v.codec->n_vocab(), row);
    const double ms_step =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t2).count() / reps;
    std::printf("mask %-32s %7.3f ms walked, %6.3f ms cached, %6.3f ms cached + applied to the row, %6d of %d tokens\n",
                s.what, ms, ms_cached, ms_step, count(out), v.codec->n_vocab());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto again = engine::make_token_trie(*v.codec);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(again->id(), v.trie->id());
  std::printf("(Qwen3 vocabulary, trie of %zu nodes, built in %.0f ms)\n", v.trie->n_nodes(), build_ms);
}

// 32 alternatives inside a string (each its own maxLength, so that the count is in the state and the cache rarely
// serves them: one walk per step): the walk shares the state across plain characters for all of them. It
// advanced every stack at every trie node before: 2.2 s a mask on the shared 2-core machine, the engine thread
// stalled for every request at every step of such a reply.
TEST(TokenMask, ManyAlternativesInsideAStringCostLittle) {
  const Vocab& v = qwen3();
  const Grammar g = string_alternatives(32);
  Matcher m(g);
  ASSERT_TRUE(m.advance(std::string("{\"k\": \"some va")));
  Mask out;
  const auto t0 = std::chrono::steady_clock::now();
  v.trie->mask(m, out);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("mask with 32 alternatives inside a string: %.1f ms\n", ms);
  EXPECT_LT(ms, 400);
  EXPECT_EQ(out, brute_force(*v.codec, m));
}

// The mask caches of all constraints together stay within their byte bound (here 64 KB; the server's is 256 MiB),
// however many schemas are in use and however many distinct states their documents reach; masks stay right when
// they are not kept. Before, each constraint kept up to 2,048 masks and keys of its own: 64 cached schemas could
// hold 2.5 GB of masks on the Qwen3 vocabulary, more with deep states' keys.
TEST(TokenMask, CachesShareOneByteBound) {
  std::vector<std::string> bytes;
  for (int a = 0x20; a < 0x7f; a++)
    for (int b = 0x20; b < 0x7f; b += 2) bytes.push_back(std::string(1, char(a)) + char(b));
  for (int a = 0x20; a < 0x7f; a++) bytes.push_back(std::string(1, char(a)));
  const TokenTrie trie(bytes, {}, {});
  const size_t mask_bytes = (bytes.size() + 63) / 64 * 8;
  const size_t bound = 64 << 10;
  Constraint::set_max_cached_bytes(bound);
  const Grammar g = std::get<Grammar>(compile_schema(nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"k": {"type": "string", "maxLength": 100000}}})"), "schema"));
  {
    std::vector<std::unique_ptr<Constraint>> cs;
    for (int i = 0; i < 4; i++) cs.push_back(std::make_unique<Constraint>(g));
    for (int step = 0; step < 300; step++) {
      for (auto& c : cs) {
        Matcher m(g);
        ASSERT_TRUE(m.advance("{\"k\":\"" + std::string(step, 'a')));
        Mask direct;
        trie.mask(m, direct);
        EXPECT_EQ(*c->mask(trie, m), direct);
      }
      size_t held = 0;
      for (auto& c : cs) held += c->cache_size() * mask_bytes;
      ASSERT_LE(held, bound) << "step " << step;
      ASSERT_LE(Constraint::cached_bytes(), bound);
    }
    EXPECT_GT(Constraint::cached_bytes(), bound / 2);  // it does cache
  }
  EXPECT_EQ(Constraint::cached_bytes(), 0u);  // freed with the constraints
  Constraint::set_max_cached_bytes(Constraint::kMaxCachedBytes);
}

}  // namespace
}  // namespace ds::grammar
