// Batched matvec Y[B, rows] = X[B, cols] · Wᵀ for Q4_K weights, 25 <= B <= 64, with Hopper's warpgroup MMA
// (wgmma, sm_90a only: the body is compiled for __CUDA_ARCH_FEAT_SM90_ALL; host code launches it only when the
// build has sm_90a SASS (DS_HAVE_SM90A) and the device is compute capability 9.0).
// Include from matvec_batched.cu only (after matvec_fold.cuh: it shares the fold kernel's exactness scheme).
//
// Same arithmetic as matvec_fold.cuh mode 2: A = sc_j · q as exact fp16 integers (LOP3 + one HFMA2 per code
// pair), x as two fp16 terms of the column-scaled x (22 bits), d applied in fp32 once per half block (128
// elements), mins by mma.sync per block. What changes is who multiplies:
//  * one wgmma m64n128k16 per warpgroup and k16 step: A (64 rows) from registers, B = [hi terms of the 64
//    batch columns | lo terms] (N = 128) from shared memory. The hi and lo sums land in different
//    accumulator columns of the same thread (columns j and 64 + j), so they are two independent chains of 8
//    per half block, like fold mode 2, at the cost of one accumulator set (64 registers) instead of two.
//  * x is staged per block in shared memory (64 KB: 2 half blocks x 8 k-steps x 128 columns x 16 k) by
//    cp.async together with the weight rows, in the no-swizzle core-matrix layout wgmma reads directly
//    (split_kernel writes it in that order, so staging is a plain copy).
// A CTA owns kWG x 64 rows (kWG warpgroups) and a contiguous range of blocks (split K, deterministic
// reduction in split order as in matvec_fold.cuh).
#pragma once
#include <cuda_fp16.h>

#include <cstdlib>
#include <type_traits>

#include "cuda/matvec.h"
#include "cuda/matvec_fold.cuh"
#include "cuda/model/rms_row.cuh"

