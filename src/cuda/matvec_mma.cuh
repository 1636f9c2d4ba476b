// Tensor-core batched matvec Y[B, rows] = X[B, cols] · Wᵀ (matvec.h) for GGUF block weights.
//
// Exactness scheme (float activations, near-fp32 accuracy):
//   Every supported block format is integer codes times per-group scales (Q4_K: w = d·sc_j·q − dmin·m_j
//   per 32-element sub-block j), so sum_i w_i x_i = Σ_groups (scale · Σ q_i x_i − min · Σ x_i).
//   Σ q_i x_i runs on tensor cores (mma.sync m16n8k16, bf16 inputs, fp32 accumulation): A = the integer
//   codes as bf16 (exact: |q| <= 128), B = x split into kTerms bf16 terms x = x1 + x2 (+ x3), each the
//   bf16 rounding of the remainder (3 terms carry 24 bits = fp32, 2 terms 16 bits). Each product
//   q · x_k is exact in the fp32 accumulator; per group the fp32 partial sum is scaled in fp32.
//   BF16 weights are exact in bf16 (no scale); F16 weights are split into two exact bf16 terms.
//
// Mapping: a warp owns 16·kMT consecutive rows and every batch column (8 per n-tile). The k dimension
// of one m16n8k16 step ("chunk", 16 consecutive elements) is permuted identically in A and B: lane
// (g = lane/4, t = lane%4) holds elements 4t .. 4t+3 of the chunk in k-slots 2t, 2t+1, 2t+8, 2t+9, so
// a lane decodes 4 consecutive codes of rows g and g+8 (one 32-bit word for 4/5/6-bit formats) and
// loads 4 consecutive activations (one float4) of batch column g. Weights are read straight from
// global memory (every byte by exactly one warp). The kWarps warps of a CTA share one row tile and split
// its columns (warp w takes blocks [blocks·w/kWarps, blocks·(w+1)/kWarps)); their partial sums meet in
// shared memory and warp 0 adds them in warp order: deterministic (the same inputs give the same bits on
// every run and in every batch composition of the same size), no atomics.
//
// Measured with the earlier atomics split (H200, bench/cuda/matvec_batched_bench_standalone.cu): error vs dot_row
// max 1.6e-7 of sum|w x| (rms 2e-8) with 3 terms, max 1.6e-6 (rms 4e-7) with 2 terms. Q4_K
// [12288 x 4096]: 64 us at B = 8, 98 us at B = 32, 150 us at B = 64 (43 TFLOP/s; the FMA kernel:
// 264 / 963 / 1866 us). Latency-bound, far from tensor-core peak (next: x split once per CTA into shared memory, staged
// weight tiles; see bench/cuda/NOTES.md).
#pragma once
#include <cuda_bf16.h>

#include "cuda/cuda_util.h"
#include "cuda/matvec.h"
#include "cuda/quant_traits.cuh"

#ifndef DS_MMA_TERMS
#define DS_MMA_TERMS 3
#endif

