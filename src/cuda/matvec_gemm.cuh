// GEMM-structured tensor-core batched matvec Y[B, rows] = X[B, cols] · Wᵀ (matvec.h) for Q4_K, Q5_K,
// Q6_K and Q8_0 weights and 2 <= B <= 64. Include from matvec_batched.cu only (it owns the workspace).
//
// Same exactness scheme as matvec_mma.cuh (whose decoders it reuses): integer codes as bf16 (exact) times x
// split into kT bf16 terms (3 terms: 24 significant bits, as fp32; 2 terms: 16 bits), fp32 accumulation
// per group (sub-block) of codes, then the group's scale (and min · Σx) applied in fp32.
//
// Two kernels per call:
//  1. split_x: x [B][cols] fp32 -> bf16 terms, once per call, stored in the mma B-fragment order
//     xf[kstep q][n-tile][lane][term][2 words] (lane (g, t) of n-tile n holds elements 16q + 4t .. +3 of batch
//     column 8n + g: the k-permutation of matvec_mma.cuh), plus Σx per 32-element group (for mins).
//     Columns B .. 8·NT-1 are zeros.
//  2. gemm: a CTA owns kRows = 256 consecutive rows (8 warps x two 16-row m-tiles, or 16 warps x one; see
//     warp_rows_for) and a contiguous range of stages (256 elements of every row; 128 for Q8_0) of the K
//     dimension. The quantized weight tile of a stage (256 rows x one stage, 16-byte chunks of each row's
//     span) goes to shared memory with cp.async, 2-3 stages deep, read from device memory exactly once per
//     call. Each warp decodes its rows' codes from shared memory once per step and reuses them for every
//     n-tile and term; the B fragments come pre-split from xf (global, through L1: every warp of a CTA
//     reads the same ones; the next step's are prefetched into L1 one line per thread).
//     Every warp owns whole rows and all batch columns: no reduction inside the CTA.
//     When the row tiles alone do not fill the GPU, K is split over `splits` CTAs per row tile: each writes
//     its partial sums to a workspace, the last to arrive (atomic counter) adds the partials in split order
//     (deterministic: the same bits on every run whatever the arrival order) and writes y.
// Decoders with kF16 (DecQ6KQuarterH, DecQ8_0H: the default for Q6_K / Q8_0, see matvec_batched_fold.h) give
// fp16 codes and take x as 2 fp16 terms of x·s (col_scale_kernel: s a power of two per batch column), 22
// bits in 2 mmas instead of 3 bf16 terms (measured on the H200: Q6_K max error 1.25e-7, as fast as 2 bf16
// terms); y = acc / s.
// The workspace (x fragments, group sums, partial sums, counters) is static device memory shared by all
// calls: calls must not run concurrently on different streams (the engine runs one step at a time).
//
// Measured (H200, bench/cuda/NOTES.md 2026-12-02 batched section): 9B shapes at B = 64 reach 40-62
// "effective" TFLOP/s (2·B·rows·cols per second) with 3 terms and 51-88 with 2 terms, i.e. 120-190 TFLOP/s
// of bf16 mma.sync work, a fraction of the tensor cores' rate: the kernel is latency-bound (2-4 warps per
// scheduler, x fragments through L1), not compute- or memory-bound. See the notes for what to try next.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

#include "cuda/matvec_mma.cuh"

