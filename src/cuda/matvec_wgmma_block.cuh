// Batched Q4_K matvec, 25 <= B <= 64, wgmma with an mbarrier ring and one accumulator set per block (sm_90a only;
// include from matvec_batched.cu after matvec_wgmma_ring.cuh). Operands as wg::wgmma_kernel (A = exact fp16 sc·q from
// registers, B = [hi | lo] fp16 terms of the 64 scaled columns from shared memory, d in fp32 per row and block, mins by
// mma.sync per block), data path as the Q4_K ring kernel before it (matvec_wgmma_ring.cuh; per block one stage: x 64
// KB, the block sums 4 KB, the CTA's weight rows as one 2D tensor copy; full / empty mbarriers, no __syncthreads).
// Changes:
//  * one sum per block: d is per row and block (not per half), so both halves' 16 k-steps go into one accumulator set,
//    waited once, one fp32 epilogue per block (was: wait + epilogue per half). The A fragments are built a quarter
//    block (4 k-steps) at a time into two alternating register sets: quarter q + 1 is built while q's wgmmas run
//    (wgmma.wait_group 1 frees the set of q − 1); the mins' mma.sync run while the last quarter's wgmmas do.
//  * kN64: hi and lo as two m64n64k16 wgmmas with the same A registers into the same 32 accumulators (x's layout puts
//    the hi terms of the 64 columns in the first 2 KB of each 4 KB k-step, the lo terms in the second), instead of one
//    m64n128k16 into 64 (hi and lo in separate columns): half the accumulator registers, a quarter of the epilogue.
// (Removed in q6k13: DS_MVB_RED=3, the splits of a row tile as one cluster summed through distributed shared memory,
// no step gain in splitk11. Removed in splitk11: x multicast to clusters of 2 or 4 consecutive row tiles, DS_MVB_WG
// 8 / 10 / 11, slower than no cluster in every measurement of batched9 / batched10; the prebuild and deep weight-ring
// forms measured in splitk11, slower too: bench/cuda/NOTES.md. Removed in mvb16: DS_MVB_WG=15, 13 with the mins' mma.sync at
// the start of each block (same bits): ffn_gate_up 51.4 vs 52.0 us but the 2-warpgroup shapes 3-5% slower, 9B step at 64
// 8.435 vs 8.356 ms; commit 092d8e3. Removed in mvb17 (commit fee9d42): DS_MVB_WG=16, hl_kernel, the 2-warpgroup shapes
// with 4 warpgroups per 128-row tile (x's hi and lo terms in separate warpgroups, m64n64k16): more eligible warps but
// twice the instructions for the same tensor-pipe time, ffn_down 48.7 vs 37.6 us, 9B step 8.446 vs 7.882 ms at 64;
// DS_MVB_BLK_PRE=1, the next block's first A quarter built during the last quarter (same bits): ffn_gate_up 54.0 vs
// 51.8 us, step 7.986 vs 7.882 ms. Removed in hb19 (commit c3cdf93): DS_MVB_HALF, half-block stages (4 stages of a half
// block: x half + header and s = 0 codes as an 80-byte box / x half + s = 1 codes + block sums; the first half released
// after quarter 2's issue, block i + 2's first half issued into it, the producer 1.5 blocks ahead; same bits):
// ffn_down 37.3-37.7 vs 36.4-36.5 us, attn_qkv 25.1-25.6 vs 24.4-24.5, ffn_gate_up 50.1-50.5 vs 50.7-50.9; 9B step at
// 64 x 512+ 8.355 / 8.423 vs 8.394 / 8.386 ms, <2> only 8.417 / 8.402. Removed in sp19 (commit 2f92357): DS_MVB_MINQ, the
// mins' 8 mma.sync after quarter 2's issue + wait_group 1 (before quarter 3's build) instead of behind quarter 3's
// wgmmas, the header read there (same bits): with DS_MVB_LEAN ffn_gate_up 49.3 vs 48.5-48.7 us, ffn_down 37.6-37.8 vs
// 36.7-36.8; 9B step at 64 x 512+ 8.362 / 8.364 vs 8.311 / 8.314 ms (LEAN alone), 8.355 / 8.363 (neither).)
// Removed in s30 (commits ea21768, aa0640f): DS_MVB_BLK_WG=4, 4 warpgroups of 64 rows (256-row tiles, 16 warps per SM)
// with hi / lo as two m64n64k16 (kN64) on kFast descriptors and kLean (128 registers, no spill), within tolerance:
// slower on 6 of the 7 9B shapes at B = 64 (H100: ffn_gate_up 77.9 vs 51.2 us, ffn_down 46.0 vs 38.1, ssm_out 27.3 vs
// 18.9; attn qkv 34.5 vs 35.5).
// Summation order: per block one chain of 16 (N128: per hi / lo column) or 32 (N64: hi and lo alternating) k-steps,
// then acc += dmin·mins, acc += d·sum; so not the bits of wgmma_kernel, but the same products, within
// float64 tolerance (tests/cuda CudaMatvecBatched configs wg 9, 12). The plan (warpgroups, splits) depends on
// the shape only and the kernel always computes 64 columns: a column's bits do not depend on B (25..64).
#pragma once
#include <cudaTypedefs.h>

