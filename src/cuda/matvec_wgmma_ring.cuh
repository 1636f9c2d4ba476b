// Batched Q4_K matvec, 25 <= B <= 64, wgmma with an mbarrier ring (sm_90a only; include from matvec_batched.cu after
// matvec_wgmma.cuh). The arithmetic is wg::wgmma_kernel's (A = exact fp16 sc·q from registers, B = [hi | lo] terms of
// the 64 scaled columns, d per half block in fp32, mins by mma.sync per block); what changes is how data arrives and
// how the warpgroups are kept in step:
//  * each block of a CTA's range is one stage: x (64 KB), the block sums for the mins (4 KB, read from shared
//    memory instead of global) and the CTA's weight rows (one 2D tensor copy of kRows x 144 bytes, dense), each one
//    bulk copy issued by lane 0 of warp 0, completing on the stage's "full" mbarrier (expect_tx). (The first form
//    copied each row by its own 144-byte cp.async.bulk: ~2x slower than wg::wgmma_kernel on the H200, the ~200
//    small copies per stage took ~50 ns each.)
//  * no __syncthreads in the loop: every warp arrives on the stage's "empty" mbarrier when it is done with it (its
//    wgmmas waited, its shared loads used), warp 0 waits for that before refilling the slot. The warpgroups drift
//    apart, so one's dequantisation and fp32 epilogue overlap another's wgmmas (with __syncthreads per block they
//    all did the same phase at once), and the ~5800 cp.async per block and CTA become 3 bulk copies;
//  * the first wgmma of a half block starts its sum (scale-d 0) instead of 64 register moves zeroing it;
//  * kOv (2 warpgroups: registers): the second half block's A fragments and the block's mins products are built
//    while the first half's wgmmas run (same operations, same order into acc: same bits as without kOv).
//  * programmatic dependent launch (DS_MVB_RING_PDL=0: off): the kernel may start while x's preparation runs (that
//    kernel lets it); warp 0 issues the weight rows of the first two blocks, then every thread waits for the
//    preparation to complete (griddepcontrol.wait) before x, the sums, y or the split buffers are touched.
// Same products summed in the same order as wg::wgmma_kernel with the same warpgroup count and split plan (hi / lo
// per half block, then the block's mins), so the same bits (tests/cuda CudaMatvecBatched.WgmmaRingSameBitsAsWgmma);
// a column's bits do not depend on B (always 64 columns).
#pragma once
#include <cudaTypedefs.h>

#include "cuda/launch.cuh"
#include "cuda/matvec_wgmma.cuh"

namespace ds::cuda {
namespace wgr {

constexpr int kXm = 4096;  // block sums for the mins per block: 8 n-tiles x 32 lanes x 16 bytes
constexpr int kWPitch = 144;  // Q4_K ring: the CTA's rows of a block as one 2D tensor copy (dense rows)
template <int kWG>
constexpr int stage_bytes() { return wg::kXBlock + kXm + 64 * kWG * kWPitch; }
template <int kWG>
constexpr int smem_bytes() { return 2 * stage_bytes<kWG>() + 64; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(uint64_t* b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(saddr(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_expect(uint64_t* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(saddr(b)) : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* b, unsigned parity) {
  const uint32_t a = saddr(b);
  uint32_t ok = 0;
  while (!ok)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(ok)
        : "r"(a), "r"(parity)
        : "memory");
}
// 2D tile of the tensor map (innermost coordinate c0, then c1) into shared memory, completing on bar.
__device__ __forceinline__ void tensor_copy_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          saddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(saddr(bar))
      : "memory");
}
__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   saddr(dst)),
               "l"(src), "r"(bytes), "r"(saddr(bar))
               : "memory");
}

