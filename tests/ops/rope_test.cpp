// Partial NEOX RoPE against the explicit 2-D rotation of each pair (i, i + n_rot/2) by p * base^(-2i/n_rot),
// computed in double; the pass-through dims stay bit-identical; relative-position property.
#include <cmath>

#include "cpu/cpu.h"
#include "op_test_util.h"

using namespace ds;
using ds::test::expect_close;

namespace {
constexpr double kTolAbs = 3e-5;  // theta up to ~1e3 rad in fp32: the float angle itself carries ~1e-4 rel
}

TEST(Rope, AgainstExplicitRotation) {
  const int64_t T = 6, nh = 3, hd = 64, n_rot = 16, half = n_rot / 2;
  const float base = 1e7f;
  const std::vector<int32_t> pos = {0, 1, 2, 7, 100, 1000};
  auto x = ds::test::randn(T * nh * 2 * hd, 5);  // rows inside a [q | gate] interleaved buffer
  auto y = x;
  cpu::rope_neox({T, nh, hd, n_rot, nh * 2 * hd, 2 * hd, base}, y.data(), pos.data());
  std::vector<float> want = x;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < nh; h++) {
      const int64_t o = t * nh * 2 * hd + h * 2 * hd;
      for (int64_t i = 0; i < half; i++) {
        const double th = pos[t] * std::pow((double)base, -2.0 * i / n_rot);
        const double a = x[o + i], b = x[o + i + half];
        want[o + i] = (float)(a * std::cos(th) - b * std::sin(th));
        want[o + i + half] = (float)(a * std::sin(th) + b * std::cos(th));
      }
    }
  expect_close(y, want, kTolAbs, 1e-5, "rope");
  for (int64_t t = 0; t < T; t++)  // pass-through part and the gate halves untouched, bit for bit
    for (int64_t h = 0; h < nh; h++)
      for (int64_t i = n_rot; i < 2 * hd; i++) ASSERT_EQ(y[t * nh * 2 * hd + h * 2 * hd + i], x[t * nh * 2 * hd + h * 2 * hd + i]);
}

TEST(Rope, PositionZeroIsIdentityAndDotDependsOnDistance) {
  const int64_t hd = 32, n_rot = 32;
  auto q = ds::test::randn(hd, 1), k = ds::test::randn(hd, 2);
  auto q0 = q;
  const int32_t zero = 0;
  cpu::rope_neox({1, 1, hd, n_rot, hd, hd, 10000.0f}, q0.data(), &zero);
  EXPECT_EQ(q0, q);
  auto dot_at = [&](int32_t pq, int32_t pk) {
    auto a = q, b = k;
    cpu::rope_neox({1, 1, hd, n_rot, hd, hd, 10000.0f}, a.data(), &pq);
    cpu::rope_neox({1, 1, hd, n_rot, hd, hd, 10000.0f}, b.data(), &pk);
    double d = 0;
    for (int64_t i = 0; i < hd; i++) d += (double)a[i] * b[i];
    return d;
  };
  EXPECT_NEAR(dot_at(10, 3), dot_at(57, 50), 1e-4);
  EXPECT_NEAR(dot_at(5, 5), dot_at(0, 0), 1e-4);
}
