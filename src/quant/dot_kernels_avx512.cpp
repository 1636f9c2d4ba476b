// AVX-512 twins of the factored decode dot kernels (and of the dequantizers, for prefill panels) (dot_kernels_avx2.cpp) for the two types that carry
// almost all decode bytes, Q4_K and Q6_K, for many rows with one x (dot_rows). Same math: per
// sub-block sum(code * x) in fp32, times the sub-block's float scale; Q4_K's mins use the shared sums of
// x per 32 elements. Three things make them faster than the AVX2 ones besides the width:
//  - the float scales of a run of blocks are decoded in a pre-pass into an array, so the broadcasts in
//    the hot loop read lines written long before (no store-to-load forwarding from a wide store);
//  - four rows at a time: each x vector loaded once serves four rows (bench_quant dot_rows/Q6_K/n1024:
//    ~10 GB/s with one or two rows, ~13-14 with four, on Zen 5);
//  - independent accumulators per sub-block position, so no FMA latency chain limits the loop.
// The activations stay fp32 (project rule: no int8 activations on the default path). Compiled for
// AVX-512 here; dispatch (dot_avx2.cpp) calls it only when cpu_has_avx512() says the CPU can.
#include <algorithm>

#include "quant/blocks.h"
#include "quant/kernels.h"

#if DS_QUANT_AVX2
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace ds::quant::detail {
namespace {

constexpr int64_t kRunBlocks = 32;  // blocks whose scales are decoded per pre-pass (stack arrays)

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline __m512 u8x16(const uint8_t* p) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p))); }
inline __m512 i8x16(const int8_t* p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p))); }

// ---- Q4_K ------------------------------------------------------------------------------------------
// The 8 sub-block scales * d and mins * dmin of one block (formats.md §5.8) as two 8-float vectors.
inline void q4k_scales(const BlockQ4_K* blk, __m256* dsc, __m256* mmn) {
  uint32_t w[3];
  __builtin_memcpy(w, blk->scales, 12);
  const uint32_t sc_lo = w[0] & 0x3f3f3f3f, mn_lo = w[1] & 0x3f3f3f3f;
  const uint32_t sc_hi = (w[2] & 0x0f0f0f0f) | (((w[0] >> 6) & 0x03030303) << 4);
  const uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0f) | (((w[1] >> 6) & 0x03030303) << 4);
  const __m128i sc = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0), mn = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
  *dsc = _mm256_mul_ps(_mm256_set1_ps(h2f(blk->d)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
  *mmn = _mm256_mul_ps(_mm256_set1_ps(h2f(blk->dmin)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)));
}

// sum over the 64 elements of sub-blocks 2c (low nibbles) and 2c+1 (high nibbles) of code * x.
struct Q4kPart {
  __m512 lo, hi;
};
inline Q4kPart q4k_part(const uint8_t* q, const __m512* xv) {
  const __m512i m4 = _mm512_set1_epi32(15);
  const __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)q));
  const __m512i v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(q + 16)));
  __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v0, m4)), xv[0]);
  lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v1, m4)), xv[1], lo);
  __m512 hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v0, 4)), xv[2]);
  hi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v1, 4)), xv[3], hi);
  return {lo, hi};
}

// R rows (1 or 2) at p[r * stride]; s32: sums of x per 32 elements.
template <int R>
void dot_q4_k(const uint8_t* p, size_t stride, int64_t nb, const float* x, const float* s32, float* y) {
  alignas(64) float dsc[R][kRunBlocks * 8];
  __m512 acc[R][4];
  __m256 accm[R];
  for (int r = 0; r < R; r++) {
    for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
    accm[r] = _mm256_setzero_ps();
  }
  for (int64_t b0 = 0; b0 < nb; b0 += kRunBlocks) {
    const int64_t b1 = std::min(nb, b0 + kRunBlocks);
    for (int r = 0; r < R; r++)
      for (int64_t b = b0; b < b1; b++) {
        __m256 d, m;
        q4k_scales((const BlockQ4_K*)(p + r * stride) + b, &d, &m);
        _mm256_store_ps(dsc[r] + 8 * (b - b0), d);
        accm[r] = _mm256_fmadd_ps(m, _mm256_loadu_ps(s32 + 8 * b), accm[r]);
      }
    for (int64_t b = b0; b < b1; b++) {
      const float* xb = x + 256 * b;
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) {
        const __m512 xv[4] = {_mm512_loadu_ps(xb + 64 * c), _mm512_loadu_ps(xb + 64 * c + 16),
                              _mm512_loadu_ps(xb + 64 * c + 32), _mm512_loadu_ps(xb + 64 * c + 48)};
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
          const Q4kPart s = q4k_part(((const BlockQ4_K*)(p + r * stride) + b)->qs + 32 * c, xv);
          const float* d = dsc[r] + 8 * (b - b0) + 2 * c;
          acc[r][c] = _mm512_fmadd_ps(s.lo, _mm512_set1_ps(d[0]), acc[r][c]);
          acc[r][c] = _mm512_fmadd_ps(s.hi, _mm512_set1_ps(d[1]), acc[r][c]);
        }
      }
    }
  }
  for (int r = 0; r < R; r++) {
    const __m512 a = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
    __m256 m = accm[r];
    __m128 ms = _mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    ms = _mm_add_ps(ms, _mm_movehl_ps(ms, ms));
    ms = _mm_add_ss(ms, _mm_movehdup_ps(ms));
    y[r] = _mm512_reduce_add_ps(a) - _mm_cvtss_f32(ms);
  }
}

