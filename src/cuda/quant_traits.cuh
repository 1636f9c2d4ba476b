// QuantTraits<T>: the device decoding of one GGML block type (formats.md §5), written once and used
// by every CUDA kernel that reads weights (dequant, matvec, embedding lookup).
//
// A block is cut into kUnits "units" of kE elements: the piece one thread decodes in one step. A unit
// is kRuns runs of kRunLen consecutive elements (run r starts at element run_start(k, r) of the block),
// so a thread loads its activations with 16-byte vector loads. Per type:
//   dequant(blk, k, w)   w[kE] = the unit's exact values, in unit order (bit-identical to gguf-py, §6)
//   dot(blk, k, v, s)    sum_i w[i] * v[i] with the scales factored out of the inner loop; s[r] is the
//                        sum of v over run r (used by types with a min/offset term)
// Float types (F32/F16/BF16) use 8-element "blocks" so a unit is 16 or 32 bytes.
//
// Everything is __host__ __device__: the host compiler builds the same code for the CPU-side tests
// (tests/cuda/quant_traits_test.cpp), which check it against the gguf-py goldens and the CPU decoders
// (random blocks) with no GPU.
// kAlign is the alignment of a block's first byte when the tensor starts 16-byte aligned; loads use
// nothing wider than that.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/ggml_type.h"
#include "quant/iq3_grids.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define DS_HD __host__ __device__ __forceinline__
#define DS_UNROLL _Pragma("unroll")
#else
#define DS_HD inline
#define DS_UNROLL
#endif

namespace ds::cuda::qt {

// ---- loads (p aligned to A bytes) ----------------------------------------------------------------
DS_HD uint32_t ld16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

template <int A>
DS_HD uint32_t ld32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  if constexpr (A >= 4) return *reinterpret_cast<const uint32_t*>(p);
  else return ld16(p) | (ld16(p + 2) << 16);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

// 16 bytes as four little-endian words.
template <int A>
DS_HD void ld128(const uint8_t* p, uint32_t (&w)[4]) {
#ifdef __CUDA_ARCH__
  if constexpr (A >= 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  } else if constexpr (A >= 8) {
    const uint2 a = *reinterpret_cast<const uint2*>(p);
    const uint2 b = *reinterpret_cast<const uint2*>(p + 8);
    w[0] = a.x; w[1] = a.y; w[2] = b.x; w[3] = b.y;
  } else {
DS_UNROLL
    for (int i = 0; i < 4; i++) w[i] = ld32<A>(p + 4 * i);
  }
#else
  std::memcpy(w, p, 16);
#endif
}

// ---- scalar conversions (all exact) ----------------------------------------------------------------
DS_HD float f16f(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half((unsigned short)h));
#else
  return ds::f16_to_f32((uint16_t)h);
#endif
}

DS_HD float bf16f(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(h << 16);
#else
  return ds::bits_to_f32(h << 16);
#endif
}

DS_HD float f32f(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  return ds::bits_to_f32(b);
#endif
}

// (byte i of w) - off, exact. On the GPU: one PRMT builds the float 2^23 + byte, one FADD removes
// 2^23 + off (no int->float conversion, which runs at quarter rate).
template <int I>
DS_HD float bytef(uint32_t w, float off) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | I)) - (8388608.0f + off);
#else
  return (float)((w >> (8 * I)) & 0xFFu) - off;
#endif
}

// The IQ4_NL codebook (formats.md §5.11) plus 128, so every entry is an unsigned byte, packed four per
// word: entry n is byte n % 4 of word n / 4.
constexpr uint32_t kIq4T0 = 0x3F2D1801u;  //   1  24  45  63   (-127 -104 -83 -65)
constexpr uint32_t kIq4T1 = 0x766A5D4Fu;  //  79  93 106 118   ( -49  -35 -22 -10)
constexpr uint32_t kIq4T2 = 0xA6998D81u;  // 129 141 153 166   (   1   13  25  38)
constexpr uint32_t kIq4T3 = 0xF1D9C5B5u;  // 181 197 217 241   (  53   69  89 113)

// Looks up the four 4-bit indices in bits 0..15 of q (nibble k = index k); byte k of the result is
// codebook[index k] + 128. GPU: two PRMTs pick from entries 0-7 and 8-15, a third picks per bit 3.
DS_HD uint32_t iq4_lut(uint32_t q) {
#ifdef __CUDA_ARCH__
  const uint32_t lo = __byte_perm(kIq4T0, kIq4T1, q & 0x7777u);
  const uint32_t hi = __byte_perm(kIq4T2, kIq4T3, q & 0x7777u);
  return __byte_perm(lo, hi, 0x3210u | ((q & 0x8888u) >> 1));
#else
  const uint32_t t[4] = {kIq4T0, kIq4T1, kIq4T2, kIq4T3};
  uint32_t r = 0;
  for (int k = 0; k < 4; k++) {
    const uint32_t n = (q >> (4 * k)) & 0xF;
    r |= ((t[n / 4] >> (8 * (n % 4))) & 0xFF) << (8 * k);
  }
  return r;
#endif
}

