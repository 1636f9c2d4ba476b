// PrefillGemm against cpu::matmul for every weight type the CUDA backend reads, at awkward and real-ish shapes,
// in each input precision; plus accumulation into strided views, several weights sharing one input, and the
// errors for shapes a type cannot take. Expected error of each input kind (inputs rounded, fp32 accumulation):
// f32 only summation order (~1e-6 relative), tf32 ~2^-11 and f16 ~2^-12 per input, bf16 ~2^-9 per input.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/prefill/prefill.cuh"
#include "prefill_test_util.h"

namespace ds {
namespace {
using cuda::prefill::GemmInputs;
using cuda::prefill::GemmOut;
using cuda::prefill::PrefillGemm;
using test::Dev;

struct Tol {
  double rel;      // relative RMS
  double abs_max;  // max |Δ| / max |ref|
};
const std::map<GemmInputs, Tol> kTol = {
    {GemmInputs::kF32, {1e-5, 1e-5}},
    {GemmInputs::kTf32, {2e-3, 5e-3}},
    {GemmInputs::kBf16, {1e-2, 3e-2}},
    {GemmInputs::kF16, {2e-3, 5e-3}},
    {GemmInputs::kF16Split, {2e-3, 5e-3}},
};
const std::vector<GemmInputs> kAllInputs = {GemmInputs::kF32, GemmInputs::kTf32, GemmInputs::kBf16, GemmInputs::kF16,
                                            GemmInputs::kF16Split};

const std::vector<GgmlType> kTypes = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16, GgmlType::Q8_0,
                                      GgmlType::Q4_0, GgmlType::Q5_0,   GgmlType::IQ4_NL, GgmlType::Q4_K,
                                      GgmlType::Q5_K, GgmlType::Q6_K,   GgmlType::IQ4_XS, GgmlType::Q4_1,
                                      GgmlType::Q5_1, GgmlType::Q2_K,   GgmlType::Q3_K, GgmlType::IQ3_XXS,
                                      GgmlType::IQ3_S};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, (double)std::fabs(x));
  return m;
}

void check(const std::vector<float>& got, const std::vector<float>& ref, GemmInputs in, const std::string& what) {
  const Tol t = kTol.at(in);
  test::expect_near(got, ref, t.abs_max * std::max(max_abs(ref), 1e-30), t.rel,
                    what + " [" + cuda::prefill::gemm_inputs_name(in) + "]");
}

std::unique_ptr<PrefillGemm> make_gemm() {
  auto g = PrefillGemm::create();
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : nullptr;
}

TEST(PrefillGemm, EveryTypeAndInputKindMatchesCpu) {
  DS_PREFILL_REQUIRE_GPU();
  auto gemm = make_gemm();
  ASSERT_TRUE(gemm);
  struct Shape { int64_t N, K, T; const char* what; };
  const std::vector<Shape> shapes = {{96, 512, 37, "small"}, {257, 256, 1, "one token, odd rows"},
                                     {130, 768, 65, "T = C + 1"}};
  uint64_t seed = 1;
  for (GgmlType type : kTypes) {
    for (const auto& sh : shapes) {
      const auto w = test::prandom_weights(type, sh.N * sh.K, seed++);
      const auto x = test::prandn(sh.T * sh.K, seed++);
      std::vector<float> ref(sh.T * sh.N);
      const ops::MatmulParams p{type, sh.N, sh.K, sh.T};
      cpu::matmul(p, w.data(), x.data(), ref.data());
      Dev<uint8_t> dw(w);
      Dev<float> dx(x);
      for (GemmInputs in : kAllInputs) {
        Dev<float> dy(std::vector<float>(sh.T * sh.N, std::numeric_limits<float>::quiet_NaN()));
        DS_CHECK_OK(gemm->matmul(p, dw.p(), dx.p(), 0, dy.p(), 0, in, false, nullptr));
        check(dy.host(), ref, in,
              std::string(ggml_type_name(type)) + " " + sh.what + " N=" + std::to_string(sh.N) +
                  " K=" + std::to_string(sh.K) + " T=" + std::to_string(sh.T));
      }
    }
  }
}