namespace ds::cuda {
namespace wg {

constexpr int kBlockBytes = 144, kPitch = 192;
constexpr int kXStep = 8 * 4096;       // bytes of x per half block: 8 k-steps x (128 columns x 16 k x fp16)
constexpr int kXBlock = 2 * kXStep;    // 64 KB per block
constexpr int64_t kMaxCols = 32768;
constexpr int64_t kXwWords = kMaxCols / 256 * kXBlock / 4;
constexpr int64_t kPartRows = 131072;  // gemm::g_part holds splits x tiles x kRows rows of 64 columns

__device__ __align__(16) uint32_t g_xw[kXwWords];

template <int kWG>
constexpr int rows_for() { return 64 * kWG; }
template <int kWG>
constexpr int stage_bytes() { return kXBlock + rows_for<kWG>() * kPitch; }

// ---- x in wgmma's B layout ------------------------------------------------------------------------
// Per (block, half block s, k-step kk): 128 columns n (n < 64: hi term of batch column n, else lo term of
// column n − 64) x 16 k-slots, as core matrices of 8 columns x 8 k (128 contiguous bytes): byte offset
// (n / 8)·256 + (κ / 8)·128 + (n % 8)·16 + (κ % 8)·2. So the descriptor's K-direction core-matrix stride
// (LBO) is 128 and the N-direction stride (SBO) 256.
// K-slot κ of k-step kk = 2i + h holds the element that the A fragment of quad lane t = (κ % 8) / 2 puts
// there (matvec_fold.cuh: lane t reads 16 bytes of segment 2s + t/2 at byte 16(t & 1); word i, nibble h;
// bytes 0, 2 in slots 2t, 2t+1 and bytes 1, 3 in 2t+8, 2t+9):
//   element = 64(2s + t/2) + 32h + 16(t & 1) + 4i + κ/8 + 2(κ % 2).
// One thread per (block, s, kk, batch column b, t): the 4 slots 2t, 2t+1, 2t+8, 2t+9 of column b.
// kQ6: the Q6_K kernel's order (matvec_wgmma_q6k.cuh: lane t reads ql bytes 16t.. of half block s, so the
// segment is t/2 + 2h and the nibble h): element = 128s + 64h + 32(t/2) + 16(t & 1) + 4i + κ/8 + 2(κ % 2).
template <bool kQ6 = false>
__global__ void __launch_bounds__(256) split_kernel(const float* __restrict__ x, int64_t cols, int batch,
                                                    const float* __restrict__ scale, uint32_t* __restrict__ xw) {
  const int64_t nblk = cols / 256;
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= nblk * 4096) return;
  const int t = (int)(tid & 3), b = (int)((tid >> 2) & 63), kk = (int)((tid >> 8) & 7), s = (int)((tid >> 11) & 1);
  const int64_t blk = tid >> 12;
  const int i = kk >> 1, h = kk & 1;
  const int64_t e0 = kQ6 ? 256 * blk + 128 * s + 64 * h + 32 * (t >> 1) + 16 * (t & 1) + 4 * i
                         : 256 * blk + 64 * (2 * s + (t >> 1)) + 32 * h + 16 * (t & 1) + 4 * i;
  float v[4] = {0.f, 0.f, 0.f, 0.f};  // slots 2t, 2t+1, 2t+8, 2t+9: elements e0 + 0, 2, 1, 3
  if (b < batch) {
    const float4 f = *reinterpret_cast<const float4*>(x + (int64_t)b * cols + e0);
    const float sc = scale[b];
    v[0] = f.x * sc; v[1] = f.z * sc; v[2] = f.y * sc; v[3] = f.w * sc;
  }
  uint32_t hi0, lo0, hi1, lo1;
  gemm::split2(v[0], v[1], hi0, lo0);
  gemm::split2(v[2], v[3], hi1, lo1);
  uint32_t* base = xw + ((blk * 2 + s) * 8 + kk) * 1024;  // 4096 bytes per k-step
  const int in = (b % 8) * 4 + t;                          // word inside a core matrix: row b % 8, slots 2t, 2t+1
  base[(b / 8) * 64 + in] = hi0;
  base[(b / 8) * 64 + 32 + in] = hi1;
  base[(8 + b / 8) * 64 + in] = lo0;
  base[(8 + b / 8) * 64 + 32 + in] = lo1;
}

// ---- all of x's preparation in one launch -------------------------------------------------------------
// One CTA per batch column b < 64 (columns >= batch get zeros, as in split_kernel): the column's scale
// (gemm::col_scale_kernel's formula: max|x| is exact in any order), its entries of xw (split_kernel<kQ6>'s
// arithmetic) and, kSums, its block sums for the Q4_K mins (fold::split_kernel<false> with nt = 8, the same
// summation order), so the bits are those of the three separate launches it replaces (DS_MVB_PREP=0: those).
// kLay: the k order of xw: kLayQ4K / kLayQ6K (split_kernel<false> / <true>), or kLayQ6KSub (the Q6_K ring's sub-block
// form, matvec_wgmma_q6k_ring.cuh: k-step kk of half block s = sub-block 8s + kk, so one k16 step holds one sub-block:
// element = 128s + 16kk + 4t + κ/8 + 2(κ % 2); no split_kernel twin).
// kSums 2 (mvb15, wgb::block_kernel's kMin2): instead of fold's block sums, per (block, n-tile, lane 4g + t) one uint2:
// the sums of sub-blocks t and t + 4 (32 elements each, in index order) of column 8n + g, times 1/16, each as an fp16
// (hi, lo) pair, so the mins product is one m16n8k16 per n-tile (k-slots 2t, 2t+1 = hi, lo of sub-block t; 2t+8, 2t+9
// of t + 4) instead of two (16-element sums in 16 slots, hi and lo in separate products). |sum| / 16 < 2^15: fp16 range.
constexpr int kLayQ4K = 0, kLayQ6K = 1, kLayQ6KSub = 2;
// The first element of xw item it (t, kk, s, blk) of a column in layout kLay.
__device__ __forceinline__ int64_t prep_elem0(int kLay, int64_t it) {
  const int t = (int)(it & 3), kk = (int)((it >> 2) & 7), s = (int)((it >> 5) & 1);
  const int64_t blk = it >> 6;
  const int i = kk >> 1, h = kk & 1;
  return kLay == kLayQ6KSub ? 256 * blk + 128 * s + 16 * kk + 4 * t
         : kLay == kLayQ6K  ? 256 * blk + 128 * s + 64 * h + 32 * (t >> 1) + 16 * (t & 1) + 4 * i
                            : 256 * blk + 64 * (2 * s + (t >> 1)) + 32 * h + 16 * (t & 1) + 4 * i;
}
// xw item it of column b from its 4 elements f (scaled by sc, split into fp16 hi / lo; zeros where !live).
__device__ __forceinline__ void prep_put(uint32_t* __restrict__ xw, int b, int64_t it, const float4 f, float sc,
                                         bool live) {
  const int t = (int)(it & 3), kk = (int)((it >> 2) & 7), s = (int)((it >> 5) & 1);
  const int64_t blk = it >> 6;
  const int in = (b % 8) * 4;
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  if (live) {
    v[0] = f.x * sc; v[1] = f.z * sc; v[2] = f.y * sc; v[3] = f.w * sc;
  }
  uint32_t hi0, lo0, hi1, lo1;
  gemm::split2(v[0], v[1], hi0, lo0);
  gemm::split2(v[2], v[3], hi1, lo1);
  uint32_t* base = xw + ((blk * 2 + s) * 8 + kk) * 1024;
  base[(b / 8) * 64 + in + t] = hi0;
  base[(b / 8) * 64 + 32 + in + t] = hi1;
  base[(8 + b / 8) * 64 + in + t] = lo0;
  base[(8 + b / 8) * 64 + 32 + in + t] = lo1;
}
// ---- where the preparation reads x (fold17) ------------------------------------------------------------
// A source gives column b's elements e .. e + 3 (e % 4 == 0) as a float4 (load4), after begin(b) ran in every thread of
// the column's CTA (live columns only); store(b, e, f) sees each float4 of the column once, in the split.
// SrcPlain: x itself ([batch][cols]).
struct SrcPlain {
  static constexpr bool kPlain = true;
  const float* x;
  int64_t cols;
  __device__ __forceinline__ void begin(int) {}
  __device__ __forceinline__ float4 load4(int b, int64_t e) const {
    return __ldg(reinterpret_cast<const float4*>(x + (int64_t)b * cols + e));
  }
  __device__ __forceinline__ void store(int, int64_t, float4) const {}
};
// SrcNorm: x' = rms_norm(x) · w with mk::rms_norm's float4 kernel's arithmetic (its factor by mk::rms_row_scale from the
// row read in that kernel's order, then (x · factor) · w per element): the same bits as that kernel's output, which is
// also written to xn ([batch][cols]) when set. cols <= 4 · mk::kRmsV4 · 256, rows of x ldx floats.
struct SrcNorm {
  static constexpr bool kPlain = false;
  const float* x;
  int64_t ldx;
  const float* w;
  float eps;
  float* xn;
  int64_t cols;
  float f = 0.f;  // the row's factor (begin)
  __device__ __forceinline__ void begin(int b) {
    __shared__ float red[32];
    const float4* xr = reinterpret_cast<const float4*>(x + (int64_t)b * ldx);
    const int n4 = (int)(cols / 4);
    float4 v[mk::kRmsV4];
#pragma unroll
    for (int j = 0; j < mk::kRmsV4; j++) {
      const int i = threadIdx.x + j * 256;
      v[j] = i < n4 ? __ldg(xr + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    f = mk::rms_row_scale(v, cols, eps, red);
  }
  __device__ __forceinline__ float4 load4(int b, int64_t e) const {
    const float4 v = __ldg(reinterpret_cast<const float4*>(x + (int64_t)b * ldx + e));
    const float4 g = __ldg(reinterpret_cast<const float4*>(w + e));
    return make_float4(v.x * f * g.x, v.y * f * g.y, v.z * f * g.z, v.w * f * g.w);
  }
  __device__ __forceinline__ void store(int b, int64_t e, float4 v) const {
    if (xn) *reinterpret_cast<float4*>(xn + (int64_t)b * cols + e) = v;
  }
};
// The block sums of column b (kSums 1: fold's items (blk, t), lane 4g + t of n-tile n for b = 8n + g; kSums 2: the
// sub-block sums of kMin2, see above); the calling CTA's 256 threads.
template <int kSums, class Src>
__device__ __forceinline__ void prep_sums(const Src& src, int64_t cols, int batch, int b, float sc,
                                          uint4* __restrict__ xm) {
  const int64_t nblk = cols / 256;
  if constexpr (kSums == 1) {
    static_assert(Src::kPlain, "fold's block sums read x itself");
    for (int64_t it = threadIdx.x; it < nblk * 4; it += 256)
      fold::split_item<false>(src.x, cols, batch, 8, sc, b >> 3, it >> 2, 4 * (b & 7) + (int)(it & 3), nullptr, xm);
  }
  // kSums 2: per block, the mins' mma.sync B fragments (one uint2 per lane and 8-column n-tile). kSums 3 (s32,
  // DS_MVB_MINW): the same values in the layout of one k-step's hi terms (prep_put), so that the block kernel's mins are
  // one m64n64k16 wgmma per block with this 2 KB tile as B: column b's k-slots 2 sb, 2 sb + 1 = hi, lo of sub-block
  // sb's sum, sub-blocks 0-3 in the first 8-k core row of its 8-column group, 4-7 in the second (+32 uint32).
  if constexpr (kSums == 2 || kSums == 3)
    for (int64_t it = threadIdx.x; it < nblk * 4; it += 256) {
      const int t = (int)(it & 3);
      const int64_t blk = it >> 2;
      uint32_t o[2];
#pragma unroll
      for (int q = 0; q < 2; q++) {
        float sum = 0.f;
        if (b < batch) {
#pragma unroll
          for (int i = 0; i < 8; i++) {
            const float4 f = src.load4(b, 256 * blk + 128 * q + 32 * t + 4 * i);
            sum += f.x * sc;
            sum += f.y * sc;
            sum += f.z * sc;
            sum += f.w * sc;
          }
        }
        const float v = sum * 0.0625f;
        const __half hv = __float2half_rn(v);
        o[q] = gemm::h2u(__halves2half2(hv, __float2half_rn(v - __half2float(hv))));
      }
      if constexpr (kSums == 2) {
        reinterpret_cast<uint2*>(xm)[(blk * 8 + (b >> 3)) * 32 + 4 * (b & 7) + t] = make_uint2(o[0], o[1]);
      } else {
        uint32_t* w = reinterpret_cast<uint32_t*>(xm) + blk * 512 + (b >> 3) * 64 + (b & 7) * 4 + t;
        w[0] = o[0];
        w[32] = o[1];
      }
    }
}
template <int kLay, int kSums>
__global__ void __launch_bounds__(256) prep_kernel(const float* __restrict__ x, int64_t cols, int batch,
                                                   float* __restrict__ scale, float* __restrict__ inv,
                                                   uint32_t* __restrict__ xw, uint4* __restrict__ xm) {
  const int b = blockIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // the block and Q6_K ring kernels, launched as this launch's programmatic dependents, may start now:
  // they prefetch weights, then wait for this grid to complete before reading anything it writes
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
  const int64_t nblk = cols / 256;
  const float* xb = x + (int64_t)b * cols;
  const float sc = b < batch ? gemm::col_scale_block(xb, cols, b, scale, inv) : 0.f;
  // xw: items (blk, s, kk, t) of column b
  for (int64_t it = threadIdx.x; it < nblk * 64; it += 256)
    prep_put(xw, b, it, b < batch ? *reinterpret_cast<const float4*>(xb + prep_elem0(kLay, it)) : float4{}, sc,
             b < batch);
  prep_sums<kSums>(SrcPlain{x, cols}, cols, batch, b, sc, xm);
}
// prep_reg_kernel (mvb16, DS_MVB_PREP_REG): prep_kernel's outputs, the same bits, in fewer dependent trips to L2. The
// wgmma kernels wait for the prep (griddepcontrol.wait) after their prologue, so its latency is on every product's critical
// path (batched11: prep work added there showed 1:1 in the products' time). prep_kernel reads the column for its maximum
// with scalar loads in a loop (cols / 256 loads per thread, a few in flight at a time: ~cols / 1024 round trips, 4 at
// 4096 columns, 12 at 12288), then again for the split. Here each thread issues the float4 loads of its split items (up to
// kR) at once, keeps them in registers for the split after the column maximum (exact in any order: the same scale);
// items past kR (cols > 1024·kR) are read 4 per thread at a time, and again for the split. 72 registers (kSums 2): a
// prep CTA still fits beside a 2-warpgroup block kernel CTA (180 x 256) on one SM, so the PDL overlap stays. The block sums (kSums) read the column once
// more as in prep_kernel (L1 hits by then).
// fold17: the source (Src) may transform x on the way in (SrcNorm): kR 4 then (two loads per item; 74 registers with
// kSums 2, so that CTA no longer fits beside a 2-warpgroup block CTA).
constexpr int kPrepR = 8;
template <int kLay, int kSums, class Src = SrcPlain, int kR = kPrepR>
__global__ void __launch_bounds__(256) prep_reg_kernel(Src src, int64_t cols, int batch, float* __restrict__ scale,
                                                       float* __restrict__ inv, uint32_t* __restrict__ xw,
                                                       uint4* __restrict__ xm) {
  const int b = blockIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" :::);  // as prep_kernel
#endif
  const int64_t nblk = cols / 256, n_it = nblk * 64;
  const bool live = b < batch;  // uniform per CTA
  if (live) src.begin(b);
  auto load = [&](int64_t it) { return src.load4(b, prep_elem0(kLay, it)); };
  float4 v[kR];
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < kR; j++) {
    const int64_t it = threadIdx.x + 256 * j;
    v[j] = live && it < n_it ? load(it) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int j = 0; j < kR; j++)
    m = fmaxf(m, fmaxf(fmaxf(fabsf(v[j].x), fabsf(v[j].y)), fmaxf(fabsf(v[j].z), fabsf(v[j].w))));
  if (live)  // items past kR: 4 loads in flight at a time (read again for the split below)
    for (int64_t it0 = threadIdx.x + 256 * kR; it0 < n_it; it0 += 4 * 256) {
      float4 f[4];
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const int64_t it = it0 + 256 * k;
        f[k] = it < n_it ? load(it) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int k = 0; k < 4; k++)
        m = fmaxf(m, fmaxf(fmaxf(fabsf(f[k].x), fabsf(f[k].y)), fmaxf(fabsf(f[k].z), fabsf(f[k].w))));
    }
  const float sc = live ? gemm::col_scale_from_max(m, b, scale, inv) : 0.f;
  auto put = [&](int64_t it, const float4 f) {
    if (live) src.store(b, prep_elem0(kLay, it), f);
    prep_put(xw, b, it, f, sc, live);
  };
#pragma unroll
  for (int j = 0; j < kR; j++) {
    const int64_t it = threadIdx.x + 256 * j;
    if (it < n_it) put(it, v[j]);
  }
  for (int64_t it = threadIdx.x + 256 * kR; it < n_it; it += 256)
    put(it, live ? load(it) : make_float4(0.f, 0.f, 0.f, 0.f));
  prep_sums<kSums>(src, cols, batch, b, sc, xm);
}
// DS_MVB_PREP_REG=1 (default): the Q4_K wgmma kernels' x preparation by prep_reg_kernel (0: prep_kernel). Same bits
// either way (CudaMatvecBatched.PrepRegSameBits). On by default since session 13's final H200 call (main f0059f1, 9B
// step at B = 64, one run each: 7.865 vs 7.932 ms short, 8.473 vs 8.532 at 512+ positions; mvb16: 8.304 vs 8.356).
// The Q6_K launch sites still use prep_kernel.
// DS_MVB_MINW (s32; set_matvec_batched_mins_wgmma): 1 (the default) = the 2-warpgroup block kernels
// (wgb::block_kernel<2, false, true>) take the mins as one m64n64k16 wgmma per block on kSums 3's tile (issued with the
// block's first quarter, so it queues with the tensor work instead of blocking each warp on 8 mma.sync behind the last
// quarter's wgmmas: ncu17's "mins HMMA" region, 8-11% of the 2-warpgroup kernels' samples, math-pipe throttle); 0 = the
// mma.sync form. The same products, another summation order inside the tensor pipe: within float64 tolerance, not the
// same bits (Q4_K worst 2.26e-7 of sum|w x| vs 2.03e-7). 3-warpgroup kernels unchanged (no registers for 32 more
// accumulators under their 168-register cap; the <2> kernel: 180 -> 201 registers, no spill). H100 (session 32, 9B,
// 64 x 512 + tg128, five interleaved pairs): 9.385-9.411 ms a step vs 9.435-9.445 with 0 (-0.5%); Q4_K ops 4,490 vs
// 4,555 us in the breakdown. Not measured on an H200.
inline int& minw_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_MINW");
    return e && e[0] == '0' && !e[1] ? 0 : 1;
  }();
  return v;
}
inline bool minw_for(int n_wg) { return n_wg == 2 && minw_setting() == 1; }
constexpr bool kPrepRegDefault = true;
inline bool& prep_reg_setting() {
  static bool v = [] {
    const char* e = std::getenv("DS_MVB_PREP_REG");
    return e && (e[0] == '0' || e[0] == '1') && !e[1] ? e[0] == '1' : kPrepRegDefault;
  }();
  return v;
}
using gemm::prep_fused;