// 6-bit scale and min of sub-block s of a Q4_K/Q5_K block (formats.md §5.8); sc points at scales[12].
DS_HD void k_scale_min(const uint8_t* sc, int s, int& scale, int& min) {
  if (s < 4) {
    scale = sc[s] & 63;
    min = sc[s + 4] & 63;
  } else {
    scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
    min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
}

// Bits 0..3 of x moved to bit 4 of bytes 0..3 (the fifth bit of four 4-bit codes). The four shifted
// copies of x do not overlap, so the multiply is carry-free.
DS_HD uint32_t spread4_bit4(uint32_t x) { return ((x * 0x00204081u) & 0x01010101u) << 4; }

template <GgmlType T>
struct QuantTraits;

// ---- F32 / F16 / BF16: 8-element blocks, one unit of one run --------------------------------------
template <>
struct QuantTraits<GgmlType::F32> {
  static constexpr int kBlockElems = 8, kBlockBytes = 32, kAlign = 16;
  static constexpr int kUnits = 1, kRuns = 1, kRunLen = 8, kE = 8;
  static constexpr bool kNeedsSums = false, kIsFloat = true;
  DS_HD static int run_start(int, int) { return 0; }
  DS_HD static float elem(const uint8_t* p, int64_t i) { return f32f(ld32<4>(p + 4 * i)); }
  DS_HD static void dequant(const uint8_t* b, int, float (&w)[kE]) {
    uint32_t a[4], c[4];
    ld128<kAlign>(b, a);
    ld128<kAlign>(b + 16, c);
DS_UNROLL
    for (int i = 0; i < 4; i++) { w[i] = f32f(a[i]); w[4 + i] = f32f(c[i]); }
  }
  DS_HD static float dot(const uint8_t* b, int k, const float (&v)[kE], const float*) {
    float w[kE];
    dequant(b, k, w);
    float acc = 0;
DS_UNROLL
    for (int i = 0; i < kE; i++) acc += w[i] * v[i];
    return acc;
  }
};

template <bool kBf>
struct Half8Traits {
  static constexpr int kBlockElems = 8, kBlockBytes = 16, kAlign = 16;
  static constexpr int kUnits = 1, kRuns = 1, kRunLen = 8, kE = 8;
  static constexpr bool kNeedsSums = false, kIsFloat = true;
  DS_HD static int run_start(int, int) { return 0; }
  DS_HD static float cvt(uint32_t h) { return kBf ? bf16f(h) : f16f(h); }
  DS_HD static float elem(const uint8_t* p, int64_t i) { return cvt(ld16(p + 2 * i)); }
  DS_HD static void dequant(const uint8_t* b, int, float (&w)[kE]) {
    uint32_t a[4];
    ld128<kAlign>(b, a);
DS_UNROLL
    for (int i = 0; i < 4; i++) { w[2 * i] = cvt(a[i] & 0xFFFF); w[2 * i + 1] = cvt(a[i] >> 16); }
  }
  DS_HD static float dot(const uint8_t* b, int k, const float (&v)[kE], const float*) {
    float w[kE];
    dequant(b, k, w);
    float acc = 0;
DS_UNROLL
    for (int i = 0; i < kE; i++) acc += w[i] * v[i];
    return acc;
  }
};
template <> struct QuantTraits<GgmlType::F16> : Half8Traits<false> {};
template <> struct QuantTraits<GgmlType::BF16> : Half8Traits<true> {};

// ---- Q8_0 (§5.2): d f16 | qs[32] int8 ----------------------------------------------------------------
template <>
struct QuantTraits<GgmlType::Q8_0> {
  static constexpr int kBlockElems = 32, kBlockBytes = 34, kAlign = 2;
  static constexpr int kUnits = 1, kRuns = 1, kRunLen = 32, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int, int) { return 0; }
  // Signed byte b as float: (b ^ 0x80) - 128.
  template <class F>
  DS_HD static void each(const uint8_t* b, F&& f) {
DS_UNROLL
    for (int j = 0; j < 8; j++) {
      const uint32_t w = ld32<kAlign>(b + 2 + 4 * j) ^ 0x80808080u;
      f(4 * j + 0, bytef<0>(w, 128.f));
      f(4 * j + 1, bytef<1>(w, 128.f));
      f(4 * j + 2, bytef<2>(w, 128.f));
      f(4 * j + 3, bytef<3>(w, 128.f));
    }
  }
  DS_HD static void dequant(const uint8_t* b, int, float (&w)[kE]) {
    const float d = f16f(ld16(b));
    each(b, [&](int i, float q) { w[i] = q * d; });
  }
  DS_HD static float dot(const uint8_t* b, int, const float (&v)[kE], const float*) {
    float acc = 0;
    each(b, [&](int i, float q) { acc += q * v[i]; });
    return f16f(ld16(b)) * acc;
  }
};

