// Fast paths (x86-64 AVX2 + FMA + F16C) for dot_row and dequantize_row. Each decoder turns a row of
// blocks into 8-float vectors holding exactly the reference values (every product is exact and FMA
// rounds once, formats.md §6), and hands them with their element offsets to a sink: DotSink
// multiplies them into four fp32 accumulators, StoreSink writes them out. The kernels live in a
// `#pragma GCC target` region; dispatch (outside it) checks the CPU at run time, so the binary still
// runs on CPUs without AVX2, where quant.cpp falls back to the scalar reference.
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define DS_QUANT_X86 1
#include <immintrin.h>
#endif

namespace ds::quant::detail {

#if DS_QUANT_X86

bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

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

// Sinks receive four vectors of 8 decoded weights and the element offset of each.
struct DotSink {
  const float* x;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  inline void operator()(int64_t e0, __m256 w0, int64_t e1, __m256 w1, int64_t e2, __m256 w2,
                         int64_t e3, __m256 w3) {
    a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + e0), a0);
    a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + e1), a1);
    a2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + e2), a2);
    a3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + e3), a3);
  }
  float total() const { return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))); }
};

struct StoreSink {
  float* y;
  inline void operator()(int64_t e0, __m256 w0, int64_t e1, __m256 w1, int64_t e2, __m256 w2,
                         int64_t e3, __m256 w3) {
    _mm256_storeu_ps(y + e0, w0);
    _mm256_storeu_ps(y + e1, w1);
    _mm256_storeu_ps(y + e2, w2);
    _mm256_storeu_ps(y + e3, w3);
  }
};

// ---- 32-element formats --------------------------------------------------------------------------

template <class Sink>
void run_q8_0(const uint8_t* p, int64_t nb, Sink& s) {
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ8_0)) {
    const auto* blk = (const BlockQ8_0*)p;
    const __m256 d = _mm256_set1_ps(h2f(blk->d));
    __m256 w[4];
    for (int k = 0; k < 4; k++)
      w[k] = _mm256_mul_ps(to_f(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk->qs + 8 * k)))), d);
    const int64_t e = 32 * b;
    s(e, w[0], e + 8, w[1], e + 16, w[2], e + 24, w[3]);
  }
}

// Q4_0 / Q4_1: element j is the low nibble of qs[j], element j + 16 the high nibble.
// y = q*d - 8d (Q4_0) or q*d + m (Q4_1): one rounding of an exact product, as the reference.
template <bool kHasMin, class Sink>
void run_q4_01(const uint8_t* p, int64_t nb, Sink& s) {
  const size_t bs = kHasMin ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0);
  const __m256i m4 = _mm256_set1_epi32(15);
  for (int64_t b = 0; b < nb; b++, p += bs) {
    uint16_t dh, mh = 0;
    std::memcpy(&dh, p, 2);
    if (kHasMin) std::memcpy(&mh, p + 2, 2);
    const uint8_t* qs = p + (kHasMin ? 4 : 2);
    const float df = h2f(dh);
    const __m256 d = _mm256_set1_ps(df);
    const __m256 c = _mm256_set1_ps(kHasMin ? h2f(mh) : -8.0f * df);
    const __m256i v0 = load_u8x8(qs), v1 = load_u8x8(qs + 8);
    const __m256 w0 = _mm256_fmadd_ps(to_f(_mm256_and_si256(v0, m4)), d, c);
    const __m256 w1 = _mm256_fmadd_ps(to_f(_mm256_and_si256(v1, m4)), d, c);
    const __m256 w2 = _mm256_fmadd_ps(to_f(_mm256_srli_epi32(v0, 4)), d, c);
    const __m256 w3 = _mm256_fmadd_ps(to_f(_mm256_srli_epi32(v1, 4)), d, c);
    const int64_t e = 32 * b;
    s(e, w0, e + 8, w1, e + 16, w2, e + 24, w3);
  }
}

