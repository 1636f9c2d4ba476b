// GQA attention with a KV cache against the naive softmax formula (double), kv head = h / (nh/nkv);
// prefill in one call vs token by token through the cache; packed batch with slots vs each alone.
#include <cmath>

#include "cpu/cpu.h"
#include "op_test_util.h"

using namespace ds;
using ds::test::expect_close;

namespace {
constexpr double kTolAbs = 2e-6, kTolRel = 2e-6;

// out[t,h] = sum_{p<=t} softmax(scale q·k_p) v_p over the first T tokens of one sequence (positions 0..T-1).
std::vector<float> naive(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                         int64_t T, int64_t nh, int64_t nkv, int64_t hd) {
  std::vector<double> out(T * nh * hd, 0.0);
  const double scale = 1 / std::sqrt((double)hd);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < nh; h++) {
      const int64_t g = h / (nh / nkv);
      std::vector<double> s(t + 1);
      double mx = -1e300, sum = 0;
      for (int64_t p = 0; p <= t; p++) {
        double d = 0;
        for (int64_t i = 0; i < hd; i++) d += (double)q[(t * nh + h) * hd + i] * k[(p * nkv + g) * hd + i];
        s[p] = d * scale;
        mx = std::max(mx, s[p]);
      }
      for (auto& x : s) sum += x = std::exp(x - mx);
      for (int64_t p = 0; p <= t; p++)
        for (int64_t i = 0; i < hd; i++) out[(t * nh + h) * hd + i] += s[p] / sum * v[(p * nkv + g) * hd + i];
    }
  return ds::test::to_float(out);
}
}  // namespace

TEST(Attention, PrefillAgainstNaiveSoftmax) {
  for (auto [nh, nkv] : {std::pair<int64_t, int64_t>{4, 1}, {4, 2}, {3, 3}}) {
    const int64_t T = 23, hd = 16, max_ctx = 40;
    auto q = ds::test::randn(T * nh * hd, 1), k = ds::test::randn(T * nkv * hd, 2), v = ds::test::randn(T * nkv * hd, 3);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)t;
    ops::AttentionParams p{T, 1, nh, nkv, hd, max_ctx, 1.0f / std::sqrt((float)hd)};
    std::vector<float> kc(p.cache_floats(), NAN), vc(p.cache_floats(), NAN), out(T * nh * hd);
    cpu::attention(p, q.data(), k.data(), v.data(), kc.data(), vc.data(), pos.data(), nullptr, nullptr, out.data());
    expect_close(out, naive(q, k, v, T, nh, nkv, hd), kTolAbs, kTolRel,
                 "nh=" + std::to_string(nh) + " nkv=" + std::to_string(nkv));
  }
}

TEST(Attention, TokenByTokenEqualsPrefill) {
  const int64_t T = 17, nh = 4, nkv = 2, hd = 8, max_ctx = T;
  auto q = ds::test::randn(T * nh * hd, 4), k = ds::test::randn(T * nkv * hd, 5), v = ds::test::randn(T * nkv * hd, 6);
  ops::AttentionParams p{T, 1, nh, nkv, hd, max_ctx, 0.3f};
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)t;
  std::vector<float> kc(p.cache_floats()), vc(p.cache_floats()), out(T * nh * hd);
  cpu::attention(p, q.data(), k.data(), v.data(), kc.data(), vc.data(), pos.data(), nullptr, nullptr, out.data());
  // Prefill the first 9 tokens, then one at a time.
  std::vector<float> kc2(p.cache_floats()), vc2(p.cache_floats()), out2(out.size());
  auto p1 = p;
  p1.n_tokens = 9;
  cpu::attention(p1, q.data(), k.data(), v.data(), kc2.data(), vc2.data(), pos.data(), nullptr, nullptr, out2.data());
  for (int64_t t = 9; t < T; t++) {
    p1.n_tokens = 1;
    cpu::attention(p1, &q[t * nh * hd], &k[t * nkv * hd], &v[t * nkv * hd], kc2.data(), vc2.data(), &pos[t], nullptr,
                   nullptr, &out2[t * nh * hd]);
  }
  EXPECT_EQ(out, out2);
  EXPECT_EQ(kc, kc2);
  EXPECT_EQ(vc, vc2);
}

TEST(Attention, PackedBatchWithSlotsEqualsEachAlone) {
  // Sequence 0 continues at position 5 (cache rows 0..4 already there); sequence 1 starts fresh.
  const int64_t nh = 2, nkv = 1, hd = 8, max_ctx = 12;
  ops::AttentionParams p{4, 2, nh, nkv, hd, max_ctx, 0.35f};
  const std::vector<int32_t> starts = {0, 1, 4}, slots = {1, 0}, pos = {5, 0, 1, 2};
  auto q = ds::test::randn(4 * nh * hd, 7), k = ds::test::randn(4 * nkv * hd, 8), v = ds::test::randn(4 * nkv * hd, 9);
  auto kc = ds::test::randn(2 * p.cache_floats(), 10), vc = ds::test::randn(2 * p.cache_floats(), 11);
  auto kc1 = kc, vc1 = vc;
  std::vector<float> out(4 * nh * hd), out1(out.size());
  cpu::attention(p, q.data(), k.data(), v.data(), kc.data(), vc.data(), pos.data(), starts.data(), slots.data(),
                 out.data());
  for (int s = 0; s < 2; s++) {
    auto p1 = p;
    p1.n_seqs = 1;
    p1.n_tokens = starts[s + 1] - starts[s];
    const int64_t t0 = starts[s];
    cpu::attention(p1, &q[t0 * nh * hd], &k[t0 * nkv * hd], &v[t0 * nkv * hd], kc1.data() + slots[s] * p.cache_floats(),
                   vc1.data() + slots[s] * p.cache_floats(), &pos[t0], nullptr, nullptr, &out1[t0 * nh * hd]);
  }
  EXPECT_EQ(out, out1);
  EXPECT_EQ(kc, kc1);
  // The continuing token attends to the 5 cached rows and itself: check against the formula.
  std::vector<float> qk(6 * nkv * hd), qv(6 * nkv * hd);
  for (int64_t r = 0; r < 6; r++)
    for (int64_t i = 0; i < hd; i++) {
      qk[r * hd + i] = kc[1 * p.cache_floats() + r * hd + i];
      qv[r * hd + i] = vc[1 * p.cache_floats() + r * hd + i];
    }
  double mx = -1e300, sum = 0;
  std::vector<double> s(6);
  for (int r = 0; r < 6; r++) {
    double d = 0;
    for (int64_t i = 0; i < hd; i++) d += (double)q[0 * hd + i] * qk[r * hd + i];  // head 0 of token 0
    mx = std::max(mx, s[r] = d * 0.35);
  }
  for (auto& x : s) sum += x = std::exp(x - mx);
  for (int64_t i = 0; i < hd; i++) {
    double o = 0;
    for (int r = 0; r < 6; r++) o += s[r] / sum * qv[r * hd + i];
    EXPECT_NEAR(out[i], o, 2e-6);
  }
}
