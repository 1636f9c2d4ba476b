// The simd.h building blocks for AVX-512 (16 floats per register, 32 registers), plus the AVX-512 BF16
// GEMM micro-kernel of the approximate --fast prefill. Compiled for AVX-512 here, used only after the
// run-time check in isa.cpp.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "cpu/simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_ps(), which -Wuninitialized flags.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")

namespace ds::cpu {
namespace {

struct V {
  using R = __m512;
  static constexpr int W = 16, kNG = 4, kNV = 4, kMr = 8;
  static constexpr float kExpMin = -104.0f;  // scalef builds denormals and zero correctly
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float a) { return _mm512_set1_ps(a); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R a) { _mm512_storeu_ps(p, a); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float sum(R a) { return _mm512_reduce_add_ps(a); }
  static R round(R a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R scale2(R p, R n) { return _mm512_scalef_ps(p, n); }
  // 16x16 transpose in place: r[i][j] -> r[j][i] (unpack pairs, 4x4 blocks per 128-bit lane, then lanes).
  static void transpose(R* r) {
    R a[16], b[16];
    for (int i = 0; i < 8; i++) {
      a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) {  // b[4g + j], lane l: rows 4g .. 4g+3 of column 4l + j
      b[4 * g + 0] = _mm512_shuffle_ps(a[4 * g], a[4 * g + 2], 0x44);
      b[4 * g + 1] = _mm512_shuffle_ps(a[4 * g], a[4 * g + 2], 0xEE);
      b[4 * g + 2] = _mm512_shuffle_ps(a[4 * g + 1], a[4 * g + 3], 0x44);
      b[4 * g + 3] = _mm512_shuffle_ps(a[4 * g + 1], a[4 * g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
      const R clo = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x88), chi = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xDD);
      const R dlo = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x88), dhi = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xDD);
      r[j] = _mm512_shuffle_f32x4(clo, dlo, 0x88);
      r[8 + j] = _mm512_shuffle_f32x4(clo, dlo, 0xDD);
      r[4 + j] = _mm512_shuffle_f32x4(chi, dhi, 0x88);
      r[12 + j] = _mm512_shuffle_f32x4(chi, dhi, 0xDD);
    }
  }
};

#include "cpu/simd_impl.h"

// bf16 pairs: panel [K/2][32][2], x rows of K bf16; vdpbf16ps adds both products of a pair per lane.
template <int M>
void gemm_bf16(int64_t K, const uint16_t* pw, const uint16_t* x, int64_t ldx, float* y, int64_t ldy, int nr) {
  __m512 c0[M], c1[M];
#pragma GCC unroll 16
  for (int m = 0; m < M; m++) c0[m] = c1[m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 2, pw += 64) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(pw), w1 = (__m512bh)_mm512_loadu_si512(pw + 32);
#pragma GCC unroll 16
    for (int m = 0; m < M; m++) {
      int32_t pair;
      std::memcpy(&pair, x + m * ldx + k, 4);
      const __m512bh b = (__m512bh)_mm512_set1_epi32(pair);
      c0[m] = _mm512_dpbf16_ps(c0[m], w0, b);
      c1[m] = _mm512_dpbf16_ps(c1[m], w1, b);
    }
  }
  const __mmask16 k0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  const __mmask16 k1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
#pragma GCC unroll 16
  for (int m = 0; m < M; m++) {
    _mm512_mask_storeu_ps(y + m * ldy, k0, c0[m]);
    _mm512_mask_storeu_ps(y + m * ldy + 16, k1, c1[m]);
  }
}

void to_bf16(const float* x, int64_t n, uint16_t* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i*)(y + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
  for (; i < n; i++) y[i] = f32_to_bf16(x[i]);
}

using GemmF32 = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int);
using GemmBf16 = void (*)(int64_t, const uint16_t*, const uint16_t*, int64_t, float*, int64_t, int);
constexpr GemmF32 kGemmF32[V::kMr] = {gemm_f32<1>, gemm_f32<2>, gemm_f32<3>, gemm_f32<4>,
                                      gemm_f32<5>, gemm_f32<6>, gemm_f32<7>, gemm_f32<8>};
constexpr GemmBf16 kGemmBf16[V::kMr] = {gemm_bf16<1>, gemm_bf16<2>, gemm_bf16<3>, gemm_bf16<4>,
                                        gemm_bf16<5>, gemm_bf16<6>, gemm_bf16<7>, gemm_bf16<8>};

}  // namespace

#pragma GCC pop_options

const VecOps* vec_ops_avx512() {
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
                             .gemm_bf16 = kGemmBf16,
                             .to_bf16 = to_bf16,
                             .rows_times_matrix = rows_times_matrix,
                             .pack_panel = pack_panel};
  return &ops;
}

}  // namespace ds::cpu

#else
namespace ds::cpu {
const VecOps* vec_ops_avx512() { return nullptr; }
}  // namespace ds::cpu
#endif