#include <cstdlib>

#include "cuda/launch.cuh"
#include "cuda/matvec_wgmma.cuh"
#include "cuda/matvec_wgmma_ring.cuh"

namespace ds::cuda {
namespace wgb {

constexpr int kXm = wgr::kXm, kWPitch = wgr::kWPitch;
template <int kWG>
constexpr int stage_bytes() { return wg::kXBlock + kXm + 64 * kWG * kWPitch; }
template <int kWG>
constexpr int smem_bytes() { return 2 * stage_bytes<kWG>() + 64; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using wgr::saddr;
__device__ __forceinline__ void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
// m64n64k16: D (32 fp32 per thread) (+)= A (registers) · B (descriptor); acc_in 0 starts the sum.
__device__ __forceinline__ void wgmma_64(float (&c)[32], const uint32_t (&a)[4], uint64_t desc, int acc_in) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]),
        "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]),
        "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]),
        "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc_in));
}

// The fp16 scale terms of half block s (k-steps 8s .. 8s + 7) for this thread's rows rbase, rbase + 8 (from the header).
struct Scales {
  __half2 mul_lo[2], add_lo[2], mul_hi[2], add_hi[2];
};
__device__ __forceinline__ void scales_h(const uint8_t* wslot, int rbase, int s, int u, Scales& sc) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint4 hd = *reinterpret_cast<const uint4*>(wslot + (rbase + 8 * h) * kWPitch);
    const uint32_t scs = s == 0 ? (hd.y & 0x3F3F3F3Fu) : ((hd.w & 0x0F0F0F0Fu) | ((hd.y >> 2) & 0x30303030u));
    const __half2 sp = fold::byte_pair(scs, u);
    sc.mul_lo[h] = __low2half2(sp);
    sc.add_lo[h] = __hmul2(sc.mul_lo[h], __float2half2_rn(-1024.f));
    sc.mul_hi[h] = __hmul2(__high2half2(sp), __float2half2_rn(0.0625f));
    sc.add_hi[h] = __hmul2(sc.mul_hi[h], __float2half2_rn(-1024.f));
  }
}

// A fragments of quarter q (half block s = q / 2, k-steps 4(q % 2) .. +3) for this thread's rows rbase, rbase + 8:
// wg::wgmma_kernel's k-steps 4(q % 2) .. +3 (the same dequantisation), from 8 bytes of each row's codes, sc = half block s's.
// (w & mask) | magic as one LOP3 (kFast): with both constants as immediates ptxas emits an AND and an OR; the magic
// passed in a register lets it use the 3-input form. Same result bits.
__device__ __forceinline__ uint32_t and_or(uint32_t w, uint32_t mask, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(w), "r"(mask), "r"(magic));
  return r;
}