// ---- Q4_0 (§5.3), Q5_0 (§5.4), Q4_1, Q5_1: 32-element blocks, element j = low nibble of qs[j], element j + 16 =
// high nibble (Q5: bit j of the 32-bit qh word as bit 4 of element j). One unit = one block, in element order.
// kMin (Q4_1 / Q5_1): an f16 min m after d, w = q * d + m with q unsigned; dot() factors it out as m * (sum of v),
// the run sum s[0]. Without kMin, w = (q - kBias) * d. IQ4_NL (§5.11) has the same layout with a codebook (below).
template <int kBytes, int kAlignBytes, int kQh, int kQs, int kBias, bool kMin>
struct Nibble32Traits {
  static constexpr int kBlockElems = 32, kBlockBytes = kBytes, kAlign = kAlignBytes;
  static constexpr int kUnits = 1, kRuns = 1, kRunLen = 32, kE = 32;
  static constexpr bool kNeedsSums = kMin, kIsFloat = false;
  DS_HD static int run_start(int, int) { return 0; }
  template <class F>
  DS_HD static void each(const uint8_t* b, F&& f) {  // f(element, q - kBias)
    uint32_t qh = 0;
    if constexpr (kQh >= 0) qh = ld32<kAlign>(b + kQh);
DS_UNROLL
    for (int j = 0; j < 4; j++) {
      const uint32_t w = ld32<kAlign>(b + kQs + 4 * j);
      uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
      if constexpr (kQh >= 0) {
        lo |= spread4_bit4((qh >> (4 * j)) & 0xF);
        hi |= spread4_bit4((qh >> (16 + 4 * j)) & 0xF);
      }
      constexpr float bias = (float)kBias;
      f(4 * j + 0, bytef<0>(lo, bias)); f(16 + 4 * j + 0, bytef<0>(hi, bias));
      f(4 * j + 1, bytef<1>(lo, bias)); f(16 + 4 * j + 1, bytef<1>(hi, bias));
      f(4 * j + 2, bytef<2>(lo, bias)); f(16 + 4 * j + 2, bytef<2>(hi, bias));
      f(4 * j + 3, bytef<3>(lo, bias)); f(16 + 4 * j + 3, bytef<3>(hi, bias));
    }
  }
  DS_HD static void dequant(const uint8_t* b, int, float (&w)[kE]) {
    const float d = f16f(ld16(b));
    if constexpr (kMin) {
      const float m = f16f(ld16(b + 2));
      each(b, [&](int i, float q) { w[i] = q * d + m; });
    } else {
      each(b, [&](int i, float q) { w[i] = q * d; });
    }
  }
  DS_HD static float dot(const uint8_t* b, int, const float (&v)[kE], const float* s) {
    float acc = 0;
    each(b, [&](int i, float q) { acc += q * v[i]; });
    if constexpr (kMin) return f16f(ld16(b)) * acc + f16f(ld16(b + 2)) * s[0];
    return f16f(ld16(b)) * acc;
  }
};
//                                                              bytes align  qh  qs bias min
template <> struct QuantTraits<GgmlType::Q4_0> : Nibble32Traits<18, 2, -1, 2, 8, false> {};
template <> struct QuantTraits<GgmlType::Q5_0> : Nibble32Traits<22, 2, 2, 6, 16, false> {};
template <> struct QuantTraits<GgmlType::Q4_1> : Nibble32Traits<20, 4, -1, 4, 0, true> {};
template <> struct QuantTraits<GgmlType::Q5_1> : Nibble32Traits<24, 8, 4, 8, 0, true> {};

// Codebook decode of 16 bytes of IQ4 codes (32 elements: low nibbles first, then high nibbles).
// The codebook lookup yields bytes in nibble order (lo0, hi0, lo1, hi1), which map to elements
// (j, 16 + j, j + 1, 17 + j).
template <int A, class F>
DS_HD void iq4_each(const uint8_t* qs, F&& f) {
  uint32_t w[4];
  ld128<A>(qs, w);
DS_UNROLL
  for (int j = 0; j < 4; j++) {
    const uint32_t r0 = iq4_lut(w[j] & 0xFFFF), r1 = iq4_lut(w[j] >> 16);
    f(4 * j + 0, bytef<0>(r0, 128.f)); f(16 + 4 * j + 0, bytef<1>(r0, 128.f));
    f(4 * j + 1, bytef<2>(r0, 128.f)); f(16 + 4 * j + 1, bytef<3>(r0, 128.f));
    f(4 * j + 2, bytef<0>(r1, 128.f)); f(16 + 4 * j + 2, bytef<1>(r1, 128.f));
    f(4 * j + 3, bytef<2>(r1, 128.f)); f(16 + 4 * j + 3, bytef<3>(r1, 128.f));
  }
}

