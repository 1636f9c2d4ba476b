// Batched matvec Y[B, rows] = X[B, cols] · Wᵀ for Q6_K weights, 25 <= B <= 64 (min_batch()), with Hopper's warpgroup MMA
// (wgmma, sm_90a only, like matvec_wgmma.cuh whose x layout, descriptors and reduction it shares).
// Include from matvec_batched.cu only, after matvec_wgmma.cuh.
//
// Q6_K: w = d·sc_j·(q − 32) in 16-element sub-block j (q 6-bit: 4 bits in ql, 2 in qh; sc_j int8; d fp16),
// so per 256-element block  Σ w x = d · Σ_j sc_j Σ (q − 32) x.
//  * sc·(q − 32) reaches 128·32 = 4096: not exact in fp16 (11 significant bits). Split sc = 16·sh + sl with
//    sh = sc >> 4 in [−8, 7] and sl = sc & 15 in [0, 15]: A1 = 16·sh·(q − 32) (|.| <= 4096, a multiple of 16)
//    and A2 = sl·(q − 32) (|.| <= 480) are exact fp16, each made by one HFMA2 from the LOP3-built fp16
//    1024 + q ((1024 + q)·m − 1056·m rounds once, to the exact integer) and, for A1, one HMUL2 by 16.
//    Both go into the same accumulators (2 wgmma per k16 step), so A1 + A2 = sc·(q − 32) per element.
//  * x as two fp16 terms of the column-scaled x in wgmma's B operand (N = 128: [hi terms | lo terms] of the
//    64 batch columns), staged per block in shared memory: wg::split_kernel<true> writes it in this kernel's
//    k order. Each product (<= 13 bits x 11 bits) is exact in fp32; the sums are flushed (· d in fp32) every
//    4 k-steps, so each accumulator chain is 8 wgmma long (hi and lo in different accumulator columns), as in
//    matvec_fold.cuh mode 2 and the Q4_K wgmma kernel.
//  * Blocks are 210 bytes (2 mod 16): a CTA stages per row the 16-byte-aligned 224-byte span that covers
//    the block with cp.async (the tensor's last bytes with 2-byte loads: nothing is read past its end), and
//    lanes read their (2-byte-aligned) words as aligned words + funnel shifts.
// k order per half block s (128 elements: ql bytes 64s.., qh bytes 128 + 32s.., scales 192 + 8s..): lane t
// of a quad reads ql bytes 16t..16t+15 and qh bytes 16(t & 1)..+15 of the half: elements l = 16(t & 1) +
// 4i + byte of segment t/2 (low nibbles) and t/2 + 2 (high nibbles), sub-blocks 8s + t and 8s + t + 4.
// k-step kk = 2i + h takes nibble h of word i: bytes 0, 2 in k-slots 2t, 2t+1 and 1, 3 in 2t+8, 2t+9.
#pragma once
#include <cuda_fp16.h>

#include <cstdlib>

#include "cuda/matvec_wgmma.cuh"

