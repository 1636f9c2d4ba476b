// Prefill (chunked delta rule) vs token by token (recurrent rule) through the whole model: the same
// logits and the same final conv windows, delta-rule states and KV caches within fp32 tolerance; and a
// prefill followed by decode equals all-decode. Uses tiny-gqa (nv = 3 nk, untied, MTP block) so the
// V-head mapping matters, and a prompt that crosses two 64-token chunk boundaries.
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "model_test_util.h"
#include "testutil.h"

using namespace ds;

namespace {
constexpr double kLogitTol = 1e-4;  // fp32 rounding of two algorithms; the fixture bound is 2e-3
constexpr double kStateTol = 1e-4;

void expect_states_close(const SequenceState& a, const SequenceState& b, const std::string& what) {
  ASSERT_EQ(a.n_past, b.n_past) << what;
  for (auto [ga, gb, name] : {std::tuple{&a.conv, &b.conv, "conv"}, {&a.ssm, &b.ssm, "ssm"},
                              {&a.k_cache, &b.k_cache, "k_cache"}, {&a.v_cache, &b.v_cache, "v_cache"}}) {
    for (size_t l = 0; l < ga->size(); l++) {
      const auto& x = (*ga)[l];
      const auto& y = (*gb)[l];
      ASSERT_EQ(x.size(), y.size());
      if (x.empty()) continue;
      const auto e = ds::test::compare(x.data(), y.data(), x.size());
      EXPECT_LE(e.max_abs, kStateTol) << what << ": layer " << l << " " << name << " max |diff| " << e.max_abs;
    }
  }
}
}  // namespace

TEST(ModelConsistency, PrefillEqualsTokenByToken) {
  const auto ref = ds::test::load_model_ref("tiny-gqa-q4_k_m");
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const int64_t T = 150, V = m->cfg.n_vocab;  // crosses 64 and 128
  ASSERT_GE((int64_t)ref.prompt.size(), T);
  const std::span<const int32_t> toks(ref.prompt.data(), T);

  auto s1 = SequenceState::create(m->cfg, T);
  ASSERT_TRUE(s1.ok());
  std::vector<float> l1(T * V);
  ASSERT_TRUE(forward(*m, *s1, toks, l1.data(), true).ok());

  auto s2 = SequenceState::create(m->cfg, T);
  std::vector<float> l2(T * V);
  for (int64_t t = 0; t < T; t++) ASSERT_TRUE(forward(*m, *s2, toks.subspan(t, 1), &l2[t * V], false).ok());

  const auto e = ds::test::compare(l1.data(), l2.data(), l1.size());
  std::printf("[ consist  ] prefill vs token-by-token, %lld tokens: max|dlogit| %.3e\n", (long long)T, e.max_abs);
  EXPECT_LE(e.max_abs, kLogitTol) << "worst at position " << e.worst / V;
  expect_states_close(*s1, *s2, "prefill vs token-by-token");

  // Prefill 100, then decode 50: equals the token-by-token run (state handed over correctly).
  auto s3 = SequenceState::create(m->cfg, T);
  std::vector<float> l3(T * V);
  ASSERT_TRUE(forward(*m, *s3, toks.first(100), l3.data(), true).ok());
  for (int64_t t = 100; t < T; t++) ASSERT_TRUE(forward(*m, *s3, toks.subspan(t, 1), &l3[t * V], false).ok());
  const auto e3 = ds::test::compare(l3.data(), l2.data(), l3.size());
  EXPECT_LE(e3.max_abs, kLogitTol);
  expect_states_close(*s3, *s2, "prefill+decode vs token-by-token");

  // Last-row-only output equals the last row of all_logits (the head then runs as a matrix-vector
  // product, so only to fp32 rounding); reset() gives a fresh sequence.
  s1->reset();
  EXPECT_EQ(s1->n_past, 0);
  std::vector<float> last(V);
  ASSERT_TRUE(forward(*m, *s1, toks, last.data(), false).ok());
  EXPECT_LE(ds::test::compare(last.data(), &l1[(T - 1) * V], V).max_abs, 1e-5);
}

TEST(ModelConsistency, DumpHookNamesEveryIntermediate) {
  const auto ref = ds::test::load_model_ref("tiny-gqa-q4_k_m");
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto st = SequenceState::create(m->cfg, 8);
  std::map<std::string, std::vector<int64_t>> seen;
  std::vector<float> dumped_logits;
  DumpFn dump = [&](std::string_view name, const float* data, std::span<const int64_t> shape) {
    seen[std::string(name)] = std::vector<int64_t>(shape.begin(), shape.end());
    if (name == "logits") {
      int64_t n = 1;
      for (auto d : shape) n *= d;
      dumped_logits.assign(data, data + n);
    }
  };
  std::vector<float> logits(5 * m->cfg.n_vocab);
  ASSERT_TRUE(forward(*m, *st, std::span<const int32_t>(ref.prompt.data(), 5), logits.data(), true, dump).ok());
  const auto& c = m->cfg;
  using V = std::vector<int64_t>;
  EXPECT_EQ(seen["embd"], (V{5, c.n_embd}));
  EXPECT_EQ(seen["L0.attn_norm"], (V{5, c.n_embd}));
  EXPECT_EQ(seen["L1.gdn.conv_out"], (V{5, c.conv_dim()}));
  EXPECT_EQ(seen["L2.gdn.core_out"], (V{5, c.n_v_heads, c.d_v}));
  EXPECT_EQ(seen["L3.attn.q_rope"], (V{5, c.n_head, c.head_dim}));
  EXPECT_EQ(seen["L3.attn.k_rope"], (V{5, c.n_head_kv, c.head_dim}));
  EXPECT_EQ(seen["L3.ffn_out"], (V{5, c.n_embd}));
  EXPECT_EQ(seen["final_norm"], (V{5, c.n_embd}));
  EXPECT_EQ(seen["logits"], (V{5, c.n_vocab}));
  EXPECT_EQ(seen.count("L3.gdn.conv_out"), 0u);  // layer 3 is full attention
  EXPECT_EQ(seen.count("L4.attn_norm"), 0u);     // the MTP block never runs
  EXPECT_EQ(dumped_logits, logits);
}
