// Batched Q6_K matvec, 25 <= B <= 64 (min_batch()), on shapes whose rows are a multiple of 8 blocks: the default Q6_K
// product of the batched step (DS_MVB_WG_Q6K=11, kHi false: the scaled-A form) and the certified greedy head's hi-only
// bound product (kHi true). The Q4_K block kernel's data path (matvec_wgmma_block.cuh): per block one stage = x (64 KB)
// and the CTA's weight rows as one 2D tensor copy, on full / empty mbarriers, no __syncthreads in the loop,
// programmatic dependent launch (weights of the first two blocks before griddepcontrol.wait). Include from
// matvec_batched.cu after matvec_wgmma_q6k.cuh and matvec_wgmma_block.cuh; sm_90a only.
// (Earlier forms of this kernel, measured slower and removed in session 42 (bench/cuda/NOTES.md keeps their numbers):
// q6k_kernel's rounds on this data path (DS_MVB_WG_Q6K=6, the default batched9 .. q6k13), the block form (8) and the
// sub-block form with d·sc applied per k-step in fp32 (9, the default q6k13 .. q6k16); x multicast to clusters of 2 / 4
// row tiles (5 / 7) went in splitk11.)
//  * Q6_K blocks are 210 bytes, so block starts are not 16-byte aligned, which the tensor copy needs (the earlier
//    attempt with boxes starting at blk·210 died with an illegal instruction): the box starts at (blk·210) & ~15 and
//    is 224 bytes wide (covers the block from any offset 0..14), rows 224 bytes apart in shared memory; the block
//    starts at byte (blk·210) & 15 of each row's box (row_bytes = 210·nblk is a multiple of 16 when nblk is a multiple
//    of 8, which the tensor map needs for its row stride anyway: other shapes take wg6::q6k_kernel). Bytes of the last
//    block's box past the row end are zero-filled by the copy, not read from the next row.
#pragma once
#include <cudaTypedefs.h>

#include "cuda/matvec_wgmma_block.cuh"
#include "cuda/matvec_wgmma_q6k.cuh"

