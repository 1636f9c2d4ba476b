// Factored AVX2+FMA dot kernels for the hot decode types (Q4_K, Q6_K, Q8_0; the other
// formats go through the generic code-buffer kernels of dot_generic_avx2.cpp).
// Instead of decoding each weight to float and multiplying, they sum code * x per sub-block and
// apply the sub-block scale once:  sum_e (s * q_e + c) x_e = s * sum(q_e x_e) + c * sum(x_e).
// Code offsets (Q6_K's -32) are applied to the int8 codes; the mins of Q4_K-like formats need sums
// of x per 16 or 32 elements: one row (dot_row) accumulates them inline, many rows (dot_rows)
// compute them once per x and share them, which removes a quarter of the work. Accumulation is fp32
// per sub-block, then per row.
#include "quant/blocks.h"
#include "quant/kernels.h"

#if DS_QUANT_AVX2
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "quant/avx2_util.h"

namespace ds::quant::detail {
namespace {

// Partial sums of x: s[i] = sum x[w*i .. w*i + w) for w = 16 (s16) and 32 (s32).
void x_sums(const float* x, int64_t n, float* s16, float* s32) {
  for (int64_t i = 0; i < n / 16; i++)
    s16[i] = hsum(_mm256_add_ps(_mm256_loadu_ps(x + 16 * i), _mm256_loadu_ps(x + 16 * i + 8)));
  for (int64_t i = 0; i < n / 32; i++) s32[i] = s16[2 * i] + s16[2 * i + 1];
}

inline __m256 add4(__m256 a, __m256 b, __m256 c, __m256 d) {
  return _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
}

inline __m256i load_i8x8(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p));
}

inline __m256 codes_dot32_i8(const int8_t* q, const float* x) {
  __m256 a = _mm256_mul_ps(to_f(load_i8x8(q)), _mm256_loadu_ps(x));
  __m256 b = _mm256_mul_ps(to_f(load_i8x8(q + 8)), _mm256_loadu_ps(x + 8));
  a = _mm256_fmadd_ps(to_f(load_i8x8(q + 16)), _mm256_loadu_ps(x + 16), a);
  b = _mm256_fmadd_ps(to_f(load_i8x8(q + 24)), _mm256_loadu_ps(x + 24), b);
  return _mm256_add_ps(a, b);
}

// ---- Q4_K: y = d*sc*q - dmin*mn per 32-element sub-block ----------------------------------------
template <bool kPre>
float dot_q4_k(const uint8_t* p, int64_t nb, const float* x, const float* s32) {
  const __m256i m4 = _mm256_set1_epi32(15);
  alignas(32) float dsc[8], mmn[8];
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ4_K), x += 256) {
    const auto* blk = (const BlockQ4_K*)p;
    k_scales_mins(blk->scales, h2f(blk->d), h2f(blk->dmin), dsc, mmn);
    if (kPre) accm = _mm256_fmadd_ps(_mm256_load_ps(mmn), _mm256_loadu_ps(s32 + 8 * b), accm);
    for (int c = 0; c < 4; c++) {
      const uint8_t* q = blk->qs + 32 * c;
      const float* xc = x + 64 * c;
      const __m256i v0 = load_u8x8(q), v1 = load_u8x8(q + 8), v2 = load_u8x8(q + 16), v3 = load_u8x8(q + 24);
      const __m256 x0 = _mm256_loadu_ps(xc), x1 = _mm256_loadu_ps(xc + 8), x2 = _mm256_loadu_ps(xc + 16),
                   x3 = _mm256_loadu_ps(xc + 24), x4 = _mm256_loadu_ps(xc + 32), x5 = _mm256_loadu_ps(xc + 40),
                   x6 = _mm256_loadu_ps(xc + 48), x7 = _mm256_loadu_ps(xc + 56);
      __m256 qa = _mm256_mul_ps(to_f(_mm256_and_si256(v0, m4)), x0);
      __m256 qb = _mm256_mul_ps(to_f(_mm256_and_si256(v1, m4)), x1);
      qa = _mm256_fmadd_ps(to_f(_mm256_and_si256(v2, m4)), x2, qa);
      qb = _mm256_fmadd_ps(to_f(_mm256_and_si256(v3, m4)), x3, qb);
      __m256 qc = _mm256_mul_ps(to_f(_mm256_srli_epi32(v0, 4)), x4);
      __m256 qd = _mm256_mul_ps(to_f(_mm256_srli_epi32(v1, 4)), x5);
      qc = _mm256_fmadd_ps(to_f(_mm256_srli_epi32(v2, 4)), x6, qc);
      qd = _mm256_fmadd_ps(to_f(_mm256_srli_epi32(v3, 4)), x7, qd);
      acc0 = _mm256_fmadd_ps(_mm256_add_ps(qa, qb), _mm256_broadcast_ss(dsc + 2 * c), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_add_ps(qc, qd), _mm256_broadcast_ss(dsc + 2 * c + 1), acc1);
      if (!kPre) {
        accm = _mm256_fmadd_ps(add4(x0, x1, x2, x3), _mm256_broadcast_ss(mmn + 2 * c), accm);
        accm = _mm256_fmadd_ps(add4(x4, x5, x6, x7), _mm256_broadcast_ss(mmn + 2 * c + 1), accm);
      }
    }
  }
  return hsum(_mm256_sub_ps(_mm256_add_ps(acc0, acc1), accm));
}