namespace ds::cuda {
namespace mma {

#ifndef DS_MMA_WARPS
#define DS_MMA_WARPS 4
#endif
#ifndef DS_MMA_PF
#define DS_MMA_PF 1024  // L2 prefetch distance per row in bytes (0: off)
#endif
#ifndef DS_MMA_MT1_MAX_BATCH
#define DS_MMA_MT1_MAX_BATCH 16
#endif

constexpr int kTerms = DS_MMA_TERMS;  // bf16 terms per activation
constexpr int kWarps = DS_MMA_WARPS;
constexpr int kThreads = 32 * kWarps;

// ---- bf16 packing helpers -----------------------------------------------------------------------
// Four small unsigned bytes (each <= 127) -> two bf16x2 words holding (byte - off) exactly:
// PRMT builds bf16 128 + byte (exponent byte 0x43), HSUB2 removes 128 + off.
template <int kOff>
__device__ __forceinline__ void bytes_to_bf16(uint32_t b, uint32_t& p0, uint32_t& p1) {
  constexpr unsigned short kBits = (unsigned short)(0x4300 + kOff);  // bf16 of 128 + off (off < 128)
  const __nv_bfloat162 base = __halves2bfloat162(__ushort_as_bfloat16(kBits), __ushort_as_bfloat16(kBits));
  uint32_t u0 = __byte_perm(b, 0x43434343u, 0x4140u), u1 = __byte_perm(b, 0x43434343u, 0x4342u);
  __nv_bfloat162 h0 = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&u0), base);
  __nv_bfloat162 h1 = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&u1), base);
  p0 = *reinterpret_cast<uint32_t*>(&h0);
  p1 = *reinterpret_cast<uint32_t*>(&h1);
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {  // exact when lo, hi fit bf16
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
// Four bytes (byte i - off, exact in bf16) through fp32.
template <int kOff>
__device__ __forceinline__ void bytes_to_bf16_f(uint32_t b, uint32_t& p0, uint32_t& p1) {
  p0 = pack_bf16(qt::bytef<0>(b, (float)kOff), qt::bytef<1>(b, (float)kOff));
  p1 = pack_bf16(qt::bytef<2>(b, (float)kOff), qt::bytef<3>(b, (float)kOff));
}
__device__ __forceinline__ float bf_lo(uint32_t p) { return __uint_as_float(p << 16); }
__device__ __forceinline__ float bf_hi(uint32_t p) { return __uint_as_float(p & 0xFFFF0000u); }

// ---- decoders: D::decode(blk, s, t, a, sc, mn) fills, for step s of the block (kChunks chunks of 16
// elements), lane t's codes a[c][term][0] = elements 4t, 4t+1 and a[c][term][1] = 4t+2, 4t+3 of chunk c,
// and per group (kChunks / kGroups consecutive chunks) its scale and min (w = sc·q − mn).
struct DecQ4K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144, kStepElems = 64, kChunks = 4, kGroups = 2;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = true, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int s, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&mn)[kGroups]) {
    const uint32_t w0 = qt::ld32<4>(b + 16 + 32 * s + 4 * t), w1 = qt::ld32<4>(b + 16 + 32 * s + 16 + 4 * t);
    bytes_to_bf16<0>(w0 & 0x0F0F0F0Fu, a[0][0][0], a[0][0][1]);
    bytes_to_bf16<0>(w1 & 0x0F0F0F0Fu, a[1][0][0], a[1][0][1]);
    bytes_to_bf16<0>((w0 >> 4) & 0x0F0F0F0Fu, a[2][0][0], a[2][0][1]);
    bytes_to_bf16<0>((w1 >> 4) & 0x0F0F0F0Fu, a[3][0][0], a[3][0][1]);
    const float d = qt::f16f(qt::ld16(b)), dmin = qt::f16f(qt::ld16(b + 2));
#pragma unroll
    for (int j = 0; j < 2; j++) {
      int scale, min;
      qt::k_scale_min(b + 4, 2 * s + j, scale, min);
      sc[j] = d * (float)scale;
      mn[j] = dmin * (float)min;
    }
  }
};

struct DecQ5K {
  static constexpr int kBlockElems = 256, kBlockBytes = 176, kStepElems = 64, kChunks = 4, kGroups = 2;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = true, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int s, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&mn)[kGroups]) {
    const uint32_t w0 = qt::ld32<4>(b + 48 + 32 * s + 4 * t), w1 = qt::ld32<4>(b + 48 + 32 * s + 16 + 4 * t);
    const uint32_t h0 = qt::ld32<4>(b + 16 + 4 * t), h1 = qt::ld32<4>(b + 32 + 4 * t);
    bytes_to_bf16<0>((w0 & 0x0F0F0F0Fu) | (((h0 >> (2 * s)) & 0x01010101u) << 4), a[0][0][0], a[0][0][1]);
    bytes_to_bf16<0>((w1 & 0x0F0F0F0Fu) | (((h1 >> (2 * s)) & 0x01010101u) << 4), a[1][0][0], a[1][0][1]);
    bytes_to_bf16<0>(((w0 >> 4) & 0x0F0F0F0Fu) | (((h0 >> (2 * s + 1)) & 0x01010101u) << 4), a[2][0][0],
                     a[2][0][1]);
    bytes_to_bf16<0>(((w1 >> 4) & 0x0F0F0F0Fu) | (((h1 >> (2 * s + 1)) & 0x01010101u) << 4), a[3][0][0],
                     a[3][0][1]);
    const float d = qt::f16f(qt::ld16(b)), dmin = qt::f16f(qt::ld16(b + 2));
#pragma unroll
    for (int j = 0; j < 2; j++) {
      int scale, min;
      qt::k_scale_min(b + 4, 2 * s + j, scale, min);
      sc[j] = d * (float)scale;
      mn[j] = dmin * (float)min;
    }
  }
};