// ---- the kernel -------------------------------------------------------------------------------------
struct Args {
  const uint8_t* w;
  int64_t rows, cols, row_bytes;
  float* y;
  int batch, splits;
  bool accumulate;
  const uint32_t* xw;
  const uint4* xm;  // fold::split_kernel's block sums (mins), n-tiles of 8 columns x 8
  const float* inv;
  float* part;
  unsigned* count;
  uint32_t lbo, sbo;  // descriptor strides (128 and 256; swappable for the bench's layout check)
  int red = 1;        // store_acc's split reduction: 1 = reduce_splits (loads first), 0 = the serial loop, 2 = reduce_splits
                      // after one acq_rel fence by thread 0 instead of __threadfence (fence.sc) in every thread (red_mode)
};

constexpr int kRedDefault = 1;
// DS_MVB_RED=0: the split-K reduction of the wgmma kernels as the serial loop (one element per thread and
// iteration, its split loads and then inv / y loads one L2 round trip after another); default 1: reduce_splits; 2:
// reduce_splits, and the partial sums published by __syncthreads + one fence.acq_rel.gpu / atomicAdd / fence by thread
// 0 (release cumulative over the CTA's stores, as CUTLASS's semaphore) instead of __threadfence in every thread.
// (3, split-K clusters summed through distributed shared memory, measured no step gain in splitk11: removed in q6k13.)
inline int& red_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_RED");
    return e && e[0] >= '0' && e[0] <= '2' && !e[1] ? e[0] - '0' : kRedDefault;
  }();
  return v;
}
inline int red_mode() { return red_setting(); }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A wgmma shared-memory descriptor: its low word (the 14-bit start address field, shared address >> 4) and the leading /
// stride byte offsets above it. desc_lo / desc_from_lo apart so that a kernel can keep one low word per stage and add
// k-step offsets to it (wgb::mma_q's kFast form).
__device__ __forceinline__ uint32_t desc_lo(const void* p) {
  return ((uint32_t)__cvta_generic_to_shared(p) & 0x3FFFF) >> 4;
}
__device__ __forceinline__ uint64_t desc_from_lo(uint32_t lo, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)lo | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}
__device__ __forceinline__ uint64_t desc_for(const void* p, uint32_t lbo, uint32_t sbo) {
  return desc_from_lo(desc_lo(p), lbo, sbo);
}
__device__ __forceinline__ void wgmma_128(float (&c)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
// The same with the accumulators' input switched by acc_in (0: D = A·B, the first step of a sum).
__device__ __forceinline__ void wgmma_128(float (&c)[64], const uint32_t (&a)[4], uint64_t desc, int acc_in) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc_in));
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void keep(float (&c)[N]) {  // the accumulators stay in registers across wgmma
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(c[i])::"memory");
}
#endif

