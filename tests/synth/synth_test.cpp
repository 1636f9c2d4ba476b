// Synthetic models: parameter counts against the spec's per-size numbers (qwen35-spec.md §7, which match
// what llama.cpp reports), tensor list / types / order / metadata against files made by llama.cpp's own
// converter + llama-quantize (fixtures/models), and the written tiny model through the reader and config.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/fp16.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/qwen35.h"
#include "tokenizer/tokenizer.h"
#include "quant/quant.h"
#include "synth/synth.h"
#include "testutil.h"

using namespace ds;
using namespace ds::synth;

namespace {

// The tiny-gqa fixture's shape (fixtures/models/tiny-gqa/hf-config.json): nv = 3 nk, nkv 1, untied.
Shape tiny_gqa_shape() {
  Shape s = *preset("tiny");
  s.n_head_kv = 1, s.n_k_heads = 2, s.n_v_heads = 6, s.tied = false;
  return s;
}

void expect_plan_matches_file(const std::vector<PlannedTensor>& plan, const std::string& path) {
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto& ts = f->tensors();
  ASSERT_EQ(plan.size(), ts.size());
  for (size_t i = 0; i < ts.size(); i++) {
    SCOPED_TRACE(ts[i].name);
    EXPECT_EQ(plan[i].name, ts[i].name) << "tensor order differs at " << i;
    EXPECT_EQ(ggml_type_name(plan[i].type), ggml_type_name(ts[i].type));
    ASSERT_EQ(plan[i].ne.size(), ts[i].n_dims);
    for (size_t d = 0; d < plan[i].ne.size(); d++) EXPECT_EQ(plan[i].ne[d], ts[i].ne[d]);
  }
}

}  // namespace

TEST(SynthPlan, ParameterCountsOfEverySize) {
  // Trunk params and MTP-block params per size: qwen35-spec.md §7 (llama.cpp reports 752.39 M, 8.95 B, 26.90 B).
  struct Want {
    const char* size;
    uint64_t trunk, mtp;
  } want[] = {{"0.8B", 752393024, 20452864},
              {"2B", 1881825088, 60828160},
              {"4B", 4205751296, 120599552},
              {"9B", 8953803264, 243290624},
              {"27B", 26895998464ull, 424699392}};
  for (const auto& w : want) {
    SCOPED_TRACE(w.size);
    auto s = preset(w.size);
    ASSERT_TRUE(s.ok());
    for (Mix m : {Mix::Q4_K_M, Mix::Q3_K_M, Mix::Q5_K_M, Mix::Q8_0, Mix::BF16}) {
      auto plan = plan_tensors(*s, m, false, 248320);
      EXPECT_EQ(count_params(plan), w.trunk);
      EXPECT_EQ(count_params(plan_tensors(*s, m, true, 248320)), w.trunk + w.mtp);
    }
  }
  EXPECT_EQ(size_label(752393024), "752M");
  EXPECT_EQ(size_label(8953803264ull), "9.0B");
  EXPECT_EQ(size_label(26895998464ull), "27B");
}

TEST(SynthPlan, FileSizesMatchTheSpecEstimates) {
  // qwen35-spec.md §7.1 (GB of tensor data, no MTP): 0.8B BF16 1.506, Q8_0 0.801, Q4_K_M 0.518; 9B Q4_K_M 5.618;
  // 27B Q4_K_M 16.536. performance.md: llama-bench shows 494 MiB for 0.8B Q4_K_M.
  auto gb = [](const char* size, Mix m) { return count_bytes(plan_tensors(*preset(size), m, false, 248320)) / 1e9; };
  EXPECT_NEAR(gb("0.8B", Mix::BF16), 1.506, 0.0006);
  EXPECT_NEAR(gb("0.8B", Mix::Q8_0), 0.801, 0.0006);
  EXPECT_NEAR(gb("0.8B", Mix::Q4_K_M), 0.518, 0.0006);
  EXPECT_NEAR(gb("9B", Mix::Q4_K_M), 5.618, 0.0006);
  EXPECT_NEAR(gb("27B", Mix::Q4_K_M), 16.536, 0.0006);
  EXPECT_NEAR(count_bytes(plan_tensors(*preset("0.8B"), Mix::Q4_K_M, false, 248320)) / 1048576.0, 494, 0.5);
}