template <>
struct QuantTraits<GgmlType::IQ4_NL> {
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kAlign = 2;
  static constexpr int kUnits = 1, kRuns = 1, kRunLen = 32, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int, int) { return 0; }
  DS_HD static void dequant(const uint8_t* b, int, float (&w)[kE]) {
    const float d = f16f(ld16(b));
    iq4_each<kAlign>(b + 2, [&](int i, float q) { w[i] = d * q; });
  }
  DS_HD static float dot(const uint8_t* b, int, const float (&v)[kE], const float*) {
    float acc = 0;
    iq4_each<kAlign>(b + 2, [&](int i, float q) { acc += q * v[i]; });
    return f16f(ld16(b)) * acc;
  }
};

// ---- IQ4_XS (§5.12): d | scales_h u16 | scales_l[4] | qs[128]; unit = one 32-element sub-block ----
template <>
struct QuantTraits<GgmlType::IQ4_XS> {
  static constexpr int kBlockElems = 256, kBlockBytes = 136, kAlign = 8;
  static constexpr int kUnits = 8, kRuns = 1, kRunLen = 32, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int k, int) { return 32 * k; }
  DS_HD static float scale(const uint8_t* b, int k) {
    const uint32_t sh = ld16(b + 2);
    const int ls = ((b[4 + k / 2] >> (4 * (k % 2))) & 0xF) | (((sh >> (2 * k)) & 3) << 4);
    return f16f(ld16(b)) * (float)(ls - 32);
  }
  DS_HD static void dequant(const uint8_t* b, int k, float (&w)[kE]) {
    const float dl = scale(b, k);
    iq4_each<kAlign>(b + 8 + 16 * k, [&](int i, float q) { w[i] = dl * q; });
  }
  DS_HD static float dot(const uint8_t* b, int k, const float (&v)[kE], const float*) {
    float acc = 0;
    iq4_each<kAlign>(b + 8 + 16 * k, [&](int i, float q) { acc += q * v[i]; });
    return scale(b, k) * acc;
  }
};

// ---- Q4_K (§5.8) and Q5_K (§5.9). Unit k (c = k / 2, h = k % 2) = the 16 code bytes
// qs[32c + 16h .. +16): low nibbles are elements 64c + 16h + i (sub-block 2c, run 0), high nibbles
// elements 64c + 32 + 16h + i (sub-block 2c + 1, run 1). Q5_K adds bit s of qh[16h + i].
template <bool kQ5>
struct KQuant45 {
  static constexpr int kBlockElems = 256, kBlockBytes = kQ5 ? 176 : 144, kAlign = 16;
  static constexpr int kUnits = 8, kRuns = 2, kRunLen = 16, kE = 32;
  static constexpr bool kNeedsSums = true, kIsFloat = false;
  static constexpr int kQsOff = kQ5 ? 48 : 16;
  DS_HD static int run_start(int k, int r) { return 64 * (k / 2) + 32 * r + 16 * (k % 2); }
  // f(i, q) over the unit's 32 codes, i in unit order (0..15 run 0, 16..31 run 1).
  template <class F>
  DS_HD static void each(const uint8_t* b, int k, F&& f) {
    const int c = k / 2, h = k % 2;
    uint32_t w[4];
    ld128<kAlign>(b + kQsOff + 32 * c + 16 * h, w);
    uint32_t qh[4] = {0, 0, 0, 0};
    if constexpr (kQ5) ld128<kAlign>(b + 16 + 16 * h, qh);
DS_UNROLL
    for (int j = 0; j < 4; j++) {
      uint32_t lo = w[j] & 0x0F0F0F0Fu, hi = (w[j] >> 4) & 0x0F0F0F0Fu;
      if constexpr (kQ5) {
        lo |= ((qh[j] >> (2 * c)) & 0x01010101u) << 4;
        hi |= ((qh[j] >> (2 * c + 1)) & 0x01010101u) << 4;
      }
      f(4 * j + 0, bytef<0>(lo, 0.f)); f(16 + 4 * j + 0, bytef<0>(hi, 0.f));
      f(4 * j + 1, bytef<1>(lo, 0.f)); f(16 + 4 * j + 1, bytef<1>(hi, 0.f));
      f(4 * j + 2, bytef<2>(lo, 0.f)); f(16 + 4 * j + 2, bytef<2>(hi, 0.f));
      f(4 * j + 3, bytef<3>(lo, 0.f)); f(16 + 4 * j + 3, bytef<3>(hi, 0.f));
    }
  }
  DS_HD static void dequant(const uint8_t* b, int k, float (&w)[kE]) {
    const float d = f16f(ld16(b)), dmin = f16f(ld16(b + 2));
    int sc0, m0, sc1, m1;
    k_scale_min(b + 4, 2 * (k / 2), sc0, m0);
    k_scale_min(b + 4, 2 * (k / 2) + 1, sc1, m1);
    const float ds0 = d * (float)sc0, dm0 = dmin * (float)m0;
    const float ds1 = d * (float)sc1, dm1 = dmin * (float)m1;
    each(b, k, [&](int i, float q) { w[i] = i < 16 ? ds0 * q - dm0 : ds1 * q - dm1; });
  }
  DS_HD static float dot(const uint8_t* b, int k, const float (&v)[kE], const float* s) {
    float a0 = 0, a1 = 0;
    each(b, k, [&](int i, float q) {
      if (i < 16) a0 += q * v[i];
      else a1 += q * v[i];
    });
    const float d = f16f(ld16(b)), dmin = f16f(ld16(b + 2));
    int sc0, m0, sc1, m1;
    k_scale_min(b + 4, 2 * (k / 2), sc0, m0);
    k_scale_min(b + 4, 2 * (k / 2) + 1, sc1, m1);
    return d * ((float)sc0 * a0 + (float)sc1 * a1) - dmin * ((float)m0 * s[0] + (float)m1 * s[1]);
  }
};
template <> struct QuantTraits<GgmlType::Q4_K> : KQuant45<false> {};
template <> struct QuantTraits<GgmlType::Q5_K> : KQuant45<true> {};