// The last CTA's sum of a tile's kS split partials (p0: [kS][64 columns][kRows], float4 aligned), the same
// arithmetic and order as store_acc's serial loop (v = 0, += split 0, 1, ..., *= inv[b], y (+)= v), so the same bits,
// but every load of a pass is issued before the first add: per thread kF float4 of each split (kS·kF·4 <= 64
// registers) with their inv and old y values, then the sums and stores. The serial loop made the tile's last CTA
// wait ~64 dependent L2 round trips after its main loop (the other CTAs of the tile, and their SMs, idle).
template <int kS, int kRows, int kThreads, class A>
__device__ __forceinline__ void reduce_splits(const A& a, int tile, int64_t row0, const float* p0) {
  constexpr int kF = kS <= 2 ? 8 : kS <= 4 ? 4 : 2;
  constexpr int kQ = kRows / 4;  // float4 per column
  const int n4 = a.batch * kQ;
  const float4* p4 = reinterpret_cast<const float4*>(p0);
#pragma unroll 1
  for (int base = threadIdx.x; base < n4; base += kThreads * kF) {
    float4 q[kS][kF];
    float sc[kF], yo[kF][4];
#pragma unroll
    for (int j = 0; j < kF; j++) {
      const int idx = base + j * kThreads;
      if (idx >= n4) continue;
#pragma unroll
      for (int sp = 0; sp < kS; sp++) q[sp][j] = __ldcg(p4 + sp * 16 * kRows + idx);
      const int b = idx / kQ, rl = 4 * (idx % kQ);
      sc[j] = a.inv[b];
      if (a.accumulate) {
        const float* yp = a.y + (int64_t)b * a.rows + row0 + rl;
#pragma unroll
        for (int c = 0; c < 4; c++) yo[j][c] = row0 + rl + c < a.rows ? yp[c] : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < kF; j++) {
      const int idx = base + j * kThreads;
      if (idx >= n4) continue;
      const int b = idx / kQ, rl = 4 * (idx % kQ);
      float* yp = a.y + (int64_t)b * a.rows + row0 + rl;
      float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int sp = 0; sp < kS; sp++) {
        v[0] += q[sp][j].x;
        v[1] += q[sp][j].y;
        v[2] += q[sp][j].z;
        v[3] += q[sp][j].w;
      }
#pragma unroll
      for (int c = 0; c < 4; c++) {
        if (row0 + rl + c >= a.rows) continue;
        const float w = v[c] * sc[j];
        yp[c] = a.accumulate ? yo[j][c] + w : w;
      }
    }
  }
  if (threadIdx.x == 0) a.count[tile] = 0;
}