TEST(SynthPlan, MatchesLlamaQuantizeOutputOfTheFixtures) {
  // Same names, order, types and shapes as llama.cpp's converter + llama-quantize wrote for tiny-sym
  // (tied, Q4_K_M and Q8_0) and tiny-gqa (untied, MTP block, Q5_0 fallback for 384-wide rows).
  Shape sym = *preset("tiny");
  expect_plan_matches_file(plan_tensors(sym, Mix::Q4_K_M, false, 4032), test::fixture("models/tiny-sym/tiny-sym-q4_k_m.gguf"));
  expect_plan_matches_file(plan_tensors(sym, Mix::Q8_0, false, 4032), test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf"));
  expect_plan_matches_file(plan_tensors(tiny_gqa_shape(), Mix::Q4_K_M, true, 4032),
                           test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
}

TEST(SynthPlan, UseMoreBitsRule) {
  // llama-quant.cpp: i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
  std::vector<int64_t> got;
  for (int64_t i = 0; i < 24; i++)
    if (use_more_bits(i, 24)) got.push_back(i);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23}));
}

TEST(SynthPlan, Q3KMixFollowsLlamaQuantizeRules) {
  // 9B: 32 layers, every fourth full attention. Q3_K trunk, Q6_K output, attn_v / attn_qkv Q5_K in the first two
  // layers that have one, ffn_down Q5_K in the first 32/16 = 2 layers, attn_output Q4_K.
  auto plan = plan_tensors(*preset("9B"), Mix::Q3_K_M, false, 248320);
  std::map<std::string, GgmlType> type;
  for (const auto& t : plan) type[t.name] = t.type;
  EXPECT_EQ(type["output.weight"], GgmlType::Q6_K);
  EXPECT_EQ(type["token_embd.weight"], GgmlType::Q3_K);
  EXPECT_EQ(type["blk.0.ffn_up.weight"], GgmlType::Q3_K);
  EXPECT_EQ(type["blk.0.attn_qkv.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.1.attn_qkv.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.2.attn_qkv.weight"], GgmlType::Q4_K);
  EXPECT_EQ(type["blk.3.attn_v.weight"], GgmlType::Q4_K);
  EXPECT_EQ(type["blk.3.attn_output.weight"], GgmlType::Q4_K);
  EXPECT_EQ(type["blk.3.attn_q.weight"], GgmlType::Q3_K);
  EXPECT_EQ(type["blk.1.ffn_down.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.2.ffn_down.weight"], GgmlType::Q4_K);
  EXPECT_EQ(type["blk.31.ffn_down.weight"], GgmlType::Q4_K);
  EXPECT_EQ(mix_file_type(Mix::Q3_K_M), 12u);
  EXPECT_EQ(*parse_mix("q3_k_m"), Mix::Q3_K_M);
  // Smaller than Q4_K_M, larger than an all-Q3_K file (3.4375 bits a weight).
  const double q3 = count_bytes(plan) / 1e9, q4 = count_bytes(plan_tensors(*preset("9B"), Mix::Q4_K_M, false, 248320)) / 1e9;
  EXPECT_LT(q3, q4);
  EXPECT_GT(q3, count_params(plan) * 3.4375 / 8 / 1e9);
}

