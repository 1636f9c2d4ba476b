// qwen35_config_from_gguf on the fixture models, checked against each model's Hugging Face config
// (fixtures/models/*/hf-config.json, written by transformers, not by deltaserve or llama.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf_test_util.h"
#include "model/config.h"
#include "testutil.h"

using namespace ds;

TEST(Qwen35Config, MatchesHfConfigOfEveryFixture) {
  for (const auto& p : test::model_ggufs()) {
    SCOPED_TRACE(p);
    std::ifstream js(std::filesystem::path(p).parent_path() / "hf-config.json");
    auto hf = nlohmann::json::parse(js);
    auto f = gguf::File::open(p);
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto r = qwen35_config_from_gguf(*f);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Qwen35Config& c = *r;
    EXPECT_EQ(c.arch, "qwen35");
    EXPECT_EQ(c.n_embd, hf["hidden_size"].get<int64_t>());
    EXPECT_EQ(c.n_ff, hf["intermediate_size"].get<int64_t>());
    EXPECT_EQ(c.n_layer, hf["num_hidden_layers"].get<int64_t>());
    EXPECT_EQ(c.n_mtp, hf.value("mtp_num_hidden_layers", 0));
    EXPECT_EQ(c.n_block, c.n_layer + c.n_mtp);
    EXPECT_EQ(c.n_head, hf["num_attention_heads"].get<int64_t>());
    EXPECT_EQ(c.n_head_kv, hf["num_key_value_heads"].get<int64_t>());
    EXPECT_EQ(c.head_dim, hf["head_dim"].get<int64_t>());
    EXPECT_EQ(c.n_k_heads, hf["linear_num_key_heads"].get<int64_t>());
    EXPECT_EQ(c.n_v_heads, hf["linear_num_value_heads"].get<int64_t>());
    EXPECT_EQ(c.d_k, hf["linear_key_head_dim"].get<int64_t>());
    EXPECT_EQ(c.d_v, hf["linear_value_head_dim"].get<int64_t>());
    EXPECT_EQ(c.conv_kernel, hf["linear_conv_kernel_dim"].get<int64_t>());
    EXPECT_EQ(c.n_vocab, hf["vocab_size"].get<int64_t>());
    EXPECT_EQ(c.n_ctx_train, hf["max_position_embeddings"].get<int64_t>());
    EXPECT_EQ(c.tied_embeddings, hf["tie_word_embeddings"].get<bool>());
    EXPECT_FLOAT_EQ((float)c.rms_eps, hf["rms_norm_eps"].get<float>());
    EXPECT_EQ(c.rope_base, hf["rope_parameters"]["rope_theta"].get<double>());
    EXPECT_EQ(c.n_rot, (int64_t)(c.head_dim * hf["partial_rotary_factor"].get<double>()));
    auto sec = hf["rope_parameters"]["mrope_section"].get<std::vector<int64_t>>();
    sec.resize(4, 0);
    EXPECT_EQ(c.rope_sections, sec);
    auto types = hf["layer_types"].get<std::vector<std::string>>();
    ASSERT_EQ(c.layers.size(), types.size());
    for (size_t i = 0; i < types.size(); i++)
      EXPECT_EQ(c.layers[i] == LayerKind::FullAttention, types[i] == "full_attention") << "layer " << i;
    EXPECT_EQ(c.conv_dim(), 2 * c.n_k_heads * c.d_k + c.n_v_heads * c.d_v);
  }
}