// The end of every kernel of the wgmma family (wgmma_kernel, the Q4_K block kernel, the Q6_K kernel and its
// ring): acc[n][r] holds local row rbase + 8(r / 2), batch column 8n + 2t + r % 2 of the CTA's kRows rows. One split:
// y = acc · inv[b] (or y +=). Several: the CTA's partial sums go to a.part, and the last CTA of the tile to arrive
// (threadfence + counter) sums the splits in split order, stores, and resets the tile's counter for the next call
// (stream order). A: wg::Args or wg6::Args (the same fields). Called by every thread of the CTA (kThreads).
template <int kRows, int kThreads, class A>
__device__ __forceinline__ void store_acc(const A& a, const float (&acc)[8][4], int tile, int split, int64_t row0,
                                          int rbase, int t) {
  if (a.splits == 1) {
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const int64_t row = row0 + rbase + 8 * (r >> 1);
        const int b = 8 * n + 2 * t + (r & 1);
        if (row >= a.rows || b >= a.batch) continue;
        float* yp = a.y + (int64_t)b * a.rows + row;
        const float v = acc[n][r] * a.inv[b];
        *yp = a.accumulate ? *yp + v : v;
      }
    return;
  }
  float* part = a.part + ((int64_t)tile * a.splits + split) * 64 * kRows;
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int r = 0; r < 4; r++) part[(8 * n + 2 * t + (r & 1)) * kRows + rbase + 8 * (r >> 1)] = acc[n][r];
  __shared__ int is_last;
  if (a.red == 2) {  // CTA barrier, then one release at gpu scope (cumulative over the CTA's stores) and the count
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
      is_last = atomicAdd(&a.count[tile], 1u) == (unsigned)(a.splits - 1);
      asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
    }
    __syncthreads();
    if (!is_last) return;
  } else {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&a.count[tile], 1u) == (unsigned)(a.splits - 1);
    __syncthreads();
    if (!is_last) return;
    __threadfence();
  }
  const float* p0 = a.part + (int64_t)tile * a.splits * 64 * kRows;
  if (a.red) {
    switch (a.splits) {
      case 2: reduce_splits<2, kRows, kThreads>(a, tile, row0, p0); return;
      case 3: reduce_splits<3, kRows, kThreads>(a, tile, row0, p0); return;
      case 4: reduce_splits<4, kRows, kThreads>(a, tile, row0, p0); return;
      case 5: reduce_splits<5, kRows, kThreads>(a, tile, row0, p0); return;
      case 6: reduce_splits<6, kRows, kThreads>(a, tile, row0, p0); return;
      case 7: reduce_splits<7, kRows, kThreads>(a, tile, row0, p0); return;
      case 8: reduce_splits<8, kRows, kThreads>(a, tile, row0, p0); return;
      default: break;
    }
  }
  for (int idx = threadIdx.x; idx < a.batch * kRows; idx += kThreads) {
    const int b = idx / kRows, rl = idx % kRows;
    const int64_t row = row0 + rl;
    if (row >= a.rows) continue;
    float v = 0.f;
    for (int sp = 0; sp < a.splits; sp++) v += __ldcg(p0 + ((int64_t)sp * 64 + b) * kRows + rl);
    v *= a.inv[b];
    float* yp = a.y + (int64_t)b * a.rows + row;
    *yp = a.accumulate ? *yp + v : v;
  }
  if (threadIdx.x == 0) a.count[tile] = 0;
}