namespace ds::cuda {
namespace wg6 {

constexpr int kBlockBytes = 210, kChunks = 14, kPitch = 16 * kChunks;  // 224-byte span per row and block

template <int kWG>
constexpr int stage_bytes() { return wg::kXBlock + 64 * kWG * kPitch; }

struct Args {
  const uint8_t* w;
  int64_t rows, cols, row_bytes;
  float* y;
  int batch, splits;
  bool accumulate;
  const uint32_t* xw;
  const float* inv;
  float* part;
  unsigned* count;
  int red = 1;  // as wg::Args::red
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// 8 bytes from a 2-byte-aligned shared-memory address.
__device__ __forceinline__ uint2 ld8_a2(const uint8_t* p) {
  const uint32_t* b = reinterpret_cast<const uint32_t*>((uintptr_t)p & ~(uintptr_t)3);
  const uint32_t sh = ((uint32_t)(uintptr_t)p & 3u) * 8u;
  const uint32_t w0 = b[0], w1 = b[1], w2 = b[2];
  return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
}
#endif

template <int kWG, bool kPipe>
__global__ void __launch_bounds__(128 * kWG, 1) q6k_kernel(const Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace wg;
  constexpr int kRows = 64 * kWG, kThreads = 128 * kWG, kStage = stage_bytes<kWG>();
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (int64_t)tile * kRows;
  const int64_t nblk = a.cols / 256;
  const int64_t bk0 = nblk * split / a.splits, bk1 = nblk * (split + 1) / a.splits;
  const int n_my = (int)(bk1 - bk0);
  const uint8_t* w_end = a.w + a.rows * a.row_bytes;
  // stage layout: [x: kXBlock bytes][weights: kRows x kPitch, the aligned span of each row's block]
  auto issue = [&](int i) {
    uint8_t* dst = smem + (i & 1) * kStage;
    const uint8_t* xs = reinterpret_cast<const uint8_t*>(a.xw) + (bk0 + i) * kXBlock;
    for (int idx = threadIdx.x; idx < kXBlock / 16; idx += kThreads) gemm::cp_async16(dst + 16 * idx, xs + 16 * idx);
    uint8_t* wd = dst + kXBlock;
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const int64_t row = row0 + r < a.rows ? row0 + r : a.rows - 1;
      const uintptr_t src = (uintptr_t)(a.w + row * a.row_bytes + (bk0 + i) * kBlockBytes);
      const uint8_t* s16 = reinterpret_cast<const uint8_t*>((src & ~(uintptr_t)15) + 16 * c);
      uint8_t* d16 = wd + r * kPitch + 16 * c;
      if (s16 + 16 <= w_end) {
        gemm::cp_async16(d16, s16);
      } else {  // the tensor's last bytes (its size is even): no read past its end
        for (int k = 0; k < 16; k += 2)
          if (s16 + k < w_end) *reinterpret_cast<uint16_t*>(d16 + k) = *reinterpret_cast<const uint16_t*>(s16 + k);
      }
    }
  };
  if (n_my > 0) issue(0);
  gemm::cp_commit();

