// qwen35_config_from_gguf on the fixture models, checked against each model's Hugging Face config
// (fixtures/models/*/hf-config.json, written by transformers, not by deltaserve or llama.cpp).
#include <gtest/gtest.h>

#include <filesystem>
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