namespace ds::cuda {
namespace wg6r {

constexpr int kBox = 224;
template <int kWG>
constexpr int stage_bytes() { return wg::kXBlock + 64 * kWG * kBox; }
template <int kWG>
constexpr int smem_bytes() { return 2 * stage_bytes<kWG>() + 64; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A fragment of k-step K = sub-block K for rows rbase (+8): the 1024 + q fp16 pairs by PRMT (bytes 0, 2 and 1, 3 of v
// under 0x64), then q − 32 as exact fp16 integers by one HADD2; ql / qh: the words at byte 4t of the sub-block's
// 16-byte ql / qh chunks. Bytes 0, 2 of the 4 codes go to k-slots 2t, 2t + 1 and bytes 1, 3 to 2t + 8, 2t + 9
// (wg::prep_kernel<kLayQ6KSub>).
__device__ __forceinline__ void build_sub_p(const uint32_t (&ql)[2], const uint32_t (&qh)[2], int seg, uint32_t (&af)[4]) {
  const __half2 m1056 = __float2half2_rn(-1056.f);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint32_t v = ((ql[h] >> (4 * (seg >> 1))) & 0x0F0F0F0Fu) | (((qh[h] >> (2 * seg)) & 0x03030303u) << 4);
    af[h] = gemm::h2u(__hadd2(gemm::u2h(__byte_perm(v, 0x64646464u, 0x4240u)), m1056));
    af[2 + h] = gemm::h2u(__hadd2(gemm::u2h(__byte_perm(v, 0x64646464u, 0x4341u)), m1056));
  }
}
template <int N>
__device__ __forceinline__ void wait_n() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
#endif

// The scaled-A form (kHi false; x in sub-block k order, wg::prep_kernel<kLayQ6KSub>): the sub-block form before it
// spent its issue slots on the 32 FMAs of a per-k-step scale-add (ncu, mvb15: output head issue-bound, 61% issue, 39%
// tensor). Here the scale goes into A: P = sc·(q − 32) is an integer, |P| <= 4096; A = fp16(P) (one HMUL2 of the exact
// fp16 q − 32 and sc) is exact unless P is odd and |P| > 2048, and E = P − A (one HFMA2, exact: 0 or ±1) is the
// remainder. Per k-step three m64n64k16 into one sum for the whole block: A·hi + A·lo + E·hi = P·x − E·lo, the dropped
// E·lo below 2^-22 of that term; d is applied once per block (32 FMAs). 1.5x the sub-block form's tensor work, about
// half its instructions per k-step. sc of both rows as one half2 (PRMT of the interleaved scale bytes under 0x64, HADD2
// of −1152), broadcast into the HMUL2 / HFMA2. Three A fragment sets in flight (wait_group 2; q6k16's call 1: two sets
// 1-2% slower on the output head, 6% on ffn_down, as more of each warpgroup's wgmmas stay queued while another
// warpgroup is at its block boundary; call 2: four sets the same step time).
// kHi (hi-only, cg38; never a default product: only the certified greedy head, src/cuda/model/kernels_certify.cu): the
// scaled-A form with A·hi alone, i.e. fp16(sc·(q − 32))·fp16(x·s): one m64n64k16 per k-step instead of three. Against
// the exact sum it drops A·lo (|lo| <= 2^-11 |x·s|) and E·hi (|E| <= 2^-11 |sc·(q − 32)|), so per row r and column c
// the result is within ||w_r||_1 · max|x_c| · 2^-10 (+ fp32 rounding) of W x: a bound, not a tolerance, which the
// certified selection uses to find the exact argmax.
template <int kWG, bool kHi>
__global__ void __launch_bounds__(128 * kWG, 1) ring_kernel(const wg6::Args a, const __grid_constant__ CUtensorMap tw) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace wg;
  constexpr int kRows = 64 * kWG, kThreads = 128 * kWG, kStage = stage_bytes<kWG>();
  constexpr unsigned kTx = kXBlock + kRows * kBox;
  constexpr int kScBuf = 3;  // A fragment sets in flight (wgmma.wait_group kScBuf − 1)
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + 2 * kStage);
  uint64_t* empty = full + 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (int64_t)tile * kRows;
  const int64_t nblk = a.cols / 256;
  const int64_t bk0 = nblk * split / a.splits, bk1 = nblk * (split + 1) / a.splits;
  const int n_my = (int)(bk1 - bk0);
  if (threadIdx.x == 0) {
    wgr::bar_init(&full[0], 1);
    wgr::bar_init(&full[1], 1);
    wgr::bar_init(&empty[0], 4 * kWG);
    wgr::bar_init(&empty[1], 4 * kWG);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  // stage layout: [x: kXBlock][weights: kRows x kBox]; called by all of warp 0
  auto issue_w = [&](int i) {
    const int slot = i & 1;
    if (lane == 0) {
      wgr::bar_expect(&full[slot], kTx);
      wgr::tensor_copy_2d(smem + slot * kStage + kXBlock, &tw, (int)(((bk0 + i) * wg6::kBlockBytes) & ~(int64_t)15),
                          (int)row0, &full[slot]);
    }
  };
  auto issue_x = [&](int i) {
    const int slot = i & 1;
    uint8_t* dst = smem + slot * kStage;
    const uint8_t* xsrc = reinterpret_cast<const uint8_t*>(a.xw) + (bk0 + i) * kXBlock;
    if (lane == 0) wgr::bulk_copy(dst, xsrc, kXBlock, &full[slot]);
  };
  if (warp == 0)
    for (int i = 0; i < 2 && i < n_my; i++) issue_w(i);
  wgr::grid_wait();
  if (warp == 0)
    for (int i = 0; i < 2 && i < n_my; i++) issue_x(i);

  float acc[8][4];
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int r = 0; r < 4; r++) acc[n][r] = 0.f;
  const int rbase = 16 * warp + g;

#pragma unroll 1
  for (int i = 0; i < n_my; i++) {
    const int slot = i & 1;
    if (warp == 0 && i >= 1 && i + 1 < n_my) {
      wgr::bar_wait(&empty[slot ^ 1], (unsigned)(((i - 1) >> 1) & 1));
      issue_w(i + 1);
      issue_x(i + 1);
    }
    wgr::bar_wait(&full[slot], (unsigned)((i >> 1) & 1));
    const uint8_t* xslot = smem + slot * kStage;
    const uint8_t* wslot = xslot + kXBlock;
    const int off = (int)(((bk0 + i) * wg6::kBlockBytes) & 15);
    const uint8_t* rp[2];
    float dd[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      rp[h] = wslot + (rbase + 8 * h) * kBox + off;
      dd[h] = __half2float(*reinterpret_cast<const __half*>(rp[h] + 208));
    }
    // 4-byte words at byte c (a multiple of 4) of row h's block, for the A fragments: two LDS from the shared array by
    // word index (immediate offsets) and one funnel shift. Every such word sits at the same misalignment off & 3 (rows
    // kBox = 224 bytes apart). (The generic-pointer form before, (uintptr_t)p & ~3, lost the shared space: LD.E with
    // 64-bit address arithmetic, ~350 instructions per warp and block for the 32 words in this kernel's SASS.)
    const uint32_t* s32 = reinterpret_cast<const uint32_t*>(smem);
    const uint32_t wsh = (uint32_t)(off & 3) * 8u;
    int wb[2];
#pragma unroll
    for (int h = 0; h < 2; h++) wb[h] = (slot * kStage + kXBlock + (rbase + 8 * h) * kBox + (off & ~3)) >> 2;
    auto word = [&](int h, int c) { return __funnelshift_r(s32[wb[h] + (c >> 2)], s32[wb[h] + (c >> 2) + 1], wsh); };
    // iw[K / 2]: the scale bytes of sub-blocks K, K + 1 (K even) of both rows, interleaved (row 0, row 1, row 0,
    // row 1), each + 128 (^ 0x80) for the 1024 + u fp16 trick
    uint32_t iw[8];
#pragma unroll
    for (int m = 0; m < 4; m++) {
      const uint32_t s0 = word(0, 192 + 4 * m) ^ 0x80808080u, s1 = word(1, 192 + 4 * m) ^ 0x80808080u;
      iw[2 * m] = __byte_perm(s0, s1, 0x5140u);
      iw[2 * m + 1] = __byte_perm(s0, s1, 0x7362u);
    }
    uint32_t ql[2][4][2], qh[2][2][2];
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int m = 0; m < 4; m++) ql[s][m][h] = word(h, 64 * s + 16 * m + 4 * t);
#pragma unroll
        for (int hf = 0; hf < 2; hf++) qh[s][hf][h] = word(h, 128 + 32 * s + 16 * hf + 4 * t);
      }
    // the block's x descriptor; k-step K's hi terms at + (K / 8)·kXStep + (K % 8)·4096 bytes, lo terms + 2048
    const uint64_t d0 = desc_for(xslot, 128u, 256u);
    float cb[32];
    uint32_t ar[kScBuf][4], ae[kScBuf][4];
    auto build = [&](int K, uint32_t (&r)[4], uint32_t (&e)[4]) {
      const int s = K >> 3, kk = K & 7, seg = kk >> 1, hf = kk & 1;
      uint32_t q[4];
      build_sub_p(ql[s][2 * (seg & 1) + hf], qh[s][hf], seg, q);
      // (sc row 0, sc row 1) exact in fp16: PRMT builds 1024 + sc + 128, one HADD2 takes 1152 off
      const __half2 sc2 = __hadd2(gemm::u2h(__byte_perm(iw[K >> 1], 0x64646464u, (K & 1) ? 0x4342u : 0x4140u)),
                                  __float2half2_rn(-1152.f));
      const __half2 sr[2] = {__low2half2(sc2), __high2half2(sc2)};
#pragma unroll
      for (int j = 0; j < 4; j++) {  // j = h, 2 + h: row h
        const __half2 p = __hmul2_rn(gemm::u2h(q[j]), sr[j & 1]);  // fp16(sc·(q − 32)), off by 0 or ±1
        r[j] = gemm::h2u(p);
        if constexpr (!kHi) e[j] = gemm::h2u(__hfma2(gemm::u2h(q[j]), sr[j & 1], __hneg2(p)));  // the exact remainder
      }
    };
    auto mma = [&](int K, const uint32_t (&r)[4], const uint32_t (&e)[4]) {
      const uint64_t dh = d0 + (uint64_t)(((K >> 3) * kXStep + (K & 7) * 4096) >> 4), dl = dh + (2048 >> 4);
      wg_fence();
      wgb::wgmma_64(cb, r, dh, K == 0 ? 0 : 1);  // hi terms (a new sum per block)
      if constexpr (!kHi) {
        wgb::wgmma_64(cb, r, dl, 1);  // lo terms
        wgb::wgmma_64(cb, e, dh, 1);  // the remainder's hi terms
      }
      wg_commit();
    };
#pragma unroll
    for (int K = 0; K < 16; K++) {
      if (K >= kScBuf) wait_n<kScBuf - 1>();  // k-step K − kScBuf done: its A registers are free
      build(K, ar[K % kScBuf], ae[K % kScBuf]);
      mma(K, ar[K % kScBuf], ae[K % kScBuf]);
    }
    wg_wait0();
    keep(cb);
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int r = 0; r < 4; r++) acc[n][r] = fmaf(dd[r >> 1], cb[4 * n + r], acc[n][r]);
    __syncwarp();
    if (lane == 0) wgr::bar_arrive(&empty[slot]);
  }

  wg::store_acc<kRows, kThreads>(a, acc, tile, split, row0, rbase, t);
