// The simd.h building blocks for AVX2 + FMA (8 floats per register, 16 registers). Compiled for AVX2
// here, used only after the run-time check in isa.cpp.
#include <algorithm>
#include <cstdint>

#include "cpu/simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace ds::cpu {
namespace {

struct V {
  using R = __m256;
  static constexpr int W = 8, kNG = 2, kNV = 4, kMr = 6;
  // scale2 adds n to the exponent field, which must stay normal: clamp the input.
  static constexpr float kExpMin = -86.0f;
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float a) { return _mm256_set1_ps(a); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R a) { _mm256_storeu_ps(p, a); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static float sum(R a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R scale2(R p, R n) {
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
  }
  // 8x8 transpose in place: r[i][j] -> r[j][i] (unpack pairs, 4x4 blocks per 128-bit lane, then lanes).
  static void transpose(R* r) {
    R a[8], b[8];
    for (int i = 0; i < 4; i++) {
      a[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; g++) {  // b[4g + j], lane l: rows 4g .. 4g+3 of column 4l + j
      b[4 * g + 0] = _mm256_shuffle_ps(a[4 * g], a[4 * g + 2], 0x44);
      b[4 * g + 1] = _mm256_shuffle_ps(a[4 * g], a[4 * g + 2], 0xEE);
      b[4 * g + 2] = _mm256_shuffle_ps(a[4 * g + 1], a[4 * g + 3], 0x44);
      b[4 * g + 3] = _mm256_shuffle_ps(a[4 * g + 1], a[4 * g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
      r[j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x20);
      r[4 + j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x31);
    }
  }
};

#include "cpu/simd_impl.h"

using GemmF32 = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int);
constexpr GemmF32 kGemmF32[V::kMr] = {gemm_f32<1>, gemm_f32<2>, gemm_f32<3>, gemm_f32<4>, gemm_f32<5>, gemm_f32<6>};

}  // namespace

#pragma GCC pop_options

const VecOps* vec_ops_avx2() {
  static const VecOps ops = {.width = V::W,
                             .row_times_matrix = row_times_matrix,
                             .exp = exp_rows,
                             .exp_sum = exp_sum,
                             .dot = dot,
                             .scale = scale,
                             .gdn_step = gdn_step,
                             .attn_scores = attn_scores,
                             .attn_values = attn_values,
                             .gemm_nr = 2 * V::W,
                             .gemm_mr = V::kMr,
                             .gemm_f32 = kGemmF32,
                             .gemm_bf16 = nullptr,
                             .to_bf16 = nullptr,
                             .rows_times_matrix = rows_times_matrix,
                             .pack_panel = pack_panel};
  return &ops;
}

}  // namespace ds::cpu

#else
namespace ds::cpu {
const VecOps* vec_ops_avx2() { return nullptr; }
}  // namespace ds::cpu
#endif
