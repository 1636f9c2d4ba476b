// Code-buffer AVX2 dot kernels for the formats without a dedicated kernel. A per-type decoder turns
// one block into int8 codes (in element order), one scale per group of G elements and, for formats
// with a min, one offset per group; the shared loop then computes
//   sum_groups scale_g * sum(code_e x_e) + offset_g * sum(x_e)
// with the sums of x either precomputed per x (dot_rows) or accumulated inline (dot_row).
// 32-element formats: Q5_0 (code offset folded into signed codes), Q5_1 (min as offset), IQ4_NL,
// MXFP4 (codebook via pshufb); 256-element: Q5_K, IQ4_XS (G = 32), Q2_K, Q3_K (G = 16). (Q4_0 and
// Q4_1 are faster without the buffer: dot_avx2.cpp widens their nibbles straight from memory.)
#include "quant/blocks.h"
#include "quant/kernels.h"

#if DS_QUANT_AVX2
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "quant/avx2_util.h"

namespace ds::quant::detail {
namespace {

inline __m256i load_i8x8(const int8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)); }

inline __m256i nibbles32(const uint8_t* q) {  // element j: low nibble of q[j]; j + 16: high nibble
  const __m128i v = _mm_loadu_si128((const __m128i*)q);
  const __m128i m4 = _mm_set1_epi8(15);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m4)),
                                 _mm_and_si128(_mm_srli_epi16(v, 4), m4), 1);
}

// The 32 fifth bits of Q5_0/Q5_1 (u32, bit j = element j) as bytes 0x10 / 0x00: byte j of the
// broadcast word takes qh byte j/8, then a per-byte bit mask and a compare.
inline __m256i q5_high_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ULL);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

inline void store32(int8_t* c, __m256i v) { _mm256_store_si256((__m256i*)c, v); }

// ---- 32-element decoders: codes[32], *scale, *offset --------------------------------------------
struct DecQ5_0 {
  static constexpr size_t kBytes = sizeof(BlockQ5_0);
  static constexpr bool kOff = false;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float*) {
    const auto* b = (const BlockQ5_0*)p;
    store32(c, _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), q5_high_bits(b->qh)), _mm256_set1_epi8(16)));
    *scale = h2f(b->d);
  }
};
struct DecQ5_1 {
  static constexpr size_t kBytes = sizeof(BlockQ5_1);
  static constexpr bool kOff = true;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float* offset) {
    const auto* b = (const BlockQ5_1*)p;
    store32(c, _mm256_or_si256(nibbles32(b->qs), q5_high_bits(b->qh)));
    *scale = h2f(b->d);
    *offset = h2f(b->m);
  }
};
inline __m256i lut16(const int8_t* t) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)t)); }
struct DecIQ4_NL {
  static constexpr size_t kBytes = sizeof(BlockIQ4_NL);
  static constexpr bool kOff = false;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float*) {
    const auto* b = (const BlockIQ4_NL*)p;
    store32(c, _mm256_shuffle_epi8(lut16(kvalues_iq4nl), nibbles32(b->qs)));
    *scale = h2f(b->d);
  }
};
struct DecMXFP4 {
  static constexpr size_t kBytes = sizeof(BlockMXFP4);
  static constexpr bool kOff = false;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float*) {
    const auto* b = (const BlockMXFP4*)p;
    store32(c, _mm256_shuffle_epi8(lut16(kvalues_mxfp4), nibbles32(b->qs)));
    *scale = e8m0_to_f32_half(b->e);
  }
};

template <class Dec, bool kPre>
float dot_g32(const uint8_t* p, int64_t nb, const float* x, const float* s32) {
  alignas(32) int8_t c[32];
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acco = _mm256_setzero_ps();
  float off = 0;
  for (int64_t b = 0; b < nb; b++, p += Dec::kBytes, x += 32) {
    float scale, offset = 0;
    Dec::decode(p, c, &scale, &offset);
    const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8), x2 = _mm256_loadu_ps(x + 16),
                 x3 = _mm256_loadu_ps(x + 24);
    const __m256 va = _mm256_fmadd_ps(to_f(load_i8x8(c + 16)), x2, _mm256_mul_ps(to_f(load_i8x8(c)), x0));
    const __m256 vb = _mm256_fmadd_ps(to_f(load_i8x8(c + 24)), x3, _mm256_mul_ps(to_f(load_i8x8(c + 8)), x1));
    const __m256 sv = _mm256_set1_ps(scale);
    acc0 = _mm256_fmadd_ps(va, sv, acc0);
    acc1 = _mm256_fmadd_ps(vb, sv, acc1);
    if constexpr (Dec::kOff) {
      if (kPre) off += offset * s32[b];
      else acco = _mm256_fmadd_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)), _mm256_set1_ps(offset), acco);
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), acco)) + off;
}