// A fragments of half block s for this thread's rows rbase, rbase + 8 (wg::wgmma_kernel's dequantisation).
__device__ __forceinline__ void build_a(const uint8_t* wslot, int rbase, int s, int t, int u, uint32_t (&af)[8][4]) {
  uint4 q[2];
  __half2 mul_lo[2], add_lo[2], mul_hi[2], add_hi[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint8_t* rp = wslot + (rbase + 8 * h) * kWPitch;
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

// The 8 wgmmas of one half block into c (the first one starts the sum), committed as one group.
__device__ __forceinline__ void mma_half(float (&c)[64], const uint32_t (&af)[8][4], const uint8_t* xs, uint32_t lbo,
                                         uint32_t sbo) {
  wg::wg_fence();
  wg::wgmma_128(c, af[0], wg::desc_for(xs, lbo, sbo), 0);
#pragma unroll
  for (int kk = 1; kk < 8; kk++) wg::wgmma_128(c, af[kk], wg::desc_for(xs + kk * 4096, lbo, sbo));
  wg::wg_commit();
}

// acc += d·hi, d·lo per batch column (columns n and 64 + n of c), as wg::wgmma_kernel.
__device__ __forceinline__ void epilogue(float (&acc)[8][4], const float (&c)[64], const float (&dd)[2]) {
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      acc[n][r] = fmaf(dd[r >> 1], c[32 + 4 * n + r], acc[n][r]);
      acc[n][r] = fmaf(dd[r >> 1], c[4 * n + r], acc[n][r]);
    }
}
#endif

// tw: the weights as a 2D uint8 tensor [rows][row_bytes] with boxes of kRows rows x one block (144 bytes); rows past
// the end are filled with zeros (their outputs are not stored).
template <int kWG, bool kOv>
__global__ void __launch_bounds__(128 * kWG, 1) ring_kernel(const wg::Args a, const __grid_constant__ CUtensorMap tw) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kRows = 64 * kWG, kThreads = 128 * kWG, kStage = stage_bytes<kWG>();
  constexpr unsigned kTx = wg::kXBlock + kXm + kRows * kWPitch;
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
  if (threadIdx.x == 0) {
    bar_init(&full[0], 1);
    bar_init(&full[1], 1);
    bar_init(&empty[0], 4 * kWG);
    bar_init(&empty[1], 4 * kWG);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  // stage layout: [x: kXBlock][block sums: kXm][weights: kRows x kPitch]; called by all of warp 0: the weights
  // (with the stage's expected bytes), then x and the sums (written by the preparation kernel)
  auto issue_w = [&](int i) {
    const int slot = i & 1;
    if (lane == 0) {
      bar_expect(&full[slot], kTx);
      tensor_copy_2d(smem + slot * kStage + wg::kXBlock + kXm, &tw, (int)((bk0 + i) * wg::kBlockBytes), (int)row0,
                     &full[slot]);
    }
  };
  auto issue_x = [&](int i) {
    const int slot = i & 1;
    uint8_t* dst = smem + slot * kStage;
    const int64_t blk = bk0 + i;
    if (lane == 0) {
      bulk_copy(dst, reinterpret_cast<const uint8_t*>(a.xw) + blk * wg::kXBlock, wg::kXBlock, &full[slot]);
      bulk_copy(dst + wg::kXBlock, a.xm + blk * 256, kXm, &full[slot]);
    }
  };
  if (warp == 0)
    for (int i = 0; i < 2 && i < n_my; i++) issue_w(i);
  grid_wait();
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
    if (warp == 0 && i >= 1 && i + 1 < n_my) {  // blocks 0 and 1 were issued above
      bar_wait(&empty[slot ^ 1], (unsigned)(((i - 1) >> 1) & 1));  // slot ^ 1 held block i − 1
      issue_w(i + 1);
      issue_x(i + 1);
    }
    bar_wait(&full[slot], (unsigned)((i >> 1) & 1));
    const uint8_t* xslot = smem + slot * kStage;
    const uint4* xms = reinterpret_cast<const uint4*>(xslot + wg::kXBlock);
    const uint8_t* wslot = xslot + wg::kXBlock + kXm;
    float dd[2], dm[2];
    uint32_t amin[4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint4 hd = *reinterpret_cast<const uint4*>(wslot + (rbase + 8 * h) * kWPitch);
      const __half2 dh = gemm::u2h(hd.x);
      dd[h] = __low2float(dh);
      dm[h] = -16.f * __high2float(dh);
      amin[h] = gemm::h2u(fold::byte_pair(hd.z & 0x3F3F3F3Fu, u));
      amin[2 + h] = gemm::h2u(fold::byte_pair(((hd.w >> 4) & 0x0F0F0F0Fu) | ((hd.z >> 2) & 0x30303030u), u));
    }
    float c[64];
    if constexpr (kOv) {
      uint32_t af0[8][4], af1[8][4];
      float cm[8][4];
      build_a(wslot, rbase, 0, t, u, af0);
      mma_half(c, af0, xslot, a.lbo, a.sbo);
      build_a(wslot, rbase, 1, t, u, af1);  // while half 0's wgmmas run
#pragma unroll
      for (int n = 0; n < 8; n++) {
        const uint4 xv = xms[n * 32 + lane];
#pragma unroll
        for (int r = 0; r < 4; r++) cm[n][r] = 0.f;
        fold::mma_f16(cm[n], amin, xv.x, xv.y);
        fold::mma_f16(cm[n], amin, xv.z, xv.w);
      }
      wg::wg_wait0();
      wg::keep(c);
      epilogue(acc, c, dd);
      mma_half(c, af1, xslot + wg::kXStep, a.lbo, a.sbo);
      wg::wg_wait0();
      wg::keep(c);
      epilogue(acc, c, dd);
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) acc[n][r] = fmaf(dm[r >> 1], cm[n][r], acc[n][r]);
    } else {
#pragma unroll 1
      for (int s = 0; s < 2; s++) {
        uint32_t af[8][4];
        build_a(wslot, rbase, s, t, u, af);
        mma_half(c, af, xslot + s * wg::kXStep, a.lbo, a.sbo);
        wg::wg_wait0();
        wg::keep(c);
        epilogue(acc, c, dd);
      }
#pragma unroll
      for (int n = 0; n < 8; n++) {
        const uint4 xv = xms[n * 32 + lane];
        float cm[4] = {0.f, 0.f, 0.f, 0.f};
        fold::mma_f16(cm, amin, xv.x, xv.y);
        fold::mma_f16(cm, amin, xv.z, xv.w);
#pragma unroll
        for (int r = 0; r < 4; r++) acc[n][r] = fmaf(dm[r >> 1], cm[r], acc[n][r]);
      }
    }
    __syncwarp();
    if (lane == 0) bar_arrive(&empty[slot]);
  }

  wg::store_acc<kRows, kThreads>(a, acc, tile, split, row0, rbase, t);