#endif
}

template <int kWG, bool kHi>
Status launch_ring(wg6::Args a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<kWG>();
  static const cudaError_t e =
      cudaFuncSetAttribute(ring_kernel<kWG, kHi>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess)
    return cu_err("cuda matvec_batched (wgmma Q6_K ring): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  CUtensorMap map;
  DS_TRY(wgr::weight_map(a.w, a.rows, a.row_bytes, kBox, 64 * kWG, map));
  const cudaError_t le =
      launch_pdl(ring_kernel<kWG, kHi>, grid, dim3(128 * kWG), kSmem, stream, wgr::pdl_setting(), a, map);
  if (le != cudaSuccess) return cu_err("cuda matvec_batched (wgmma Q6_K ring): launch: {}", cudaGetErrorString(le));
  CUDA_TRY_LAUNCH("matvec_batched (wgmma Q6_K ring)", stream);
  return {};
}

// Whether the ring takes this shape: the tensor map's row stride (210·cols/256 bytes) must be a multiple of 16.
inline bool supports(int64_t cols) { return (cols / 256) % 8 == 0 && wgr::tensor_map_encoder(); }

// Warpgroups by shape as wg6::launch (wg::choose_wg); hi: the hi-only bound product (kHi) instead of the scaled-A form.
inline Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                     cudaStream_t stream, bool accumulate, bool hi) {
  const int n_wg = wgb::wg_force() ? wgb::wg_force() : wg::choose_wg(rows, cols, sm_count());
  uint32_t* xw;
  float *inv, *scale, *part;
  unsigned* count;
  CUDA_TRY(cudaGetSymbolAddress((void**)&xw, wg::g_xw));
  CUDA_TRY(cudaGetSymbolAddress((void**)&inv, gemm::g_inv));
  CUDA_TRY(cudaGetSymbolAddress((void**)&scale, gemm::g_scale));
  CUDA_TRY(cudaGetSymbolAddress((void**)&part, gemm::g_part));
  CUDA_TRY(cudaGetSymbolAddress((void**)&count, gemm::g_count));
  const int64_t nblk = cols / 256;
  wg::prep_kernel<wg::kLayQ6KSub, false><<<64, 256, 0, stream>>>(x, cols, batch, scale, inv, xw, nullptr);
  CUDA_TRY_LAUNCH("matvec_batched (wgmma Q6_K ring prep)", stream);
  const int rows_per_tile = 64 * n_wg;
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  const int splits = wg::choose_splits(tiles, nblk, rows_per_tile, sm_count());
  const wg6::Args a{static_cast<const uint8_t*>(w), rows, cols, nblk * wg6::kBlockBytes, y, batch, splits, accumulate,
                    xw, inv, part, count, wg::red_mode()};
  const dim3 grid((unsigned)tiles, (unsigned)splits);
  if (hi) return n_wg == 3 ? launch_ring<3, true>(a, grid, stream) : launch_ring<2, true>(a, grid, stream);
  return n_wg == 3 ? launch_ring<3, false>(a, grid, stream) : launch_ring<2, false>(a, grid, stream);
}

}  // namespace wg6r
}  // namespace ds::cuda