// ---- 256-element decoders: codes[256], scale[256/G], offset[256/G] -------------------------------
struct DecQ5_K {
  static constexpr size_t kBytes = sizeof(BlockQ5_K);
  static constexpr int kG = 32;
  static constexpr bool kOff = true;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float* offset) {
    const auto* b = (const BlockQ5_K*)p;
    k_scales_mins(b->scales, h2f(b->d), h2f(b->dmin), scale, offset);
    _mm256_store_ps(offset, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_load_ps(offset)));
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i h = _mm256_loadu_si256((const __m256i*)b->qh);  // bit s of qh[l]: fifth bit of sub-block s
    for (int k = 0; k < 4; k++) {  // sub-blocks 2k (low nibbles) and 2k+1 (high nibbles)
      const __m256i q = _mm256_loadu_si256((const __m256i*)(b->qs + 32 * k));
      const __m256i hk = _mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * k));
      store32(c + 64 * k, _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_slli_epi16(hk, 4), b4)));
      store32(c + 64 * k + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hk, 3), b4)));
    }
  }
};
struct DecIQ4_XS {
  static constexpr size_t kBytes = sizeof(BlockIQ4_XS);
  static constexpr int kG = 32;
  static constexpr bool kOff = false;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float*) {
    const auto* b = (const BlockIQ4_XS*)p;
    // Scale of sub-block s: nibble s of the u32 scales_l (bits 4s..4s+3) | bit pair s of scales_h << 4.
    uint32_t sl;
    std::memcpy(&sl, b->scales_l, 4);
    const __m256i s4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), s2 = _mm256_srli_epi32(s4, 1);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), s4), _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), s2), _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    _mm256_store_ps(scale, _mm256_mul_ps(_mm256_set1_ps(h2f(b->d)), to_f(ls)));
    const __m256i lut = lut16(kvalues_iq4nl);
    for (int s = 0; s < 8; s++) store32(c + 32 * s, _mm256_shuffle_epi8(lut, nibbles32(b->qs + 16 * s)));
  }
};
// Eight consecutive 32-element blocks decoded as one 256-element group (so the codes are stored
// well before they are loaded back: no store-forwarding stalls).
template <class Dec>
struct Batch8 {
  static constexpr size_t kBytes = 8 * Dec::kBytes;
  static constexpr int kG = 32;
  static constexpr bool kOff = Dec::kOff;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float* offset) {
    for (int i = 0; i < 8; i++) Dec::decode(p + i * Dec::kBytes, c + 32 * i, scale + i, offset + i);
  }
};
struct DecQ2_K {
  static constexpr size_t kBytes = sizeof(BlockQ2_K);
  static constexpr int kG = 16;
  static constexpr bool kOff = true;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float* offset) {
    const auto* b = (const BlockQ2_K*)p;
    const __m256 d = _mm256_set1_ps(h2f(b->d)), dmin = _mm256_set1_ps(-h2f(b->dmin));
    for (int h = 0; h < 2; h++) {
      const __m256i sc = load_u8x8(b->scales + 8 * h);
      _mm256_store_ps(scale + 8 * h, _mm256_mul_ps(d, to_f(_mm256_and_si256(sc, _mm256_set1_epi32(15)))));
      _mm256_store_ps(offset + 8 * h, _mm256_mul_ps(dmin, to_f(_mm256_srli_epi32(sc, 4))));
    }
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int n = 0; n < 2; n++) {  // element 128n + 32j + (16k + l) <- bits 2j of qs[32n + 16k + l]
      const __m256i q = _mm256_loadu_si256((const __m256i*)(b->qs + 32 * n));
      store32(c + 128 * n, _mm256_and_si256(q, m2));
      store32(c + 128 * n + 32, _mm256_and_si256(_mm256_srli_epi16(q, 2), m2));
      store32(c + 128 * n + 64, _mm256_and_si256(_mm256_srli_epi16(q, 4), m2));
      store32(c + 128 * n + 96, _mm256_and_si256(_mm256_srli_epi16(q, 6), m2));
    }
  }
};
struct DecQ3_K {
  static constexpr size_t kBytes = sizeof(BlockQ3_K);
  static constexpr int kG = 16;
  static constexpr bool kOff = false;
  static void decode(const uint8_t* p, int8_t* c, float* scale, float*) {
    const auto* b = (const BlockQ3_K*)p;
    // Sixteen 6-bit scales (formats.md §5.7) as four u32 words of 4 bytes each: low nibbles from
    // bytes 0-7 (scales 0-7 low, 8-15 high nibbles), top two bits from bytes 8-11 (pair i/4 of byte
    // 8 + i%4).
    uint32_t w[3], a[4];
    std::memcpy(w, b->scales, 12);
    a[0] = (w[0] & 0x0f0f0f0f) | (((w[2] >> 0) & 0x03030303) << 4);
    a[1] = (w[1] & 0x0f0f0f0f) | (((w[2] >> 2) & 0x03030303) << 4);
    a[2] = ((w[0] >> 4) & 0x0f0f0f0f) | (((w[2] >> 4) & 0x03030303) << 4);
    a[3] = ((w[1] >> 4) & 0x0f0f0f0f) | (((w[2] >> 6) & 0x03030303) << 4);
    const __m256 d = _mm256_set1_ps(h2f(b->d));
    const __m256i k32 = _mm256_set1_epi32(32);
    _mm256_store_ps(scale, _mm256_mul_ps(d, to_f(_mm256_sub_epi32(load_u8x8((const uint8_t*)a), k32))));
    _mm256_store_ps(scale + 8, _mm256_mul_ps(d, to_f(_mm256_sub_epi32(load_u8x8((const uint8_t*)a + 8), k32))));
    const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4), zero = _mm256_setzero_si256();
    const __m256i hm = _mm256_loadu_si256((const __m256i*)b->hmask);
    for (int n = 0; n < 2; n++) {  // same layout as Q2_K; high bit 4n + j of hmask[16k + l] clear => -4
      const __m256i q = _mm256_loadu_si256((const __m256i*)(b->qs + 32 * n));
      for (int j = 0; j < 4; j++) {
        const __m256i low = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), m2);
        const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * n + j)));
        const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), zero);
        store32(c + 128 * n + 32 * j, _mm256_sub_epi8(low, _mm256_and_si256(clear, four)));
      }
    }
  }
};