  float acc[8][4];
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int r = 0; r < 4; r++) acc[n][r] = 0.f;
  float c[64];
#pragma unroll
  for (int r = 0; r < 64; r++) c[r] = 0.f;
  // Local rows of this thread: rbase (+8) (wgmma's A and D fragment layout per warp = mma.sync's m16).
  const int rbase = 16 * warp + g;
  const __half2 k16 = __float2half2_rn(16.f);

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
    const uint8_t* rp[2];
    float dd[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t row = row0 + rbase + 8 * h < a.rows ? row0 + rbase + 8 * h : a.rows - 1;
      const uintptr_t src = (uintptr_t)(a.w + row * a.row_bytes + blk * kBlockBytes);
      rp[h] = wslot + (rbase + 8 * h) * kPitch + (src & 15);
      dd[h] = __half2float(*reinterpret_cast<const __half*>(rp[h] + 208));
    }
    // Four rounds per block: half block s = R / 2, k-steps 4(R % 2) .. +3 (words 2(R % 2), +1 of each lane's
    // ql and qh spans). build() makes a round's A fragments from shared memory; with kPipe the next round's
    // are built while the current round's wgmmas run (a second fragment set: 32 more registers).
    auto build = [&](int R, uint32_t (&af)[4][2][4]) {
      const int s = R >> 1, rd = R & 1;
      const int qsh = 2 * (t >> 1);  // qh bits of segment t/2 (+4 for the high nibble's segment t/2 + 2)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uint2 ql = ld8_a2(rp[h] + 64 * s + 16 * t + 8 * rd);
        const uint2 qh = ld8_a2(rp[h] + 128 + 32 * s + 16 * (t & 1) + 8 * rd);
#pragma unroll
        for (int nb = 0; nb < 2; nb++) {
          const int sc = (int)*reinterpret_cast<const int8_t*>(rp[h] + 192 + 8 * s + t + 4 * nb);
          const float shf = (float)(sc >> 4), slf = (float)(sc & 15);  // sc = 16·sh + sl
          const __half2 mh = __float2half2_rn(shf), ah = __float2half2_rn(-1056.f * shf);
          const __half2 ml = __float2half2_rn(slf), al = __float2half2_rn(-1056.f * slf);
#pragma unroll
          for (int ii = 0; ii < 2; ii++) {
            const int kl = 2 * ii + nb;
            const uint32_t wl = ii ? ql.y : ql.x, wh = ii ? qh.y : qh.x;
            const uint32_t v = ((wl >> (4 * nb)) & 0x0F0F0F0Fu) | (((wh >> (qsh + 4 * nb)) & 0x03030303u) << 4);
            const __half2 p0 = gemm::u2h((v & 0x00FF00FFu) | 0x64006400u);         // 1024 + q of bytes 0, 2
            const __half2 p1 = gemm::u2h(((v >> 8) & 0x00FF00FFu) | 0x64006400u);  // bytes 1, 3
            af[kl][0][h] = gemm::h2u(__hmul2(__hfma2(p0, mh, ah), k16));
            af[kl][0][2 + h] = gemm::h2u(__hmul2(__hfma2(p1, mh, ah), k16));
            af[kl][1][h] = gemm::h2u(__hfma2(p0, ml, al));
            af[kl][1][2 + h] = gemm::h2u(__hfma2(p1, ml, al));
          }
        }
      }
    };
    auto issue_round = [&](int R, uint32_t (&af)[4][2][4]) {
      const int s = R >> 1, rd = R & 1;
      keep(c);
      wg_fence();
#pragma unroll
      for (int kl = 0; kl < 4; kl++) {
        const uint64_t desc = desc_for(xslot + s * kXStep + (4 * rd + kl) * 4096, 128u, 256u);
        wgmma_128(c, af[kl][0], desc, kl);  // kl = 0: a new sum
        wgmma_128(c, af[kl][1], desc, 1);
      }
      wg_commit();
    };
    // columns n and 64 + n of the accumulators: the hi and lo sums of batch column n
    auto flush = [&] {
      wg_wait0();
      keep(c);
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
          acc[n][r] = fmaf(dd[r >> 1], c[32 + 4 * n + r], acc[n][r]);
          acc[n][r] = fmaf(dd[r >> 1], c[4 * n + r], acc[n][r]);
        }
    };
    if constexpr (kPipe) {
      uint32_t af0[4][2][4], af1[4][2][4];
      build(0, af0);
      issue_round(0, af0);
      build(1, af1);
      flush();
      issue_round(1, af1);
      build(2, af0);
      flush();
      issue_round(2, af0);
      build(3, af1);
      flush();
      issue_round(3, af1);
      flush();
    } else {
#pragma unroll 1
      for (int R = 0; R < 4; R++) {
        uint32_t af[4][2][4];
        build(R, af);
        issue_round(R, af);
        flush();
      }
    }
  }
  gemm::cp_wait<0>();

  wg::store_acc<kRows, kThreads>(a, acc, tile, split, row0, rbase, t);
#endif
}

// ---- host side --------------------------------------------------------------------------------------
// Smallest batch that takes this kernel (it always computes 64 columns, with twice the Q4_K kernel's tensor
// work per column). Measured on the H200 (bench/cuda/NOTES.md "2026-12-03 batched7"), 9B shapes, us, fp16 gemm
// kernel (matvec_gemm.cuh, 8-column n-tiles) at B = 32 / 64 vs this kernel: ffn_down [4096 x 12288] 71 / 130
// vs 79-90, attn_qkv [8192 x 4096] 49 / 91 vs 57-68, ssm_out [4096 x 4096] 36 / 68 vs 36-45; the 9B step
// (cuda-bench, x prepared in one launch, 2 warpgroups pipelined): B = 33 11.198 ms with it vs 11.309 without,
// B = 40 11.934 vs 12.140; at B = 32 (call 1, before those two changes) 11.521 with vs 11.328 without.
// So from 33 (B > 32) then. With the Q6_K ring (matvec_wgmma_q6k_ring.cuh, batched9), H200 session 8
// (docs/measurements/2026-12-03-h200-session8-{final,followup}.txt), 9B step with --select 0, ms, threshold 25 vs 33:
// B = 25 8.401 vs 8.706, B = 28 8.602 vs 8.920, B = 32 8.915 vs 9.224 (and 9.475 vs 9.764 with the logits
// downloaded); test_cuda_model passed with the threshold at 25, the batched tests cover B = 25. So from 25, where
// the wgmma kernels start. DS_MVB_WG_Q6K_MIN = 25..64 overrides it.
constexpr int kMinBatchDefault = 25;
inline int min_batch() {
  static const int v = [] {
    const char* e = std::getenv("DS_MVB_WG_Q6K_MIN");
    const int m = e ? std::atoi(e) : 0;
    return m >= wg::kMinBatch && m <= 64 ? m : kMinBatchDefault;
  }();
  return v;
}
// The Q4_K wgmma kernel's shape limits (wg::supports), from min_batch().
inline bool supports(int64_t rows, int64_t cols, int batch) {
  return batch >= min_batch() && wg::supports(rows, cols, batch);
}