// Q5_0 / Q5_1: as Q4 plus bit j of the u32 qh as the fifth bit of element j.
template <bool kHasMin, class Sink>
void run_q5_01(const uint8_t* p, int64_t nb, Sink& s) {
  const size_t bs = kHasMin ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
  const __m256i m4 = _mm256_set1_epi32(15), one = _mm256_set1_epi32(1);
  const __m256i sh0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sh1 = _mm256_add_epi32(sh0, _mm256_set1_epi32(8));
  const __m256i sh2 = _mm256_add_epi32(sh0, _mm256_set1_epi32(16));
  const __m256i sh3 = _mm256_add_epi32(sh0, _mm256_set1_epi32(24));
  for (int64_t b = 0; b < nb; b++, p += bs) {
    uint16_t dh, mh = 0;
    uint32_t qh;
    std::memcpy(&dh, p, 2);
    if (kHasMin) std::memcpy(&mh, p + 2, 2);
    std::memcpy(&qh, p + (kHasMin ? 4 : 2), 4);
    const uint8_t* qs = p + (kHasMin ? 8 : 6);
    const float df = h2f(dh);
    const __m256 d = _mm256_set1_ps(df);
    const __m256 c = _mm256_set1_ps(kHasMin ? h2f(mh) : -16.0f * df);
    const __m256i h = _mm256_set1_epi32((int)qh);
    auto hi_bit = [&](__m256i sh) {
      return _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(h, sh), one), 4);
    };
    const __m256i v0 = load_u8x8(qs), v1 = load_u8x8(qs + 8);
    const __m256 w0 = _mm256_fmadd_ps(to_f(_mm256_or_si256(_mm256_and_si256(v0, m4), hi_bit(sh0))), d, c);
    const __m256 w1 = _mm256_fmadd_ps(to_f(_mm256_or_si256(_mm256_and_si256(v1, m4), hi_bit(sh1))), d, c);
    const __m256 w2 = _mm256_fmadd_ps(to_f(_mm256_or_si256(_mm256_srli_epi32(v0, 4), hi_bit(sh2))), d, c);
    const __m256 w3 = _mm256_fmadd_ps(to_f(_mm256_or_si256(_mm256_srli_epi32(v1, 4), hi_bit(sh3))), d, c);
    const int64_t e = 32 * b;
    s(e, w0, e + 8, w1, e + 16, w2, e + 24, w3);
  }
}

// 32 packed nibbles (16 bytes: element j low nibble of q[j], j + 16 high nibble) looked up in a
// 16-entry int8 codebook, as four vectors of int32 in element order.
inline void lut_nibbles(const uint8_t* q, __m256i lut, __m256i* out) {
  const __m128i v = _mm_loadu_si128((const __m128i*)q);
  const __m128i m4 = _mm_set1_epi8(15);
  const __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
  const __m256i idx = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  const __m256i val = _mm256_shuffle_epi8(lut, idx);  // 32 int8 in element order
  const __m128i a = _mm256_castsi256_si128(val), b = _mm256_extracti128_si256(val, 1);
  out[0] = _mm256_cvtepi8_epi32(a);
  out[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(a, 8));
  out[2] = _mm256_cvtepi8_epi32(b);
  out[3] = _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8));
}

inline __m256i lut16(const int8_t* t) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)t));
}

template <class Sink>
void run_iq4_nl(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i lut = lut16(kvalues_iq4nl);
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockIQ4_NL)) {
    const auto* blk = (const BlockIQ4_NL*)p;
    const __m256 d = _mm256_set1_ps(h2f(blk->d));
    __m256i q[4];
    lut_nibbles(blk->qs, lut, q);
    const int64_t e = 32 * b;
    s(e, _mm256_mul_ps(d, to_f(q[0])), e + 8, _mm256_mul_ps(d, to_f(q[1])), e + 16,
      _mm256_mul_ps(d, to_f(q[2])), e + 24, _mm256_mul_ps(d, to_f(q[3])));
  }
}

template <class Sink>
void run_mxfp4(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i lut = lut16(kvalues_mxfp4);
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockMXFP4)) {
    const auto* blk = (const BlockMXFP4*)p;
    const __m256 h = _mm256_set1_ps(e8m0_to_f32_half(blk->e));
    __m256i q[4];
    lut_nibbles(blk->qs, lut, q);
    const int64_t e = 32 * b;
    s(e, _mm256_mul_ps(h, to_f(q[0])), e + 8, _mm256_mul_ps(h, to_f(q[1])), e + 16,
      _mm256_mul_ps(h, to_f(q[2])), e + 24, _mm256_mul_ps(h, to_f(q[3])));
  }
}

// ---- 256-element formats -------------------------------------------------------------------------

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