template <class Dec, bool kPre>
float dot_g256(const uint8_t* p, int64_t nb, const float* x, const float* sums) {
  constexpr int G = Dec::kG, NG = 256 / G;
  alignas(32) int8_t c[256];
  alignas(32) float scale[16], offset[16];
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acco = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, p += Dec::kBytes, x += 256) {
    Dec::decode(p, c, scale, offset);
    if (Dec::kOff && kPre)
      for (int g = 0; g < NG; g += 8)
        acco = _mm256_fmadd_ps(_mm256_load_ps(offset + g), _mm256_loadu_ps(sums + NG * b + g), acco);
    for (int e = 0; e < 256; e += 32) {
      const __m256 x0 = _mm256_loadu_ps(x + e), x1 = _mm256_loadu_ps(x + e + 8), x2 = _mm256_loadu_ps(x + e + 16),
                   x3 = _mm256_loadu_ps(x + e + 24);
      const __m256 v01 = _mm256_fmadd_ps(to_f(load_i8x8(c + e + 8)), x1, _mm256_mul_ps(to_f(load_i8x8(c + e)), x0));
      const __m256 v23 = _mm256_fmadd_ps(to_f(load_i8x8(c + e + 24)), x3, _mm256_mul_ps(to_f(load_i8x8(c + e + 16)), x2));
      if constexpr (G == 32) {
        if (e % 64 == 0) acc0 = _mm256_fmadd_ps(_mm256_add_ps(v01, v23), _mm256_broadcast_ss(scale + e / 32), acc0);
        else acc1 = _mm256_fmadd_ps(_mm256_add_ps(v01, v23), _mm256_broadcast_ss(scale + e / 32), acc1);
        if (Dec::kOff && !kPre)
          acco = _mm256_fmadd_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)),
                                 _mm256_broadcast_ss(offset + e / 32), acco);
      } else {
        acc0 = _mm256_fmadd_ps(v01, _mm256_broadcast_ss(scale + e / 16), acc0);
        acc1 = _mm256_fmadd_ps(v23, _mm256_broadcast_ss(scale + e / 16 + 1), acc1);
        if (Dec::kOff && !kPre) {
          acco = _mm256_fmadd_ps(_mm256_add_ps(x0, x1), _mm256_broadcast_ss(offset + e / 16), acco);
          acco = _mm256_fmadd_ps(_mm256_add_ps(x2, x3), _mm256_broadcast_ss(offset + e / 16 + 1), acco);
        }
      }
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), acco));
}

template <class Dec>
float g256(const uint8_t* p, const float* x, int64_t n, const float* sums) {
  return sums ? dot_g256<Dec, true>(p, n / 256, x, sums) : dot_g256<Dec, false>(p, n / 256, x, nullptr);
}
// 32-element formats: groups of 8 blocks through the 256 kernel, then the remaining blocks.
template <class Dec>
float g32(const uint8_t* p, const float* x, int64_t n, const float* s32) {
  const int64_t n8 = n / 256 * 256, tail = (n - n8) / 32;
  float r = g256<Batch8<Dec>>(p, x, n8, s32);
  if (tail) {
    p += n8 / 32 * Dec::kBytes;
    r += s32 ? dot_g32<Dec, true>(p, tail, x + n8, s32 + n8 / 32) : dot_g32<Dec, false>(p, tail, x + n8, nullptr);
  }
  return r;
}