namespace ds::cuda {
namespace gemm {

// kRows = 256 rows per CTA either as 8 warps x two 16-row m-tiles (MT = 2: each x fragment feeds 2 m-tiles)
// or 16 warps x one m-tile (MT = 1: half the registers per thread, twice the warps to hide latency).
constexpr int kRows = 256;
template <int MT>
constexpr int threads_for() { return 32 * kRows / (16 * MT); }
constexpr int64_t kMaxCols = 32768;
constexpr int64_t kXfWords = kMaxCols / 16 * 8 * 32 * 3 * 2;  // per kstep: 8 n-tiles x 32 lanes x 3 terms x 2 words
constexpr int64_t kXsumFloats = kMaxCols / 32 * 64;
constexpr int64_t kPartFloats = (int64_t)64 * 131072;  // splits x padded rows x 64 columns
constexpr int kMaxTiles = 2048;

__device__ __align__(16) uint32_t g_xf[kXfWords];
__device__ __align__(16) float g_xsum[kXsumFloats];
__device__ __align__(16) float g_part[kPartFloats];
__device__ unsigned g_count[kMaxTiles];
__device__ float g_inv[64];    // per batch column: 1 / s (fp16 x terms, see col_scale_kernel)
__device__ float g_scale[64];  // s

// ---- fp16 x terms (decoders with kF16; the Q4_K fold kernel) -----------------------------------------
// Per batch column: s = 2^(14 - E) with max|x| < 2^E, so x·s fits fp16 (< 2^14) and its two fp16 terms
// hi = fp16(x·s), lo = fp16(x·s − hi) carry 22 bits; y = acc / s at the end (exact: a power of two).
__global__ void __launch_bounds__(256) col_scale_kernel(const float* __restrict__ x, int64_t cols, float* scale,
                                                        float* inv) {
  const int b = blockIdx.x;
  float m = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += 256) m = fmaxf(m, fabsf(x[(int64_t)b * cols + i]));
#pragma unroll
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float red[8];
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; i++) m = fmaxf(m, red[i]);
    int e = 0;
    if (m > 0.f && m <= 3.0e38f) frexpf(m, &e);  // m < 2^e
    e = max(-100, min(e, 120));
    scale[b] = ldexpf(1.f, 14 - e);
    inv[b] = ldexpf(1.f, e - 14);
  }
}
// The scale of batch column b from each thread's partial max|x| m, inside a 256-thread block (one CTA per column):
// every thread gets s; thread 0 writes scale[b] and inv[b]. Call from all threads of the block. (wg::prep_reg_kernel
// folds its maximum from registers and calls this too: the same scale.)
__device__ __forceinline__ float col_scale_from_max(float m, int b, float* scale, float* inv) {
  __shared__ float red[8];
  __shared__ float sc_sh;
#pragma unroll
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < 8; i++) m = fmaxf(m, red[i]);
    int e = 0;
    if (m > 0.f && m <= 3.0e38f) frexpf(m, &e);  // m < 2^e
    e = max(-100, min(e, 120));
    sc_sh = ldexpf(1.f, 14 - e);
    scale[b] = sc_sh;
    inv[b] = ldexpf(1.f, e - 14);
  }
  __syncthreads();
  return sc_sh;
}
// col_scale_kernel's scale for batch column b inside a 256-thread block (one CTA per column).
__device__ __forceinline__ float col_scale_block(const float* __restrict__ xb, int64_t cols, int b, float* scale,
                                                 float* inv) {
  float m = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += 256) m = fmaxf(m, fabsf(xb[i]));
  return col_scale_from_max(m, b, scale, inv);
}
// Whether the per-call preparation of x runs as one launch (the column scale fused into the split: fold and
// wgmma kernels, the fp16 gemm decoders), the default, or as the separate launches (DS_MVB_PREP=0).
inline bool prep_fused() {
  static const bool v = [] {
    const char* e = std::getenv("DS_MVB_PREP");
    return !(e && e[0] == '0');
  }();
  return v;
}
__device__ __forceinline__ uint32_t h2u(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 u2h(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }
// (hi, lo) fp16 terms of the pair (v, w): hi = (fp16(v), fp16(w)), lo = the fp16 remainders.
__device__ __forceinline__ void split2(float v, float w, uint32_t& hi, uint32_t& lo) {
  const __half hv = __float2half_rn(v), hw = __float2half_rn(w);
  const __half lv = __float2half_rn(v - __half2float(hv)), lw = __float2half_rn(w - __half2float(hw));
  hi = h2u(__halves2half2(hv, hw));
  lo = h2u(__halves2half2(lv, lw));
}
// Four bytes -> two fp16 pairs holding (byte - off) exactly: PRMT builds fp16 1024 + byte (0x64XX), HSUB2
// removes 1024 + off.
template <int kOff>
__device__ __forceinline__ void bytes_to_f16(uint32_t b, uint32_t& p0, uint32_t& p1) {
  const __half2 base = __float2half2_rn(1024.f + kOff);
  p0 = h2u(__hsub2(u2h(__byte_perm(b, 0x64646464u, 0x4140u)), base));
  p1 = h2u(__hsub2(u2h(__byte_perm(b, 0x64646464u, 0x4342u)), base));
}
__device__ __forceinline__ void mma_h(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Whether decoder D gives fp16 codes (x then comes as 2 fp16 terms of the scaled x).
template <class D>
constexpr bool is_f16() {
  if constexpr (requires { D::kF16; }) return D::kF16;
  else return false;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// ---- 1. split x -----------------------------------------------------------------------------------
// One thread per (batch column b < 8·NT, 32-element group): two ksteps x four lanes' float4s.
// kH: 2 fp16 terms of x·scale[b] (kT = 2) instead of kT bf16 terms of x.
template <int kT, bool kH = false>
__global__ void __launch_bounds__(256) split_x_kernel(const float* __restrict__ x, int64_t cols, int batch, int nt,
                                                      uint32_t* __restrict__ xf, float* __restrict__ xsum,
                                                      const float* __restrict__ scale = nullptr) {
  const int64_t groups = cols / 32;
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= groups * 8 * nt) return;
  const int b = (int)(i / groups);
  const int64_t grp = i % groups;
  const int n = b >> 3, g = b & 7;
  float sum = 0.f;
#pragma unroll
  for (int qq = 0; qq < 2; qq++) {
    const int64_t q = 2 * grp + qq;
#pragma unroll
    for (int t = 0; t < 4; t++) {
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (b < batch) v = *reinterpret_cast<const float4*>(x + (int64_t)b * cols + 16 * q + 4 * t);
      sum += (v.x + v.y) + (v.z + v.w);
      uint32_t p0[kT], p1[kT];
      float x0 = v.x, x1 = v.y, x2 = v.z, x3 = v.w;
      if constexpr (kH) {
        static_assert(kT == 2, "fp16 x: 2 terms");
        const float sc = b < batch ? scale[b] : 0.f;
        split2(x0 * sc, x1 * sc, p0[0], p0[1]);
        split2(x2 * sc, x3 * sc, p1[0], p1[1]);
      } else {
#pragma unroll
        for (int k = 0; k < kT; k++) {
          p0[k] = mma::pack_bf16(x0, x1);
          p1[k] = mma::pack_bf16(x2, x3);
          x0 -= mma::bf_lo(p0[k]); x1 -= mma::bf_hi(p0[k]);
          x2 -= mma::bf_lo(p1[k]); x3 -= mma::bf_hi(p1[k]);
        }
      }
      uint32_t* dst = xf + ((q * nt + n) * 32 + 4 * g + t) * (2 * kT);
      if constexpr (kT == 2) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(p0[0], p1[0], p0[1], p1[1]);
      } else {
#pragma unroll
        for (int k = 0; k < kT; k++) *reinterpret_cast<uint2*>(dst + 2 * k) = make_uint2(p0[k], p1[k]);
      }
    }
  }
  xsum[grp * 8 * nt + b] = sum;
}

// split_x_kernel<2, true> with the column scale in the same launch: one CTA per batch column b < 8·nt (the
// same bits as col_scale_kernel + split_x_kernel<2, true>).
__global__ void __launch_bounds__(256) prep_h_kernel(const float* __restrict__ x, int64_t cols, int batch, int nt,
                                                     uint32_t* __restrict__ xf, float* __restrict__ xsum,
                                                     float* __restrict__ scale, float* __restrict__ inv) {
  const int b = blockIdx.x;
  const int64_t groups = cols / 32;
  const float sc = b < batch ? col_scale_block(x + (int64_t)b * cols, cols, b, scale, inv) : 0.f;
  const int n = b >> 3, g = b & 7;
  for (int64_t grp = threadIdx.x; grp < groups; grp += 256) {
    float sum = 0.f;
#pragma unroll
    for (int qq = 0; qq < 2; qq++) {
      const int64_t q = 2 * grp + qq;
#pragma unroll
      for (int t = 0; t < 4; t++) {
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (b < batch) v = *reinterpret_cast<const float4*>(x + (int64_t)b * cols + 16 * q + 4 * t);
        sum += (v.x + v.y) + (v.z + v.w);
        uint32_t p0[2], p1[2];
        split2(v.x * sc, v.y * sc, p0[0], p0[1]);
        split2(v.z * sc, v.w * sc, p1[0], p1[1]);
        uint32_t* dst = xf + ((q * nt + n) * 32 + 4 * g + t) * 4;
        *reinterpret_cast<uint4*>(dst) = make_uint4(p0[0], p1[0], p0[1], p1[1]);
      }
    }
    xsum[grp * 8 * nt + b] = sum;
  }
}

// ---- 2. the GEMM kernel ----------------------------------------------------------------------------
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }
// Q6_K in quarter blocks: step s = half s % 2 of matvec_mma.cuh's DecQ6K step s / 2 (its chunks s%2, 2+s%2,
// 4+s%2, 6+s%2), so a warp holds the codes of 4 chunks instead of 8 (register pressure at 8 n-tiles).
struct DecQ6KQuarter {
  static constexpr int kBlockElems = 256, kBlockBytes = 210, kStepElems = 64, kChunks = 4, kGroups = 4;
  static constexpr int kAT = 1;
  static constexpr bool kHasMin = false, kNoScale = false;
  __device__ static int chunk_off(int s, int c) { return 128 * (s >> 1) + 16 * (2 * c + (s & 1)); }
  __device__ static void decode(const uint8_t* b, int s, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
    const int n = s >> 1, h = s & 1;
    const uint32_t wa = qt::ld32<2>(b + 64 * n + 16 * h + 4 * t);
    const uint32_t wb = qt::ld32<2>(b + 64 * n + 32 + 16 * h + 4 * t);
    const uint32_t wh = qt::ld32<2>(b + 128 + 32 * n + 16 * h + 4 * t);
    mma::bytes_to_bf16<32>((wa & 0x0F0F0F0Fu) | ((wh & 0x03030303u) << 4), a[0][0][0], a[0][0][1]);
    mma::bytes_to_bf16<32>((wb & 0x0F0F0F0Fu) | (((wh >> 2) & 0x03030303u) << 4), a[1][0][0], a[1][0][1]);
    mma::bytes_to_bf16<32>(((wa >> 4) & 0x0F0F0F0Fu) | (((wh >> 4) & 0x03030303u) << 4), a[2][0][0], a[2][0][1]);
    mma::bytes_to_bf16<32>(((wb >> 4) & 0x0F0F0F0Fu) | (((wh >> 6) & 0x03030303u) << 4), a[3][0][0], a[3][0][1]);
    const float d = qt::f16f(qt::ld16(b + 208));
#pragma unroll
    for (int c = 0; c < 4; c++) sc[c] = d * (float)(int8_t)b[192 + 8 * n + 2 * c + h];
  }
};