#endif
}

// Programmatic dependent launch of the ring kernels (DS_MVB_RING_PDL=0: plain launches).
inline bool& pdl_setting() {
  static bool v = [] {
    const char* e = std::getenv("DS_MVB_RING_PDL");
    return !(e && e[0] == '0');
  }();
  return v;
}
// The weights as a 2D uint8 tensor [rows][row_bytes] (row_bytes a multiple of 16) with boxes of n_rows rows x
// box_bytes (cuTensorMapEncodeTiled through the runtime's driver entry point: no link against libcuda); parts of a box
// past the rows' end or the last row are filled with zeros.
// The driver's tensor-map encoder, looked up once (null where the driver has none: matvec_batched.cu then takes
// wg::wgmma_kernel instead of the ring).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}
inline Status weight_map(const uint8_t* w, int64_t rows, int64_t row_bytes, int box_bytes, int n_rows, CUtensorMap& map) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) return cu_err("cuda matvec_batched (wgmma ring): no cuTensorMapEncodeTiled");
  const cuuint64_t dims[2] = {(cuuint64_t)row_bytes, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)row_bytes};
  const cuuint32_t box[2] = {(cuuint32_t)box_bytes, (cuuint32_t)n_rows}, estr[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(w), dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return cu_err("cuda matvec_batched (wgmma ring): cuTensorMapEncodeTiled: {}", (int)r);
  return {};
}

template <int kWG, bool kOv>
Status launch_ring(const wg::Args& a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<kWG>();
  static const cudaError_t e =
      cudaFuncSetAttribute(ring_kernel<kWG, kOv>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess) return cu_err("cuda matvec_batched (wgmma ring): cudaFuncSetAttribute: {}", cudaGetErrorString(e));
  CUtensorMap map;
  DS_TRY(weight_map(a.w, a.rows, a.row_bytes, kWPitch, 64 * kWG, map));
  const cudaError_t le = launch_pdl(ring_kernel<kWG, kOv>, grid, dim3(128 * kWG), kSmem, stream, pdl_setting(), a, map);
  if (le != cudaSuccess) return cu_err("cuda matvec_batched (wgmma ring): launch: {}", cudaGetErrorString(le));
  CUDA_TRY_LAUNCH("matvec_batched (wgmma ring)", stream);
  return {};
}

// variant: 2 or 3 warpgroups, 4 = 2 overlapped (kOv), else by shape (wg::choose_wg; 2 -> overlapped).
inline Status launch(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                     cudaStream_t stream, bool accumulate, int variant) {
  if (variant < 2 || variant > 4) variant = wg::choose_wg(rows, cols, sm_count()) == 3 ? 3 : 4;
  const int n_wg = variant == 3 ? 3 : 2;
  wg::Args a;
  dim3 grid;
  DS_TRY(wg::prepare(w, rows, cols, x, y, batch, stream, accumulate, n_wg, false, a, grid));
  if (variant == 3) return launch_ring<3, false>(a, grid, stream);
  if (variant == 4) return launch_ring<2, true>(a, grid, stream);
  return launch_ring<2, false>(a, grid, stream);
}

}  // namespace wgr
}  // namespace ds::cuda