template <int kWG>
__global__ void __launch_bounds__(128 * kWG, 1) wgmma_kernel(const Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kRows = rows_for<kWG>(), kThreads = 128 * kWG, kStage = stage_bytes<kWG>();
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int u = 2 * (t >> 1);
  const int tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (int64_t)tile * kRows;
  const int64_t nblk = a.cols / 256;
  const int64_t bk0 = nblk * split / a.splits, bk1 = nblk * (split + 1) / a.splits;
  const int n_my = (int)(bk1 - bk0);
  // stage layout: [x: kXBlock bytes][weights: kRows x kPitch]
  auto issue = [&](int i) {
    uint8_t* dst = smem + (i & 1) * kStage;
    const uint8_t* xs = reinterpret_cast<const uint8_t*>(a.xw) + (bk0 + i) * kXBlock;
    for (int idx = threadIdx.x; idx < kXBlock / 16; idx += kThreads) gemm::cp_async16(dst + 16 * idx, xs + 16 * idx);
    uint8_t* wd = dst + kXBlock;
    for (int idx = threadIdx.x; idx < kRows * 9; idx += kThreads) {
      const int r = idx / 9, c = idx % 9;
      const int64_t row = row0 + r < a.rows ? row0 + r : a.rows - 1;
      gemm::cp_async16(wd + r * kPitch + 16 * c, a.w + row * a.row_bytes + (bk0 + i) * kBlockBytes + 16 * c);
    }
  };
  if (n_my > 0) issue(0);
  gemm::cp_commit();

  float acc[8][4];
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int r = 0; r < 4; r++) acc[n][r] = 0.f;
  // Local rows of this thread: rbase (+8): warpgroup warp / 4 owns rows 64·(warp / 4) .. +63, its warp
  // warp % 4 rows 16·(warp % 4) .. +15 (wgmma's A and D fragment layout per warp = mma.sync's m16 layout).
  const int rbase = 16 * warp + g;

