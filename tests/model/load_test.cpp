// Loading: shapes from metadata (trunk = block_count - nextn_predict_layers, schedule, tied/untied,
// MTP block bound but not in the trunk), and every bad-file / bad-input case is an Error that names what
// is wrong: a missing tensor, a mis-shaped tensor, an unsupported type, a token outside the vocabulary,
// a position past the state's max context.
#include <cstring>
#include <functional>

#include "model_test_util.h"
#include "testutil.h"

using namespace ds;

namespace {

// Re-writes a GGUF in memory with `edit` applied to each tensor (return false to drop it).
struct TensorEdit {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> data;
};
Result<gguf::File> rewrite(const gguf::File& f, const std::function<bool(TensorEdit&)>& edit) {
  gguf::Writer w(f.alignment());
  for (const auto& kv : f.metadata()) w.set(kv.key, kv.value);
  for (const auto& t : f.tensors()) {
    TensorEdit e{t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(f.tensor_data(t), f.tensor_data(t) + t.n_bytes)};
    if (!edit(e)) continue;
    const size_t i = w.add_tensor(e.name, e.type, e.ne);
    w.set_tensor_data(i, std::move(e.data));
  }
  return gguf::File::from_bytes(w.to_bytes(), "edited.gguf");
}

std::string load_error(const gguf::File& f) {
  auto m = Qwen35Model::load(f);
  return m.ok() ? std::string("(loaded)") : m.error().message;
}

}  // namespace

TEST(ModelLoad, ShapesFromMetadata) {
  auto gqa = Qwen35Model::load_file(ds::test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
  ASSERT_TRUE(gqa.ok()) << gqa.error().message;
  const auto& c = gqa->cfg;
  EXPECT_EQ(c.n_block, 5);
  EXPECT_EQ(c.n_mtp, 1);
  EXPECT_EQ(c.n_layer, 4);
  ASSERT_EQ(gqa->layers.size(), 4u);
  EXPECT_EQ(gqa->layers[2].kind, LayerKind::GatedDeltaNet);
  EXPECT_EQ(gqa->layers[3].kind, LayerKind::FullAttention);
  EXPECT_EQ(c.n_k_heads, 2);
  EXPECT_EQ(c.n_v_heads, 6);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(gqa->output.name, "output.weight");
  ASSERT_EQ(gqa->mtp.size(), 1u);
  EXPECT_EQ(gqa->mtp[0].eh_proj.n_cols, 2 * c.n_embd);
  EXPECT_EQ(gqa->mtp[0].eh_proj.n_rows, c.n_embd);
  EXPECT_GT(gqa->mtp_bytes, 0u);
  EXPECT_EQ(gqa->trunk_bytes + gqa->mtp_bytes, [&] {  // every tensor of the file accounted once
    uint64_t n = 0;
    for (const auto& t : gqa->file->tensors()) n += t.n_bytes;
    return n;
  }());
  // ssm_a holds -exp(A_log) (negative); conv taps stored [Cc][Kc].
  for (float a : gqa->layers[0].gdn.ssm_a) EXPECT_LT(a, 0.0f);
  EXPECT_EQ((int64_t)gqa->layers[0].gdn.conv.size(), c.conv_dim() * c.conv_kernel);

  auto sym = Qwen35Model::load_file(ds::test::fixture("models/tiny-sym/tiny-sym-bf16.gguf"));
  ASSERT_TRUE(sym.ok()) << sym.error().message;
  EXPECT_TRUE(sym->cfg.tied_embeddings);
  EXPECT_EQ(sym->output.name, "token_embd.weight");
  EXPECT_EQ(sym->output.data, sym->token_embd.data);
  EXPECT_TRUE(sym->mtp.empty());
}

TEST(ModelLoad, BadTensorsAreErrorsNamingThem) {
  auto f = gguf::File::open(ds::test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;

  auto missing = rewrite(*f, [](TensorEdit& e) { return e.name != "blk.2.ssm_dt.bias"; });
  ASSERT_TRUE(missing.ok()) << missing.error().message;
  EXPECT_NE(load_error(*missing).find("'blk.2.ssm_dt.bias' is missing"), std::string::npos) << load_error(*missing);

  auto missing_mtp = rewrite(*f, [](TensorEdit& e) { return e.name != "blk.4.nextn.eh_proj.weight"; });
  ASSERT_TRUE(missing_mtp.ok());
  EXPECT_NE(load_error(*missing_mtp).find("blk.4.nextn.eh_proj.weight"), std::string::npos);

  auto misshaped = rewrite(*f, [](TensorEdit& e) {
    if (e.name == "blk.1.ssm_a") {  // 6 value heads -> 5
      e.ne = {5};
      e.data.resize(5 * 4);
    }
    return true;
  });
  ASSERT_TRUE(misshaped.ok()) << misshaped.error().message;
  const std::string me = load_error(*misshaped);
  EXPECT_NE(me.find("'blk.1.ssm_a' has shape [5]"), std::string::npos) << me;
  EXPECT_NE(me.find("expected [6]"), std::string::npos) << me;

  auto transposed = rewrite(*f, [](TensorEdit& e) {
    if (e.name == "blk.0.ssm_conv1d.weight") std::swap(e.ne[0], e.ne[1]);
    return true;
  });
  ASSERT_TRUE(transposed.ok()) << transposed.error().message;
  EXPECT_NE(load_error(*transposed).find("'blk.0.ssm_conv1d.weight' has shape [640, 4]"), std::string::npos)
      << load_error(*transposed);

  auto bad_type = rewrite(*f, [](TensorEdit& e) {
    if (e.name == "blk.0.ffn_up.weight") {  // I32 is a valid GGUF type, not a weight type
      e.type = GgmlType::I32;
      e.data.assign(e.ne[0] * e.ne[1] * 4, 0);
    }
    return true;
  });
  ASSERT_TRUE(bad_type.ok()) << bad_type.error().message;
  EXPECT_NE(load_error(*bad_type).find("blk.0.ffn_up.weight"), std::string::npos) << load_error(*bad_type);
}

TEST(ModelLoad, BadInputsAreErrors) {
  auto m = Qwen35Model::load_file(ds::test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const int64_t V = m->cfg.n_vocab;
  auto st = SequenceState::create(m->cfg, 4);
  ASSERT_TRUE(st.ok());
  std::vector<float> logits(4 * V);
  const std::vector<int32_t> bad = {1, (int32_t)V};
  auto s = forward(*m, *st, bad, logits.data(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("outside the vocabulary"), std::string::npos) << s.error().message;
  const std::vector<int32_t> neg = {-1};
  EXPECT_FALSE(forward(*m, *st, neg, logits.data(), true).ok());
  EXPECT_FALSE(forward(*m, *st, std::span<const int32_t>(), logits.data(), true).ok());
  EXPECT_EQ(st->n_past, 0);  // failed calls leave the state alone

  const std::vector<int32_t> three = {1, 2, 3}, two = {4, 5};
  ASSERT_TRUE(forward(*m, *st, three, logits.data(), true).ok());
  s = forward(*m, *st, two, logits.data(), true);  // 3 + 2 > 4
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("max context 4"), std::string::npos) << s.error().message;
  EXPECT_EQ(st->n_past, 3);
  EXPECT_TRUE(forward(*m, *st, std::span<const int32_t>(two.data(), 1), logits.data(), false).ok());

  EXPECT_FALSE(SequenceState::create(m->cfg, 0).ok());
  EXPECT_FALSE(SequenceState::create(m->cfg, m->cfg.n_ctx_train + 1).ok());
}