template <class Sink>
void run_q4_k(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i m4 = _mm256_set1_epi32(15);
  alignas(32) float dsc[8], mmn[8];
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ4_K)) {
    const auto* blk = (const BlockQ4_K*)p;
    k_scales_mins(blk->scales, h2f(blk->d), h2f(blk->dmin), dsc, mmn);
    for (int c = 0; c < 4; c++) {  // sub-blocks 2c (low nibbles) and 2c+1 (high nibbles)
      const __m256 d0 = _mm256_broadcast_ss(dsc + 2 * c), m0 = _mm256_broadcast_ss(mmn + 2 * c);
      const __m256 d1 = _mm256_broadcast_ss(dsc + 2 * c + 1), m1 = _mm256_broadcast_ss(mmn + 2 * c + 1);
      const uint8_t* q = blk->qs + 32 * c;
      const int64_t e = 256 * b + 64 * c;
      __m256i v[4];
      for (int k = 0; k < 4; k++) v[k] = load_u8x8(q + 8 * k);
      s(e, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[0], m4)), d0, m0),
        e + 8, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[1], m4)), d0, m0),
        e + 16, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[2], m4)), d0, m0),
        e + 24, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[3], m4)), d0, m0));
      s(e + 32, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[0], 4)), d1, m1),
        e + 40, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[1], 4)), d1, m1),
        e + 48, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[2], 4)), d1, m1),
        e + 56, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[3], 4)), d1, m1));
    }
  }
}

// Q4_K dot with the affine form factored out of the inner loop:
//   sum_e (d*sc*q_e - dmin*mn) x_e = d*sc * sum(q_e x_e) - dmin*mn * sum(x_e)  per 32-element sub-block.
// Half the FMA-port work of decode-then-FMA; the sums are fp32 per sub-block, then per row.
float dot_q4_k(const uint8_t* p, int64_t nb, const float* x) {
  const __m256i m4 = _mm256_set1_epi32(15);
  alignas(32) float dsc[8], mmn[8];
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ4_K), x += 256) {
    const auto* blk = (const BlockQ4_K*)p;
    k_scales_mins(blk->scales, h2f(blk->d), h2f(blk->dmin), dsc, mmn);
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
      const __m256 s0 = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
      const __m256 s1 = _mm256_add_ps(_mm256_add_ps(x4, x5), _mm256_add_ps(x6, x7));
      acc0 = _mm256_fmadd_ps(_mm256_add_ps(qa, qb), _mm256_broadcast_ss(dsc + 2 * c), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_add_ps(qc, qd), _mm256_broadcast_ss(dsc + 2 * c + 1), acc1);
      acc0 = _mm256_fnmadd_ps(s0, _mm256_broadcast_ss(mmn + 2 * c), acc0);
      acc1 = _mm256_fnmadd_ps(s1, _mm256_broadcast_ss(mmn + 2 * c + 1), acc1);
    }
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

template <class Sink>
void run_q5_k(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i m4 = _mm256_set1_epi32(15), b4 = _mm256_set1_epi32(16);
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ5_K)) {
    const auto* blk = (const BlockQ5_K*)p;
    alignas(32) float dsc[8], mmn[8];
    k_scales_mins(blk->scales, h2f(blk->d), h2f(blk->dmin), dsc, mmn);
    __m256i h[4];  // qh[l] zero-extended; bit s is the fifth bit of sub-block s
    for (int k = 0; k < 4; k++) h[k] = _mm256_slli_epi32(load_u8x8(blk->qh + 8 * k), 4);
    for (int c = 0; c < 4; c++) {
      const __m256 d0 = _mm256_broadcast_ss(dsc + 2 * c), m0 = _mm256_broadcast_ss(mmn + 2 * c);
      const __m256 d1 = _mm256_broadcast_ss(dsc + 2 * c + 1), m1 = _mm256_broadcast_ss(mmn + 2 * c + 1);
      const uint8_t* q = blk->qs + 32 * c;
      const __m128i sh0 = _mm_cvtsi32_si128(2 * c), sh1 = _mm_cvtsi32_si128(2 * c + 1);
      __m256 lo[4], hi[4];
      for (int k = 0; k < 4; k++) {
        const __m256i v = load_u8x8(q + 8 * k);
        const __m256i h0 = _mm256_and_si256(_mm256_srl_epi32(h[k], sh0), b4);
        const __m256i h1 = _mm256_and_si256(_mm256_srl_epi32(h[k], sh1), b4);
        lo[k] = _mm256_fmsub_ps(to_f(_mm256_or_si256(_mm256_and_si256(v, m4), h0)), d0, m0);
        hi[k] = _mm256_fmsub_ps(to_f(_mm256_or_si256(_mm256_srli_epi32(v, 4), h1)), d1, m1);
      }
      const int64_t e = 256 * b + 64 * c;
      s(e, lo[0], e + 8, lo[1], e + 16, lo[2], e + 24, lo[3]);
      s(e + 32, hi[0], e + 40, hi[1], e + 48, hi[2], e + 56, hi[3]);
    }
  }
}