TEST(PrefillGemm, RealShapes) {
  DS_PREFILL_REQUIRE_GPU();
  auto gemm = make_gemm();
  ASSERT_TRUE(gemm);
  // 0.8B ffn_down [1024 x 3584] and a 9B-like [1024 x 4096] slice, T = 300 (several cuBLAS tiles each way).
  struct Shape { GgmlType type; int64_t N, K, T; };
  const std::vector<Shape> shapes = {{GgmlType::Q6_K, 1024, 3584, 300}, {GgmlType::Q4_K, 1024, 4096, 300},
                                     {GgmlType::BF16, 512, 1024, 300}};
  uint64_t seed = 500;
  for (const auto& sh : shapes) {
    const auto w = test::prandom_weights(sh.type, sh.N * sh.K, seed++);
    const auto x = test::prandn(sh.T * sh.K, seed++);
    std::vector<float> ref(sh.T * sh.N);
    const ops::MatmulParams p{sh.type, sh.N, sh.K, sh.T};
    cpu::matmul(p, w.data(), x.data(), ref.data());
    Dev<uint8_t> dw(w);
    Dev<float> dx(x);
    for (GemmInputs in : kAllInputs) {
      Dev<float> dy = Dev<float>::zeros(sh.T * sh.N);
      DS_CHECK_OK(gemm->matmul(p, dw.p(), dx.p(), 0, dy.p(), 0, in, false, nullptr));
      check(dy.host(), ref, in, "real " + std::string(ggml_type_name(sh.type)) + " " + std::to_string(sh.N) + "x" +
                                    std::to_string(sh.K) + " T=" + std::to_string(sh.T));
    }
  }
}

// pf26: activations past f16's 65,504 (an outlier channel, a few huge rows) with f16 inputs: X is scaled by a power of
// two before the conversion and the product by its inverse, so the result stays finite and as close as for ordinary
// inputs (relative to the largest reference value); accumulate and a strided X included. Before pf26 these became inf.
TEST(PrefillGemm, F16InputsPastTheF16Range) {
  DS_PREFILL_REQUIRE_GPU();
  auto gemm = make_gemm();
  ASSERT_TRUE(gemm);
  const int64_t N = 192, K = 1024, T = 40, ldx = 1100;
  const auto w = test::prandom_weights(GgmlType::Q4_K, N * K, 81);
  auto xs = test::prandn(T * ldx, 82);
  for (int64_t t = 0; t < T; t++) xs[t * ldx + 7] *= 3.0e5f;  // an outlier channel
  for (int64_t k = 0; k < K; k++) xs[5 * ldx + k] *= 2.0e6f;  // one huge row
  std::vector<float> x(T * K), ref(T * N);
  for (int64_t t = 0; t < T; t++) std::copy(&xs[t * ldx], &xs[t * ldx] + K, &x[t * K]);
  cpu::matmul({GgmlType::Q4_K, N, K, T}, w.data(), x.data(), ref.data());
  Dev<uint8_t> dw(w);
  Dev<float> dx(xs);
  for (GemmInputs in : {GemmInputs::kF16, GemmInputs::kF16Split}) {
    Dev<float> dy = Dev<float>::zeros(T * N);
    DS_CHECK_OK(gemm->matmul({GgmlType::Q4_K, N, K, T}, dw.p(), dx.p(), ldx, dy.p(), 0, in, false, nullptr));
    const auto got = dy.host();
    for (size_t i = 0; i < got.size(); i++)
      ASSERT_TRUE(std::isfinite(got[i])) << cuda::prefill::gemm_inputs_name(in) << " output " << i << " is " << got[i];
    check(got, ref, in, "X up to ~1e7 (past f16's range)");
    Dev<float> acc = Dev<float>::zeros(T * N);  // accumulate: beta from device memory too
    DS_CHECK_OK(gemm->matmul({GgmlType::Q4_K, N, K, T}, dw.p(), dx.p(), ldx, acc.p(), 0, in, true, nullptr));
    DS_CHECK_OK(gemm->matmul({GgmlType::Q4_K, N, K, T}, dw.p(), dx.p(), ldx, acc.p(), 0, in, true, nullptr));
    std::vector<float> ref2(ref);
    for (float& v : ref2) v *= 2.f;
    check(acc.host(), ref2, in, "X past f16's range, accumulated twice");
  }
}

