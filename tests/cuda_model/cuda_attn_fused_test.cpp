// DS_ATTN_FUSED (attn9) end to end: the attention layer's kernels folded into two (level 1: the combine in
// the partial kernel) or one (level 2: q/k norm + RoPE + cache store too) give level 0's logits (the three
// kernels) through the step path (a 20-token prompt as one step: the one-kernel form computes the step's
// earlier rows itself), CUDA graph decode steps (the arrival counters must be left zero by every replay), a
// batch of two sequences, and caches of 1, 4 and 16 position splits; and with the dump hook every named
// intermediate (q_norm, k_norm, q_rope, k_rope, core_out, gated, ...) exists and agrees with level 0's.
#include <cstdio>
#include <map>

#include "cuda/model/model_kernels.cuh"
#include "cuda_test_util.h"

using namespace ds;

namespace {

struct LevelGuard {
  int saved = cuda::mk::attn_fused();
  ~LevelGuard() { cuda::mk::set_attn_fused(saved); }
};

// Logits of: prompt[0..20) and prompt[0..7) prefilled (every row) into two states by the step path, 4 decode
// steps of the first alone, then 3 steps of both as a batch. A fresh model per call (graphs are per model).
std::vector<float> run_level(const Qwen35Model& m, const ds::test::ModelRef& ref, int level, int64_t max_ctx) {
  cuda::mk::set_attn_fused(level);
  cuda::CudaModelOptions o;
  o.prefill_min_tokens = 1 << 30;  // the step path
  auto cm = ds::test::load_cuda(m, o);
  if (!cm) return {};
  const int64_t V = m.cfg.n_vocab;
  auto a = ds::test::new_state(*cm, max_ctx), b = ds::test::new_state(*cm, max_ctx);
  if (!a || !b) return {};
  std::vector<float> all, rows(20 * V);
  const std::vector<int32_t> pa(ref.prompt.begin(), ref.prompt.begin() + 20), pb(ref.prompt.begin(), ref.prompt.begin() + 7);
  auto s = cm->prefill(*a, pa, rows.data(), true);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  all.insert(all.end(), rows.begin(), rows.end());
  s = cm->prefill(*b, pb, rows.data(), true);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  all.insert(all.end(), rows.begin(), rows.begin() + 7 * V);
  for (int i = 0; i < 4; i++) {
    const auto l = ds::test::decode_step(*cm, {a.get()}, {ref.generated[i]});
    all.insert(all.end(), l.begin(), l.end());
  }
  for (int i = 0; i < 3; i++) {
    const auto l = ds::test::decode_step(*cm, {a.get(), b.get()}, {ref.generated[4 + i], ref.prompt[7 + i]});
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

class CudaAttnFused : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaAttnFused, LevelsGiveTheThreeKernelsLogits) {
  DS_SKIP_WITHOUT_GPU();
  LevelGuard guard;
  const auto ref = ds::test::load_model_ref(GetParam());
  ASSERT_GE(ref.prompt.size(), 20u);
  ASSERT_GE(ref.generated.size(), 7u);
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  for (int64_t max_ctx : {32, 64, 128, 4096}) {  // 1, 2, 4 and 16 splits (attn_splits)
    if (max_ctx > m->cfg.n_ctx_train) continue;
    const auto l0 = run_level(*m, ref, 0, max_ctx);
    ASSERT_FALSE(l0.empty());
    for (int level = 1; level <= 2; level++) {
      const auto l = run_level(*m, ref, level, max_ctx);
      ASSERT_EQ(l.size(), l0.size()) << "level " << level << ", max_ctx " << max_ctx;
      const auto d = ds::test::diff(l.data(), l0.data(), l.size());
      std::printf("[attn9] %s max_ctx %lld: level %d vs 0: logits max_abs %.3g%s\n", GetParam().c_str(),
                  (long long)max_ctx, level, d.max_abs, d.max_abs == 0 ? " (same bits)" : "");
      EXPECT_TRUE(d.finite) << "level " << level << ", max_ctx " << max_ctx;
      EXPECT_LE(d.max_abs, 1e-4) << "level " << level << ", max_ctx " << max_ctx << " at " << d.worst;
    }
  }
}

using Dumps = std::map<std::string, std::vector<float>>;

// A 24-token prefill and one decode with the dump hook (the step path), at `level`, max_ctx 1024 (4 splits).
Dumps dumps_at(const Qwen35Model& m, const ds::test::ModelRef& ref, int level) {
  cuda::mk::set_attn_fused(level);
  auto cm = ds::test::load_cuda(m);
  Dumps d;
  if (!cm) return d;
  auto st = ds::test::new_state(*cm, std::min<int64_t>(1024, m.cfg.n_ctx_train));
  if (!st) return d;
  int call = 0;
  DumpFn f = [&](std::string_view name, const float* data, std::span<const int64_t> shape) {
    size_t n = 1;
    for (int64_t x : shape) n *= (size_t)x;
    d[std::to_string(call) + ":" + std::string(name)].assign(data, data + n);
  };
  const std::vector<int32_t> p(ref.prompt.begin(), ref.prompt.begin() + 24);
  auto s = cm->prefill(*st, p, nullptr, false, f);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  call = 1;
  cuda::CudaSeqState* sp = st.get();
  std::vector<float> out(m.cfg.n_vocab);
  s = cm->decode({&sp, 1}, std::span<const int32_t>(&ref.prompt[24], 1), out.data(), f);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return d;
}

TEST_P(CudaAttnFused, DumpsAtEveryLevel) {
  DS_SKIP_WITHOUT_GPU();
  LevelGuard guard;
  const auto ref = ds::test::load_model_ref(GetParam());
  ASSERT_GE(ref.prompt.size(), 25u);
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Dumps d0 = dumps_at(*m, ref, 0);
  ASSERT_FALSE(d0.empty());
  for (int level = 1; level <= 2; level++) {
    const Dumps d = dumps_at(*m, ref, level);
    EXPECT_EQ(d.size(), d0.size()) << "level " << level;
    double worst = 0;
    std::string worst_name;
    for (const auto& [name, v0] : d0) {
      auto it = d.find(name);
      if (it == d.end()) {
        ADD_FAILURE() << "level " << level << ": '" << name << "' missing";
        continue;
      }
      ASSERT_EQ(it->second.size(), v0.size()) << name;
      const auto e = ds::test::diff(it->second.data(), v0.data(), v0.size());
      EXPECT_TRUE(e.finite) << "level " << level << ": " << name;
      EXPECT_LE(e.max_abs, 1e-4 * std::max(1.0, e.ref_max)) << "level " << level << ": " << name;
      if (e.max_abs > worst) {
        worst = e.max_abs;
        worst_name = name;
      }
    }
    std::printf("[attn9] %s dumps: level %d vs 0: %zu intermediates, largest max_abs %.3g%s%s\n",
                GetParam().c_str(), level, d0.size(), worst, worst > 0 ? " at " : " (same bits)", worst_name.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaAttnFused, ::testing::Values("tiny-gqa-q4_k_m", "tiny-sym-bf16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