TEST(SynthPlan, Q5KMixFollowsLlamaQuantizeRules) {
  // llama-quant.cpp treats Q5_K_M as Q4_K_M with Q5_K: attn_v / attn_qkv and ffn_down Q6_K where use_more_bits(i, n)
  // (9B, 32 blocks: 0..3, 6, 9, ..., 27, 28..31), else Q5_K; output Q6_K; every other matrix Q5_K.
  auto plan = plan_tensors(*preset("9B"), Mix::Q5_K_M, false, 248320);
  std::map<std::string, GgmlType> type;
  for (const auto& t : plan) type[t.name] = t.type;
  EXPECT_EQ(type["output.weight"], GgmlType::Q6_K);
  EXPECT_EQ(type["token_embd.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.0.ffn_up.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.0.attn_qkv.weight"], GgmlType::Q6_K);
  EXPECT_EQ(type["blk.4.attn_qkv.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.6.attn_qkv.weight"], GgmlType::Q6_K);
  EXPECT_EQ(type["blk.3.attn_v.weight"], GgmlType::Q6_K);
  EXPECT_EQ(type["blk.7.attn_v.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.7.attn_output.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.7.attn_q.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.5.ffn_down.weight"], GgmlType::Q5_K);
  EXPECT_EQ(type["blk.9.ffn_down.weight"], GgmlType::Q6_K);
  EXPECT_EQ(type["blk.31.ffn_down.weight"], GgmlType::Q6_K);
  // The same tensors as Q4_K_M, each Q4_K one now Q5_K.
  const auto q4 = plan_tensors(*preset("9B"), Mix::Q4_K_M, false, 248320);
  ASSERT_EQ(q4.size(), plan.size());
  for (size_t i = 0; i < plan.size(); i++) {
    EXPECT_EQ(plan[i].name, q4[i].name);
    EXPECT_EQ(plan[i].type, q4[i].type == GgmlType::Q4_K ? GgmlType::Q5_K : q4[i].type) << plan[i].name;
  }
  EXPECT_EQ(mix_file_type(Mix::Q5_K_M), 17u);
  EXPECT_EQ(*parse_mix("q5_k_m"), Mix::Q5_K_M);
  EXPECT_EQ(mix_name(Mix::Q5_K_M), "Q5_K_M");
  // Q5_K is 5.5 bits a weight: larger than Q4_K_M, smaller than all-Q6_K (6.5625).
  const double q5 = count_bytes(plan) / 1e9, q4b = count_bytes(q4) / 1e9;
  EXPECT_GT(q5, q4b);
  EXPECT_GT(q5, count_params(plan) * 5.5 / 8 / 1e9);
  EXPECT_LT(q5, count_params(plan) * 6.5625 / 8 / 1e9);
}

TEST(SynthVocab, BuiltinVocabularyIsConsistent) {
  Vocab v = builtin_vocab();
  const gguf::Value *toks = nullptr, *types = nullptr, *merges = nullptr, *eos = nullptr, *tmpl = nullptr;
  for (const auto& kv : v.keys) {
    if (kv.key == "tokenizer.ggml.tokens") toks = &kv.value;
    if (kv.key == "tokenizer.ggml.token_type") types = &kv.value;
    if (kv.key == "tokenizer.ggml.merges") merges = &kv.value;
    if (kv.key == "tokenizer.ggml.eos_token_id") eos = &kv.value;
    if (kv.key == "tokenizer.chat_template") tmpl = &kv.value;
  }
  ASSERT_TRUE(toks && types && merges && eos && tmpl);
  ASSERT_EQ(toks->arr_s.size(), types->arr_i.size());
  std::set<std::string> all(toks->arr_s.begin(), toks->arr_s.end());
  EXPECT_EQ(all.size(), toks->arr_s.size()) << "duplicate tokens";
  EXPECT_GE(merges->arr_s.size(), 200u);
  // Every merge joins two known tokens into a known token (what a BPE tokenizer relies on).
  for (const auto& m : merges->arr_s) {
    auto sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    EXPECT_TRUE(all.count(m.substr(0, sp)) && all.count(m.substr(sp + 1)) && all.count(m.substr(0, sp) + m.substr(sp + 1)))
        << m;
  }
  EXPECT_EQ(toks->arr_s[0], "!");
  EXPECT_TRUE(all.count("Ġ"));  // the space byte in GPT-2's byte-to-unicode form
  EXPECT_EQ(toks->arr_s.at(eos->u), "<|im_end|>");
  EXPECT_EQ(types->arr_i.at(eos->u), 3);
  for (size_t i = 0; i < toks->arr_s.size(); i++)
    if (toks->arr_s[i] == "<think>" || toks->arr_s[i] == "</tool_call>") {
      EXPECT_EQ(types->arr_i[i], 4);
    }
  v.pad_to((int64_t)toks->arr_s.size() + 3);
  EXPECT_EQ(v.size(), (int64_t)all.size() + 3);
}