// Q6_K: step = half n (128 elements, 8 chunks); chunk c = elements 128n + 16c .. +16, whose scale is
// scales[8n + c] (16-element sub-blocks, so one group per chunk).
struct DecQ6K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210, kStepElems = 128, kChunks = 8, kGroups = 8;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int s, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint32_t wa = qt::ld32<2>(b + 64 * s + 16 * h + 4 * t);
      const uint32_t wb = qt::ld32<2>(b + 64 * s + 32 + 16 * h + 4 * t);
      const uint32_t wh = qt::ld32<2>(b + 128 + 32 * s + 16 * h + 4 * t);
      bytes_to_bf16<32>((wa & 0x0F0F0F0Fu) | ((wh & 0x03030303u) << 4), a[0 + h][0][0], a[0 + h][0][1]);
      bytes_to_bf16<32>((wb & 0x0F0F0F0Fu) | (((wh >> 2) & 0x03030303u) << 4), a[2 + h][0][0], a[2 + h][0][1]);
      bytes_to_bf16<32>(((wa >> 4) & 0x0F0F0F0Fu) | (((wh >> 4) & 0x03030303u) << 4), a[4 + h][0][0],
                        a[4 + h][0][1]);
      bytes_to_bf16<32>(((wb >> 4) & 0x0F0F0F0Fu) | (((wh >> 6) & 0x03030303u) << 4), a[6 + h][0][0],
                        a[6 + h][0][1]);
    }
    const float d = qt::f16f(qt::ld16(b + 208));
#pragma unroll
    for (int c = 0; c < 8; c++) sc[c] = d * (float)(int8_t)b[192 + 8 * s + c];
  }
};

struct DecQ8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34, kStepElems = 32, kChunks = 2, kGroups = 1;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
#pragma unroll
    for (int c = 0; c < 2; c++)
      bytes_to_bf16_f<128>(qt::ld32<2>(b + 2 + 16 * c + 4 * t) ^ 0x80808080u, a[c][0][0], a[c][0][1]);
    sc[0] = qt::f16f(qt::ld16(b));
  }
};

// Q4_0 / Q5_0: element j = low nibble of qs[j] (chunk 0), element j + 16 = high nibble (chunk 1).
struct DecQ4_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kStepElems = 32, kChunks = 2, kGroups = 1;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
    const uint32_t w = qt::ld32<2>(b + 2 + 4 * t);
    bytes_to_bf16<8>(w & 0x0F0F0F0Fu, a[0][0][0], a[0][0][1]);
    bytes_to_bf16<8>((w >> 4) & 0x0F0F0F0Fu, a[1][0][0], a[1][0][1]);
    sc[0] = qt::f16f(qt::ld16(b));
  }
};

struct DecQ5_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 22, kStepElems = 32, kChunks = 2, kGroups = 1;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
    const uint32_t qh = qt::ld32<2>(b + 2), w = qt::ld32<2>(b + 6 + 4 * t);
    bytes_to_bf16<16>((w & 0x0F0F0F0Fu) | qt::spread4_bit4((qh >> (4 * t)) & 0xF), a[0][0][0], a[0][0][1]);
    bytes_to_bf16<16>(((w >> 4) & 0x0F0F0F0Fu) | qt::spread4_bit4((qh >> (16 + 4 * t)) & 0xF), a[1][0][0],
                      a[1][0][1]);
    sc[0] = qt::f16f(qt::ld16(b));
  }
};

// IQ4 codebook: the four nibbles of `nib` (one per byte, bytes 0..3) -> codebook values as bf16.
__device__ __forceinline__ void iq4_to_bf16(uint32_t nib, uint32_t& p0, uint32_t& p1) {
  const uint32_t packed = __byte_perm(nib | (nib >> 4), 0, 0x0020u);  // nibbles 0..3 in bits 0..15
  bytes_to_bf16_f<128>(qt::iq4_lut(packed), p0, p1);
}