// ---- Q6_K ------------------------------------------------------------------------------------------
// Codes of one block, element 128n + 32t + l, assembled 64 at a time in the byte domain minus 32 (int8):
// t = 0, 1: low nibbles of ql[64n + 0..63] with bits 0-1 / 2-3 of qh[32n + l];
// t = 2, 3: high nibbles of the same ql bytes with bits 4-5 / 6-7 of qh.
inline void q6k_codes(const BlockQ6_K* blk, int8_t* codes) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
  for (int n = 0; n < 2; n++) {
    const __m512i ql = _mm512_loadu_si512(blk->ql + 64 * n);
    const __m256i h = _mm256_loadu_si256((const __m256i*)(blk->qh + 32 * n));
    // H: bytes 0-31 = qh, bytes 32-63 = qh >> 2 (the t = 1 and t = 3 bits moved down by 2).
    const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(H, 4), m30));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(H, m30));
    _mm512_store_si512(codes + 128 * n, _mm512_sub_epi8(lo, k32));
    _mm512_store_si512(codes + 128 * n + 64, _mm512_sub_epi8(hi, k32));
  }
}

template <int R>
void dot_q6_k(const uint8_t* p, size_t stride, int64_t nb, const float* x, float* y) {
  alignas(64) float ds[R][kRunBlocks * 16];
  alignas(64) int8_t codes[R][256];
  __m512 acc[R][4];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += kRunBlocks) {
    const int64_t b1 = std::min(nb, b0 + kRunBlocks);
    for (int r = 0; r < R; r++)
      for (int64_t b = b0; b < b1; b++) {
        const auto* blk = (const BlockQ6_K*)(p + r * stride) + b;
        _mm512_store_ps(ds[r] + 16 * (b - b0), _mm512_mul_ps(_mm512_set1_ps(h2f(blk->d)), i8x16(blk->scales)));
      }
    for (int64_t b = b0; b < b1; b++) {
      for (int r = 0; r < R; r++) q6k_codes((const BlockQ6_K*)(p + r * stride) + b, codes[r]);
      // Keep the codes in memory so each 16-code load feeds VPMOVSXBD directly (dot_kernels_avx2.cpp).
      asm volatile("" ::: "memory");
      const float* xb = x + 256 * b;
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) {  // sub-block i = elements 16i .. 16i + 15
        const __m512 xv = _mm512_loadu_ps(xb + 16 * i);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
          acc[r][i & 3] = _mm512_fmadd_ps(_mm512_mul_ps(i8x16(codes[r] + 16 * i), xv),
                                          _mm512_set1_ps(ds[r][16 * (b - b0) + i]), acc[r][i & 3]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3])));
}