// The same with fp16 codes (kF16: x as 2 fp16 terms of the column-scaled x, 22 bits; 2 mmas per chunk).
struct DecQ6KQuarterH : DecQ6KQuarter {
  static constexpr bool kF16 = true;
  __device__ static void decode(const uint8_t* b, int s, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
    const int n = s >> 1, h = s & 1;
    const uint32_t wa = qt::ld32<2>(b + 64 * n + 16 * h + 4 * t);
    const uint32_t wb = qt::ld32<2>(b + 64 * n + 32 + 16 * h + 4 * t);
    const uint32_t wh = qt::ld32<2>(b + 128 + 32 * n + 16 * h + 4 * t);
    bytes_to_f16<32>((wa & 0x0F0F0F0Fu) | ((wh & 0x03030303u) << 4), a[0][0][0], a[0][0][1]);
    bytes_to_f16<32>((wb & 0x0F0F0F0Fu) | (((wh >> 2) & 0x03030303u) << 4), a[1][0][0], a[1][0][1]);
    bytes_to_f16<32>(((wa >> 4) & 0x0F0F0F0Fu) | (((wh >> 4) & 0x03030303u) << 4), a[2][0][0], a[2][0][1]);
    bytes_to_f16<32>(((wb >> 4) & 0x0F0F0F0Fu) | (((wh >> 6) & 0x03030303u) << 4), a[3][0][0], a[3][0][1]);
    const float d = qt::f16f(qt::ld16(b + 208));
#pragma unroll
    for (int c = 0; c < 4; c++) sc[c] = d * (float)(int8_t)b[192 + 8 * n + 2 * c + h];
  }
};
struct DecQ8_0H : mma::DecQ8_0 {
  static constexpr bool kF16 = true;
  __device__ static void decode(const uint8_t* b, int, int t, uint32_t (&a)[kChunks][kAT][2],
                                float (&sc)[kGroups], float (&)[kGroups]) {
#pragma unroll
    for (int c = 0; c < 2; c++) bytes_to_f16<128>(qt::ld32<2>(b + 2 + 16 * c + 4 * t) ^ 0x80808080u, a[c][0][0], a[c][0][1]);
    sc[0] = qt::f16f(qt::ld16(b));
  }
};