struct DecIQ4NL {
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kStepElems = 32, kChunks = 2, kGroups = 1;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
    const uint32_t w = qt::ld32<2>(b + 2 + 4 * t);
    iq4_to_bf16(w & 0x0F0F0F0Fu, a[0][0][0], a[0][0][1]);
    iq4_to_bf16((w >> 4) & 0x0F0F0F0Fu, a[1][0][0], a[1][0][1]);
    sc[0] = qt::f16f(qt::ld16(b));
  }
};

struct DecIQ4XS {  // step = one 32-element sub-block k (0..7), laid out like an IQ4_NL block
  static constexpr int kBlockElems = 256, kBlockBytes = 136, kStepElems = 32, kChunks = 2, kGroups = 1;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static void decode(const uint8_t* b, int s, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
    const uint32_t w = qt::ld32<4>(b + 8 + 16 * s + 4 * t);
    iq4_to_bf16(w & 0x0F0F0F0Fu, a[0][0][0], a[0][0][1]);
    iq4_to_bf16((w >> 4) & 0x0F0F0F0Fu, a[1][0][0], a[1][0][1]);
    sc[0] = qt::QuantTraits<GgmlType::IQ4_XS>::scale(b, s);
  }
};

// BF16: 16-element "blocks" of 32 bytes, exact, no scale.
struct DecBF16 {
  static constexpr int kBlockElems = 16, kBlockBytes = 32, kStepElems = 16, kChunks = 1, kGroups = 1;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = true;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&)[kGroups], float (&)[kGroups]) {
    const uint2 v = *reinterpret_cast<const uint2*>(b + 8 * t);
    a[0][0][0] = v.x;
    a[0][0][1] = v.y;
  }
};

// F16: each value split into two exact bf16 terms (11 significant bits = 8 + 3; f16 range fits bf16).
struct DecF16 {
  static constexpr int kBlockElems = 16, kBlockBytes = 32, kStepElems = 16, kChunks = 1, kGroups = 1;
  static constexpr int kAT = 2;
  static constexpr bool kHasMin = false, kNoScale = true;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&)[kGroups], float (&)[kGroups]) {
    const uint2 v = *reinterpret_cast<const uint2*>(b + 8 * t);
    const uint32_t w[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      const uint32_t hi = pack_bf16(f.x, f.y);
      a[0][0][i] = hi;
      a[0][1][i] = pack_bf16(f.x - bf_lo(hi), f.y - bf_hi(hi));
    }
  }
};

// ---- the kernel --------------------------------------------------------------------------------
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x = t1 + t2 (+ t3): each term the bf16 rounding of what the previous ones left (exact remainders).
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t (&p)[kTerms]) {
#pragma unroll
  for (int k = 0; k < kTerms; k++) {
    p[k] = pack_bf16(x0, x1);
    if (k + 1 < kTerms) { x0 -= bf_lo(p[k]); x1 -= bf_hi(p[k]); }
  }
}

struct Args {
  const uint8_t* w;
  int64_t rows, cols, row_bytes, blocks;  // blocks per row (decoder blocks)
  const float* x;
  float* y;
  int batch;
  bool accumulate;
};