// ---- Q2_K (§5.6) and Q3_K (§5.7): 2-bit codes, element 128n + 32j + 16k + l is bits 2j..2j+1 of
// qs[32n + 16k + l]. Unit u (n = u / 4, c = u % 4) takes the 8 code bytes qs[32n + 8c ..] and their
// four bit pairs: run j = elements 128n + 32j + 8c .. +8, whose scale is number 8n + 2j + c / 2 (one
// per 16 elements). The same cut as Q6_K's, so a unit is 32 elements in 4 runs of 8.
DS_HD int k2_run_start(int u, int j) { return 128 * (u / 4) + 32 * j + 8 * (u % 4); }
DS_HD int k2_scale_index(int u, int j) { return 8 * (u / 4) + 2 * j + (u % 4) / 2; }

// Q2_K: scales[16] (low nibble scale, high nibble min) | qs[64] | d | dmin; w = (d * sc) * q - dmin * m.
template <>
struct QuantTraits<GgmlType::Q2_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 84, kAlign = 4;
  static constexpr int kUnits = 8, kRuns = 4, kRunLen = 8, kE = 32;
  static constexpr bool kNeedsSums = true, kIsFloat = false;
  DS_HD static int run_start(int u, int j) { return k2_run_start(u, j); }
  template <class F>  // f(j, i, q), i = index inside run j
  DS_HD static void each(const uint8_t* b, int u, F&& f) {
    const uint8_t* qs = b + 16 + 32 * (u / 4) + 8 * (u % 4);
DS_UNROLL
    for (int h = 0; h < 2; h++) {
      const uint32_t w = ld32<kAlign>(qs + 4 * h);
DS_UNROLL
      for (int j = 0; j < 4; j++) {
        const uint32_t q = (w >> (2 * j)) & 0x03030303u;
        f(j, 4 * h + 0, bytef<0>(q, 0.f)); f(j, 4 * h + 1, bytef<1>(q, 0.f));
        f(j, 4 * h + 2, bytef<2>(q, 0.f)); f(j, 4 * h + 3, bytef<3>(q, 0.f));
      }
    }
  }
  DS_HD static void dequant(const uint8_t* b, int u, float (&w)[kE]) {
    const float d = f16f(ld16(b + 80)), dmin = f16f(ld16(b + 82));
    float ds[4], dm[4];
DS_UNROLL
    for (int j = 0; j < 4; j++) {
      const uint32_t sc = b[k2_scale_index(u, j)];
      ds[j] = d * (float)(sc & 0xF);
      dm[j] = dmin * (float)(sc >> 4);
    }
    each(b, u, [&](int j, int i, float q) { w[8 * j + i] = ds[j] * q - dm[j]; });
  }
  DS_HD static float dot(const uint8_t* b, int u, const float (&v)[kE], const float* s) {
    float a[4] = {0, 0, 0, 0};
    each(b, u, [&](int j, int i, float q) { a[j] += q * v[8 * j + i]; });
    float acc = 0, macc = 0;
DS_UNROLL
    for (int j = 0; j < 4; j++) {
      const uint32_t sc = b[k2_scale_index(u, j)];
      acc += (float)(sc & 0xF) * a[j];
      macc += (float)(sc >> 4) * s[j];
    }
    return f16f(ld16(b + 80)) * acc - f16f(ld16(b + 82)) * macc;
  }
};

