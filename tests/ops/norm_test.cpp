// RMSNorm, gated RMSNorm and L2 norm against hand-computed values and a double-precision formula.
#include <cmath>

#include "cpu/cpu.h"
#include "op_test_util.h"

using namespace ds;
using ds::test::expect_close;

namespace {
constexpr double kTolAbs = 2e-6, kTolRel = 1e-6;  // fp32 vs double on O(1) values

double silu_d(double x) { return x / (1 + std::exp(-x)); }
}  // namespace

TEST(RmsNorm, HandComputed) {
  // x = [1, 2, 3, 4]: mean(x^2) = 7.5, y = x / sqrt(7.5 + eps) * w.
  const std::vector<float> x = {1, 2, 3, 4}, w = {1, 2, 0.5f, -1};
  std::vector<float> y(4);
  cpu::rms_norm(ops::RmsNormParams::packed(1, 4, 0.0f), x.data(), w.data(), y.data());
  const double r = 1 / std::sqrt(7.5);
  expect_close(y, ds::test::to_float({1 * r, 2 * 2 * r, 3 * 0.5 * r, -4 * r}), 1e-6, 1e-6, "rms [1,2,3,4]");
}

TEST(RmsNorm, StridedHeadsAgainstFormula) {
  // q_norm use: read q (first hd of each [q | gate] head pair) out of [T, nh, 2*hd], write packed [T, nh, hd].
  for (int64_t hd : {1, 7, 64, 256}) {
    const int64_t T = 5, nh = 3;
    auto x = ds::test::randn(T * nh * 2 * hd, 1 + hd, 3.0f);
    auto w = ds::test::randn(hd, 2 + hd);
    std::vector<float> y(T * nh * hd);
    ops::RmsNormParams p{T, nh, hd, nh * 2 * hd, 2 * hd, nh * hd, hd, 1e-6f};
    cpu::rms_norm(p, x.data(), w.data(), y.data());
    std::vector<double> want(y.size());
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < nh; h++) {
        const float* xr = &x[t * nh * 2 * hd + h * 2 * hd];
        double ss = 0;
        for (int64_t i = 0; i < hd; i++) ss += (double)xr[i] * xr[i];
        const double r = 1 / std::sqrt(ss / hd + 1e-6);
        for (int64_t i = 0; i < hd; i++) want[(t * nh + h) * hd + i] = xr[i] * r * w[i];
      }
    expect_close(y, ds::test::to_float(want), kTolAbs * 4, kTolRel, "rms strided hd=" + std::to_string(hd));
  }
}

TEST(RmsNorm, InPlaceEqualsOutOfPlace) {
  const int64_t rows = 9, cols = 33;
  auto x = ds::test::randn(rows * cols, 3), w = ds::test::randn(cols, 4);
  std::vector<float> y(x.size()), z = x;
  const auto p = ops::RmsNormParams::packed(rows, cols, 1e-6f);
  cpu::rms_norm(p, x.data(), w.data(), y.data());
  cpu::rms_norm(p, z.data(), w.data(), z.data());
  EXPECT_EQ(y, z);
}

TEST(RmsNormGated, AgainstFormula) {
  for (int64_t dv : {1, 5, 64, 128}) {
    const int64_t rows = 7;
    auto x = ds::test::randn(rows * dv, 10 + dv, 2.0f), z = ds::test::randn(rows * dv, 20 + dv, 2.0f);
    auto w = ds::test::randn(dv, 30 + dv);
    std::vector<float> y(x.size());
    cpu::rms_norm_gated({rows, dv, 1e-6f}, x.data(), z.data(), w.data(), y.data());
    std::vector<double> want(y.size());
    for (int64_t r = 0; r < rows; r++) {
      double ss = 0;
      for (int64_t i = 0; i < dv; i++) ss += (double)x[r * dv + i] * x[r * dv + i];
      const double s = 1 / std::sqrt(ss / dv + 1e-6);
      for (int64_t i = 0; i < dv; i++) want[r * dv + i] = x[r * dv + i] * s * w[i] * silu_d(z[r * dv + i]);
    }
    expect_close(y, ds::test::to_float(want), kTolAbs * 8, kTolRel * 2, "gated dv=" + std::to_string(dv));
  }
}

TEST(RmsNormGated, WeightHasNoPlusOne) {
  // With w = 0 the output must be exactly 0 (a "+1" weight convention would give the normalized x).
  const std::vector<float> x = {1, -2, 3}, z = {1, 1, 1}, w = {0, 0, 0};
  std::vector<float> y(3, 9.0f);
  cpu::rms_norm_gated({1, 3, 1e-6f}, x.data(), z.data(), w.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0}));
}

TEST(L2Norm, HandComputed) {
  const std::vector<float> x = {3, 4, 0, 0, 0, 5, 12, 0};  // two heads of 4
  std::vector<float> y(8);
  cpu::l2_norm({1, 2, 4, 8, 4, 8, 4, 0.0f}, x.data(), y.data());
  expect_close(y, {0.6f, 0.8f, 0, 0, 0, 5.0f / 13, 12.0f / 13, 0}, 1e-7, 1e-7, "l2 hand");
  // HF eps form: x / sqrt(sum x^2 + eps); a zero row stays zero, a tiny row is damped (not blown up).
  const std::vector<float> tiny = {1e-4f, 0};
  std::vector<float> yt(2);
  cpu::l2_norm({1, 1, 2, 2, 2, 2, 2, 1e-6f}, tiny.data(), yt.data());
  EXPECT_NEAR(yt[0], 1e-4 / std::sqrt(1e-8 + 1e-6), 1e-6);
}

TEST(L2Norm, InPlaceOnConvOutputLayout) {
  // q and k heads inside U [T, Cc] (stride Cc), v part untouched.
  const int64_t T = 4, nk = 3, dk = 16, Cc = 2 * nk * dk + 5 * dk;
  auto u = ds::test::randn(T * Cc, 42, 2.0f);
  auto orig = u;
  cpu::l2_norm({T, 2 * nk, dk, Cc, dk, Cc, dk, 1e-6f}, u.data(), u.data());
  for (int64_t t = 0; t < T; t++) {
    for (int64_t h = 0; h < 2 * nk; h++) {
      double ss = 0;
      for (int64_t i = 0; i < dk; i++) ss += (double)orig[t * Cc + h * dk + i] * orig[t * Cc + h * dk + i];
      for (int64_t i = 0; i < dk; i++)
        EXPECT_NEAR(u[t * Cc + h * dk + i], orig[t * Cc + h * dk + i] / std::sqrt(ss + 1e-6), 1e-6);
    }
    for (int64_t c = 2 * nk * dk; c < Cc; c++) EXPECT_EQ(u[t * Cc + c], orig[t * Cc + c]);
  }
}
