// Causal conv1d + SiLU: against the direct formula over the whole history, and split into pieces
// (the rolling window must carry exactly the last Kc-1 inputs), including pieces shorter than Kc-1.
#include <cmath>

#include "cpu/cpu.h"
#include "op_test_util.h"

using namespace ds;
using ds::test::expect_close;

namespace {
constexpr double kTolAbs = 1e-6, kTolRel = 1e-6;

// y[t, c] = silu(sum_j w[c, j] * x[t - (Kc-1) + j, c]) with x[<0] = 0, in double.
std::vector<float> conv_direct(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t Cc,
                               int64_t Kc) {
  std::vector<double> y(T * Cc);
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < Cc; c++) {
      double s = 0;
      for (int64_t j = 0; j < Kc; j++) {
        const int64_t src = t - (Kc - 1) + j;
        if (src >= 0) s += (double)w[c * Kc + j] * x[src * Cc + c];
      }
      y[t * Cc + c] = s / (1 + std::exp(-s));
    }
  return ds::test::to_float(y);
}
}  // namespace

TEST(Conv1d, HandComputedTapOrder) {
  // One channel, Kc = 4, w = [1, 10, 100, 1000]: tap 0 multiplies the oldest sample.
  const std::vector<float> w = {1, 10, 100, 1000};
  std::vector<float> state = {0.001f, 0.002f, 0.003f};  // oldest first
  const std::vector<float> x = {0.004f};
  std::vector<float> y(1);
  cpu::conv1d_silu({1, 1, 1, 4}, x.data(), w.data(), state.data(), nullptr, nullptr, y.data());
  const double s = 0.001 * 1 + 0.002 * 10 + 0.003 * 100 + 0.004 * 1000;
  EXPECT_NEAR(y[0], s / (1 + std::exp(-s)), 1e-6);
  EXPECT_EQ(state, (std::vector<float>{0.002f, 0.003f, 0.004f}));
}

TEST(Conv1d, OneCallAgainstDirectFormula) {
  for (int64_t Kc : {1, 2, 4}) {
    for (int64_t T : {1, 2, 3, 17}) {
      const int64_t Cc = 37;
      auto x = ds::test::randn(T * Cc, 100 + T), w = ds::test::randn(Cc * Kc, 200 + Kc);
      std::vector<float> state((Kc - 1) * Cc, 0.0f), y(T * Cc);
      cpu::conv1d_silu({T, 1, Cc, Kc}, x.data(), w.data(), state.data(), nullptr, nullptr, y.data());
      const std::string what = "Kc=" + std::to_string(Kc) + " T=" + std::to_string(T);
      expect_close(y, conv_direct(x, w, T, Cc, Kc), kTolAbs * 10, kTolRel, what);
      // Final window = the last Kc-1 inputs (zeros where the sequence is shorter).
      for (int64_t r = 0; r < Kc - 1; r++)
        for (int64_t c = 0; c < Cc; c++) {
          const int64_t src = T - (Kc - 1) + r;
          EXPECT_EQ(state[r * Cc + c], src >= 0 ? x[src * Cc + c] : 0.0f) << what;
        }
    }
  }
}

TEST(Conv1d, PiecesEqualOneCall) {
  const int64_t Kc = 4, Cc = 24, T = 13;
  auto x = ds::test::randn(T * Cc, 7), w = ds::test::randn(Cc * Kc, 8);
  std::vector<float> s1((Kc - 1) * Cc, 0.0f), y1(T * Cc);
  cpu::conv1d_silu({T, 1, Cc, Kc}, x.data(), w.data(), s1.data(), nullptr, nullptr, y1.data());
  std::vector<float> s2((Kc - 1) * Cc, 0.0f), y2(T * Cc);
  for (int64_t t0 = 0, piece = 1; t0 < T; t0 += piece, piece = piece % 5 + 1) {  // pieces 1,2,3,4,5,1,...
    const int64_t n = std::min(piece, T - t0);
    cpu::conv1d_silu({n, 1, Cc, Kc}, x.data() + t0 * Cc, w.data(), s2.data(), nullptr, nullptr, y2.data() + t0 * Cc);
  }
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(s1, s2);
}

TEST(Conv1d, PackedBatchWithSlotsEqualsEachAlone) {
  const int64_t Kc = 4, Cc = 10, W = Kc - 1;
  const std::vector<int32_t> starts = {0, 5, 5, 7};  // lengths 5, 0, 2
  const std::vector<int32_t> slots = {2, 0, 1};
  const int64_t T = starts.back();
  auto x = ds::test::randn(T * Cc, 11), w = ds::test::randn(Cc * Kc, 12);
  auto pool = ds::test::randn(3 * W * Cc, 13);  // nonzero initial windows
  auto pool_alone = pool;
  std::vector<float> y(T * Cc), y_alone(T * Cc);
  cpu::conv1d_silu({T, 3, Cc, Kc}, x.data(), w.data(), pool.data(), starts.data(), slots.data(), y.data());
  for (int s = 0; s < 3; s++) {
    const int64_t n = starts[s + 1] - starts[s];
    cpu::conv1d_silu({n, 1, Cc, Kc}, x.data() + starts[s] * Cc, w.data(), pool_alone.data() + slots[s] * W * Cc,
                     nullptr, nullptr, y_alone.data() + starts[s] * Cc);
  }
  EXPECT_EQ(y, y_alone);
  EXPECT_EQ(pool, pool_alone);
}
