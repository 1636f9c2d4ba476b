// response_format in the engine, on the fake backend (hash logits: a model that writes anything): constrained
// replies are documents of their schema, greedy and sampled; json_object replies are objects or cut by
// max_tokens; the constraint starts after </think> when asked; unconstrained requests beside them are unchanged.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/byte_codec.h"
#include "engine/engine.h"
#include "engine/fake_backend.h"
#include "engine_rig.h"
#include "grammar/schema.h"

namespace ds::engine {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::ordered_json;

FakeBackendOptions fake_opts() {
  FakeBackendOptions o;
  o.n_vocab = ByteCodec::kVocab;
  o.n_ctx = 4096;
  o.n_slots = 4;
  o.suppressed = {ByteCodec::kImEnd, ByteCodec::kEndOfText};  // the end comes from the mask alone
  return o;
}

struct Out {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::None;
};

Out collect(RequestHandle& h) {
  Out r;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<Event> evs;
    h.wait(evs, 50ms);
    for (auto& e : evs) {
      r.text += e.text;
      for (auto& t : e.tokens) r.tokens.push_back(t.id);
      if (e.finish != FinishReason::None) {
        r.finish = e.finish;
        return r;
      }
    }
  }
  ADD_FAILURE() << "request did not finish in time";
  return r;
}

std::shared_ptr<const grammar::Constraint> constraint_of(const std::string& schema) {
  auto r = grammar::compile_schema(json::parse(schema), "schema");
  EXPECT_TRUE(std::holds_alternative<grammar::Grammar>(r));
  return std::make_shared<grammar::Constraint>(std::get<grammar::Grammar>(std::move(r)));
}

// Every choice bounded (booleans, enums, short arrays): a document always ends.
const char* kBounded = R"({"type": "object", "properties": {
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"enum": [1, 2, 3]}, "maxItems": 3},
    "maybe": {"type": ["null", "boolean"]}},
  "required": ["ok", "color", "tags"], "additionalProperties": false})";

// A hand-written check of kBounded.
void expect_bounded_instance(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << text;
    return;
  }
  ASSERT_TRUE(j.is_object()) << text;
  std::vector<std::string> keys;
  for (auto& [k, v] : j.items()) keys.push_back(k);
  const bool with_maybe = keys.size() == 4;
  std::vector<std::string> want = {"ok", "color", "tags"};
  if (with_maybe) want.push_back("maybe");
  EXPECT_EQ(keys, want) << text;
  EXPECT_TRUE(j["ok"].is_boolean()) << text;
  EXPECT_TRUE(j["color"] == "red" || j["color"] == "green" || j["color"] == "blue") << text;
  ASSERT_TRUE(j["tags"].is_array()) << text;
  EXPECT_LE(j["tags"].size(), 3u) << text;
  for (auto& t : j["tags"]) EXPECT_TRUE(t == 1 || t == 2 || t == 3) << text;
  if (with_maybe) {
    EXPECT_TRUE(j["maybe"].is_null() || j["maybe"].is_boolean()) << text;
  }
}

GenerationRequest request(int seed, std::shared_ptr<const grammar::Constraint> c, float temperature) {
  GenerationRequest r;
  for (int i = 0; i < 12; i++) r.prompt.push_back((seed * 37 + i * 11 + 3) % 250);
  r.sampling.temperature = temperature;
  r.sampling.seed = static_cast<uint64_t>(seed);
  r.max_tokens = 2000;
  r.constraint = std::move(c);
  return r;
}

struct Rig : test::EngineRig {
  using EngineRig::EngineRig;
  Out run(GenerationRequest r) {
    auto h = submit(std::move(r));
    return h ? collect(*h) : Out{};
  }
};

TEST(Constraint, BoundedSchemaGreedyAndSampled) {
  Rig rig(fake_opts());
  auto c = constraint_of(kBounded);
  for (int seed = 0; seed < 6; seed++) {
    for (float temp : {0.0f, 1.0f}) {
      const Out r = rig.run(request(seed, c, temp));
      EXPECT_EQ(r.finish, FinishReason::Stop) << "seed " << seed << " temperature " << temp << ": " << r.text;
      ASSERT_FALSE(r.tokens.empty());
      EXPECT_TRUE(rig.codec.is_eog(r.tokens.back())) << "ends on an end-of-generation token";
      expect_bounded_instance(r.text);
    }
  }
  EXPECT_GT(c->cache_size(), 0u);
}

// The vocabulary's trie exists once the engine is constructed (the server constructs it before it listens), not
// only after the engine thread built it at the first constrained request; constrained replies use that same trie.
TEST(Constraint, TrieBuiltWithTheEngine) {
  ByteCodec codec;
  FakeBackend fb(fake_opts());
  Engine eng(fb, codec, {});
  const grammar::TokenTrie* trie = eng.vocabulary_trie();
  ASSERT_TRUE(trie);
  EXPECT_EQ(trie->n_vocab(), codec.n_vocab());
  EXPECT_GT(trie->n_nodes(), 256u);  // the root and a node per byte token
  eng.start();
  auto c = constraint_of(kBounded);
  for (int seed = 0; seed < 3; seed++) {
    auto s = eng.submit(request(seed, c, seed ? 1.0f : 0.0f));
    ASSERT_EQ(s.status, SubmitStatus::Ok) << s.message;
    const Out r = collect(*s.handle);
    EXPECT_EQ(r.finish, FinishReason::Stop) << r.text;
    expect_bounded_instance(r.text);
  }
  EXPECT_EQ(eng.vocabulary_trie(), trie);
}