template <class D, int kMT>
__global__ void __launch_bounds__(kThreads) matvec_mma_kernel(const Args a) {
  constexpr int kSteps = D::kBlockElems / D::kStepElems;
  constexpr int kGC = D::kChunks / D::kGroups;  // chunks per group
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int nt = (a.batch + 7) >> 3;
  const int64_t row0 = (int64_t)blockIdx.x * 16 * kMT;  // the CTA's row tile (CTA-uniform)
  if (row0 >= a.rows) return;
  const int64_t kb0 = a.blocks * warp / kWarps, kb1 = a.blocks * (warp + 1) / kWarps;

  const uint8_t* wrow[kMT][2];
#pragma unroll
  for (int m = 0; m < kMT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t r = row0 + 16 * m + 8 * h + g;
      wrow[m][h] = a.w + (r < a.rows ? r : a.rows - 1) * a.row_bytes;
    }

  float acc[kMT][8][4];
#pragma unroll
  for (int m = 0; m < kMT; m++)
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[m][n][i] = 0.f;

  // L2 prefetch of this warp's rows DS_MMA_PF bytes ahead of the block being decoded (row l % (16 kMT)
  // for lane l; with 16 rows two lanes share a row, 64 bytes apart).
  const uint8_t* pf_row = a.w + (row0 + lane % (16 * kMT) < a.rows ? row0 + lane % (16 * kMT) : a.rows - 1) * a.row_bytes;
  const int pf_off = 64 * (lane / (16 * kMT));
  for (int64_t kb = kb0; kb < kb1; kb++) {
    if constexpr (DS_MMA_PF > 0) {
      constexpr int kLanesPerRow = 2 / kMT;
#pragma unroll
      for (int o = 0; o < D::kBlockBytes; o += 64 * kLanesPerRow) {
        const int64_t off = kb * D::kBlockBytes + DS_MMA_PF + pf_off + o;
        if (off < kb1 * D::kBlockBytes) asm volatile("prefetch.global.L2 [%0];" ::"l"(pf_row + off));
      }
    }
#pragma unroll 1
    for (int s = 0; s < kSteps; s++) {
      uint32_t af[kMT][D::kChunks][D::kAT][4];
      float sc[kMT][2][D::kGroups], mn[kMT][2][D::kGroups];
#pragma unroll
      for (int m = 0; m < kMT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          uint32_t q[D::kChunks][D::kAT][2];
          D::decode(wrow[m][h] + kb * D::kBlockBytes, s, t, q, sc[m][h], mn[m][h]);
#pragma unroll
          for (int c = 0; c < D::kChunks; c++)
#pragma unroll
            for (int at = 0; at < D::kAT; at++) {
              af[m][c][at][h] = q[c][at][0];      // a0a1 (row g) / a2a3 (row g + 8): elements 4t, 4t+1
              af[m][c][at][2 + h] = q[c][at][1];  // a4a5 / a6a7: elements 4t+2, 4t+3
            }
        }
      const int64_t e0 = kb * D::kBlockElems + s * D::kStepElems + 4 * t;
#pragma unroll
      for (int n = 0; n < 8; n++) {
        if (n >= nt) break;
        const int b = 8 * n + g;
        uint32_t bt[D::kChunks][kTerms][2];
        float gs[D::kGroups];
        const float* xp = a.x + (int64_t)(b < a.batch ? b : 0) * a.cols + e0;
#pragma unroll
        for (int c = 0; c < D::kChunks; c++) {
          float4 v = __ldg(reinterpret_cast<const float4*>(xp + 16 * c));
          if (b >= a.batch) v = make_float4(0.f, 0.f, 0.f, 0.f);
          uint32_t p0[kTerms], p1[kTerms];
          split_pair(v.x, v.y, p0);
          split_pair(v.z, v.w, p1);
#pragma unroll
          for (int k = 0; k < kTerms; k++) { bt[c][k][0] = p0[k]; bt[c][k][1] = p1[k]; }
          if constexpr (D::kHasMin) {
            const float part = (v.x + v.y) + (v.z + v.w);
            if (c % kGC == 0) gs[c / kGC] = part;
            else gs[c / kGC] += part;
          }
        }
        // Group sums of x for the two batch columns this lane's accumulators hold (2t, 2t+1).
        float s0[D::kGroups], s1[D::kGroups];
        if constexpr (D::kHasMin) {
#pragma unroll
          for (int j = 0; j < D::kGroups; j++) {
            float v = gs[j];
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            s0[j] = __shfl_sync(0xffffffffu, v, 8 * t);
            s1[j] = __shfl_sync(0xffffffffu, v, 8 * t + 4);
          }
        }
#pragma unroll
        for (int m = 0; m < kMT; m++) {
          if constexpr (D::kNoScale) {
#pragma unroll
            for (int at = 0; at < D::kAT; at++)
#pragma unroll
              for (int k = 0; k < kTerms; k++) {
                if (at > 0 && k == kTerms - 1) continue;  // w_lo · x_last: below the kept precision
                mma_bf16(acc[m][n], af[m][0][at], bt[0][k][0], bt[0][k][1]);
              }
          } else {
#pragma unroll
            for (int j = 0; j < D::kGroups; j++) {
              float c4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
              for (int cc = 0; cc < kGC; cc++)
#pragma unroll
                for (int k = 0; k < kTerms; k++)
                  mma_bf16(c4, af[m][j * kGC + cc][0], bt[j * kGC + cc][k][0], bt[j * kGC + cc][k][1]);
              acc[m][n][0] = fmaf(sc[m][0][j], c4[0], acc[m][n][0]);
              acc[m][n][1] = fmaf(sc[m][0][j], c4[1], acc[m][n][1]);
              acc[m][n][2] = fmaf(sc[m][1][j], c4[2], acc[m][n][2]);
              acc[m][n][3] = fmaf(sc[m][1][j], c4[3], acc[m][n][3]);
              if constexpr (D::kHasMin) {
                acc[m][n][0] = fmaf(-mn[m][0][j], s0[j], acc[m][n][0]);
                acc[m][n][1] = fmaf(-mn[m][0][j], s1[j], acc[m][n][1]);
                acc[m][n][2] = fmaf(-mn[m][1][j], s0[j], acc[m][n][2]);
                acc[m][n][3] = fmaf(-mn[m][1][j], s1[j], acc[m][n][3]);
              }
            }
          }
        }
      }
    }
  }

  // Column slices of the warps meet in shared memory; warp 0 adds them in warp order (deterministic).
  __shared__ float red[kWarps - 1][kMT * 8 * 4][32];
  if (warp > 0) {
#pragma unroll
    for (int m = 0; m < kMT; m++)
#pragma unroll
      for (int n = 0; n < 8; n++) {
        if (n >= nt) break;
#pragma unroll
        for (int i = 0; i < 4; i++) red[warp - 1][(m * 8 + n) * 4 + i][lane] = acc[m][n][i];
      }
  }
  __syncthreads();
  if (warp != 0) return;
  // Accumulator i of n-tile n: row g + 8 (i / 2), batch column 8n + 2t + i % 2.
#pragma unroll
  for (int m = 0; m < kMT; m++)
#pragma unroll
    for (int n = 0; n < 8; n++) {
      if (n >= nt) break;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float v = acc[m][n][i];
        for (int w = 0; w < kWarps - 1; w++) v += red[w][(m * 8 + n) * 4 + i][lane];
        const int64_t r = row0 + 16 * m + 8 * (i / 2) + g;
        const int b = 8 * n + 2 * t + (i % 2);
        if (r >= a.rows || b >= a.batch) continue;
        float* yp = a.y + (int64_t)b * a.rows + r;
        *yp = a.accumulate ? *yp + v : v;
      }
    }
}