// Q3_K: hmask[32] | qs[64] | scales[12] | d. The third bit of element 128n + 32j + 16k + l is bit
// 4n + j of hmask[16k + l]; q = (low | high << 2) - 4. Scale i is 6 bits, signed by -32: low 4 bits
// from nibble i / 8 of scales[i % 8], high 2 bits from bits 2(i / 4).. of scales[8 + i % 4].
template <>
struct QuantTraits<GgmlType::Q3_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kAlign = 2;
  static constexpr int kUnits = 8, kRuns = 4, kRunLen = 8, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int u, int j) { return k2_run_start(u, j); }
  DS_HD static int scale(const uint8_t* b, int u, int j) {
    const int i = k2_scale_index(u, j);
    const uint8_t* sc = b + 96;
    const int low4 = (sc[i % 8] >> (4 * (i / 8))) & 0xF;
    const int high2 = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (low4 | (high2 << 4)) - 32;
  }
  template <class F>  // f(j, i, q - 4), i = index inside run j
  DS_HD static void each(const uint8_t* b, int u, F&& f) {
    const int n = u / 4, c = u % 4;
    const uint8_t* hm = b + 8 * c;
    const uint8_t* qs = b + 32 + 32 * n + 8 * c;
DS_UNROLL
    for (int h = 0; h < 2; h++) {
      const uint32_t w = ld32<kAlign>(qs + 4 * h), wh = ld32<kAlign>(hm + 4 * h) >> (4 * n);
DS_UNROLL
      for (int j = 0; j < 4; j++) {
        const uint32_t q = ((w >> (2 * j)) & 0x03030303u) | (((wh >> j) & 0x01010101u) << 2);
        f(j, 4 * h + 0, bytef<0>(q, 4.f)); f(j, 4 * h + 1, bytef<1>(q, 4.f));
        f(j, 4 * h + 2, bytef<2>(q, 4.f)); f(j, 4 * h + 3, bytef<3>(q, 4.f));
      }
    }
  }
  DS_HD static void dequant(const uint8_t* b, int u, float (&w)[kE]) {
    const float d = f16f(ld16(b + 108));
    float ds[4];
DS_UNROLL
    for (int j = 0; j < 4; j++) ds[j] = d * (float)scale(b, u, j);
    each(b, u, [&](int j, int i, float q) { w[8 * j + i] = ds[j] * q; });
  }
  DS_HD static float dot(const uint8_t* b, int u, const float (&v)[kE], const float*) {
    float a[4] = {0, 0, 0, 0};
    each(b, u, [&](int j, int i, float q) { a[j] += q * v[8 * j + i]; });
    float acc = 0;
DS_UNROLL
    for (int j = 0; j < 4; j++) acc += (float)scale(b, u, j) * a[j];
    return f16f(ld16(b + 108)) * acc;
  }
};

