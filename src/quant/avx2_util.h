// Small AVX2 helpers shared by the fast-path files. Include ONLY inside a
// `#pragma GCC target("avx2,fma,f16c")` region (after <immintrin.h>): everything here is compiled
// for AVX2 and must never run before the runtime CPU check (kernels.h: cpu_has_avx2_fma).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ds::quant::detail {
namespace {

// f16 -> f32 with one F16C instruction (exact, like core's f16_to_f32).
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 bytes at p, zero-extended to 8 int32 lanes.
inline __m256i load_u8x8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
}
inline __m256 to_f(__m256i v) { return _mm256_cvtepi32_ps(v); }

// All eight Q4_K/Q5_K sub-block scales times d and mins times dmin (formats.md §5.8), as floats.
// Works on the 12 bytes as three u32 words: w0 = bytes 0-3, w1 = 4-7, w2 = 8-11.
inline void k_scales_mins(const uint8_t* q, float d, float dmin, float* dsc, float* mmn) {
  uint32_t w[3];
  std::memcpy(w, q, 12);
  const uint32_t sc_lo = w[0] & 0x3f3f3f3f, mn_lo = w[1] & 0x3f3f3f3f;
  const uint32_t sc_hi = (w[2] & 0x0f0f0f0f) | (((w[0] >> 6) & 0x03030303) << 4);
  const uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0f) | (((w[1] >> 6) & 0x03030303) << 4);
  const __m128i sc = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0);
  const __m128i mn = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
  _mm256_store_ps(dsc, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
  _mm256_store_ps(mmn, _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
}

}  // namespace
}  // namespace ds::quant::detail