TEST(Qwen35Config, TinyModelsByHand) {
  // The numbers in the task statement and fixtures/README.md.
  auto g = gguf::File::open(test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
  ASSERT_TRUE(g.ok());
  auto cg = qwen35_config_from_gguf(*g);
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  EXPECT_EQ(cg->n_layer, 4);
  EXPECT_EQ(cg->n_mtp, 1);
  EXPECT_EQ(cg->n_k_heads, 2);
  EXPECT_EQ(cg->n_v_heads, 6);
  EXPECT_FALSE(cg->tied_embeddings);
  EXPECT_EQ(cg->n_full_attn(), 1);
  EXPECT_EQ(cg->n_gdn(), 3);
  auto s = gguf::File::open(test::fixture("models/tiny-sym/tiny-sym-bf16.gguf"));
  ASSERT_TRUE(s.ok());
  auto cs = qwen35_config_from_gguf(*s);
  ASSERT_TRUE(cs.ok()) << cs.error().message;
  EXPECT_EQ(cs->n_layer, 4);
  EXPECT_EQ(cs->n_mtp, 0);
  EXPECT_EQ(cs->n_k_heads, 4);
  EXPECT_EQ(cs->n_v_heads, 4);
  EXPECT_TRUE(cs->tied_embeddings);
}

TEST(Qwen35Config, VocabOnlyFileHasNoConfig) {
  auto f = gguf::File::open(test::vocab_gguf("vocab-qwen35re"));
  ASSERT_TRUE(f.ok());
  auto c = qwen35_config_from_gguf(*f);
  ASSERT_FALSE(c.ok());
  // It has every qwen35.* key (the converter wrote them) but no tensors.
  EXPECT_NE(c.error().message.find("no tensor 'token_embd.weight'"), std::string::npos) << c.error().message;
}

namespace {

// The tiny-gqa fixture's metadata and tensor records (data left as zeros), edited by `edit`, which
// returns false to drop a key; `extra` keys are appended.
Result<Qwen35Config> edited(const std::function<bool(const std::string&, gguf::Value&)>& edit,
                            std::vector<gguf::KeyValue> extra = {}, const std::string& drop_tensor = "") {
  static auto src = gguf::File::open(test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
  EXPECT_TRUE(src.ok());
  gguf::Writer w;
  for (const auto& kv : src->metadata()) {
    gguf::Value v = kv.value;
    if (edit(kv.key, v)) w.set(kv.key, std::move(v));
  }
  for (auto& kv : extra) w.set(kv.key, kv.value);
  for (const auto& t : src->tensors())
    if (t.name != drop_tensor) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
  auto f = gguf::File::from_bytes(w.to_bytes(), "edited.gguf");
  if (!f.ok()) return f.error();
  return qwen35_config_from_gguf(*f);
}

auto set_u32(const std::string& key, uint32_t val) {
  return [key, val](const std::string& k, gguf::Value& v) {
    if (k == key) v = gguf::Value::make_u32(val);
    return true;
  };
}

void expect_config_error(const Result<Qwen35Config>& r, std::vector<std::string> parts) {
  ASSERT_FALSE(r.ok()) << "accepted";
  for (const auto& p : parts) EXPECT_NE(r.error().message.find(p), std::string::npos) << "'" << p << "' not in: " << r.error().message;
}

}  // namespace

TEST(Qwen35Config, EveryRequiredKeyIsChecked) {
  ASSERT_TRUE(edited([](const std::string&, gguf::Value&) { return true; }).ok());
  for (const char* key : {"general.architecture", "qwen35.block_count", "qwen35.context_length", "qwen35.embedding_length",
                          "qwen35.feed_forward_length", "qwen35.attention.head_count", "qwen35.attention.head_count_kv",
                          "qwen35.rope.dimension_sections", "qwen35.rope.freq_base",
                          "qwen35.attention.layer_norm_rms_epsilon", "qwen35.attention.key_length",
                          "qwen35.attention.value_length", "qwen35.ssm.conv_kernel", "qwen35.ssm.state_size",
                          "qwen35.ssm.group_count", "qwen35.ssm.time_step_rank", "qwen35.ssm.inner_size",
                          "qwen35.rope.dimension_count", "tokenizer.ggml.tokens"}) {
    SCOPED_TRACE(key);
    auto drop = [&](const std::string& k, gguf::Value&) { return k != key; };
    expect_config_error(edited(drop), {key});
    // A wrong type names the key too.
    auto wrong = [&](const std::string& k, gguf::Value& v) {
      if (k == key) v = v.type == gguf::ValueType::STRING ? gguf::Value::make_u32(1) : gguf::Value::make_str("x");
      return true;
    };
    expect_config_error(edited(wrong), {key});
  }
}

TEST(Qwen35Config, InconsistentValuesNameBothKeys) {
  expect_config_error(edited(set_u32("qwen35.attention.value_length", 32)),
                      {"qwen35.attention.key_length", "qwen35.attention.value_length", "64", "32"});
  expect_config_error(edited(set_u32("qwen35.ssm.inner_size", 390)), {"qwen35.ssm.inner_size", "qwen35.ssm.time_step_rank"});
  expect_config_error(edited(set_u32("qwen35.ssm.inner_size", 768)),
                      {"qwen35.ssm.inner_size", "qwen35.ssm.time_step_rank", "qwen35.ssm.state_size", "128"});
  expect_config_error(edited(set_u32("qwen35.ssm.time_step_rank", 5)), {"qwen35.ssm.time_step_rank", "qwen35.ssm.group_count"});
  expect_config_error(edited(set_u32("qwen35.attention.head_count_kv", 3)),
                      {"qwen35.attention.head_count", "qwen35.attention.head_count_kv"});
  expect_config_error(edited(set_u32("qwen35.nextn_predict_layers", 5)), {"qwen35.nextn_predict_layers", "qwen35.block_count"});
  expect_config_error(edited(set_u32("qwen35.rope.dimension_count", 65)),
                      {"qwen35.rope.dimension_count", "qwen35.attention.key_length"});
  expect_config_error(edited(set_u32("qwen35.attention.head_count", 0)), {"qwen35.attention.head_count", "= 0"});
  expect_config_error(edited(set_u32("qwen35.block_count", 1u << 30)), {"qwen35.block_count", "implausible"});
  expect_config_error(edited(set_u32("qwen35.full_attention_interval", 0)), {"qwen35.full_attention_interval"});
  auto eps = [](double val) {
    return [val](const std::string& k, gguf::Value& v) {
      if (k == "qwen35.attention.layer_norm_rms_epsilon") v.f = val;
      return true;
    };
  };
  expect_config_error(edited(eps(0)), {"qwen35.attention.layer_norm_rms_epsilon"});
  expect_config_error(edited(eps(NAN)), {"qwen35.attention.layer_norm_rms_epsilon"});
  auto sections = [](std::vector<int64_t> s) {
    return [s](const std::string& k, gguf::Value& v) {
      if (k == "qwen35.rope.dimension_sections") v = gguf::Value::make_i32_array(s);
      return true;
    };
  };
  expect_config_error(edited(sections({1, 2, 3, 4, 5})), {"qwen35.rope.dimension_sections", "5 entries"});
  expect_config_error(edited(sections({-1})), {"qwen35.rope.dimension_sections"});
  // Fewer tokens than embedding rows: names the tensor and the token list.
  auto few_tokens = [](const std::string& k, gguf::Value& v) {
    if (k == "tokenizer.ggml.tokens") v.arr_s.resize(4000);
    return true;
  };
  expect_config_error(edited(few_tokens), {"token_embd.weight", "[256, 4032]", "expected [256, 4000]", "tokenizer.ggml.tokens"});
  auto other_arch = [](const std::string& k, gguf::Value& v) {
    if (k == "general.architecture") v.s = "llama";
    return true;
  };
  expect_config_error(edited(other_arch), {"architecture 'llama' is not supported"});
  expect_config_error(edited([](const std::string&, gguf::Value&) { return true; }, {}, "token_embd.weight"),
                      {"no tensor 'token_embd.weight'"});
}

TEST(Qwen35Config, OptionalKeysAndSchedule) {
  auto keep = [](const std::string&, gguf::Value&) { return true; };
  // No MTP key: all blocks are trunk layers.
  auto no_mtp = edited([](const std::string& k, gguf::Value&) { return k != "qwen35.nextn_predict_layers"; });
  ASSERT_TRUE(no_mtp.ok()) << no_mtp.error().message;
  EXPECT_EQ(no_mtp->n_layer, 5);
  EXPECT_EQ(no_mtp->n_mtp, 0);
  // No interval key: the default 4.
  auto no_int = edited([](const std::string& k, gguf::Value&) { return k != "qwen35.full_attention_interval"; });
  ASSERT_TRUE(no_int.ok());
  EXPECT_EQ(no_int->full_attn_interval, 4);
  auto sched = [](const Qwen35Config& c) {
    std::string s;
    for (auto k : c.layers) s += k == LayerKind::FullAttention ? 'A' : 'L';
    return s;
  };
  EXPECT_EQ(sched(*no_int), "LLLA");
  auto i2 = edited(set_u32("qwen35.full_attention_interval", 2));
  ASSERT_TRUE(i2.ok());
  EXPECT_EQ(sched(*i2), "LALA");
  EXPECT_EQ(i2->n_full_attn(), 2);
  // The bool array wins over the interval; one entry per block (the MTP entry is not used) or per layer.
  auto rec = edited(keep, {{"qwen35.attention.recurrent_layers", gguf::Value::make_bool_array({false, true, true, false, false})}});
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  EXPECT_EQ(sched(*rec), "ALLA");
  auto rec4 = edited(keep, {{"qwen35.attention.recurrent_layers", gguf::Value::make_bool_array({true, true, true, true})}});
  ASSERT_TRUE(rec4.ok());
  EXPECT_EQ(sched(*rec4), "LLLL");
  expect_config_error(edited(keep, {{"qwen35.attention.recurrent_layers", gguf::Value::make_bool_array({true, true})}}),
                      {"qwen35.attention.recurrent_layers", "2 entries", "qwen35.block_count"});
  expect_config_error(edited(keep, {{"qwen35.attention.recurrent_layers", gguf::Value::make_i32_array({1, 1, 1, 1})}}),
                      {"qwen35.attention.recurrent_layers", "ARRAY of BOOL"});
  // Integer keys of any integer type are accepted (the spec recommends it).
  auto as_u64 = edited([](const std::string& k, gguf::Value& v) {
    if (k == "qwen35.embedding_length") v = gguf::Value::make_u64(256);
    if (k == "qwen35.context_length") v = gguf::Value::make_i32(4096);
    return true;
  });
  ASSERT_TRUE(as_u64.ok()) << as_u64.error().message;
  EXPECT_EQ(as_u64->n_embd, 256);
}