TEST(SynthData, RandomBlocksHaveSmallScalesAndFiniteValues) {
  Shape s = *preset("0.8B");  // random-block mode
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::BF16, GgmlType::Q3_K,
                     GgmlType::Q5_K, GgmlType::Q5_1, GgmlType::IQ4_NL}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    PlannedTensor pt{"blk.0.ffn_up.weight", t, {1024, 96}, Init::Matrix};
    std::vector<uint8_t> a(pt.n_bytes()), b(pt.n_bytes());
    fill_tensor(s, pt, 7, 3, 0, pt.n_elements(), a.data());
    // Same data when generated in two pieces (the grain is 65536 elements).
    fill_tensor(s, pt, 7, 3, 0, 65536, b.data());
    const auto info = *ggml_type_info(t);
    fill_tensor(s, pt, 7, 3, 65536, pt.n_elements() - 65536, b.data() + 65536 / info.block_size * info.type_size);
    EXPECT_EQ(a, b);
    std::vector<float> x(pt.n_elements());
    quant::dequantize_row(t, a.data(), x.data(), (int64_t)x.size());
    double sum2 = 0;
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v));
      sum2 += (double)v * v;
    }
    const double rms = std::sqrt(sum2 / x.size());
    EXPECT_GT(rms, 1e-3);
    EXPECT_LT(rms, 8.0);
    if (t == GgmlType::Q4_K) {
      uint16_t d;
      std::memcpy(&d, a.data() + 144, 2);  // second block's d
      EXPECT_EQ(f16_to_f32(d), 1.0f / 1024);
    }
  }
  // Another seed gives other bytes.
  PlannedTensor pt{"x", GgmlType::Q4_K, {256, 4}, Init::Matrix};
  std::vector<uint8_t> a(pt.n_bytes()), b(pt.n_bytes());
  fill_tensor(s, pt, 1, 0, 0, pt.n_elements(), a.data());
  fill_tensor(s, pt, 2, 0, 0, pt.n_elements(), b.data());
  EXPECT_NE(a, b);
}

TEST(SynthWrite, TinyModelOpensWithTheExpectedConfig) {
  Options o;
  o.size = "tiny";
  o.mix = Mix::Q8_0;
  o.seed = 5;
  o.out = test::temp_dir() + "/tiny-q8_0.gguf";
  ASSERT_TRUE(write_model(o).ok());
  auto f = gguf::File::open(o.out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto prep = prepare(o);
  ASSERT_TRUE(prep.ok());
  EXPECT_EQ(f->file_size(), prep->file_bytes);
  auto c = qwen35_config_from_gguf(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->n_embd, 256);
  EXPECT_EQ(c->n_layer, 4);
  EXPECT_EQ(c->n_mtp, 0);
  EXPECT_EQ(c->n_ff, 512);
  EXPECT_EQ(c->n_head, 4);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->n_k_heads, 4);
  EXPECT_EQ(c->n_v_heads, 4);
  EXPECT_EQ(c->d_k, 64);
  EXPECT_EQ(c->n_rot, 16);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->n_full_attn(), 1);
  EXPECT_EQ(c->rope_base, 1e7);
  EXPECT_EQ(c->n_vocab, builtin_vocab().size());
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre").value(), "qwen2");
  // Every value finite; SSM decay rates negative; norms near 1.
  for (const auto& t : f->tensors()) {
    SCOPED_TRACE(t.name);
    std::vector<float> x(t.n_elements);
    quant::dequantize_row(t.type, f->tensor_data(t), x.data(), (int64_t)x.size());
    for (float v : x) ASSERT_TRUE(std::isfinite(v));
    const bool is_ssm_a = t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".ssm_a") == 0;
    for (float v : x) {
      if (is_ssm_a) {
        EXPECT_LT(v, 0);
      }
      if (t.name.find("norm") != std::string::npos) {
        EXPECT_NEAR(v, 1.0, 0.11);
      }
    }
  }
  // The metadata keys (other than the tokenizer's) in the order llama-quantize writes them.
  auto ref = gguf::File::open(test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf"));
  ASSERT_TRUE(ref.ok());
  auto keys = [](const gguf::File& g) {
    std::vector<std::string> k;
    for (const auto& kv : g.metadata())
      if (kv.key.rfind("tokenizer.", 0) != 0) k.push_back(kv.key + ":" + std::string(gguf::value_type_name(kv.value.type)));
    return k;
  };
  EXPECT_EQ(keys(*f), keys(*ref));
  // Same seed, same file.
  Options o2 = o;
  o2.out = test::temp_dir() + "/tiny-q8_0-again.gguf";
  ASSERT_TRUE(write_model(o2).ok());
  EXPECT_EQ(test::read_file(o.out), test::read_file(o2.out));
}

TEST(SynthWrite, ErrorsAreClear) {
  EXPECT_FALSE(preset("3B").ok());
  EXPECT_NE(preset("3B").error().message.find("0.8B"), std::string::npos);
  EXPECT_FALSE(parse_mix("Q2_K").ok());
  Options o;
  o.out = test::temp_dir() + "/no-such-dir/x.gguf";
  auto st = write_model(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("does not exist"), std::string::npos);
  o.out = test::temp_dir() + "/v.gguf";
  o.vocab_path = test::temp_dir() + "/missing-vocab.gguf";
  EXPECT_FALSE(write_model(o).ok());
}

