// The mbarrier ring's pieces shared by the Q4_K block kernel (matvec_wgmma_block.cuh) and the Q6_K ring kernel
// (matvec_wgmma_q6k_ring.cuh), sm_90a only; include from matvec_batched.cu after matvec_wgmma.cuh: mbarrier init /
// expect_tx / arrive / wait, the 2D tensor copy and the 1D bulk copy into shared memory that complete on an mbarrier,
// griddepcontrol.wait, the weights' tensor map (cuTensorMapEncodeTiled through the runtime's driver entry point) and
// the programmatic-dependent-launch switch. Per block one stage (x 64 KB, the block sums for the mins 4 KB, the CTA's
// weight rows as one 2D tensor copy of kRows x 144 bytes, dense), each one bulk copy issued by lane 0 of warp 0 and
// completing on the stage's "full" mbarrier; every warp arrives on the stage's "empty" mbarrier when done with it and
// warp 0 waits for that before refilling the slot, so no __syncthreads in the loop and the warpgroups drift apart (one's
// dequantisation and epilogue overlap another's wgmmas). (The first form copied each row by its own 144-byte
// cp.async.bulk: ~2x slower than wg::wgmma_kernel on the H200, the ~200 small copies per stage took ~50 ns each.)
// (Removed in session 42: the Q4_K ring kernel itself, DS_MVB_WG 4 .. 7 (wg::wgmma_kernel's products in the same order
// on this data path, same bits; by shape, 2 / 3 warpgroups forced, 2 overlapped), the default from session 7 until the
// block kernel (batched9: ffn_gate_up 54.7 vs 58.2 us, output 478.6 vs 507.6 at B = 64 on the H200).)
#pragma once
#include <cudaTypedefs.h>

#include "cuda/launch.cuh"
#include "cuda/matvec_wgmma.cuh"

namespace ds::cuda {
namespace wgr {

constexpr int kXm = 4096;  // block sums for the mins per block: 8 n-tiles x 32 lanes x 16 bytes
constexpr int kWPitch = 144;  // Q4_K: the CTA's rows of a block as one 2D tensor copy (dense rows)

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
#endif

// Programmatic dependent launch of the block and Q6_K ring kernels (DS_MVB_RING_PDL=0: plain launches).
inline bool& pdl_setting() {
  static bool v = [] {
    const char* e = std::getenv("DS_MVB_RING_PDL");
    return !(e && e[0] == '0');
  }();
  return v;
}
// The driver's tensor-map encoder, looked up once (null where the driver has none: matvec_batched.cu then takes
// wg::wgmma_kernel instead of the block kernel).
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
// The weights as a 2D uint8 tensor [rows][row_bytes] (row_bytes a multiple of 16) with boxes of n_rows rows x
// box_bytes (cuTensorMapEncodeTiled through the runtime's driver entry point: no link against libcuda); parts of a box
// past the rows' end or the last row are filled with zeros.
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

}  // namespace wgr
}  // namespace ds::cuda