// ---- Q6_K: y = d*sc*(q - 32) per 16-element sub-block --------------------------------------------
// The 6-bit codes of a 128-element half are assembled 32 at a time in the byte domain, minus 32
// (signed int8), so no offset term is needed.
float dot_q6_k(const uint8_t* p, int64_t nb, const float* x) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
  alignas(32) int8_t codes[256];
  alignas(32) float ds[16];
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  auto put = [&](int8_t* c, __m256i lo, __m256i hi) {
    _mm256_store_si256((__m256i*)c, _mm256_sub_epi8(_mm256_or_si256(lo, hi), k32));
  };
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ6_K), x += 256) {
    const auto* blk = (const BlockQ6_K*)p;
    const __m256 d = _mm256_set1_ps(h2f(blk->d));
    _mm256_store_ps(ds, _mm256_mul_ps(d, to_f(load_i8x8(blk->scales))));
    _mm256_store_ps(ds + 8, _mm256_mul_ps(d, to_f(load_i8x8(blk->scales + 8))));
    for (int n = 0; n < 2; n++) {
      const __m256i qa = _mm256_loadu_si256((const __m256i*)(blk->ql + 64 * n));
      const __m256i qb = _mm256_loadu_si256((const __m256i*)(blk->ql + 64 * n + 32));
      const __m256i h = _mm256_loadu_si256((const __m256i*)(blk->qh + 32 * n));
      int8_t* c = codes + 128 * n;  // element 128n + 32t + l
      put(c, _mm256_and_si256(qa, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
      put(c + 32, _mm256_and_si256(qb, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
      put(c + 64, _mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(h, m30));
      put(c + 96, _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
    }
    // Keep the codes in memory: the 8-byte loads below then feed VPMOVSXBD from memory (one shuffle per 8
    // codes); left to itself the compiler forwards them through registers with three shuffles per 8, and
    // the shuffle ports become the limit (bench_quant dot/Q6_K/n4096: 6.3 -> 8.4 GB/s on Zen).
    asm volatile("" ::: "memory");
    for (int i = 0; i < 16; i += 2) {  // two 16-element sub-blocks per step
      const float* xi = x + 16 * i;
      const int8_t* ci = codes + 16 * i;
      const __m256 v0 = _mm256_fmadd_ps(to_f(load_i8x8(ci + 8)), _mm256_loadu_ps(xi + 8),
                                        _mm256_mul_ps(to_f(load_i8x8(ci)), _mm256_loadu_ps(xi)));
      const __m256 v1 = _mm256_fmadd_ps(to_f(load_i8x8(ci + 24)), _mm256_loadu_ps(xi + 24),
                                        _mm256_mul_ps(to_f(load_i8x8(ci + 16)), _mm256_loadu_ps(xi + 16)));
      acc0 = _mm256_fmadd_ps(v0, _mm256_broadcast_ss(ds + i), acc0);
      acc1 = _mm256_fmadd_ps(v1, _mm256_broadcast_ss(ds + i + 1), acc1);
    }
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// ---- Q8_0: y = d*q --------------------------------------------------------------------------------
float dot_q8_0(const uint8_t* p, int64_t nb, const float* x) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const auto* b0 = (const BlockQ8_0*)(p + b * sizeof(BlockQ8_0));
    const auto* b1 = b0 + 1;
    acc0 = _mm256_fmadd_ps(codes_dot32_i8(b0->qs, x + 32 * b), _mm256_set1_ps(h2f(b0->d)), acc0);
    acc1 = _mm256_fmadd_ps(codes_dot32_i8(b1->qs, x + 32 * b + 32), _mm256_set1_ps(h2f(b1->d)), acc1);
  }
  if (b < nb) {
    const auto* b0 = (const BlockQ8_0*)(p + b * sizeof(BlockQ8_0));
    acc0 = _mm256_fmadd_ps(codes_dot32_i8(b0->qs, x + 32 * b), _mm256_set1_ps(h2f(b0->d)), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// One row; s16/s32 are the precomputed x sums or nullptr (then computed inline).
bool dot_one(GgmlType t, const uint8_t* p, const float* x, int64_t n, const float* s16, const float* s32,
             float* out) {
  const bool pre = s16 != nullptr;
  switch (t) {
    case GgmlType::Q4_K: *out = pre ? dot_q4_k<true>(p, n / 256, x, s32) : dot_q4_k<false>(p, n / 256, x, nullptr); return true;
    case GgmlType::Q6_K: *out = dot_q6_k(p, n / 256, x); return true;
    case GgmlType::Q8_0: *out = dot_q8_0(p, n / 32, x); return true;
    default: return dot_generic_avx2(t, p, x, n, s16, s32, out);
  }
}

bool needs_sums(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q2_K || t == GgmlType::Q5_1;
}

}  // namespace

bool dot_kernel_avx2(GgmlType t, const void* row, const float* x, int64_t n, float* out) {
  return dot_one(t, (const uint8_t*)row, x, n, nullptr, nullptr, out);
}

bool dot_rows_kernel_avx2(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n,
                          float* y, float* scratch) {
  const auto* p = (const uint8_t*)w;
  if (!needs_sums(t) || n_rows < 2) {
    float v;
    if (!dot_one(t, p, x, n, nullptr, nullptr, &v)) return false;
    y[0] = v;
    for (int64_t r = 1; r < n_rows; r++) dot_one(t, p + r * row_stride, x, n, nullptr, nullptr, y + r);
    return true;
  }
  float* s16 = scratch;
  float* s32 = s16 + n / 16;
  x_sums(x, n, s16, s32);
  if (!dot_one(t, p, x, n, s16, s32, y)) return false;
  for (int64_t r = 1; r < n_rows; r++) dot_one(t, p + r * row_stride, x, n, s16, s32, y + r);
  return true;
}

}  // namespace ds::quant::detail

#pragma GCC pop_options

#else

namespace ds::quant::detail {
bool dot_kernel_avx2(GgmlType, const void*, const float*, int64_t, float*) { return false; }
bool dot_rows_kernel_avx2(GgmlType, const void*, size_t, int64_t, const float*, int64_t, float*, float*) {
  return false;
}
}  // namespace ds::quant::detail

#endif