// ---- Q6_K (§5.10): ql[128] | qh[64] | scales[16] int8 | d. Unit k (n = k / 4, m = k % 4) covers
// l in [8m, 8m + 8) of half n for all four t: run t = elements 128n + 32t + 8m .. +8, which reads
// ql[64n + 8m ..], ql[64n + 32 + 8m ..] and qh[32n + 8m ..] (8 bytes each) and 4 scales.
template <>
struct QuantTraits<GgmlType::Q6_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 210, kAlign = 2;
  static constexpr int kUnits = 8, kRuns = 4, kRunLen = 8, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int k, int t) { return 128 * (k / 4) + 32 * t + 8 * (k % 4); }
  DS_HD static int scale(const uint8_t* b, int k, int t) {
    return (int8_t)b[192 + 8 * (k / 4) + 2 * t + (k % 4) / 2];
  }
  template <class F>  // f(t, i, q - 32), i = index inside run t
  DS_HD static void each(const uint8_t* b, int k, F&& f) {
    const int n = k / 4, m = k % 4;
    const uint8_t* qa = b + 64 * n + 8 * m;
    const uint8_t* qb = qa + 32;
    const uint8_t* qh = b + 128 + 32 * n + 8 * m;
DS_UNROLL
    for (int j = 0; j < 2; j++) {
      const uint32_t wa = ld32<kAlign>(qa + 4 * j), wb = ld32<kAlign>(qb + 4 * j);
      const uint32_t wh = ld32<kAlign>(qh + 4 * j);
      const uint32_t q0 = (wa & 0x0F0F0F0Fu) | ((wh & 0x03030303u) << 4);
      const uint32_t q1 = (wb & 0x0F0F0F0Fu) | (((wh >> 2) & 0x03030303u) << 4);
      const uint32_t q2 = ((wa >> 4) & 0x0F0F0F0Fu) | (((wh >> 4) & 0x03030303u) << 4);
      const uint32_t q3 = ((wb >> 4) & 0x0F0F0F0Fu) | (((wh >> 6) & 0x03030303u) << 4);
      f(0, 4 * j + 0, bytef<0>(q0, 32.f)); f(0, 4 * j + 1, bytef<1>(q0, 32.f));
      f(0, 4 * j + 2, bytef<2>(q0, 32.f)); f(0, 4 * j + 3, bytef<3>(q0, 32.f));
      f(1, 4 * j + 0, bytef<0>(q1, 32.f)); f(1, 4 * j + 1, bytef<1>(q1, 32.f));
      f(1, 4 * j + 2, bytef<2>(q1, 32.f)); f(1, 4 * j + 3, bytef<3>(q1, 32.f));
      f(2, 4 * j + 0, bytef<0>(q2, 32.f)); f(2, 4 * j + 1, bytef<1>(q2, 32.f));
      f(2, 4 * j + 2, bytef<2>(q2, 32.f)); f(2, 4 * j + 3, bytef<3>(q2, 32.f));
      f(3, 4 * j + 0, bytef<0>(q3, 32.f)); f(3, 4 * j + 1, bytef<1>(q3, 32.f));
      f(3, 4 * j + 2, bytef<2>(q3, 32.f)); f(3, 4 * j + 3, bytef<3>(q3, 32.f));
    }
  }
  DS_HD static void dequant(const uint8_t* b, int k, float (&w)[kE]) {
    const float d = f16f(ld16(b + 208));
    float ds[4];
DS_UNROLL
    for (int t = 0; t < 4; t++) ds[t] = d * (float)scale(b, k, t);
    each(b, k, [&](int t, int i, float q) { w[8 * t + i] = ds[t] * q; });
  }
  DS_HD static float dot(const uint8_t* b, int k, const float (&v)[kE], const float*) {
    float a[4] = {0, 0, 0, 0};
    each(b, k, [&](int t, int i, float q) { a[t] += q * v[8 * t + i]; });
    float acc = 0;
DS_UNROLL
    for (int t = 0; t < 4; t++) acc += (float)scale(b, k, t) * a[t];
    return f16f(ld16(b + 208)) * acc;
  }
};

// ---- IQ3_XXS and IQ3_S (§5.13): unit g = the 32-element group g, elements 32g + 8l + j (l = 0..3,
// j = 0..7) are grid entry e1 (j < 4) or e2 (j >= 4) of chunk l, byte j % 4, times the group's
// scale, negated where bit j of the chunk's sign byte is set. The grids are read from device memory
// on the GPU (indices differ per thread, so __constant__ would serialize) and from a host copy
// otherwise; both come from quant/iq3_grids.h.
#ifdef __CUDACC__
static __device__ const uint32_t kIq3xxsGridDev[256] = {DS_IQ3XXS_GRID};
static __device__ const uint32_t kIq3sGridDev[512] = {DS_IQ3S_GRID};
#endif
inline constexpr uint32_t kIq3xxsGridHost[256] = {DS_IQ3XXS_GRID};
inline constexpr uint32_t kIq3sGridHost[512] = {DS_IQ3S_GRID};

DS_HD uint32_t iq3xxs_grid(uint32_t i) {
#ifdef __CUDA_ARCH__
  return kIq3xxsGridDev[i];
#else
  return kIq3xxsGridHost[i];
#endif
}
DS_HD uint32_t iq3s_grid(uint32_t i) {
#ifdef __CUDA_ARCH__
  return kIq3sGridDev[i];
#else
  return kIq3sGridHost[i];
#endif
}

// x with its sign flipped when bit 0 of s is set (exact; the grid values are never zero).
DS_HD float flip(float x, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(__float_as_uint(x) ^ ((s & 1u) << 31));
#else
  return ds::bits_to_f32(ds::f32_to_bits(x) ^ ((s & 1u) << 31));
#endif
}

// IQ3_XXS's 7 stored sign bits plus the eighth, which makes the count of set bits even (§5.13 ksigns).
DS_HD uint32_t iq_signs7(uint32_t i) {
#ifdef __CUDA_ARCH__
  return i | ((uint32_t)(__popc(i) & 1) << 7);
#else
  return i | ((uint32_t)(__builtin_popcount(i) & 1) << 7);
#endif
}

