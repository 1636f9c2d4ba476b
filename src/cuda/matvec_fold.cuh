// Batched matvec Y[B, rows] = X[B, cols] · Wᵀ for Q4_K weights, 2 <= B <= 64, with the sub-block scale
// folded into the tensor-core operand ("fold" kernel; matvec_gemm.cuh's kernel is the general one).
// Include from matvec_batched.cu only (it owns the workspace).
//
// Exactness scheme. Q4_K: w = d·sc_j·q − dmin·m_j in sub-block j (q 4-bit, sc_j and m_j 6-bit), so per
// 256-element block  Σ w x = d · Σ (sc_j q) x − dmin · Σ_j m_j Σ_{i in j} x.
//  * A operand = sc_j · q as fp16: an integer <= 15·63 = 945 < 2048, exact. Made from the code bits in two
//    instructions per pair: LOP3 gives the fp16 1024 + q (or 1024 + 16q for a high nibble, 0x6400 | bits),
//    one fused HFMA2 (1024 + q)·sc − 1024·sc rounds once, to the exact integer.
//  * B operand = x split into two fp16 terms after a per-batch-column power-of-two scale s (max|x·s| < 2^14):
//    hi = fp16(x·s), lo = fp16(x·s − hi); 22 significant bits (error <= ~2^-23 |x| per element; elements
//    below 2^-24 / s are absolute-error bounded far under the fp32 sum's rounding).
//  * Each product (<= 10 bits x 11 bits) is exact in the mma's fp32 accumulator, which runs over the whole
//    block (16 k-steps x 2 terms); d is applied once per block in fp32 (8x fewer scale FMAs than per
//    sub-block) and y = acc / s at the end (exact: a power of two).
//  * Mins: one more mma per block and term: A = m_j (exact in fp16) in 16 k-slots, B = the sums of x·s over
//    16-element halves of sub-blocks, / 16 (so they stay under 2^14), split hi + lo; applied as
//    −16·dmin·cm in fp32.
// Versus matvec_gemm.cuh (3 bf16 terms, fp32 scale and min per 32-element sub-block): 34 instead of 48 mmas
// per block and row pair x n-tile, 8 instead of 64 fp32 FMAs, and each warp's 2 x NT accumulators are
// independent mma chains through the block (the old kernel's ran 6 dependent mmas then an FMA).
//
// Measured (H200, bench/cuda/NOTES.md "2026-12-02 batched4"): B = 64, 9B shapes, mode 2 (default) / mode 0 vs
// matvec_gemm.cuh 3 / 2 bf16 terms: ffn_gate_up [24576 x 4096] 185 / 169 vs 278 / 204 us, ffn_down
// [4096 x 12288] 106 / 99 vs 158 / 114, output [248320 x 4096] 1306 / 1138 vs 2342 / 1561 (54-115 TFLOP/s
// effective). Max error vs float64 (of sum|w x|): mode 0 4.0e-7, mode 1 2.4e-7, mode 2 9.7e-8 (the GEMM
// kernel, 3 terms: 1.3e-7): the tensor cores' fp32 accumulation loses about an ulp of the running sum per
// mma, so the error grows with the chain length and size of the sums (mode 0: 32 mmas per chain).
// 9B Q4_K_M cuda-bench at B = 64: 2,463 tok/s (mode 2) / 2,552 (mode 0) vs 2,022 with the GEMM kernel;
// 2,597 with Q6_K also on fp16 x terms (matvec_gemm.cuh DecQ6KQuarterH).
//
// Mapping: a CTA owns 256 rows (8 warps x 32 rows: two m-tiles) and a contiguous range of blocks (split K
// as in matvec_gemm.cuh, deterministic). A step = half a block (128 elements, 8 k-steps): lane (g, t) reads
// 16 bytes of its rows' qs (LDS.128 at qs + 64s + 16t: 32 codes of segment 2s + t/2, sub-blocks
// 4s + 2(t/2) and +1); k-step kk = 2i + h takes nibble h of the lane's word i: bytes 0, 2 in k-slots
// 2t, 2t+1 and bytes 1, 3 in 2t+8, 2t+9. split_x writes x in exactly that order (one uint4 per lane per
// k-step and n-tile: hi and lo terms), so the B fragments are 512-byte coalesced loads (through L1; every
// warp of the CTA reads the same ones, prefetched one step ahead).
#pragma once
#include <cuda_fp16.h>

