// Internal to src/quant: per-block scalar decoders (the reference, formats.md §5), the fast
// (AVX2+FMA) row kernels, and the codebook tables. Not part of the public API (see quant.h).
#pragma once
#include <cstdint>

#include "core/ggml_type.h"

// The AVX2 fast paths are compiled on x86-64 with GCC/Clang unless DS_QUANT_NO_SIMD is defined
// (which also lets the scalar-only build be checked on this machine).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(DS_QUANT_NO_SIMD)
#define DS_QUANT_AVX2 1
#else
#define DS_QUANT_AVX2 0
#endif

namespace ds::quant::detail {

// Decodes one block of type t at `block` into y[0..block_size). Scalar, bit-exact (§6).
using DequantBlockFn = void (*)(const void* block, float* y);
// Returns the scalar block decoder of t, or nullptr if t cannot be decoded.
DequantBlockFn dequant_block_fn(GgmlType t);

// Codebook decoders need the grid tables (iq_dequant.cpp); nullptr for non-codebook types.
DequantBlockFn iq_dequant_block_fn(GgmlType t);

// Fast paths (dot_avx2.cpp). Each returns false when it has no kernel for t or the CPU lacks
// AVX2/FMA; the caller then falls back to the scalar reference.
bool cpu_has_avx2_fma();
// Tests only: false makes every entry point take the scalar path, as on a CPU without AVX2.
void set_fast_paths_enabled(bool on);
bool dot_row_fast(GgmlType t, const void* row, const float* x, int64_t n, float* out);
bool dequantize_row_fast(GgmlType t, const void* row, float* y, int64_t n);
// Many rows with one x (y[r] = row r . x); false if no fast path (caller loops over dot_row).
bool dot_rows_fast(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n,
                   float* y);

// The factored kernels of dot_kernels_avx2.cpp (AVX2 only: call after cpu_has_avx2_fma()).
bool dot_kernel_avx2(GgmlType t, const void* row, const float* x, int64_t n, float* out);
// scratch: n/16 + n/32 floats for the partial sums of x.
bool dot_rows_kernel_avx2(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n,
                          float* y, float* scratch);
// The AVX-512 Q4_K/Q6_K many-row kernels (dot_kernels_avx512.cpp; false for other types). Call only
// after cpu_has_avx512(). scratch: n/32 floats.
bool dot_rows_kernel_avx512(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n,
                            float* y, float* scratch);
// AVX-512 bit-exact Q4_K/Q6_K row dequantization (false for other types); after cpu_has_avx512().
bool dequant_kernel_avx512(GgmlType t, const void* row, float* y, int64_t n);
// AVX-512 F/BW/VL/DQ present, fast paths on, and not capped by DS_CPU_ISA=avx2|scalar (as ds::cpu).
bool cpu_has_avx512();
// Tests only: false keeps dot_rows on the AVX2 kernels (to test both on an AVX-512 machine).
void set_avx512_enabled(bool on);
// dot_generic_avx2.cpp: the code-buffer kernels (Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/MXFP4, Q2_K/Q3_K/Q5_K).
// s16/s32: precomputed sums of x per 16/32 elements, or nullptr to accumulate them inline.
bool dot_generic_avx2(GgmlType t, const uint8_t* row, const float* x, int64_t n, const float* s16,
                      const float* s32, float* out);
// Bit-exact dequantization through the same decoders (false for types it does not cover).
bool dequant_generic_avx2(GgmlType t, const uint8_t* row, float* y, int64_t n);

// ---- tables ------------------------------------------------------------------------------------
extern const int8_t kvalues_iq4nl[16];
extern const int8_t kvalues_mxfp4[16];
extern const uint64_t iq2xxs_grid[256];
extern const uint64_t iq2xs_grid[512];
extern const uint64_t iq2s_grid[1024];
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];
extern const uint64_t iq1s_grid[2048];

// ksigns_iq2xs[i] for a 7-bit index: i with bit 7 set when popcount(i) is odd (formats.md §5.13).
// Sub-block scale and min of Q4_K/Q5_K from their 12 packed bytes (formats.md §5.8).
inline void k_scale_min(const uint8_t* q, int s, uint8_t* sc, uint8_t* mn) {
  if (s < 4) {
    *sc = q[s] & 63;
    *mn = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    *mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// MXFP4's E8M0 exponent decoded as half the OCP value, 2^(e-128), as ggml does (formats.md §3).
inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : (e == 1 ? 0x00400000u : 0x00200000u);
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline uint8_t ksigns(uint32_t i) { return (uint8_t)(i | ((__builtin_popcount(i) & 1) << 7)); }

}  // namespace ds::quant::detail
