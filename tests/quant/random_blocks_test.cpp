// quant/random_blocks: the test and benchmark data of the quantized kernels must decode to finite,
// realistically scaled weights, and the same seed must give the same data.
#include "quant/random_blocks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "quant/quant.h"

namespace ds {
namespace {

TEST(RandomBlocks, DecodeToFiniteScaledWeights) {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                            GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                            GgmlType::IQ4_XS, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q2_K,
                            GgmlType::Q3_K};
  const int64_t n = 4096;
  for (GgmlType t : types) {
    const auto blocks = random_blocks(t, n, 7);
    const auto info = *ggml_type_info(t);
    ASSERT_EQ((int64_t)blocks.size(), n / info.block_size * info.type_size) << ggml_type_name(t);
    std::vector<float> w(n);
    quant::dequantize_row(t, blocks.data(), w.data(), n);
    double max_abs = 0.0;
    int nonzero = 0;
    for (float v : w) {
      ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(t);
      max_abs = std::max(max_abs, (double)std::fabs(v));
      nonzero += v != 0.f;
    }
    EXPECT_GT(nonzero, n / 2) << ggml_type_name(t);
    // Scales are at most 2^-6; the largest code times its (sub-)scale stays far below 100.
    EXPECT_LT(max_abs, 100.0) << ggml_type_name(t);
    EXPECT_EQ(random_blocks(t, n, 7), blocks) << ggml_type_name(t) << ": same seed, same data";
    EXPECT_NE(random_blocks(t, n, 8), blocks) << ggml_type_name(t) << ": another seed, other data";
  }
}

TEST(RandomBlocks, NormalHasTheRequestedScale) {
  const auto v = random_normal(20000, 3, 0.5f);
  double s = 0.0, ss = 0.0;
  for (float x : v) s += x, ss += (double)x * x;
  const double mean = s / v.size(), sd = std::sqrt(ss / v.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sd, 0.5, 0.02);
}

}  // namespace
}  // namespace ds