// Q6_K: element 128n + 32t + l; low nibble from ql[64n + l] (t = 0, 2) or ql[64n + 32 + l]
// (t = 1, 3), high 2 bits from qh[32n + l] >> 2t. y = (d * scale) * (q - 32).
template <class Sink>
void run_q6_k(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(0x30);
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ6_K)) {
    const auto* blk = (const BlockQ6_K*)p;
    // d * scale and 32 * d * scale for the 16 sub-blocks (y = q * ds - 32 ds, exact).
    alignas(32) float ds[16], ds32[16];
    const __m256 d = _mm256_set1_ps(h2f(blk->d)), k32 = _mm256_set1_ps(32.0f);
    for (int i = 0; i < 2; i++) {
      const __m256 v = _mm256_mul_ps(d, to_f(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk->scales + 8 * i)))));
      _mm256_store_ps(ds + 8 * i, v);
      _mm256_store_ps(ds32 + 8 * i, _mm256_mul_ps(v, k32));
    }
    for (int n = 0; n < 2; n++) {
      const uint8_t* ql = blk->ql + 64 * n;
      const uint8_t* qh = blk->qh + 32 * n;
      for (int k = 0; k < 4; k++) {  // l = 8k .. 8k+7; sub-block of (t, l) is 8n + 2t + k/2
        const __m256i a = load_u8x8(ql + 8 * k), bq = load_u8x8(ql + 32 + 8 * k);
        const __m256i h = load_u8x8(qh + 8 * k);
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi32(h, 4), m2));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(bq, m4), _mm256_and_si256(_mm256_slli_epi32(h, 2), m2));
        const __m256i q2 = _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(h, m2));
        const __m256i q3 = _mm256_or_si256(_mm256_srli_epi32(bq, 4), _mm256_and_si256(_mm256_srli_epi32(h, 2), m2));
        const int i = 8 * n + k / 2;  // sub-block of t = 0; t adds 2
        const int64_t e = 256 * b + 128 * n + 8 * k;
        s(e, _mm256_fmsub_ps(to_f(q0), _mm256_broadcast_ss(ds + i), _mm256_broadcast_ss(ds32 + i)),
          e + 32, _mm256_fmsub_ps(to_f(q1), _mm256_broadcast_ss(ds + i + 2), _mm256_broadcast_ss(ds32 + i + 2)),
          e + 64, _mm256_fmsub_ps(to_f(q2), _mm256_broadcast_ss(ds + i + 4), _mm256_broadcast_ss(ds32 + i + 4)),
          e + 96, _mm256_fmsub_ps(to_f(q3), _mm256_broadcast_ss(ds + i + 6), _mm256_broadcast_ss(ds32 + i + 6)));
      }
    }
  }
}

template <class Sink>
void run_iq4_xs(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i lut = lut16(kvalues_iq4nl);
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockIQ4_XS)) {
    const auto* blk = (const BlockIQ4_XS*)p;
    const float d = h2f(blk->d);
    for (int sb = 0; sb < 8; sb++) {
      const int ls = ((blk->scales_l[sb / 2] >> (4 * (sb % 2))) & 0xF) | (((blk->scales_h >> (2 * sb)) & 3) << 4);
      const __m256 dl = _mm256_set1_ps(d * (float)(ls - 32));
      __m256i q[4];
      lut_nibbles(blk->qs + 16 * sb, lut, q);
      const int64_t e = 256 * b + 32 * sb;
      s(e, _mm256_mul_ps(dl, to_f(q[0])), e + 8, _mm256_mul_ps(dl, to_f(q[1])), e + 16,
        _mm256_mul_ps(dl, to_f(q[2])), e + 24, _mm256_mul_ps(dl, to_f(q[3])));
    }
  }
}

// Any other decodable type: the scalar block decoder, then vector sinks (32 elements at a time).
template <class Sink>
void run_generic(DequantBlockFn fn, uint32_t bsize, uint32_t tsize, const uint8_t* p, int64_t nb, Sink& s) {
  alignas(32) float y[256];
  for (int64_t b = 0; b < nb; b++, p += tsize) {
    fn(p, y);
    for (uint32_t j = 0; j < bsize; j += 32) {
      const int64_t e = (int64_t)b * bsize + j;
      s(e, _mm256_load_ps(y + j), e + 8, _mm256_load_ps(y + j + 8), e + 16, _mm256_load_ps(y + j + 16),
        e + 24, _mm256_load_ps(y + j + 24));
    }
  }
}