#include "cuda/matvec_gemm.cuh"

namespace ds::cuda {
namespace fold {

#ifndef DS_FOLD_NTH
#define DS_FOLD_NTH 4  // up to this many n-tiles: one accumulator group; above: two
#endif
constexpr int kRows = 256, kThreads = 256;
constexpr int kBlockBytes = 144;
// Shared-memory row pitch: 192 = 64 mod 128 so the two rows of one LDS.128 phase (8 lanes: rows g, g+1,
// 64 bytes each) fall in different banks.
constexpr int kPitch = 192;
constexpr int kStageBytes = kRows * kPitch;
template <int NT>
constexpr int stages_for() { return NT >= 6 ? 2 : 3; }  // 2 stages at large B: L1 keeps room for x
constexpr int64_t kMaxCols = 32768;
constexpr int64_t kXfVec = kMaxCols / 256 * 2 * 8 * 8 * 32;  // uint4: block x step x n-tile x k-step x lane
constexpr int64_t kXmVec = kMaxCols / 256 * 8 * 32;          // uint4: block x n-tile x lane

__device__ __align__(16) uint4 g_xf[kXfVec];
__device__ __align__(16) uint4 g_xm[kXmVec];
using gemm::h2u;
using gemm::split2;
using gemm::u2h;

// ---- 1. per-column scale: gemm::col_scale_kernel (s = 2^(14 - E) with max|x| < 2^E) ---------------------

// ---- 2. split x into the B-fragment order -----------------------------------------------------------
// One item per (n-tile, block, lane (g, t)): batch column b = 8n + g (scale sc; 0 for columns >= batch), the
// lane's 64 elements of the block. kFrags = false: only the block sums xm (matvec_wgmma.cuh stages x in its
// own layout).
template <bool kFrags>
__device__ __forceinline__ void split_item(const float* __restrict__ x, int64_t cols, int batch, int nt, float sc,
                                           int n, int64_t blk, int lane, uint4* __restrict__ xf,
                                           uint4* __restrict__ xm) {
  const int g = lane >> 2, t = lane & 3;
  const int b = 8 * n + g;
  float S[2][2];
#pragma unroll
  for (int s = 0; s < 2; s++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t e0 = 256 * blk + 64 * (2 * s + (t >> 1)) + 32 * h + 16 * (t & 1);
      float v[16];
#pragma unroll
      for (int q = 0; q < 4; q++) {
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (b < batch) f = *reinterpret_cast<const float4*>(x + (int64_t)b * cols + e0 + 4 * q);
        v[4 * q] = f.x * sc; v[4 * q + 1] = f.y * sc; v[4 * q + 2] = f.z * sc; v[4 * q + 3] = f.w * sc;
      }
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 16; i++) sum += v[i];
      S[s][h] = sum;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        uint4 o;
        split2(v[4 * i], v[4 * i + 2], o.x, o.z);
        split2(v[4 * i + 1], v[4 * i + 3], o.y, o.w);
        if (kFrags) xf[(((blk * 2 + s) * nt + n) * 8 + 2 * i + h) * 32 + lane] = o;
      }
    }
  uint4 o;
  split2(S[0][0] * 0.0625f, S[0][1] * 0.0625f, o.x, o.z);
  split2(S[1][0] * 0.0625f, S[1][1] * 0.0625f, o.y, o.w);
  xm[(blk * nt + n) * 32 + lane] = o;
}
// One thread per item.
template <bool kFrags = true>
__global__ void __launch_bounds__(256) split_kernel(const float* __restrict__ x, int64_t cols, int batch, int nt,
                                                    const float* __restrict__ scale, uint4* __restrict__ xf,
                                                    uint4* __restrict__ xm) {
  const int64_t nblk = cols / 256;
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= nblk * nt * 32) return;
  const int lane = (int)(tid & 31);
  const int64_t blk = (tid >> 5) % nblk;
  const int n = (int)((tid >> 5) / nblk);
  const int b = 8 * n + (lane >> 2);
  split_item<kFrags>(x, cols, batch, nt, b < batch ? scale[b] : 0.f, n, blk, lane, xf, xm);
}
// The column scale and the split in one launch: one CTA per batch column b < 8·nt (the same bits as
// gemm::col_scale_kernel + split_kernel; DS_MVB_PREP=0 keeps those two launches).
__global__ void __launch_bounds__(256) prep_kernel(const float* __restrict__ x, int64_t cols, int batch, int nt,
                                                   float* __restrict__ scale, float* __restrict__ inv,
                                                   uint4* __restrict__ xf, uint4* __restrict__ xm) {
  const int b = blockIdx.x;
  const int64_t nblk = cols / 256;
  const float sc = b < batch ? gemm::col_scale_block(x + (int64_t)b * cols, cols, b, scale, inv) : 0.f;
  for (int64_t it = threadIdx.x; it < nblk * 4; it += 256)
    split_item<true>(x, cols, batch, nt, sc, b >> 3, it >> 2, 4 * (b & 7) + (int)(it & 3), xf, xm);
}