// The tiny model through the rest of the stack: the loader accepts it, the forward pass gives finite and
// varied logits, the built-in tokenizer round-trips text, and the built-in chat template renders.
TEST(SynthWrite, TinyModelRunsThroughLoaderTokenizerAndTemplate) {
  Options o;
  o.size = "tiny";
  o.mix = Mix::Q8_0;
  o.out = test::temp_dir() + "/tiny-stack.gguf";
  ASSERT_TRUE(write_model(o).ok());
  auto model = Qwen35Model::load_file(o.out);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto state = SequenceState::create(model->cfg, 64);
  ASSERT_TRUE(state.ok());

  auto tok = tokenizer::Tokenizer::from_gguf(*model->file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::string text = "Hello! Who are you? The quick brown fox, 42 times.";
  auto ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size() / 2) << "the learned merges should shorten English text";
  EXPECT_EQ(tok->decode(ids), text);
  auto im = tok->encode("<|im_start|>user", true);
  ASSERT_FALSE(im.empty());
  EXPECT_EQ(tok->token_text(im[0]), "<|im_start|>");
  EXPECT_EQ(tok->token_text(tok->eos_id()), "<|im_end|>");

  auto tmpl = chat::chat_template_from_gguf(*model->file);
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  msgs.push_back({{"role", "system"}, {"content", "Be brief."}});
  msgs.push_back({{"role", "user"}, {"content", "Hi"}});
  auto r = tmpl->render(msgs, nullptr, true, {{"enable_thinking", false}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                "<think>\n\n</think>\n\n");
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  tools.push_back({{"type", "function"}, {"function", {{"name", "get_time"}}}});
  auto rt = tmpl->render(msgs, tools, true);
  ASSERT_TRUE(rt.ok()) << rt.error().message;
  EXPECT_NE(rt->find("Be brief.\n\n# Tools"), std::string::npos) << *rt;
  EXPECT_NE(rt->find("\"name\": \"get_time\""), std::string::npos) << *rt;

  // Forward: finite logits with a real spread; greedy decoding does not repeat one token forever.
  auto prompt = tok->encode(*r, true);
  std::vector<float> logits(model->cfg.n_vocab);
  ASSERT_TRUE(forward(*model, *state, prompt, logits.data(), false).ok());
  std::set<int32_t> seen;
  for (int i = 0; i < 12; i++) {
    double s = 0, s2 = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      s += v, s2 += (double)v * v;
    }
    const double sd = std::sqrt(s2 / logits.size() - (s / logits.size()) * (s / logits.size()));
    EXPECT_GT(sd, 0.1);
    int32_t next = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
    seen.insert(next);
    ASSERT_TRUE(forward(*model, *state, std::span<const int32_t>(&next, 1), logits.data(), false).ok());
  }
  EXPECT_GE(seen.size(), 3u);
}

TEST(SynthWrite, VocabularyFromAnotherFile) {
  // The tokenizer keys of the tiny-sym fixture (llama.cpp's converter) are copied unchanged; tiny is not padded.
  const std::string src = test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf");
  Options o;
  o.size = "tiny";
  o.mix = Mix::Q4_K_M;
  o.vocab_path = src;
  o.out = test::temp_dir() + "/tiny-vocab.gguf";
  ASSERT_TRUE(write_model(o).ok());
  auto a = gguf::File::open(src), b = gguf::File::open(o.out);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& kv : a->metadata()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    SCOPED_TRACE(kv.key);
    const gguf::Value* v = b->find(kv.key);
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(*v == kv.value);
  }
  EXPECT_EQ(b->find_tensor("token_embd.weight")->ne[1], 4032);
  // With a real size the vocabulary is padded to 248,320 with [PAD<id>] (type 5) entries.
  Vocab v = *vocab_from_gguf(src);
  v.pad_to(248320);
  EXPECT_EQ(v.size(), 248320);
  for (const auto& kv : v.keys)
    if (kv.key == "tokenizer.ggml.tokens") {
      EXPECT_EQ(kv.value.arr_s[4032], "[PAD4032]");
      EXPECT_EQ(kv.value.arr_s.back(), "[PAD248319]");
    }
}