template <int kWG, bool kPipe>
Status launch_wg(const Args& a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = 2 * stage_bytes<kWG>();
  static const cudaError_t e =
      cudaFuncSetAttribute(q6k_kernel<kWG, kPipe>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess)
    return cu_err("cuda matvec_batched (wgmma Q6_K): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  q6k_kernel<kWG, kPipe><<<grid, 128 * kWG, kSmem, stream>>>(a);
  CUDA_TRY_LAUNCH("matvec_batched (wgmma Q6_K)", stream);
  return {};
}

// Whether the automatic choice (variant 1) runs 2-warpgroup CTAs pipelined (variant 4): measured (H200, B = 64,
// us, 2 plain / 2 pipelined) ffn_down 89.8 / 87.3, attn_qkv 68.3 / 66.5, ssm_out 45.4 / 44.2.
constexpr bool kAutoPipe = true;

// Q6_K weights (16-byte aligned, checked by the caller). variant: 2 or 3 warpgroups per CTA, 4 = 2 pipelined
// (the next round's A fragments built while the current round's wgmmas run; 3 warpgroups have no registers
// for it), anything else: wg::choose_wg (the shape alone decides, so a column's bits do not depend on B).
inline Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                     cudaStream_t stream, bool accumulate, int variant) {
  if (variant < 2 || variant > 4) {
    variant = wg::choose_wg(rows, cols, sm_count());
    if (variant == 2 && kAutoPipe) variant = 4;
  }
  const int n_wg = variant == 3 ? 3 : 2;
  uint32_t* xw;
  float *inv, *scale, *part;
  unsigned* count;
  CUDA_TRY(cudaGetSymbolAddress((void**)&xw, wg::g_xw));
  CUDA_TRY(cudaGetSymbolAddress((void**)&inv, gemm::g_inv));
  CUDA_TRY(cudaGetSymbolAddress((void**)&scale, gemm::g_scale));
  CUDA_TRY(cudaGetSymbolAddress((void**)&part, gemm::g_part));
  CUDA_TRY(cudaGetSymbolAddress((void**)&count, gemm::g_count));
  const int64_t nblk = cols / 256;
  if (wg::prep_fused()) {
    wg::prep_kernel<wg::kLayQ6K, false><<<64, 256, 0, stream>>>(x, cols, batch, scale, inv, xw, nullptr);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma Q6_K prep)", stream);
  } else {
    gemm::col_scale_kernel<<<batch, 256, 0, stream>>>(x, cols, scale, inv);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma Q6_K scale)", stream);
    wg::split_kernel<true><<<(unsigned)((nblk * 4096 + 255) / 256), 256, 0, stream>>>(x, cols, batch, scale, xw);
    CUDA_TRY_LAUNCH("matvec_batched (wgmma Q6_K split)", stream);
  }
  const int rows_per_tile = 64 * n_wg;
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  const int splits = wg::choose_splits(tiles, nblk, rows_per_tile, sm_count());
  const Args a{static_cast<const uint8_t*>(w), rows, cols, nblk * kBlockBytes, y, batch, splits, accumulate,
               xw, inv, part, count, wg::red_mode()};
  const dim3 grid((unsigned)tiles, (unsigned)splits);
  return variant == 3 ? launch_wg<3, false>(a, grid, stream)
         : variant == 4 ? launch_wg<2, true>(a, grid, stream)
                        : launch_wg<2, false>(a, grid, stream);
}

}  // namespace wg6
}  // namespace ds::cuda