// ---- 3. the GEMM kernel -----------------------------------------------------------------------------
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Bytes u, u+1 of v (each < 64) as an exact fp16 pair.
__device__ __forceinline__ __half2 byte_pair(uint32_t v, int u) {
  const uint32_t p = __byte_perm(v >> (8 * u), 0x64646464u, 0x4140u);  // fp16 1024 + byte
  return __hsub2(u2h(p), __float2half2_rn(1024.f));
}

struct Args {
  const uint8_t* w;
  int64_t rows, cols, row_bytes;
  float* y;
  int batch, splits;
  bool accumulate;
  const uint4* xf;
  const uint4* xm;
  const float* inv;
  float* part;
  unsigned* count;
};

// kMode: where the mma sums are scaled by d (the tensor cores' fp32 accumulation loses up to an ulp of the
// running sum per mma, so longer chains of larger sums cost accuracy): 0 once per block (one chain of 32
// mmas), 1 once per step (16), 2 once per step with the lo terms in their own chain (8 + 8).
template <int NT, int kMode>
__global__ void __launch_bounds__(kThreads, 1) fold_kernel(const Args a) {
  constexpr int kStages = stages_for<NT>();
  constexpr int NB = 8 * NT;
  // n-tiles per accumulator group (registers: 2·4·NTH floats per chain)
  constexpr int NTH = kMode == 2 ? (NT <= 3 ? NT : 3) : NT <= DS_FOLD_NTH ? NT : (NT + 1) / 2;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int u = 2 * (t >> 1);
  const int tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (int64_t)tile * kRows;
  const int64_t nblk = a.cols / 256;
  const int64_t bk0 = nblk * split / a.splits, bk1 = nblk * (split + 1) / a.splits;
  const int n_my = (int)(bk1 - bk0);

  auto issue = [&](int i) {
    uint8_t* dst = smem + (i % kStages) * kStageBytes;
    for (int idx = threadIdx.x; idx < kRows * 9; idx += kThreads) {
      const int r = idx / 9, c = idx % 9;
      const int64_t row = row0 + r < a.rows ? row0 + r : a.rows - 1;
      gemm::cp_async16(dst + r * kPitch + 16 * c, a.w + row * a.row_bytes + (bk0 + i) * kBlockBytes + 16 * c);
    }
  };
  // L1 prefetch of one step's x fragments (NT x 8 k-steps x 512 bytes) and, with step 0, the block's mins.
  auto prefetch_step = [&](int64_t blk, int s) {
    if (blk >= bk1) return;
    if ((int)threadIdx.x < 32 * NT)
      gemm::prefetch_l1(a.xf + ((blk * 2 + s) * NT * 8) * 32 + 8 * threadIdx.x);
    if (s == 0 && (int)threadIdx.x < 4 * NT) gemm::prefetch_l1(a.xm + blk * NT * 32 + 8 * threadIdx.x);
  };
  prefetch_step(bk0, 0);
#pragma unroll
  for (int i = 0; i < kStages - 1; i++) {
    if (i < n_my) issue(i);
    gemm::cp_commit();
  }

  float acc[2][NT][4];
#pragma unroll
  for (int m = 0; m < 2; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[m][n][i] = 0.f;
  // Local rows of (m-tile m, half h): warp·32 + 16m + 8h + g.
  const int rbase = warp * 32 + g;

#pragma unroll 1
  for (int i = 0; i < n_my; i++) {
    gemm::cp_wait<kStages - 2>();
    __syncthreads();  // block i has landed for every thread; every warp is done with block i - 1
    if (i + kStages - 1 < n_my) issue(i + kStages - 1);
    gemm::cp_commit();
    const uint8_t* slot = smem + (i % kStages) * kStageBytes;
    const int64_t blk = bk0 + i;
    // d and the mins' A fragment of the 4 rows (read once per block)
    float dd[2][2], dm[2][2];
    uint32_t amin[2][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uint4 hd = *reinterpret_cast<const uint4*>(slot + (rbase + 16 * m + 8 * h) * kPitch);
        const __half2 dh = u2h(hd.x);
        dd[m][h] = __low2float(dh);
        dm[m][h] = -16.f * __high2float(dh);
        amin[m][h] = h2u(byte_pair(hd.z & 0x3F3F3F3Fu, u));
        amin[m][2 + h] = h2u(byte_pair(((hd.w >> 4) & 0x0F0F0F0Fu) | ((hd.z >> 2) & 0x30303030u), u));
      }
    // The n-tiles in NH groups of NTH (one group's block accumulators live at a time: registers).
#pragma unroll
    for (int n0 = 0; n0 < NT; n0 += NTH) {
      float c[2][NTH][4], cl[2][NTH][4];  // block (or step) sums: hi terms (and lo terms, kMode 2)
      auto zero = [&] {
#pragma unroll
        for (int m = 0; m < 2; m++)
#pragma unroll
          for (int n = 0; n < NTH; n++)
#pragma unroll
            for (int r = 0; r < 4; r++) c[m][n][r] = cl[m][n][r] = 0.f;
      };
      // acc += d·c (+ d·cl)
      auto apply_d = [&] {
#pragma unroll
        for (int nn = 0; nn < NTH; nn++) {
          if (n0 + nn >= NT) break;
#pragma unroll
          for (int m = 0; m < 2; m++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
              if constexpr (kMode == 2) acc[m][n0 + nn][r] = fmaf(dd[m][r >> 1], cl[m][nn][r], acc[m][n0 + nn][r]);
              acc[m][n0 + nn][r] = fmaf(dd[m][r >> 1], c[m][nn][r], acc[m][n0 + nn][r]);
            }
        }
      };
      zero();
#pragma unroll 1
      for (int s = 0; s < 2; s++) {
        if (kMode > 0 && s == 1) zero();
        if (n0 == 0) prefetch_step(s == 0 ? blk : blk + 1, s ^ 1);
        uint4 q[2][2];
        __half2 mul_lo[2][2], add_lo[2][2], mul_hi[2][2], add_hi[2][2];
#pragma unroll
        for (int m = 0; m < 2; m++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const uint8_t* rp = slot + (rbase + 16 * m + 8 * h) * kPitch;
            q[m][h] = *reinterpret_cast<const uint4*>(rp + 16 + 64 * s + 16 * t);
            const uint4 hd = *reinterpret_cast<const uint4*>(rp);
            // scales of sub-blocks 0..3: low 6 bits of bytes 4..7; 4..7: low nibble of bytes 12..15 | top
            // bits of bytes 4..7
            const uint32_t scs = s == 0 ? (hd.y & 0x3F3F3F3Fu) : ((hd.w & 0x0F0F0F0Fu) | ((hd.y >> 2) & 0x30303030u));
            const __half2 sp = byte_pair(scs, u);  // (sc of sub-block 4s + u, of 4s + u + 1)
            mul_lo[m][h] = __low2half2(sp);
            add_lo[m][h] = __hmul2(mul_lo[m][h], __float2half2_rn(-1024.f));
            mul_hi[m][h] = __hmul2(__high2half2(sp), __float2half2_rn(0.0625f));
            add_hi[m][h] = __hmul2(mul_hi[m][h], __float2half2_rn(-1024.f));
          }
        const uint4* xs = a.xf + ((blk * 2 + s) * NT * 8) * 32 + lane;
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
          const int wi = kk >> 1, hn = kk & 1;
          uint32_t af[2][4];
#pragma unroll
          for (int m = 0; m < 2; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
              const uint32_t w = wi == 0 ? q[m][h].x : wi == 1 ? q[m][h].y : wi == 2 ? q[m][h].z : q[m][h].w;
              const uint32_t mask = hn ? 0x00F000F0u : 0x000F000Fu;
              const __half2 mu = hn ? mul_hi[m][h] : mul_lo[m][h], ad = hn ? add_hi[m][h] : add_lo[m][h];
              af[m][h] = h2u(__hfma2(u2h((w & mask) | 0x64006400u), mu, ad));
              af[m][2 + h] = h2u(__hfma2(u2h(((w >> 8) & mask) | 0x64006400u), mu, ad));
            }
#pragma unroll
          for (int nn = 0; nn < NTH; nn++) {
            if (n0 + nn >= NT) break;
            const uint4 xv = __ldg(xs + ((n0 + nn) * 8 + kk) * 32);
#pragma unroll
            for (int m = 0; m < 2; m++) {
              mma_f16(c[m][nn], af[m], xv.x, xv.y);
              if constexpr (kMode == 2) mma_f16(cl[m][nn], af[m], xv.z, xv.w);
              else mma_f16(c[m][nn], af[m], xv.z, xv.w);
            }
          }
        }
        if (kMode > 0) apply_d();
      }
      if (kMode == 0) apply_d();
      // acc −= 16·dmin·(m · S/16)
#pragma unroll
      for (int nn = 0; nn < NTH; nn++) {
        if (n0 + nn >= NT) break;
        const uint4 xv = __ldg(a.xm + (blk * NT + n0 + nn) * 32 + lane);
#pragma unroll
        for (int m = 0; m < 2; m++) {
          float cm[4] = {0.f, 0.f, 0.f, 0.f};
          mma_f16(cm, amin[m], xv.x, xv.y);
          mma_f16(cm, amin[m], xv.z, xv.w);
#pragma unroll
          for (int r = 0; r < 4; r++) acc[m][n0 + nn][r] = fmaf(dm[m][r >> 1], cm[r], acc[m][n0 + nn][r]);
        }
      }
    }
  }
  gemm::cp_wait<0>();

  // Accumulator r of (m, n): local row warp·32 + 16m + 8(r/2) + g, batch column 8n + 2t + r%2.
  if (a.splits == 1) {
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
          const int64_t row = row0 + rbase + 16 * m + 8 * (r >> 1);
          const int b = 8 * n + 2 * t + (r & 1);
          if (row >= a.rows || b >= a.batch) continue;
          float* yp = a.y + (int64_t)b * a.rows + row;
          const float v = acc[m][n][r] * a.inv[b];
          *yp = a.accumulate ? *yp + v : v;
        }
    return;
  }
  float* part = a.part + ((int64_t)tile * a.splits + split) * NB * kRows;