template <bool kFast>
__device__ __forceinline__ void build_q(const uint8_t* wslot, int rbase, int q, int t, uint32_t (&af)[4][4],
                                        uint32_t magic, const Scales& sc) {
  const int s = q >> 1, p = q & 1;
  uint2 qw[2];
#pragma unroll
  for (int h = 0; h < 2; h++)
    qw[h] = *reinterpret_cast<const uint2*>(wslot + (rbase + 8 * h) * kWPitch + 16 + 64 * s + 16 * t + 8 * p);
#pragma unroll
  for (int kl = 0; kl < 4; kl++) {
    const int wi = kl >> 1, hn = kl & 1;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint32_t w = wi == 0 ? qw[h].x : qw[h].y;
      const uint32_t mask = hn ? 0x00F000F0u : 0x000F000Fu;
      const __half2 mu = hn ? sc.mul_hi[h] : sc.mul_lo[h], ad = hn ? sc.add_hi[h] : sc.add_lo[h];
      if constexpr (kFast) {
        af[kl][h] = gemm::h2u(__hfma2(gemm::u2h(and_or(w, mask, magic)), mu, ad));
        af[kl][2 + h] = gemm::h2u(__hfma2(gemm::u2h(and_or(w >> 8, mask, magic)), mu, ad));
      } else {
        af[kl][h] = gemm::h2u(__hfma2(gemm::u2h((w & mask) | 0x64006400u), mu, ad));
        af[kl][2 + h] = gemm::h2u(__hfma2(gemm::u2h(((w >> 8) & mask) | 0x64006400u), mu, ad));
      }
    }
  }
}

// The 4 k-steps of quarter q into c (first: the block's first quarter starts the sum), committed as one group.
// kFast (n128 only): xd0 = wg::desc_lo(xslot), computed once per block; each k-step's descriptor is xd0 plus its
// constant offset >> 4 (the same word: shared addresses < 256 KB, so the 14-bit field never carries).
template <bool kN64, bool kFast, int kC>
__device__ __forceinline__ void mma_q(float (&c)[kC], const uint32_t (&af)[4][4], const uint8_t* xslot, int q,
                                      bool first, uint32_t xd0) {
  const uint8_t* xs = xslot + (q >> 1) * wg::kXStep + (q & 1) * 4 * 4096;
  wg::wg_fence();
#pragma unroll
  for (int kl = 0; kl < 4; kl++) {
    if constexpr (kFast && !kN64) {
      const uint32_t lo = xd0 + (uint32_t)(((q >> 1) * wg::kXStep + (q & 1) * 4 * 4096 + kl * 4096) >> 4);
      wg::wgmma_128(c, af[kl], wg::desc_from_lo(lo, 128u, 256u), first && kl == 0 ? 0 : 1);
    } else if constexpr (kN64) {
      wgmma_64(c, af[kl], wg::desc_for(xs + kl * 4096, 128u, 256u), first && kl == 0 ? 0 : 1);  // hi terms
      wgmma_64(c, af[kl], wg::desc_for(xs + kl * 4096 + 2048, 128u, 256u), 1);                  // lo terms
    } else {
      wg::wgmma_128(c, af[kl], wg::desc_for(xs + kl * 4096, 128u, 256u), first && kl == 0 ? 0 : 1);
    }
  }
  wg::wg_commit();
}

// Byte t of v (< 64) as an exact fp16 pair (m, m).
__device__ __forceinline__ __half2 byte_dup(uint32_t v, int t) {
  return __hsub2(gemm::u2h(__byte_perm(v >> (8 * t), 0x64646464u, 0x4040u)), __float2half2_rn(1024.f));
}

// kLean: the producer's per-CTA state (its first block, the tensor map's address) in shared memory beside the
// mbarriers, read by warp 0 at each issue, and the epilogue's indices re-read from the special registers after the block
// loop: values that lived in registers across the loop (ptxas spilled 12 bytes of them in the <3> kernel at its
// 168-register cap).
struct Producer {
  int64_t bk0;
  const CUtensorMap* map;
};
__device__ __forceinline__ int64_t prod_bk0(const Producer* p) { return *reinterpret_cast<const volatile int64_t*>(&p->bk0); }
__device__ __forceinline__ const CUtensorMap* prod_map(const Producer* p) {
  return *reinterpret_cast<const CUtensorMap* const volatile*>(&p->map);
}
// A special register read where it is used (asm volatile: not kept in a register across the loop as blockIdx /
// threadIdx may be).
enum class Sreg { kCtaidX, kCtaidY, kTidX };
template <Sreg R>
__device__ __forceinline__ uint32_t sreg() {
  uint32_t v;
  if constexpr (R == Sreg::kCtaidX) asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(v));
  else if constexpr (R == Sreg::kCtaidY) asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(v));
  else asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(v));
  return v;
}

