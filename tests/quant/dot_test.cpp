// dot_row (fast path when the CPU has one) and dot_row_ref against dequantize-then-dot in double.
// Error metric: |dot - exact| / sum_i |w_i x_i|, which is what float32 summation bounds; the
// tolerance table below is per type (row-sequential sums for the 1-element types are longer).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "quant/kernels.h"
#include "quant/quant.h"
#include "quant_testutil.h"
#include "testutil.h"

namespace ds::quant {
namespace {

// Relative tolerance, in units of sum |w x|. float32 eps is 6e-8; a sum of n terms in random order
// has an error around sqrt(n) eps, bounded by n eps. The rows here have up to ~4.4k elements.
double dot_tolerance(GgmlType t) {
  using T = GgmlType;
  static const std::map<GgmlType, double> kTol = {
      // Row-sequential sums in the scalar reference (no per-block partial sums): longest chains.
      {T::F32, 3e-5}, {T::F16, 3e-5}, {T::BF16, 3e-5},
      // Per-block fp32 partial sums (32 or 256 terms), then a sum over blocks.
      {T::Q4_0, 1e-5}, {T::Q4_1, 1e-5}, {T::Q5_0, 1e-5}, {T::Q5_1, 1e-5}, {T::Q8_0, 1e-5},
      {T::Q2_K, 1e-5}, {T::Q3_K, 1e-5}, {T::Q4_K, 1e-5}, {T::Q5_K, 1e-5}, {T::Q6_K, 1e-5},
      {T::IQ2_XXS, 1e-5}, {T::IQ2_XS, 1e-5}, {T::IQ2_S, 1e-5}, {T::IQ3_XXS, 1e-5}, {T::IQ3_S, 1e-5},
      {T::IQ1_S, 1e-5}, {T::IQ1_M, 1e-5}, {T::IQ4_NL, 1e-5}, {T::IQ4_XS, 1e-5}, {T::TQ1_0, 1e-5},
      {T::TQ2_0, 1e-5}, {T::MXFP4, 1e-5},
  };
  return kTol.at(t);
}

struct Exact {
  double dot = 0, scale = 0;
};

Exact exact_dot(GgmlType t, const void* row, const float* x, int64_t n) {
  std::vector<float> w(n);
  dequantize_row_ref(t, row, w.data(), n);
  Exact e;
  for (int64_t i = 0; i < n; i++) {
    e.dot += (double)w[i] * x[i];
    e.scale += std::fabs((double)w[i] * x[i]);
  }
  return e;
}

TEST(QuantDot, EveryTypeMatchesDequantizeThenDot) {
  std::mt19937 rng(11);
  int checked = 0;
  for (GgmlType t : test::all_decodable_types()) {
    if (!can_dot(t)) continue;
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const auto ti = *ggml_type_info(t);
    const double tol = dot_tolerance(t);
    for (int64_t n : {(int64_t)256, (int64_t)1024, (int64_t)3584, (int64_t)4096 + 256}) {
      if (n % ti.block_size) continue;
      const auto row = test::random_blocks(t, n / ti.block_size, rng);
      const auto x = test::gaussian(n, rng);
      const Exact e = exact_dot(t, row.data(), x.data(), n);
      ASSERT_GT(e.scale, 0);
      const float fast = dot_row(t, row.data(), x.data(), n), ref = dot_row_ref(t, row.data(), x.data(), n);
      EXPECT_LE(std::fabs(fast - e.dot) / e.scale, tol) << "dot_row n=" << n;
      EXPECT_LE(std::fabs(ref - e.dot) / e.scale, tol) << "dot_row_ref n=" << n;
      // The fast path against the scalar path directly (both are float32 sums in different orders).
      EXPECT_LE(std::fabs((double)fast - ref) / e.scale, 2 * tol) << "fast vs scalar n=" << n;
      checked++;
    }
    // A row of a single block (tail handling of the fast paths).
    const auto row = test::random_blocks(t, 1, rng);
    const auto x = test::gaussian(ti.block_size, rng);
    const Exact e = exact_dot(t, row.data(), x.data(), ti.block_size);
    EXPECT_LE(std::fabs(dot_row(t, row.data(), x.data(), ti.block_size) - e.dot), tol * e.scale + 1e-30);
  }
  EXPECT_GE(checked, 40);
}

TEST(QuantDot, DotRowsMatchesPerRowDots) {
  // Several rows at a stride larger than the row (as in a padded tensor), every decodable type,
  // against the exact dot of each row; also 0 and 1 rows. On an AVX-512 machine both the AVX-512
  // kernels (Q4_K, Q6_K: four, then two rows at a time, so 5 and 7 rows matter) and the AVX2 ones run.
  std::mt19937 rng(21);
  for (bool avx512 : {true, false}) {
    SCOPED_TRACE(avx512 ? "avx512 allowed" : "avx512 off");
    detail::set_avx512_enabled(avx512);
    for (GgmlType t : test::all_decodable_types()) {
      if (!can_dot(t)) continue;
      SCOPED_TRACE(std::string(ggml_type_name(t)));
      const auto ti = *ggml_type_info(t);
      const bool hot = t == GgmlType::Q4_K || t == GgmlType::Q6_K;
      // 40 blocks of 256 cross the AVX-512 kernels' 32-block scale pre-pass.
      for (int64_t n : {(int64_t)1024, (int64_t)(hot ? 256 * 40 : 0)}) {
        if (n == 0) continue;
        const size_t row_bytes = ggml_row_bytes(ti, n), stride = row_bytes + 64;
        for (int64_t rows : {(int64_t)0, (int64_t)1, (int64_t)2, (int64_t)5, (int64_t)7}) {
          std::vector<uint8_t> w(rows * stride + 1);
          for (int64_t r = 0; r < rows; r++) {
            const auto blk = test::random_blocks(t, n / ti.block_size, rng);
            std::memcpy(w.data() + r * stride, blk.data(), row_bytes);
          }
          const auto x = test::gaussian(n, rng);
          std::vector<float> y(rows + 1, 12345.0f);
          dot_rows(t, w.data(), stride, rows, x.data(), n, y.data());
          for (int64_t r = 0; r < rows; r++) {
            const Exact e = exact_dot(t, w.data() + r * stride, x.data(), n);
            EXPECT_LE(std::fabs(y[r] - e.dot), dot_tolerance(t) * e.scale) << "n=" << n << " rows=" << rows << " r=" << r;
          }
          EXPECT_EQ(y[rows], 12345.0f) << "wrote past the last row";
        }
      }
    }
  }
  detail::set_avx512_enabled(true);
}

TEST(QuantDot, ScalarFallbackWhenFastPathsAreOff) {
  // What a CPU without AVX2 runs: the dispatching entry points on the scalar path.
  std::mt19937 rng(8);
  detail::set_fast_paths_enabled(false);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::BF16, GgmlType::IQ4_XS}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const auto ti = *ggml_type_info(t);
    const int64_t n = 512;
    const auto row = test::random_blocks(t, n / ti.block_size, rng);
    const auto x = test::gaussian(n, rng);
    EXPECT_EQ(dot_row(t, row.data(), x.data(), n), dot_row_ref(t, row.data(), x.data(), n));
    std::vector<float> a(n), b(n);
    dequantize_row(t, row.data(), a.data(), n);
    dequantize_row_ref(t, row.data(), b.data(), n);
    EXPECT_EQ(a, b);
    float y[2];
    std::vector<uint8_t> two(row);
    two.insert(two.end(), row.begin(), row.end());
    dot_rows(t, two.data(), row.size(), 2, x.data(), n, y);
    EXPECT_EQ(y[0], dot_row_ref(t, row.data(), x.data(), n));
    EXPECT_EQ(y[1], y[0]);
  }
  detail::set_fast_paths_enabled(true);
}

TEST(QuantDot, GoldenBlocksMatchDequantizeThenDot) {
  // The golden rows exercise every code of every field (random bytes, formats.md §7).
  std::mt19937 rng(5);
  for (const char* name : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                           "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", "TQ1_0", "TQ2_0", "IQ2_XXS", "IQ2_XS",
                           "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S"}) {
    SCOPED_TRACE(name);
    const GgmlType t = *ggml_type_from_name(name);
    if (!can_dot(t)) {
      ADD_FAILURE() << name << " has no dot_row";
      continue;
    }
    const auto row = ds::test::read_file(ds::test::fixture(std::string("quant/") + name + ".blocks"));
    const auto ti = *ggml_type_info(t);
    const int64_t n = (int64_t)(row.size() / ti.type_size) * ti.block_size;
    const auto x = test::gaussian(n, rng);
    const Exact e = exact_dot(t, row.data(), x.data(), n);
    EXPECT_LE(std::fabs(dot_row(t, row.data(), x.data(), n) - e.dot) / e.scale, dot_tolerance(t));
  }
}

}  // namespace
}  // namespace ds::quant