// The async step walks a constrained row's mask while the step runs (Seq::mask); the synchronous order walks it at
// sampling: the same replies, token for token, with several constrained rows in each step.
TEST(Constraint, MasksMadeDuringTheStepGiveTheSameReplies) {
  auto c = constraint_of(kBounded);
  auto run_all = [&](bool async) {
    EngineConfig ec;
    ec.async_step = async;
    Rig rig(fake_opts(), ec);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (int seed = 0; seed < 4; seed++) {
      auto s = rig.eng.submit(request(seed, c, seed % 2 ? 1.0f : 0.0f));
      EXPECT_EQ(s.status, SubmitStatus::Ok);
      hs.push_back(s.handle);
    }
    std::vector<Out> outs;
    for (auto& h : hs) outs.push_back(collect(*h));
    return outs;
  };
  const auto sync = run_all(false), async = run_all(true);
  ASSERT_EQ(sync.size(), async.size());
  for (size_t i = 0; i < sync.size(); i++) {
    EXPECT_EQ(sync[i].tokens, async[i].tokens) << "request " << i;
    EXPECT_EQ(async[i].finish, FinishReason::Stop) << async[i].text;
    expect_bounded_instance(async[i].text);
  }
}

TEST(Constraint, JsonObjectParsesOrIsCutByLength) {
  Rig rig(fake_opts());
  auto c = std::make_shared<grammar::Constraint>(grammar::any_object());
  int stopped = 0;
  for (int seed = 0; seed < 6; seed++) {
    GenerationRequest g = request(seed, c, 1.0f);
    g.max_tokens = 60;
    const Out r = rig.run(std::move(g));
    ASSERT_FALSE(r.text.empty());
    EXPECT_TRUE(r.text.find_first_not_of(" \t\r\n") != std::string::npos && r.text[r.text.find_first_not_of(" \t\r\n")] == '{')
        << r.text;
    if (r.finish == FinishReason::Stop) {
      stopped++;
      EXPECT_TRUE(json::parse(r.text).is_object()) << r.text;
    } else {
      EXPECT_EQ(r.finish, FinishReason::Length);
      grammar::Matcher m(c->grammar());  // cut, but a prefix of a document
      EXPECT_TRUE(m.advance(r.text)) << r.text;
    }
  }
  // An object that must end soon: max_tokens large, and the fake model closes objects sometimes.
  (void)stopped;
}

TEST(Constraint, OverridesTheModelsChoice) {
  auto o = fake_opts();
  o.oracle = [](std::span<const int32_t>) -> int32_t { return 'x'; };  // the model wants 'x' forever
  Rig rig(o);
  const Out r = rig.run(request(1, constraint_of(R"({"enum": ["xyz", "ab"]})"), 0.0f));
  EXPECT_EQ(r.text.substr(r.text.find_first_not_of(" \t\r\n")), "\"xyz\"");  // after some whitespace
  EXPECT_EQ(r.finish, FinishReason::Stop);
}

TEST(Constraint, StartsAfterThinkEnd) {
  auto o = fake_opts();
  o.oracle = [](std::span<const int32_t> h) -> int32_t {  // "hm</think>" after the prompt, then the hash model
    static const std::vector<int32_t> script = {'h', 'm', ByteCodec::kThinkEnd};
    size_t k = 0;
    while (k < h.size() && h[h.size() - 1 - k] != 0x7f) k++;
    return k < script.size() ? script[k] : -1;
  };
  Rig rig(o);
  auto c = constraint_of(kBounded);
  for (int seed = 0; seed < 3; seed++) {
    GenerationRequest g = request(seed, c, 1.0f);
    g.prompt.push_back(0x7f);
    g.constraint_after = ByteCodec::kThinkEnd;
    const Out r = rig.run(g);
    ASSERT_EQ(r.text.rfind("hm</think>", 0), 0u) << r.text;
    expect_bounded_instance(r.text.substr(10));
    EXPECT_EQ(r.finish, FinishReason::Stop);
    // Without constraint_after the reasoning cannot happen: the document starts at once.
    g.constraint_after = -1;
    const Out d = rig.run(g);
    expect_bounded_instance(d.text);
  }
}

TEST(Constraint, UnconstrainedNeighboursAreUnchanged) {
  Rig alone(fake_opts()), mixed(fake_opts());
  auto c = constraint_of(kBounded);
  std::vector<Out> want;
  for (int seed = 10; seed < 13; seed++) {
    GenerationRequest g = request(seed, nullptr, 0.0f);
    g.max_tokens = 40;
    want.push_back(alone.run(g));
  }
  // The same requests again, each beside a constrained one in the same batch.
  std::vector<std::shared_ptr<RequestHandle>> hs, cs;
  for (int seed = 10; seed < 13; seed++) {
    GenerationRequest g = request(seed, nullptr, 0.0f);
    g.max_tokens = 40;
    cs.push_back(mixed.eng.submit(request(seed + 100, c, 1.0f)).handle);
    hs.push_back(mixed.eng.submit(g).handle);
  }
  for (size_t i = 0; i < hs.size(); i++) {
    const Out r = collect(*hs[i]);
    EXPECT_EQ(r.tokens, want[i].tokens);
    expect_bounded_instance(collect(*cs[i]).text);
  }
}

}  // namespace
}  // namespace ds::engine