// From the rows' headers (rbase, rbase + 8): d, −16·dmin as float, and the mins' A fragments (kMin2: m_t pairs).
template <bool kMin2>
__device__ __forceinline__ void header(const uint8_t* wslot, int rbase, int t, int u, float (&dd)[2], float (&dm)[2],
                                       uint32_t (&amin)[4]) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint4 hd = *reinterpret_cast<const uint4*>(wslot + (rbase + 8 * h) * kWPitch);
    const __half2 dh = gemm::u2h(hd.x);
    dd[h] = __low2float(dh);
    dm[h] = -16.f * __high2float(dh);
    const uint32_t m03 = hd.z & 0x3F3F3F3Fu, m47 = ((hd.w >> 4) & 0x0F0F0F0Fu) | ((hd.z >> 2) & 0x30303030u);
    if constexpr (kMin2) {
      amin[h] = gemm::h2u(byte_dup(m03, t));
      amin[2 + h] = gemm::h2u(byte_dup(m47, t));
    } else {
      amin[h] = gemm::h2u(fold::byte_pair(m03, u));
      amin[2 + h] = gemm::h2u(fold::byte_pair(m47, u));
    }
  }
}
#endif

// tw: the weights as a 2D uint8 tensor [rows][row_bytes], boxes of kRows rows x 144 bytes (wgr::weight_map); rows past
// the end are filled with zeros, their outputs not stored.
// kMin2 (DS_MVB_WG=13): the mins as one m16n8k16 per n-tile on sub-block sums (wg::prep_kernel<kLayQ4K, 2>: k-slots 2t,
// 2t+1 = hi, lo of sub-block t's sum, A = (m_t, m_t)) instead of two on half-sub-block sums: half of the mins' mma.sync,
// which share the tensor pipe with the wgmmas; 2 KB of block sums per stage instead of 4. Other bits than 12 (the sums
// are over 32 elements, hi + lo in one product), within float64 tolerance.
// kFast (DS_MVB_BUILD=1, the default; kMin2 only; the same bits): build_q / mma_q's kFast form (the shorter A build and
// descriptors) and the scale terms once per half block (quarters 0 / 2 compute them, 1 / 3 reuse them; without it each
// mma_q's "memory" clobber makes every quarter re-read the header and redo them): static SASS per block -40 (<2> 6520,
// <3> 6480 instructions; 6 LDS, 12 HMUL2 fewer), registers as before (<2> 180, <3> 168 with 16 bytes of stack).
// kLean (DS_MVB_LEAN=1 every kFast kernel, =2 the default: the <3> ones; kFast only; the same operations in the same
// order for every float result, so the same bits): the producer's state in shared memory, the epilogue's indices
// re-read (Producer above): the <3> kernel without its spill (ptxas -v: 16 bytes of stack, 3 STL / 3 LDL -> 0, 168
// registers; <2> 180 -> 176 registers).
// kMinW (DS_MVB_MINW=1, the default since s32; kMin2 and kWG 2 only): the mins as one m64n64k16 wgmma per block into
// 32 more accumulators (A = the mins' fragments amin, B = the block sums in kSums 3's layout, issued in quarter 0's
// commit group), added with −16·dmin after wait_group 0, instead of 8 mma.sync behind quarter 3's wgmmas.
template <int kWG, bool kN64, bool kMin2 = false, bool kFast = false, bool kLean = false, bool kMinW = false>
__global__ void __launch_bounds__(128 * kWG, 1) block_kernel(const wg::Args a, const __grid_constant__ CUtensorMap tw) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kRows = 64 * kWG, kThreads = 128 * kWG, kStage = stage_bytes<kWG>();
  constexpr int kXmB = kMin2 ? kXm / 2 : kXm;  // bytes of block sums copied per block
  constexpr unsigned kTx = wg::kXBlock + kXmB + kRows * kWPitch;
  constexpr int kC = kN64 ? 32 : 64;
  static_assert(!kMinW || (kMin2 && kWG == 2), "kMinW: the 2-warpgroup kMin2 kernel only");
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + 2 * kStage);
  uint64_t* empty = full + 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int u = 2 * (t >> 1);
  const int tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (int64_t)tile * kRows;
  const int64_t nblk = a.cols / 256;
  const int64_t bk0 = nblk * split / a.splits, bk1 = nblk * (split + 1) / a.splits;
  const int n_my = (int)(bk1 - bk0);
  Producer* prod = reinterpret_cast<Producer*>(empty + 2);
  if (threadIdx.x == 0) {
    if constexpr (kLean) *prod = {bk0, &tw};
    wgr::bar_init(&full[0], 1);
    wgr::bar_init(&full[1], 1);
    wgr::bar_init(&empty[0], 4 * kWG);
    wgr::bar_init(&empty[1], 4 * kWG);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  // stage layout: [x: kXBlock][block sums: kXm][weights: kRows x kWPitch]; called by all of warp 0
  auto issue_w = [&](int i) {
    const int slot = i & 1;
    if (lane == 0) {
      wgr::bar_expect(&full[slot], kTx);
      const int64_t b0 = kLean ? prod_bk0(prod) : bk0;
      const int r0 = kLean ? (int)sreg<Sreg::kCtaidX>() * kRows : (int)row0;
      wgr::tensor_copy_2d(smem + slot * kStage + wg::kXBlock + kXm, kLean ? prod_map(prod) : &tw,
                          (int)((b0 + i) * wg::kBlockBytes), r0, &full[slot]);
    }
  };
  auto issue_x = [&](int i) {
    const int slot = i & 1;
    uint8_t* dst = smem + slot * kStage;
    const int64_t blk = (kLean ? prod_bk0(prod) : bk0) + i;
    const uint8_t* xsrc = reinterpret_cast<const uint8_t*>(a.xw) + blk * wg::kXBlock;
    const uint8_t* msrc = reinterpret_cast<const uint8_t*>(a.xm) + blk * kXmB;
    if (lane == 0) {
      wgr::bulk_copy(dst, xsrc, wg::kXBlock, &full[slot]);
      wgr::bulk_copy(dst + wg::kXBlock, msrc, kXmB, &full[slot]);
    }
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
  // 0x64006400 made opaque to ptxas (kFast: the 3-input LOP3 needs it in a register); a.splits >= 1, so bit 31 is 0.
  const uint32_t magic = 0x64006400u | ((uint32_t)a.splits & 0x80000000u);
  float cmin[kMinW ? 32 : 1];  // kMinW: the mins' wgmma accumulators (written with acc_in 0 each block)
#pragma unroll
  for (int r = 0; r < (kMinW ? 32 : 1); r++) cmin[r] = 0.f;

#pragma unroll 1
  for (int i = 0; i < n_my; i++) {
    const int slot = i & 1;
    if (warp == 0 && i >= 1 && i + 1 < n_my) {  // blocks 0 and 1 were issued above
      wgr::bar_wait(&empty[slot ^ 1], (unsigned)(((i - 1) >> 1) & 1));  // slot ^ 1 held block i − 1
      issue_w(i + 1);
      issue_x(i + 1);
    }
    wgr::bar_wait(&full[slot], (unsigned)((i >> 1) & 1));
    const uint8_t* xslot = smem + slot * kStage;
    const uint4* xms = reinterpret_cast<const uint4*>(xslot + wg::kXBlock);
    const uint8_t* wslot = xslot + wg::kXBlock + kXm;
    float dd[2], dm[2];
    uint32_t amin[4];
    header<kMin2>(wslot, rbase, t, u, dd, dm, amin);
    float c[kC];
    uint32_t af0[4][4], af1[4][4];
    const uint32_t xd0 = wg::desc_lo(xslot);
    Scales sc;
    auto build = [&](int q, uint32_t(&af)[4][4]) {
      if (!kFast || (q & 1) == 0) scales_h(wslot, rbase, q >> 1, u, sc);
      build_q<kFast>(wslot, rbase, q, t, af, magic, sc);
    };
    build(0, af0);
    if constexpr (kMinW) {  // joins quarter 0's commit group (mma_q commits)
      wg::wg_fence();
      wgmma_64(cmin, amin, wg::desc_for(xms, 128u, 256u), 0);
    }
    mma_q<kN64, kFast>(c, af0, xslot, 0, true, xd0);
    build(1, af1);
    mma_q<kN64, kFast>(c, af1, xslot, 1, false, xd0);
    wg_wait1();  // quarter 0 done: af0 free
    build(2, af0);
    mma_q<kN64, kFast>(c, af0, xslot, 2, false, xd0);
    wg_wait1();
    build(3, af1);
    mma_q<kN64, kFast>(c, af1, xslot, 3, false, xd0);
    // acc −= 16·dmin·(m · S/16) (matvec_fold.cuh) while the last wgmmas run (kMinW: after wait_group 0 below)
    if constexpr (!kMinW) {
#pragma unroll
      for (int n = 0; n < 8; n++) {
        float cm[4] = {0.f, 0.f, 0.f, 0.f};
        if constexpr (kMin2) {
          const uint2 xv = reinterpret_cast<const uint2*>(xms)[n * 32 + lane];
          fold::mma_f16(cm, amin, xv.x, xv.y);
        } else {
          const uint4 xv = xms[n * 32 + lane];
          fold::mma_f16(cm, amin, xv.x, xv.y);
          fold::mma_f16(cm, amin, xv.z, xv.w);
        }
#pragma unroll
        for (int r = 0; r < 4; r++) acc[n][r] = fmaf(dm[r >> 1], cm[r], acc[n][r]);
      }
    }
    wg::wg_wait0();
    wg::keep(c);
    if constexpr (kMinW) {
      wg::keep(cmin);
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) acc[n][r] = fmaf(dm[r >> 1], cmin[4 * n + r], acc[n][r]);
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        if constexpr (kN64) {
          acc[n][r] = fmaf(dd[r >> 1], c[4 * n + r], acc[n][r]);
        } else {
          acc[n][r] = fmaf(dd[r >> 1], c[32 + 4 * n + r], acc[n][r]);
          acc[n][r] = fmaf(dd[r >> 1], c[4 * n + r], acc[n][r]);
        }
      }
    __syncwarp();
    if (lane == 0) wgr::bar_arrive(&empty[slot]);  // this warp is done with the slot
  }

  if constexpr (kLean) {  // the indices re-read, not kept across the block loop
    const int tx = (int)sreg<Sreg::kTidX>(), bx = (int)sreg<Sreg::kCtaidX>(), ln = tx & 31;
    wg::store_acc<kRows, kThreads>(a, acc, bx, (int)sreg<Sreg::kCtaidY>(), (int64_t)bx * kRows,
                                   16 * (tx >> 5) + (ln >> 2), ln & 3);
  } else {
    wg::store_acc<kRows, kThreads>(a, acc, tile, split, row0, rbase, t);
  }
#endif
}