template <class Sink>
bool run(GgmlType t, const uint8_t* p, int64_t n, Sink& s) {
  switch (t) {
    case GgmlType::Q8_0: run_q8_0(p, n / 32, s); return true;
    case GgmlType::Q4_0: run_q4_01<false>(p, n / 32, s); return true;
    case GgmlType::Q4_1: run_q4_01<true>(p, n / 32, s); return true;
    case GgmlType::Q5_0: run_q5_01<false>(p, n / 32, s); return true;
    case GgmlType::Q5_1: run_q5_01<true>(p, n / 32, s); return true;
    case GgmlType::IQ4_NL: run_iq4_nl(p, n / 32, s); return true;
    case GgmlType::MXFP4: run_mxfp4(p, n / 32, s); return true;
    case GgmlType::Q4_K: run_q4_k(p, n / 256, s); return true;
    case GgmlType::Q5_K: run_q5_k(p, n / 256, s); return true;
    case GgmlType::Q6_K: run_q6_k(p, n / 256, s); return true;
    case GgmlType::IQ4_XS: run_iq4_xs(p, n / 256, s); return true;
    default: break;
  }
  const auto ti = ggml_type_info(t);
  const DequantBlockFn fn = dequant_block_fn(t);
  if (!ti || !fn || ti->block_size % 32 != 0) return false;
  run_generic(fn, ti->block_size, ti->type_size, p, n / ti->block_size, s);
  return true;
}

// ---- plain float rows ----------------------------------------------------------------------------

// Loads 8 weights of a 1-element-block type as floats.
template <GgmlType T>
inline __m256 load8(const uint8_t* p, int64_t i) {
  if constexpr (T == GgmlType::F32) return _mm256_loadu_ps((const float*)p + i);
  if constexpr (T == GgmlType::F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + i)));
  if constexpr (T == GgmlType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + i))), 16));
}

template <GgmlType T>
inline float load1(const uint8_t* p, int64_t i) {
  if constexpr (T == GgmlType::F32) return ((const float*)p)[i];
  if constexpr (T == GgmlType::F16) return f16_to_f32(((const uint16_t*)p)[i]);
  if constexpr (T == GgmlType::BF16) return bf16_to_f32(((const uint16_t*)p)[i]);
}

template <GgmlType T>
float dot_plain(const uint8_t* p, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load8<T>(p, i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load8<T>(p, i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8<T>(p, i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8<T>(p, i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8<T>(p, i), _mm256_loadu_ps(x + i), a0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; i++) sum += load1<T>(p, i) * x[i];
  return sum;
}

template <GgmlType T>
void dequant_plain(const uint8_t* p, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8<T>(p, i));
  for (; i < n; i++) y[i] = load1<T>(p, i);
}

bool dot_avx2(GgmlType t, const void* row, const float* x, int64_t n, float* out) {
  const auto* p = (const uint8_t*)row;
  switch (t) {
    case GgmlType::F32: *out = dot_plain<GgmlType::F32>(p, x, n); return true;
    case GgmlType::F16: *out = dot_plain<GgmlType::F16>(p, x, n); return true;
    case GgmlType::BF16: *out = dot_plain<GgmlType::BF16>(p, x, n); return true;
    case GgmlType::Q4_K: *out = dot_q4_k(p, n / 256, x); return true;
    default: break;
  }
  DotSink s{x};
  if (!run(t, p, n, s)) return false;
  *out = s.total();
  return true;
}

bool dequant_avx2(GgmlType t, const void* row, float* y, int64_t n) {
  const auto* p = (const uint8_t*)row;
  switch (t) {
    case GgmlType::F32: std::memcpy(y, row, n * sizeof(float)); return true;
    case GgmlType::F16: dequant_plain<GgmlType::F16>(p, y, n); return true;
    case GgmlType::BF16: dequant_plain<GgmlType::BF16>(p, y, n); return true;
    default: break;
  }
  StoreSink s{y};
  return run(t, p, n, s);
}

}  // namespace

#pragma GCC pop_options

bool dot_row_fast(GgmlType t, const void* row, const float* x, int64_t n, float* out) {
  return cpu_has_avx2_fma() && dot_avx2(t, row, x, n, out);
}

bool dequantize_row_fast(GgmlType t, const void* row, float* y, int64_t n) {
  return cpu_has_avx2_fma() && dequant_avx2(t, row, y, n);
}

#else  // not x86-64 GCC/Clang: scalar reference only

bool cpu_has_avx2_fma() { return false; }
bool dot_row_fast(GgmlType, const void*, const float*, int64_t, float*) { return false; }
bool dequantize_row_fast(GgmlType, const void*, float*, int64_t) { return false; }

#endif

}  // namespace ds::quant::detail