// Dequantization from the same decoders: y = code * scale + offset, one rounding (fma) of an exact
// product, as the reference (formats.md §6), so the output is bit-identical.
template <class Dec>
void dequant_g(const uint8_t* p, int64_t nb, float* y) {
  constexpr int G = Dec::kG;
  alignas(32) int8_t c[256];
  alignas(32) float scale[16], offset[16];
  for (int64_t b = 0; b < nb; b++, p += Dec::kBytes, y += 256) {
    Dec::decode(p, c, scale, offset);
    for (int e = 0; e < 256; e += 8) {
      const __m256 q = to_f(load_i8x8(c + e));
      const __m256 sc = _mm256_broadcast_ss(scale + e / G);
      _mm256_storeu_ps(y + e, Dec::kOff ? _mm256_fmadd_ps(q, sc, _mm256_broadcast_ss(offset + e / G))
                                        : _mm256_mul_ps(q, sc));
    }
  }
}

// A 32-element format: groups of 8 blocks, then the remaining blocks one by one.
template <class Dec>
void dequant_g32(const uint8_t* p, int64_t n, float* y) {
  const int64_t n8 = n / 256 * 256;
  dequant_g<Batch8<Dec>>(p, n8 / 256, y);
  alignas(32) int8_t c[32];
  p += n8 / 32 * Dec::kBytes;
  for (int64_t e0 = n8; e0 < n; e0 += 32, p += Dec::kBytes) {
    float scale, offset = 0;
    Dec::decode(p, c, &scale, &offset);
    for (int e = 0; e < 32; e += 8) {
      const __m256 q = to_f(load_i8x8(c + e));
      _mm256_storeu_ps(y + e0 + e, Dec::kOff ? _mm256_fmadd_ps(q, _mm256_set1_ps(scale), _mm256_set1_ps(offset))
                                             : _mm256_mul_ps(q, _mm256_set1_ps(scale)));
    }
  }
}

}  // namespace

bool dequant_generic_avx2(GgmlType t, const uint8_t* p, float* y, int64_t n) {
  switch (t) {
    case GgmlType::Q5_0: dequant_g32<DecQ5_0>(p, n, y); return true;
    case GgmlType::Q5_1: dequant_g32<DecQ5_1>(p, n, y); return true;
    case GgmlType::IQ4_NL: dequant_g32<DecIQ4_NL>(p, n, y); return true;
    case GgmlType::MXFP4: dequant_g32<DecMXFP4>(p, n, y); return true;
    case GgmlType::Q5_K: dequant_g<DecQ5_K>(p, n / 256, y); return true;
    case GgmlType::IQ4_XS: dequant_g<DecIQ4_XS>(p, n / 256, y); return true;
    case GgmlType::Q2_K: dequant_g<DecQ2_K>(p, n / 256, y); return true;
    case GgmlType::Q3_K: dequant_g<DecQ3_K>(p, n / 256, y); return true;
    default: return false;
  }
}

bool dot_generic_avx2(GgmlType t, const uint8_t* p, const float* x, int64_t n, const float* s16,
                      const float* s32, float* out) {
  switch (t) {
    case GgmlType::Q5_0: *out = g32<DecQ5_0>(p, x, n, s32); return true;
    case GgmlType::Q5_1: *out = g32<DecQ5_1>(p, x, n, s32); return true;
    case GgmlType::IQ4_NL: *out = g32<DecIQ4_NL>(p, x, n, s32); return true;
    case GgmlType::MXFP4: *out = g32<DecMXFP4>(p, x, n, s32); return true;
    case GgmlType::Q5_K: *out = g256<DecQ5_K>(p, x, n, s32); return true;
    case GgmlType::IQ4_XS: *out = g256<DecIQ4_XS>(p, x, n, nullptr); return true;
    case GgmlType::Q2_K: *out = g256<DecQ2_K>(p, x, n, s16); return true;
    case GgmlType::Q3_K: *out = g256<DecQ3_K>(p, x, n, s16); return true;
    default: return false;
  }
}

}  // namespace ds::quant::detail

#pragma GCC pop_options

#else

namespace ds::quant::detail {
bool dot_generic_avx2(GgmlType, const uint8_t*, const float*, int64_t, const float*, const float*, float*) {
  return false;
}
bool dequant_generic_avx2(GgmlType, const uint8_t*, float*, int64_t) { return false; }
}  // namespace ds::quant::detail

#endif