// Element offset of chunk c of step s inside a block (16 consecutive elements per chunk).
template <class D>
__device__ __forceinline__ int chunk_off(int s, int c) {
  if constexpr (requires { D::chunk_off(s, c); }) return D::chunk_off(s, c);
  else return s * D::kStepElems + 16 * c;
}

template <class D>
struct Layout {
  static constexpr int kStageElems = D::kBlockElems >= 256 ? D::kBlockElems : 128;
  static constexpr int kBlocks = kStageElems / D::kBlockElems;  // decoder blocks per stage
  static constexpr int kSB = kBlocks * D::kBlockBytes;          // bytes of one row's stage
  // Shared-memory row pitch: room for the span plus its misalignment (< 16), an odd number of 16-byte
  // chunks so the 8 rows a warp reads (lanes g) fall in different banks.
  static constexpr int kP0 = (kSB + 15 + 15) / 16 * 16;
  static constexpr int kPitch = (kP0 / 16) % 2 ? kP0 : kP0 + 16;
  static constexpr int kStageBytes = kRows * kPitch;
  // 3 stages where they fit (2 in flight while one is decoded); the rest of the 256 KB of L1/shared memory
  // stays L1, which holds the x fragments of the current and next step (up to 2 x 24 KB).
  static constexpr int kStages = 3 * kStageBytes <= 200 * 1024 ? 3 : 2;
  static constexpr int kSmem = kStages * kStageBytes;
  static_assert(kStages >= 2, "stage too large");
};