#pragma unroll
  for (int m = 0; m < 2; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        part[(8 * n + 2 * t + (r & 1)) * kRows + rbase + 16 * m + 8 * (r >> 1)] = acc[m][n][r];
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
    const int64_t row = row0 + rl;
    if (row >= a.rows) continue;
    float v = 0.f;
    for (int sp = 0; sp < a.splits; sp++) v += __ldcg(p0 + ((int64_t)sp * NB + b) * kRows + rl);
    v *= a.inv[b];
    float* yp = a.y + (int64_t)b * a.rows + row;
    *yp = a.accumulate ? *yp + v : v;
  }
  if (threadIdx.x == 0) a.count[tile] = 0;  // ready for the next call (stream order)
}

// ---- host side --------------------------------------------------------------------------------------
template <int NT, int kMode>
Status launch_mode(const Args& a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = stages_for<NT>() * kStageBytes;
  static const cudaError_t e =
      cudaFuncSetAttribute(fold_kernel<NT, kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess) return cu_err("cuda matvec_batched (fold): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  fold_kernel<NT, kMode><<<grid, kThreads, kSmem, stream>>>(a);
  CUDA_TRY_LAUNCH("matvec_batched (fold)", stream);
  return {};
}
template <int NT>
Status launch_nt(const Args& a, dim3 grid, cudaStream_t stream, int mode) {
  return mode == 0 ? launch_mode<NT, 0>(a, grid, stream)
         : mode == 1 ? launch_mode<NT, 1>(a, grid, stream)
                     : launch_mode<NT, 2>(a, grid, stream);
}

inline bool supports(int64_t rows, int64_t cols, int batch) {
  return batch >= 2 && batch <= 64 && cols % 256 == 0 && cols <= kMaxCols &&
         (rows + kRows - 1) / kRows <= gemm::kMaxTiles && rows < ((int64_t)1 << 31);
}

// Q4_K weights (16-byte aligned, checked by the caller).
inline Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                     cudaStream_t stream, bool accumulate, int mode) {
  const int nt = (batch + 7) / 8;
  uint4 *xf, *xm;
  float *inv, *scale, *part;
  unsigned* count;
  CUDA_TRY(cudaGetSymbolAddress((void**)&xf, g_xf));
  CUDA_TRY(cudaGetSymbolAddress((void**)&xm, g_xm));
  CUDA_TRY(cudaGetSymbolAddress((void**)&inv, gemm::g_inv));
  CUDA_TRY(cudaGetSymbolAddress((void**)&scale, gemm::g_scale));
  CUDA_TRY(cudaGetSymbolAddress((void**)&part, gemm::g_part));
  CUDA_TRY(cudaGetSymbolAddress((void**)&count, gemm::g_count));
  if (gemm::prep_fused()) {
    prep_kernel<<<8 * nt, 256, 0, stream>>>(x, cols, batch, nt, scale, inv, xf, xm);
    CUDA_TRY_LAUNCH("matvec_batched (fold prep)", stream);
  } else {
    gemm::col_scale_kernel<<<batch, 256, 0, stream>>>(x, cols, scale, inv);
    CUDA_TRY_LAUNCH("matvec_batched (fold scale)", stream);
    const int64_t n_split = cols / 256 * nt * 32;
    split_kernel<true><<<(unsigned)((n_split + 255) / 256), 256, 0, stream>>>(x, cols, batch, nt, scale, xf, xm);
    CUDA_TRY_LAUNCH("matvec_batched (fold split)", stream);
  }
  const int64_t tiles = (rows + kRows - 1) / kRows;
  // The split count is chosen for 64 columns whatever the batch, so a column's result does not depend on B.
  const int splits = gemm::choose_splits(tiles, cols / 256, 64, sm_count());
  const Args a{static_cast<const uint8_t*>(w), rows, cols, cols / 256 * kBlockBytes, y, batch, splits, accumulate,
               xf, xm, inv, part, count};
  const dim3 grid((unsigned)tiles, (unsigned)splits);
  switch (nt) {
    case 1: return launch_nt<1>(a, grid, stream, mode);
    case 2: return launch_nt<2>(a, grid, stream, mode);
    case 3: return launch_nt<3>(a, grid, stream, mode);
    case 4: return launch_nt<4>(a, grid, stream, mode);
    case 5: return launch_nt<5>(a, grid, stream, mode);
    case 6: return launch_nt<6>(a, grid, stream, mode);
    case 7: return launch_nt<7>(a, grid, stream, mode);
    default: return launch_nt<8>(a, grid, stream, mode);
  }
}

}  // namespace fold
}  // namespace ds::cuda