TEST(PrefillGemm, AccumulateIntoStridedViews) {
  DS_PREFILL_REQUIRE_GPU();
  auto gemm = make_gemm();
  ASSERT_TRUE(gemm);
  const int64_t N = 200, K = 512, T = 50, ldx = 600, ldy = 250;
  const auto w = test::prandom_weights(GgmlType::Q4_K, N * K, 71);
  const auto xs = test::prandn(T * ldx, 72), y0 = test::prandn(T * ldy, 73);
  std::vector<float> x(T * K), prod(T * N);
  for (int64_t t = 0; t < T; t++) std::copy(&xs[t * ldx], &xs[t * ldx] + K, &x[t * K]);
  cpu::matmul({GgmlType::Q4_K, N, K, T}, w.data(), x.data(), prod.data());
  std::vector<float> ref = y0;
  for (int64_t t = 0; t < T; t++)
    for (int64_t n = 0; n < N; n++) ref[t * ldy + n] += prod[t * N + n];
  Dev<uint8_t> dw(w);
  Dev<float> dx(xs);
  for (GemmInputs in : kAllInputs) {
    Dev<float> dy(y0);
    DS_CHECK_OK(gemm->matmul({GgmlType::Q4_K, N, K, T}, dw.p(), dx.p(), ldx, dy.p(), ldy, in, true, nullptr));
    check(dy.host(), ref, in, "accumulate, ldx 600, ldy 250 (columns past N untouched)");
  }
}

TEST(PrefillGemm, SharedInputSeveralWeights) {
  DS_PREFILL_REQUIRE_GPU();
  auto gemm = make_gemm();
  ASSERT_TRUE(gemm);
  // Three projections of one input written side by side into one [T, 404] buffer (as a model's qkv|z|b).
  const int64_t K = 256, T = 70, ld = 404;
  struct W { GgmlType type; int64_t N, off; std::vector<uint8_t> bytes; };
  std::vector<W> ws = {{GgmlType::Q4_K, 300, 0, {}}, {GgmlType::Q6_K, 64, 300, {}}, {GgmlType::F32, 40, 364, {}}};
  for (size_t i = 0; i < ws.size(); i++) ws[i].bytes = test::prandom_weights(ws[i].type, ws[i].N * K, 90 + i);
  const auto x = test::prandn(T * K, 99);
  std::vector<float> ref(T * ld, 0.f);
  for (const auto& w : ws) {
    std::vector<float> y(T * w.N);
    cpu::matmul({w.type, w.N, K, T}, w.bytes.data(), x.data(), y.data());
    for (int64_t t = 0; t < T; t++) std::copy(&y[t * w.N], &y[t * w.N] + w.N, &ref[t * ld + w.off]);
  }
  std::vector<Dev<uint8_t>> dws;
  for (const auto& w : ws) dws.emplace_back(w.bytes);
  Dev<float> dx(x);
  for (GemmInputs in : kAllInputs) {
    Dev<float> dy = Dev<float>::zeros(T * ld);
    std::vector<GemmOut> outs;
    for (size_t i = 0; i < ws.size(); i++) outs.push_back({ws[i].type, dws[i].p(), ws[i].N, dy.p() + ws[i].off, ld, false});
    DS_CHECK_OK(gemm->matmul_many(outs, dx.p(), 0, T, K, in, nullptr));
    check(dy.host(), ref, in, "matmul_many Q4_K|Q6_K|F32 into one buffer");
  }
}

TEST(PrefillGemm, RejectsBadShapes) {
  DS_PREFILL_REQUIRE_GPU();
  auto gemm = make_gemm();
  ASSERT_TRUE(gemm);
  Dev<float> buf = Dev<float>::zeros(1 << 16);
  auto call = [&](GgmlType t, int64_t N, int64_t K, GemmInputs in) {
    return gemm->matmul({t, N, K, 4}, buf.p(), buf.p() + 8192, 0, buf.p() + 16384, 0, in, false, nullptr);
  };
  EXPECT_FALSE(call(GgmlType::Q4_K, 16, 100, GemmInputs::kF32).ok()) << "K not a multiple of 256";
  EXPECT_FALSE(call(GgmlType::IQ1_S, 16, 256, GemmInputs::kF32).ok()) << "type without a CUDA kernel";
  EXPECT_FALSE(call(GgmlType::F32, 16, 12, GemmInputs::kBf16).ok()) << "K not a multiple of 8 for bf16";
  EXPECT_TRUE(call(GgmlType::F32, 16, 12, GemmInputs::kF32).ok()) << "F32 takes any K in fp32";
  EXPECT_TRUE(gemm->matmul({GgmlType::F32, 16, 12, 0}, buf.p(), buf.p(), 0, buf.p(), 0, GemmInputs::kF32, false, nullptr).ok())
      << "no tokens is a no-op";
}

}  // namespace
}  // namespace ds