// DS_MVB_BLK_WG = 2 | 3 forces the warpgroups per CTA (bench), else wg::choose_wg by shape.
inline int wg_force() {
  static const int v = [] {
    const char* e = std::getenv("DS_MVB_BLK_WG");
    return e && (e[0] == '2' || e[0] == '3') && !e[1] ? e[0] - '0' : 0;
  }();
  return v;
}

// DS_MVB_BUILD (set_matvec_batched_block_build): block_kernel's A build for the kMin2 kernels, the same bits either way:
// 1 (the default) the kFast form, 0 the form before build17. H200 (mvb18, bench/cuda/NOTES.md): ffn_gate_up 50.7-51.0
// vs 51.9-52.0 us, ffn_down 36.0-36.4 vs 37.4, attn_qkv 24.2-24.4 vs 25.0-25.1; 9B step at 64 x 512 8.36-8.40 vs
// 8.46-8.47 ms. (mvb18 measured build17's form without the once-per-half-block scales as a third form: ffn_down 37.2-37.5
// us, step 8.39-8.43 ms; removed.)
inline int& build_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_BUILD");
    return e && (e[0] == '0' || e[0] == '1') && !e[1] ? e[0] - '0' : 1;
  }();
  return v;
}

// DS_MVB_LEAN (set_matvec_batched_block_lean): block_kernel's kLean for the kFast kernels, the same bits either way;
// 1 on for every kFast kernel, 0 off, 2 (default) the <3> kernels only. H200 (sp19, bench/cuda/NOTES.md): 9B step at
// 64 x 512+ with 1 8.311 / 8.314 vs 8.355 / 8.363 ms with 0 (A B A B); mvb_bench timedef B = 64: ffn_gate_up (<3>)
// 48.5-48.7 vs 50.3-50.4 us, output (Q4_K, <3>) 415-419 vs 435-437, but ffn_down 36.7-36.8 vs 36.3-36.4, attn_qkv 24.5-24.8 vs 24.3-24.4 (<2>: no spill to remove there).
// 2 (the default since session 16's final call): kLean for the <3> kernels only (the one with the spill). H200, 9B
// step at 64 x 512+, interleaved (docs/measurements/2026-12-04-h200-session16-final.txt): 2 8.254 / 8.256 ms, 1 8.267 /
// 8.281, 0 8.314 / 8.324.
inline int& lean_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_LEAN");
    return e && e[0] == '0' && !e[1] ? 0 : e && e[0] == '1' && !e[1] ? 1 : 2;
  }();
  return v;
}