#pragma unroll 1
  for (int i = 0; i < n_my; i++) {
    gemm::cp_wait<0>();
    fence_async_smem();  // this thread's cp.async writes -> visible to the async proxy (wgmma)
    __syncthreads();     // block i landed for everyone; everyone is done with block i − 1 (its wgmmas waited)
    if (i + 1 < n_my) issue(i + 1);
    gemm::cp_commit();
    const uint8_t* xslot = smem + (i & 1) * kStage;
    const uint8_t* wslot = xslot + kXBlock;
    const int64_t blk = bk0 + i;
    float dd[2], dm[2];
    uint32_t amin[4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint4 hd = *reinterpret_cast<const uint4*>(wslot + (rbase + 8 * h) * kPitch);
      const __half2 dh = gemm::u2h(hd.x);
      dd[h] = __low2float(dh);
      dm[h] = -16.f * __high2float(dh);
      amin[h] = gemm::h2u(fold::byte_pair(hd.z & 0x3F3F3F3Fu, u));
      amin[2 + h] = gemm::h2u(fold::byte_pair(((hd.w >> 4) & 0x0F0F0F0Fu) | ((hd.z >> 2) & 0x30303030u), u));
    }
#pragma unroll 1
    for (int s = 0; s < 2; s++) {
      uint32_t af[8][4];
      {
        uint4 q[2];
        __half2 mul_lo[2], add_lo[2], mul_hi[2], add_hi[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const uint8_t* rp = wslot + (rbase + 8 * h) * kPitch;
          q[h] = *reinterpret_cast<const uint4*>(rp + 16 + 64 * s + 16 * t);
          const uint4 hd = *reinterpret_cast<const uint4*>(rp);
          const uint32_t scs = s == 0 ? (hd.y & 0x3F3F3F3Fu) : ((hd.w & 0x0F0F0F0Fu) | ((hd.y >> 2) & 0x30303030u));
          const __half2 sp = fold::byte_pair(scs, u);
          mul_lo[h] = __low2half2(sp);
          add_lo[h] = __hmul2(mul_lo[h], __float2half2_rn(-1024.f));
          mul_hi[h] = __hmul2(__high2half2(sp), __float2half2_rn(0.0625f));
          add_hi[h] = __hmul2(mul_hi[h], __float2half2_rn(-1024.f));
        }
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
          const int wi = kk >> 1, hn = kk & 1;
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const uint32_t w = wi == 0 ? q[h].x : wi == 1 ? q[h].y : wi == 2 ? q[h].z : q[h].w;
            const uint32_t mask = hn ? 0x00F000F0u : 0x000F000Fu;
            const __half2 mu = hn ? mul_hi[h] : mul_lo[h], ad = hn ? add_hi[h] : add_lo[h];
            af[kk][h] = gemm::h2u(__hfma2(gemm::u2h((w & mask) | 0x64006400u), mu, ad));
            af[kk][2 + h] = gemm::h2u(__hfma2(gemm::u2h(((w >> 8) & mask) | 0x64006400u), mu, ad));
          }
        }
      }
      float c[64];
#pragma unroll
      for (int r = 0; r < 64; r++) c[r] = 0.f;
      keep(c);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < 8; kk++) wgmma_128(c, af[kk], desc_for(xslot + s * kXStep + kk * 4096, a.lbo, a.sbo));
      wg_commit();
      wg_wait0();
      keep(c);
      // columns n and 64 + n of the accumulators: the hi and lo sums of batch column n
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
          acc[n][r] = fmaf(dd[r >> 1], c[32 + 4 * n + r], acc[n][r]);
          acc[n][r] = fmaf(dd[r >> 1], c[4 * n + r], acc[n][r]);
        }
    }
    // acc −= 16·dmin·(m · S/16), as in matvec_fold.cuh
#pragma unroll
    for (int n = 0; n < 8; n++) {
      const uint4 xv = __ldg(a.xm + (blk * 8 + n) * 32 + lane);
      float cm[4] = {0.f, 0.f, 0.f, 0.f};
      fold::mma_f16(cm, amin, xv.x, xv.y);
      fold::mma_f16(cm, amin, xv.z, xv.w);
#pragma unroll
      for (int r = 0; r < 4; r++) acc[n][r] = fmaf(dm[r >> 1], cm[r], acc[n][r]);
    }
  }
  gemm::cp_wait<0>();

  store_acc<kRows, kThreads>(a, acc, tile, split, row0, rbase, t);
#endif
}

// ---- host side --------------------------------------------------------------------------------------
// Splits of K over CTAs so the grid fills whole waves of one CTA per SM (2-3% cost per extra split: each
// writes and re-reads a partial tile); chosen for 64 columns whatever the batch.
inline int choose_splits(int64_t tiles, int64_t nblk, int rows_per_tile, int sms) {
  int best = 1;
  double best_eff = 0;
  for (int s = 1; s <= 8; s++) {
    if (s > 1 && (nblk / s < 2 || tiles * s * rows_per_tile > kPartRows)) break;
    const int64_t ctas = tiles * s, waves = (ctas + sms - 1) / sms;
    const double eff = (double)ctas / (double)(waves * sms) * (1.0 - 0.03 * (s - 1));
    if (eff > best_eff + 1e-9) best_eff = eff, best = s;
  }
  return best;
}

// Smallest batch that takes the wgmma kernel: it always computes 64 columns (N = 128 with the lo terms), so
// below this the fold kernel's narrower tiles are cheaper. Measured (H200, 9B shapes): at B = 32 the padded
// wgmma kernel matches the fold kernel on the small products and beats it on ffn_gate_up and the output
// matrix; at B = 8 the fold kernel is faster everywhere.
constexpr int kMinBatch = 25;

inline bool supports(int64_t rows, int64_t cols, int batch) {
  return batch >= kMinBatch && batch <= 64 && cols % 256 == 0 && cols <= kMaxCols &&
         (rows + 127) / 128 <= gemm::kMaxTiles && rows < ((int64_t)1 << 31);
}

// Warpgroups per CTA for a shape: 3 (192 rows, more warps to hide latency, less x traffic per row) when the
// row tiles fill the GPU without splitting K; else 2 (more, smaller tiles: fewer K splits). With one CTA per
// SM the pipeline drains at every CTA boundary and the split reduction runs on the last CTA of a tile, so K
// splits cost more than their partial sums (H200, B = 64: ffn_gate_up 24576 x 4096 79 us with 3 (no split)
// vs 126 with 2 (2 splits); ffn_down 4096 x 12288 64 us with 2 (4 splits) vs 77 with 3 (6 splits)).
inline int choose_wg(int64_t rows, int64_t cols, int sms) {
  const int64_t tiles3 = (rows + 191) / 192;
  return choose_splits(tiles3, cols / 256, 192, sms) == 1 && tiles3 <= gemm::kMaxTiles ? 3 : 2;
}

