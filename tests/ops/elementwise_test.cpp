// add, swiglu and the sigmoid output gate against their formulas, including the strided gate layout.
#include <cmath>

#include "cpu/cpu.h"
#include "op_test_util.h"

using namespace ds;

TEST(Elementwise, AddSwiglu) {
  const int64_t T = 3, I = 37;
  auto a = ds::test::randn(T * I, 1, 3.0f), b = ds::test::randn(T * I, 2, 3.0f);
  std::vector<float> y(T * I), s(T * I);
  cpu::add({T * I}, a.data(), b.data(), y.data());
  cpu::swiglu({T, I}, a.data(), b.data(), s.data());
  for (int64_t i = 0; i < T * I; i++) {
    EXPECT_EQ(y[i], a[i] + b[i]);
    EXPECT_NEAR(s[i], a[i] / (1 + std::exp(-(double)a[i])) * b[i], 1e-6 * (1 + std::fabs(s[i])));
  }
  // silu(0) = 0; silu(x) -> x for large x; silu(-large) -> 0.
  const std::vector<float> g = {0, 30, -30}, u = {1, 1, 1};
  std::vector<float> z(3);
  cpu::swiglu({1, 3}, g.data(), u.data(), z.data());
  EXPECT_EQ(z[0], 0.0f);
  EXPECT_FLOAT_EQ(z[1], 30.0f);
  EXPECT_NEAR(z[2], 0.0f, 1e-11);
}

TEST(Elementwise, OutputGateReadsInterleavedGate) {
  const int64_t T = 2, nh = 3, hd = 5;
  auto qf = ds::test::randn(T * nh * 2 * hd, 3);  // [T, nh, (q | gate)]
  auto x = ds::test::randn(T * nh * hd, 4);
  auto y = x;
  cpu::output_gate({T, nh, hd, nh * 2 * hd, 2 * hd}, y.data(), qf.data() + hd);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < nh; h++)
      for (int64_t j = 0; j < hd; j++) {
        const double gate = qf[t * nh * 2 * hd + h * 2 * hd + hd + j];
        EXPECT_NEAR(y[(t * nh + h) * hd + j], x[(t * nh + h) * hd + j] / (1 + std::exp(-gate)), 1e-6);
      }
}