// f(8l + j, signed grid value) for the 32 elements of one group, given each chunk's entries and signs.
template <class G, class F>
DS_HD void iq3_group(G&& chunk, F&& f) {
DS_UNROLL
  for (int l = 0; l < 4; l++) {
    uint32_t e1, e2, s;
    chunk(l, e1, e2, s);
    f(8 * l + 0, flip(bytef<0>(e1, 0.f), s)); f(8 * l + 1, flip(bytef<1>(e1, 0.f), s >> 1));
    f(8 * l + 2, flip(bytef<2>(e1, 0.f), s >> 2)); f(8 * l + 3, flip(bytef<3>(e1, 0.f), s >> 3));
    f(8 * l + 4, flip(bytef<0>(e2, 0.f), s >> 4)); f(8 * l + 5, flip(bytef<1>(e2, 0.f), s >> 5));
    f(8 * l + 6, flip(bytef<2>(e2, 0.f), s >> 6)); f(8 * l + 7, flip(bytef<3>(e2, 0.f), s >> 7));
  }
}

// IQ3_XXS: d | qs[64] (two grid indices per chunk) | sas[32] (per group a u32: four 7-bit sign
// indices, then a 4-bit scale in bits 28..31); scale = d * (0.5 + s) * 0.5.
template <>
struct QuantTraits<GgmlType::IQ3_XXS> {
  static constexpr int kBlockElems = 256, kBlockBytes = 98, kAlign = 2;
  static constexpr int kUnits = 8, kRuns = 1, kRunLen = 32, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int g, int) { return 32 * g; }
  DS_HD static float scale(const uint8_t* b, uint32_t sas) {
    return f16f(ld16(b)) * (0.5f + (float)(sas >> 28)) * 0.5f;
  }
  template <class F>
  DS_HD static void each(const uint8_t* b, int g, uint32_t sas, F&& f) {
    const uint8_t* qs = b + 2 + 8 * g;
    iq3_group(
        [&](int l, uint32_t& e1, uint32_t& e2, uint32_t& s) {
          e1 = iq3xxs_grid(qs[2 * l]);
          e2 = iq3xxs_grid(qs[2 * l + 1]);
          s = iq_signs7((sas >> (7 * l)) & 127);
        },
        f);
  }
  DS_HD static void dequant(const uint8_t* b, int g, float (&w)[kE]) {
    const uint32_t sas = ld32<kAlign>(b + 66 + 4 * g);
    const float db = scale(b, sas);
    each(b, g, sas, [&](int i, float q) { w[i] = db * q; });
  }
  DS_HD static float dot(const uint8_t* b, int g, const float (&v)[kE], const float*) {
    const uint32_t sas = ld32<kAlign>(b + 66 + 4 * g);
    float acc = 0;
    each(b, g, sas, [&](int i, float q) { acc += q * v[i]; });
    return scale(b, sas) * acc;
  }
};

// IQ3_S: d | qs[64] (low 8 bits of two 9-bit grid indices per chunk) | qh[8] (the ninth bits: bit 2l,
// 2l + 1 of qh[g]) | signs[32] (one byte per chunk) | scales[4] (a nibble per group);
// scale = d * (1 + 2 * nibble).
template <>
struct QuantTraits<GgmlType::IQ3_S> {
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kAlign = 2;
  static constexpr int kUnits = 8, kRuns = 1, kRunLen = 32, kE = 32;
  static constexpr bool kNeedsSums = false, kIsFloat = false;
  DS_HD static int run_start(int g, int) { return 32 * g; }
  DS_HD static float scale(const uint8_t* b, int g) {
    const int nib = (b[106 + g / 2] >> (4 * (g % 2))) & 0xF;
    return f16f(ld16(b)) * (float)(1 + 2 * nib);
  }
  template <class F>
  DS_HD static void each(const uint8_t* b, int g, F&& f) {
    const uint8_t* qs = b + 2 + 8 * g;
    const uint32_t qh = b[66 + g];
    const uint8_t* signs = b + 74 + 4 * g;
    iq3_group(
        [&](int l, uint32_t& e1, uint32_t& e2, uint32_t& s) {
          e1 = iq3s_grid(qs[2 * l] | (((qh >> (2 * l)) & 1) << 8));
          e2 = iq3s_grid(qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8));
          s = signs[l];
        },
        f);
  }
  DS_HD static void dequant(const uint8_t* b, int g, float (&w)[kE]) {
    const float db = scale(b, g);
    each(b, g, [&](int i, float q) { w[i] = db * q; });
  }
  DS_HD static float dot(const uint8_t* b, int g, const float (&v)[kE], const float*) {
    float acc = 0;
    each(b, g, [&](int i, float q) { acc += q * v[i]; });
    return scale(b, g) * acc;
  }
};

// The types with CUDA kernels. DS_CUDA_FOR_EACH_TYPE(X) expands X(F32) X(F16) ... so each launcher's
// single switch lists every type exactly once.
#define DS_CUDA_FOR_EACH_TYPE(X) \
  X(F32) X(F16) X(BF16) X(Q8_0) X(Q4_0) X(Q5_0) X(IQ4_NL) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_XS) X(Q4_1) X(Q5_1) \
  X(Q2_K) X(Q3_K) X(IQ3_XXS) X(IQ3_S)

}  // namespace ds::cuda::qt