template <int kWG>
Status launch_wg(const Args& a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = 2 * stage_bytes<kWG>();
  static const cudaError_t e =
      cudaFuncSetAttribute(wgmma_kernel<kWG>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess) return cu_err("cuda matvec_batched (wgmma): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  wgmma_kernel<kWG><<<grid, 128 * kWG, kSmem, stream>>>(a);
  CUDA_TRY_LAUNCH("matvec_batched (wgmma)", stream);
  return {};
}

// x's preparation (one launch, or DS_MVB_PREP=0: three) and the kernel arguments and grid for n_wg warpgroups per
// CTA (2 or 3); shared with the block kernel (matvec_wgmma_block.cuh).
inline Status prepare(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                      cudaStream_t stream, bool accumulate, int n_wg, bool swap_lbo_sbo, Args& out, dim3& grid,
                      bool min2 = false, const MatvecBatchedInput* in = nullptr) {
  uint32_t* xw;
  uint4 *xf, *xm;
  float *inv, *scale, *part;
  unsigned* count;
  CUDA_TRY(cudaGetSymbolAddress((void**)&xw, g_xw));
  CUDA_TRY(cudaGetSymbolAddress((void**)&xf, fold::g_xf));
  CUDA_TRY(cudaGetSymbolAddress((void**)&xm, fold::g_xm));
  CUDA_TRY(cudaGetSymbolAddress((void**)&inv, gemm::g_inv));
  CUDA_TRY(cudaGetSymbolAddress((void**)&scale, gemm::g_scale));
  CUDA_TRY(cudaGetSymbolAddress((void**)&part, gemm::g_part));
  CUDA_TRY(cudaGetSymbolAddress((void**)&count, gemm::g_count));
  const int64_t nblk = cols / 256;
  if (in && !min2) return cu_err("cuda matvec_batched: a normalised x needs the block form's kMin2 sums");
  // x's preparation with kSums block sums: prep_reg_kernel or prep_kernel (DS_MVB_PREP_REG), the same outputs
  auto prep = [&](auto sums) {
    constexpr int kS = decltype(sums)::value;
    if (prep_reg_setting())
      prep_reg_kernel<kLayQ4K, kS><<<64, 256, 0, stream>>>(SrcPlain{x, cols}, cols, batch, scale, inv, xw, xm);
    else prep_kernel<kLayQ4K, kS><<<64, 256, 0, stream>>>(x, cols, batch, scale, inv, xw, xm);
  };
  using Sums2 = std::integral_constant<int, 2>;
  using Sums3 = std::integral_constant<int, 3>;
  const bool minw = min2 && minw_for(n_wg);  // the block kernel's mins as a wgmma: the sums in kSums 3's layout
  if (in) {  // fold17: x' = rms_norm(x) made inside the preparation (matvec_batched_in)
    const SrcNorm src{in->x, in->ldx, in->norm_w, in->eps, in->xn, cols};
    if (minw)
      prep_reg_kernel<kLayQ4K, 3, SrcNorm, kPrepR / 2><<<64, 256, 0, stream>>>(src, cols, batch, scale, inv, xw, xm);
    else
      prep_reg_kernel<kLayQ4K, 2, SrcNorm, kPrepR / 2><<<64, 256, 0, stream>>>(src, cols, batch, scale, inv, xw, xm);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma prep of a normalised x)", stream);
  } else if (min2) {  // wgb::block_kernel's kMin2 sums (no unfused twin)
    if (minw) prep(Sums3{});
    else prep(Sums2{});
    CUDA_TRY_LAUNCH("matvec_batched (wgmma prep)", stream);
  } else if (prep_fused()) {
    prep(std::integral_constant<int, 1>{});
    CUDA_TRY_LAUNCH("matvec_batched (wgmma prep)", stream);
  } else {
    gemm::col_scale_kernel<<<batch, 256, 0, stream>>>(x, cols, scale, inv);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma scale)", stream);
    split_kernel<false><<<(unsigned)((nblk * 4096 + 255) / 256), 256, 0, stream>>>(x, cols, batch, scale, xw);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma split)", stream);
    // the block sums for the mins (fold::split_kernel without its fragments)
    const int64_t n_min = nblk * 8 * 32;
    fold::split_kernel<false><<<(unsigned)((n_min + 255) / 256), 256, 0, stream>>>(x, cols, batch, 8, scale, xf, xm);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma sums)", stream);
  }
  const int rows_per_tile = 64 * n_wg;
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  const int splits = choose_splits(tiles, nblk, rows_per_tile, sm_count());
  out = Args{static_cast<const uint8_t*>(w), rows, cols, cols / 256 * kBlockBytes, y, batch, splits, accumulate,
             xw, xm, inv, part, count, swap_lbo_sbo ? 256u : 128u, swap_lbo_sbo ? 128u : 256u, red_mode()};
  grid = dim3((unsigned)tiles, (unsigned)splits);
  return {};
}

// Q4_K weights (16-byte aligned, checked by the caller); n_wg = 2 or 3 warpgroups (128 or 192 rows per CTA),
// anything else: choose_wg. The choice depends on the shape only, so a column's bits do not depend on B.
inline Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                     cudaStream_t stream, bool accumulate, int n_wg, bool swap_lbo_sbo = false) {
  if (n_wg != 2 && n_wg != 3) n_wg = choose_wg(rows, cols, sm_count());
  Args a;
  dim3 grid;
  DS_TRY(prepare(w, rows, cols, x, y, batch, stream, accumulate, n_wg, swap_lbo_sbo, a, grid));
  return n_wg == 3 ? launch_wg<3>(a, grid, stream) : launch_wg<2>(a, grid, stream);
}

}  // namespace wg
}  // namespace ds::cuda