struct Args {
  const uint8_t* w;
  int64_t rows, cols, row_bytes;
  float* y;
  int batch, splits;
  bool accumulate;
  const uint32_t* xf;
  const float* xsum;
  float* part;
  unsigned* count;
  const float* inv;  // fp16 decoders: 1 / column scale
};

template <class D, int NT, int kT, int kMT>
__global__ void __launch_bounds__(threads_for<kMT>(), 1) gemm_kernel(const Args a) {
  constexpr int kThreads = threads_for<kMT>();
  using L = Layout<D>;
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kSteps = D::kBlockElems / D::kStepElems;
  constexpr int kGC = D::kChunks / D::kGroups;  // chunks (16 elements) per group
  constexpr int NB = 8 * NT;
  static_assert(D::kAT == 1 && !D::kNoScale, "gemm kernel: block-quantized types only");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (int64_t)tile * kRows;
  const int64_t nst = a.cols / L::kStageElems;
  const int64_t st0 = nst * split / a.splits, st1 = nst * (split + 1) / a.splits;
  const int n_my = (int)(st1 - st0);

  // Copies stage st0 + i of the CTA's rows into ring slot i % kStages: chunk c of row r is 16 bytes of the
  // 16-byte-aligned span that covers the row's stage bytes.
  auto issue = [&](int i) {
    uint8_t* dst = smem + (i % L::kStages) * L::kStageBytes;
    constexpr int kCh = L::kPitch / 16;
    for (int idx = threadIdx.x; idx < kRows * kCh; idx += kThreads) {
      const int r = idx / kCh, c = idx % kCh;
      const int64_t row = row0 + r < a.rows ? row0 + r : a.rows - 1;
      const uintptr_t src = (uintptr_t)(a.w + row * a.row_bytes + (st0 + i) * L::kSB);
      const uintptr_t base = src & ~(uintptr_t)15;
      if (c < (int)((src - base + L::kSB + 15) >> 4)) cp_async16(dst + r * L::kPitch + 16 * c, (const void*)(base + 16 * c));
    }
  };

  float acc[kMT][NT][4];
#pragma unroll
  for (int m = 0; m < kMT; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[m][n][i] = 0.f;

  // x fragments of step s at element eb of a block (with the block's first element e_blk): L1 prefetch of
  // its kChunks x NT x 32 lanes x kT x 8 bytes, one 128-byte line per thread, so the step's loads hit L1
  // (every warp of the CTA reads the same fragments; from L2 each would wait ~0.5 us).
  constexpr int kLinesPerChunk = NT * 32 * 2 * kT * 4 / 128;
  const int64_t e_end = st1 * L::kStageElems;
  auto prefetch_step = [&](int64_t e_blk, int s) {
    if (e_blk >= e_end || (int)threadIdx.x >= D::kChunks * kLinesPerChunk) return;
    const int c = threadIdx.x / kLinesPerChunk, l = threadIdx.x % kLinesPerChunk;
    const int64_t q = (e_blk + chunk_off<D>(s, c)) / 16;
    prefetch_l1(a.xf + q * NT * 32 * 2 * kT + 32 * l);
  };
  prefetch_step(st0 * L::kStageElems, 0);

#pragma unroll
  for (int i = 0; i < L::kStages - 1; i++) {
    if (i < n_my) issue(i);
    cp_commit();
  }
  // The warp's 4 rows per m-tile pair: r = warp·32 + 16m + 8h + g (local to the tile).
  int64_t rowq[kMT][2];
#pragma unroll
  for (int m = 0; m < kMT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t r = row0 + warp * 16 * kMT + 16 * m + 8 * h + g;
      rowq[m][h] = r < a.rows ? r : a.rows - 1;
    }

  for (int i = 0; i < n_my; i++) {
    cp_wait<L::kStages - 2>();
    __syncthreads();  // stage i has landed for every thread; every warp is done with stage i - 1
    if (i + L::kStages - 1 < n_my) issue(i + L::kStages - 1);
    cp_commit();
    const uint8_t* slot = smem + (i % L::kStages) * L::kStageBytes;
    const uint8_t* blk0[kMT][2];
#pragma unroll
    for (int m = 0; m < kMT; m++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uintptr_t src = (uintptr_t)(a.w + rowq[m][h] * a.row_bytes + (st0 + i) * L::kSB);
        blk0[m][h] = slot + (warp * 16 * kMT + 16 * m + 8 * h + g) * L::kPitch + (src & 15);
      }
    const int64_t e_stage = (st0 + i) * L::kStageElems;
#pragma unroll 1
    for (int blk = 0; blk < L::kBlocks; blk++) {
#pragma unroll 1
      for (int s = 0; s < kSteps; s++) {
        uint32_t af[kMT][D::kChunks][4];
        float sc[kMT][2][D::kGroups], mn[kMT][2][D::kGroups];
#pragma unroll
        for (int m = 0; m < kMT; m++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            uint32_t q[D::kChunks][1][2];
            D::decode(blk0[m][h] + blk * D::kBlockBytes, s, t, q, sc[m][h], mn[m][h]);
#pragma unroll
            for (int c = 0; c < D::kChunks; c++) {
              af[m][c][h] = q[c][0][0];
              af[m][c][2 + h] = q[c][0][1];
            }
          }
        const int64_t eb = e_stage + blk * D::kBlockElems;  // the block's first element
        if (s + 1 < kSteps) prefetch_step(eb, s + 1);
        else prefetch_step(eb + D::kBlockElems, 0);
#pragma unroll
        for (int n = 0; n < NT; n++) {
#pragma unroll
          for (int j = 0; j < D::kGroups; j++) {
            float c4[kMT][4];
#pragma unroll
            for (int m = 0; m < kMT; m++)
#pragma unroll
              for (int r = 0; r < 4; r++) c4[m][r] = 0.f;
#pragma unroll
            for (int cc = 0; cc < kGC; cc++) {
              const int c = j * kGC + cc;
              const int64_t q = (eb + chunk_off<D>(s, c)) / 16;
              const uint32_t* xp = a.xf + ((q * NT + n) * 32 + lane) * (2 * kT);
              uint32_t xb[kT][2];
              if constexpr (kT == 2) {
                const uint4 v = __ldg(reinterpret_cast<const uint4*>(xp));
                xb[0][0] = v.x; xb[0][1] = v.y; xb[1][0] = v.z; xb[1][1] = v.w;
              } else {
#pragma unroll
                for (int k = 0; k < kT; k++) {
                  const uint2 v = __ldg(reinterpret_cast<const uint2*>(xp + 2 * k));
                  xb[k][0] = v.x; xb[k][1] = v.y;
                }
              }
#pragma unroll
              for (int m = 0; m < kMT; m++)
#pragma unroll
                for (int k = 0; k < kT; k++) {
                  if constexpr (is_f16<D>()) mma_h(c4[m], af[m][c], xb[k][0], xb[k][1]);
                  else mma::mma_bf16(c4[m], af[m][c], xb[k][0], xb[k][1]);
                }
            }
            float2 xs = make_float2(0.f, 0.f);
            if constexpr (D::kHasMin)
              xs = __ldg(reinterpret_cast<const float2*>(a.xsum + (eb + chunk_off<D>(s, j * kGC)) / 32 * NB + 8 * n + 2 * t));
#pragma unroll
            for (int m = 0; m < kMT; m++) {
              acc[m][n][0] = fmaf(sc[m][0][j], c4[m][0], acc[m][n][0]);
              acc[m][n][1] = fmaf(sc[m][0][j], c4[m][1], acc[m][n][1]);
              acc[m][n][2] = fmaf(sc[m][1][j], c4[m][2], acc[m][n][2]);
              acc[m][n][3] = fmaf(sc[m][1][j], c4[m][3], acc[m][n][3]);
              if constexpr (D::kHasMin) {
                acc[m][n][0] = fmaf(-mn[m][0][j], xs.x, acc[m][n][0]);
                acc[m][n][1] = fmaf(-mn[m][0][j], xs.y, acc[m][n][1]);
                acc[m][n][2] = fmaf(-mn[m][1][j], xs.x, acc[m][n][2]);
                acc[m][n][3] = fmaf(-mn[m][1][j], xs.y, acc[m][n][3]);
              }
            }
          }
        }
      }
    }
  }
  cp_wait<0>();

  // Accumulator i of (m, n): local row warp·32 + 16m + 8(i/2) + g, batch column 8n + 2t + i%2.
  if (a.splits == 1) {
#pragma unroll
    for (int m = 0; m < kMT; m++)
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const int64_t r = row0 + warp * 16 * kMT + 16 * m + 8 * (i / 2) + g;
          const int b = 8 * n + 2 * t + (i % 2);
          if (r >= a.rows || b >= a.batch) continue;
          float* yp = a.y + (int64_t)b * a.rows + r;
          float v = acc[m][n][i];
          if constexpr (is_f16<D>()) v *= a.inv[b];
          *yp = a.accumulate ? *yp + v : v;
        }
    return;
  }
  float* part = a.part + ((int64_t)tile * a.splits + split) * NB * kRows;
#pragma unroll
  for (int m = 0; m < kMT; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++)
        part[(8 * n + 2 * t + (i % 2)) * kRows + warp * 16 * kMT + 16 * m + 8 * (i / 2) + g] = acc[m][n][i];
  __threadfence();
  __syncthreads();
  __shared__ int is_last;
  if (threadIdx.x == 0) is_last = atomicAdd(&a.count[tile], 1u) == (unsigned)(a.splits - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  const float* p0 = a.part + (int64_t)tile * a.splits * NB * kRows;
  for (int idx = threadIdx.x; idx < a.batch * kRows; idx += kThreads) {
    const int b = idx / kRows, rl = idx % kRows;
    const int64_t r = row0 + rl;
    if (r >= a.rows) continue;
    float v = 0.f;
    for (int sp = 0; sp < a.splits; sp++) v += __ldcg(p0 + ((int64_t)sp * NB + b) * kRows + rl);
    if constexpr (is_f16<D>()) v *= a.inv[b];
    float* yp = a.y + (int64_t)b * a.rows + r;
    *yp = a.accumulate ? *yp + v : v;
  }
  if (threadIdx.x == 0) a.count[tile] = 0;  // ready for the next call (stream order)
}

// ---- host side -------------------------------------------------------------------------------------
template <class D, int NT, int kT, int MT>
cudaError_t allow_smem() {
  static const cudaError_t e = cudaFuncSetAttribute(gemm_kernel<D, NT, kT, MT>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize, Layout<D>::kSmem);
  return e;
}

template <class D, int NT, int kT, int MT>
Status launch_nt(const Args& a, dim3 grid, cudaStream_t stream) {
  const cudaError_t e = allow_smem<D, NT, kT, MT>();
  if (e != cudaSuccess) return cu_err("cuda matvec_batched (gemm): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  gemm_kernel<D, NT, kT, MT><<<grid, threads_for<MT>(), Layout<D>::kSmem, stream>>>(a);
  CUDA_TRY_LAUNCH("matvec_batched (gemm)", stream);
  return {};
}

template <class D, int kT, int MT>
Status launch_terms(const Args& a, dim3 grid, int nt, cudaStream_t stream) {
  switch (nt) {
    case 1: return launch_nt<D, 1, kT, MT>(a, grid, stream);
    case 2: return launch_nt<D, 2, kT, MT>(a, grid, stream);
    case 3: return launch_nt<D, 3, kT, MT>(a, grid, stream);
    case 4: return launch_nt<D, 4, kT, MT>(a, grid, stream);
    case 5: return launch_nt<D, 5, kT, MT>(a, grid, stream);
    case 6: return launch_nt<D, 6, kT, MT>(a, grid, stream);
    case 7: return launch_nt<D, 7, kT, MT>(a, grid, stream);
    default: return launch_nt<D, 8, kT, MT>(a, grid, stream);
  }
}

// Warp shape (see kRows) for nt n-tiles: 16 warps x 16 rows up to 4 n-tiles (B <= 32), 8 warps x 32 rows
// above (measured on the H200, bench/cuda/NOTES.md: MT = 1 is 5-15% faster at B = 8 and 32, MT = 2 10-40%
// faster at B = 64, where MT = 1 spills under its 128-register cap). DS_MVB_MT = 1 or 2 forces one.
inline int warp_rows_for(int nt) {
  static const int forced = [] {
    const char* e = std::getenv("DS_MVB_MT");
    return e && (e[0] == '1' || e[0] == '2') && e[1] == 0 ? e[0] - '0' : 0;
  }();
  return forced ? forced : nt <= 4 ? 1 : 2;
}

// K splits per row tile: the split count whose CTAs fill their waves best (a few % off per extra split), each
// split at least 2 stages long, within the partial-sum workspace.
inline int choose_splits(int64_t tiles, int64_t n_stages, int nb, int sms) {
  if (tiles >= sms) return 1;
  int best = 1;
  double best_eff = 0;
  for (int s = 1; s <= 16; s++) {
    if (s > 1 && (n_stages / s < 2 || tiles * s * nb * kRows > kPartFloats)) break;
    const int64_t ctas = tiles * s, waves = (ctas + sms - 1) / sms;
    const double eff = (double)ctas / (double)(waves * sms) * (1.0 - 0.02 * (s - 1));  // a cost per extra split
    if (eff > best_eff + 1e-9) best_eff = eff, best = s;
  }
  return best;
}

// Whether this path takes the call (the caller falls back to matvec_mma.cuh otherwise).
template <class D>
bool supports(int64_t rows, int64_t cols, int batch) {
  return batch >= 2 && batch <= 64 && cols % Layout<D>::kStageElems == 0 && cols <= kMaxCols &&
         (rows + kRows - 1) / kRows <= kMaxTiles && rows < ((int64_t)1 << 31);
}

// terms: 2 or 3 bf16 terms per activation. Checks (alignment, sizes) are done by the caller.
template <class D>
Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch, cudaStream_t stream,
              bool accumulate, int terms) {
  const int nt = (batch + 7) / 8;
  uint32_t* xf;
  float *xsum, *part;
  unsigned* count;
  CUDA_TRY(cudaGetSymbolAddress((void**)&xf, g_xf));
  CUDA_TRY(cudaGetSymbolAddress((void**)&xsum, g_xsum));
  CUDA_TRY(cudaGetSymbolAddress((void**)&part, g_part));
  CUDA_TRY(cudaGetSymbolAddress((void**)&count, g_count));
  const int64_t n_split_threads = cols / 32 * 8 * nt;
  float *inv = nullptr, *scale = nullptr;
  if constexpr (is_f16<D>()) {
    terms = 2;
    CUDA_TRY(cudaGetSymbolAddress((void**)&inv, g_inv));
    CUDA_TRY(cudaGetSymbolAddress((void**)&scale, g_scale));
    if (prep_fused()) {
      prep_h_kernel<<<8 * nt, 256, 0, stream>>>(x, cols, batch, nt, xf, xsum, scale, inv);
    } else {
      col_scale_kernel<<<batch, 256, 0, stream>>>(x, cols, scale, inv);
      CUDA_TRY_LAUNCH("matvec_batched (column scale)", stream);
      split_x_kernel<2, true><<<(unsigned)((n_split_threads + 255) / 256), 256, 0, stream>>>(x, cols, batch, nt, xf,
                                                                                             xsum, scale);
    }
  } else if (terms == 2)
    split_x_kernel<2><<<(unsigned)((n_split_threads + 255) / 256), 256, 0, stream>>>(x, cols, batch, nt, xf, xsum);
  else
    split_x_kernel<3><<<(unsigned)((n_split_threads + 255) / 256), 256, 0, stream>>>(x, cols, batch, nt, xf, xsum);
  CUDA_TRY_LAUNCH("matvec_batched (split x)", stream);
  const int64_t tiles = (rows + kRows - 1) / kRows;
  const int splits = choose_splits(tiles, cols / Layout<D>::kStageElems, 8 * nt, sm_count());
  const Args a{static_cast<const uint8_t*>(w), rows, cols, cols / D::kBlockElems * D::kBlockBytes, y, batch,
               splits, accumulate, xf, xsum, part, count, inv};
  const dim3 grid((unsigned)tiles, (unsigned)splits);
  if constexpr (is_f16<D>())
    return warp_rows_for(nt) == 1 ? launch_terms<D, 2, 1>(a, grid, nt, stream) : launch_terms<D, 2, 2>(a, grid, nt, stream);
  else {
    if (warp_rows_for(nt) == 1)
      return terms == 2 ? launch_terms<D, 2, 1>(a, grid, nt, stream) : launch_terms<D, 3, 1>(a, grid, nt, stream);
    return terms == 2 ? launch_terms<D, 2, 2>(a, grid, nt, stream) : launch_terms<D, 3, 2>(a, grid, nt, stream);
  }
}

}  // namespace gemm
}  // namespace ds::cuda