template <int kWG, bool kN64, bool kMin2, bool kFast, bool kLean = false, bool kMinW = false>
Status launch_block_form(wg::Args a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<kWG>();
  static const cudaError_t e = cudaFuncSetAttribute(block_kernel<kWG, kN64, kMin2, kFast, kLean, kMinW>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess) return cu_err("cuda matvec_batched (wgmma block): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  CUtensorMap map;
  DS_TRY(wgr::weight_map(a.w, a.rows, a.row_bytes, kWPitch, 64 * kWG, map));
  const cudaError_t le =
      launch_pdl(block_kernel<kWG, kN64, kMin2, kFast, kLean, kMinW>, grid, dim3(128 * kWG), kSmem, stream, wgr::pdl_setting(),
                 a, map);
  if (le != cudaSuccess) return cu_err("cuda matvec_batched (wgmma block): launch: {}", cudaGetErrorString(le));
  CUDA_TRY_LAUNCH("matvec_batched (wgmma block)", stream);
  return {};
}

template <int kWG, bool kN64, bool kMin2 = false>
Status launch_block(wg::Args a, dim3 grid, cudaStream_t stream) {
  if constexpr (kMin2 && !kN64 && kWG == 2)
    if (wg::minw_for(kWG)) {  // wg::prepare wrote the sums in kSums 3's layout
      if (build_setting() == 0) return launch_block_form<kWG, kN64, kMin2, false, false, true>(a, grid, stream);
      return lean_setting() == 1 ? launch_block_form<kWG, kN64, kMin2, true, true, true>(a, grid, stream)
                                 : launch_block_form<kWG, kN64, kMin2, true, false, true>(a, grid, stream);
    }
  if constexpr (kMin2 && !kN64)
    if (build_setting() == 1)
      return lean_setting() == 1 || (lean_setting() == 2 && kWG == 3)
                 ? launch_block_form<kWG, kN64, kMin2, true, true>(a, grid, stream)
                 : launch_block_form<kWG, kN64, kMin2, true>(a, grid, stream);
  return launch_block_form<kWG, kN64, kMin2, false>(a, grid, stream);
}

// The kMin2 kernel (mins on sub-block sums) for n_wg = 2 or 3 warpgroups.
inline Status launch_min2(const wg::Args& a, dim3 grid, int n_wg, cudaStream_t stream) {
  return n_wg == 3 ? launch_block<3, false, true>(a, grid, stream) : launch_block<2, false, true>(a, grid, stream);
}

// n64: hi / lo as two n64 wgmmas into one accumulator set; else n128, min2: kMin2 (mins on sub-block sums).
inline Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                     cudaStream_t stream, bool accumulate, bool n64, bool min2 = false) {
  const int n_wg = wg_force() ? wg_force() : wg::choose_wg(rows, cols, sm_count());
  min2 = min2 && !n64;
  wg::Args a;
  dim3 grid;
  DS_TRY(wg::prepare(w, rows, cols, x, y, batch, stream, accumulate, n_wg, false, a, grid, min2));
  if (min2) return launch_min2(a, grid, n_wg, stream);
  if (n_wg == 3) return n64 ? launch_block<3, true>(a, grid, stream) : launch_block<3, false>(a, grid, stream);
  return n64 ? launch_block<2, true>(a, grid, stream) : launch_block<2, false>(a, grid, stream);
}

}  // namespace wgb
}  // namespace ds::cuda