template <class D, int kMT>
Status launch_mt(Args a, cudaStream_t stream) {
  // One CTA per row tile of 16·kMT rows; its warps split the columns (see the file comment).
  const int64_t grid_x = (a.rows + 16 * kMT - 1) / (16 * kMT);
  matvec_mma_kernel<D, kMT><<<(unsigned)grid_x, kThreads, 0, stream>>>(a);
  CUDA_TRY_LAUNCH("matvec_batched (mma)", stream);
  return {};
}

// Checks and launch; cols must be a multiple of D::kBlockElems, x 16-byte aligned.
template <class D>
Status launch(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
              cudaStream_t stream, bool accumulate) {
  if (rows <= 0 || cols <= 0) return cu_err("cuda matvec_batched: empty matrix [{}, {}]", rows, cols);
  if (cols % D::kBlockElems != 0)
    return cu_err("cuda matvec_batched: {} weights need cols to be a multiple of {}, got {}", type_cstr(type),
                  D::kBlockElems, cols);
  if ((uintptr_t)w % 16 != 0) return cu_err("cuda matvec_batched: weights {} are not 16-byte aligned", w);
  if ((uintptr_t)x % 16 != 0)
    return cu_err("cuda matvec_batched: x {} is not 16-byte aligned", (const void*)x);
  if ((uintptr_t)y % 4 != 0) return cu_err("cuda matvec_batched: y {} is not 4-byte aligned", (const void*)y);
  Args a{static_cast<const uint8_t*>(w), rows, cols, cols / D::kBlockElems * D::kBlockBytes,
         cols / D::kBlockElems, x, y, batch, accumulate};
  if (batch <= DS_MMA_MT1_MAX_BATCH) return launch_mt<D, 1>(a, stream);
  return launch_mt<D, 2>(a, stream);
}

}  // namespace mma
}  // namespace ds::cuda