// ---- dequantization (prefill panels) -------------------------------------------------------------
// Bit-exact with the reference (formats.md §6): Q4_K's d*sc*q - dmin*m has an exact product (17 + 4
// bits) and one rounding, which the FMA of the 16-entry table gives; Q6_K's (d*sc) * (q - 32) is one
// rounding of an exact product, as cvt(q - 32) * (d*sc) is.
void dequant_q4_k(const uint8_t* p, int64_t nb, float* y) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  alignas(32) float dsc[8], mmn[8];
  for (int64_t b = 0; b < nb; b++, y += 256) {
    const auto* blk = (const BlockQ4_K*)p + b;
    __m256 d, m;
    q4k_scales(blk, &d, &m);
    _mm256_store_ps(dsc, d);
    _mm256_store_ps(mmn, m);
    for (int c = 0; c < 4; c++) {
      const __m512 tlo = _mm512_fmsub_ps(iota, _mm512_set1_ps(dsc[2 * c]), _mm512_set1_ps(mmn[2 * c]));
      const __m512 thi = _mm512_fmsub_ps(iota, _mm512_set1_ps(dsc[2 * c + 1]), _mm512_set1_ps(mmn[2 * c + 1]));
      const uint8_t* q = blk->qs + 32 * c;
      const __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)q));
      const __m512i v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(q + 16)));
      // VPERMPS reads only the low 4 bits of each index: the low nibble needs no mask.
      _mm512_storeu_ps(y + 64 * c, _mm512_permutexvar_ps(v0, tlo));
      _mm512_storeu_ps(y + 64 * c + 16, _mm512_permutexvar_ps(v1, tlo));
      _mm512_storeu_ps(y + 64 * c + 32, _mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), thi));
      _mm512_storeu_ps(y + 64 * c + 48, _mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), thi));
    }
  }
}

void dequant_q6_k(const uint8_t* p, int64_t nb, float* y) {
  alignas(64) int8_t codes[256];
  alignas(64) float ds[16];
  for (int64_t b = 0; b < nb; b++, y += 256) {
    const auto* blk = (const BlockQ6_K*)p + b;
    _mm512_store_ps(ds, _mm512_mul_ps(_mm512_set1_ps(h2f(blk->d)), i8x16(blk->scales)));
    q6k_codes(blk, codes);
    asm volatile("" ::: "memory");
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(y + 16 * i, _mm512_mul_ps(i8x16(codes + 16 * i), _mm512_set1_ps(ds[i])));
  }
}

void x_sums32(const float* x, int64_t n, float* s32) {
  for (int64_t i = 0; i < n / 32; i++)
    s32[i] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(x + 32 * i), _mm512_loadu_ps(x + 32 * i + 16)));
}

}  // namespace

// Software prefetch of the weights kPrefetchBytes ahead of each 4-row group. One core's hardware
// prefetchers keep too few lines in flight (they also stop at 4 KiB pages): bench_quant dot_rows
// n4096/stream/t2 went from ~9-12 to ~18-23 GB/s on this Zen 5 with 1-2 KiB (noisy, loaded machine).
constexpr size_t kPrefetchBytes = 2048;
inline void prefetch_range(const uint8_t* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) _mm_prefetch((const char*)p + i, _MM_HINT_T0);
}

bool dot_rows_kernel_avx512(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n,
                            float* y, float* scratch) {
  const auto* p = (const uint8_t*)w;
  const int64_t nb = n / 256;
  int64_t r = 0;
  switch (t) {
    case GgmlType::Q4_K:
      x_sums32(x, n, scratch);
      for (; r + 4 <= n_rows; r += 4) {
        prefetch_range(p + r * row_stride + kPrefetchBytes, 4 * row_stride);
        dot_q4_k<4>(p + r * row_stride, row_stride, nb, x, scratch, y + r);
      }
      for (; r + 2 <= n_rows; r += 2) dot_q4_k<2>(p + r * row_stride, row_stride, nb, x, scratch, y + r);
      for (; r < n_rows; r++) dot_q4_k<1>(p + r * row_stride, row_stride, nb, x, scratch, y + r);
      return true;
    case GgmlType::Q6_K:
      for (; r + 4 <= n_rows; r += 4) {
        prefetch_range(p + r * row_stride + kPrefetchBytes, 4 * row_stride);
        dot_q6_k<4>(p + r * row_stride, row_stride, nb, x, y + r);
      }
      for (; r + 2 <= n_rows; r += 2) dot_q6_k<2>(p + r * row_stride, row_stride, nb, x, y + r);
      for (; r < n_rows; r++) dot_q6_k<1>(p + r * row_stride, row_stride, nb, x, y + r);
      return true;
    default:
      return false;
  }
}

bool dequant_kernel_avx512(GgmlType t, const void* row, float* y, int64_t n) {
  switch (t) {
    case GgmlType::Q4_K: dequant_q4_k((const uint8_t*)row, n / 256, y); return true;
    case GgmlType::Q6_K: dequant_q6_k((const uint8_t*)row, n / 256, y); return true;
    default: return false;
  }
}

}  // namespace ds::quant::detail

#pragma GCC pop_options

#else

namespace ds::quant::detail {
bool dot_rows_kernel_avx512(GgmlType, const void*, size_t, int64_t, const float*, int64_t, float*, float*) {
  return false;
}
bool dequant_kernel_avx512(GgmlType, const void*, float*, int64_t) { return false; }
}  // namespace ds::quant::detail

#endif
