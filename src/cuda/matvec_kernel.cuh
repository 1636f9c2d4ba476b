// The matvec kernel template and its launcher, shared by matvec.cu (batch 1) and matvec_batched.cu
// (1 < B <= 64), which instantiate it for every type in separate translation units (they compile in
// parallel). See matvec.cu for the thread mapping.
#pragma once
#include <algorithm>

#include "cuda/cuda_util.h"
#include "cuda/matvec.h"
#include "cuda/quant_traits.cuh"

namespace ds::cuda {
namespace mv {
using qt::QuantTraits;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kR = 4;             // rows per row group
constexpr int kMaxTileUnits = 32;  // units per row per tile = lpr <= 32
constexpr int kBT = 8;            // batch columns per pass in the batched kernel

template <class QT>
struct Tile {
  static constexpr int kMaxBlocks = kMaxTileUnits / QT::kUnits;
  // 16-byte slots per row: the tile's bytes plus one slot for the start's misalignment.
  static constexpr int kSlots = (kMaxBlocks * QT::kBlockBytes + 15) / 16 + 1;
  static constexpr int kStageBytes = kR * kSlots * 16;
  // Stages of the per-warp cp.async ring: as many as fit in ~10 KB per warp (2..4), so each warp keeps
  // 1..3 tiles in flight while it decodes one (about 100 KB in flight per SM at 16 warps).
  static constexpr int kStages = kStageBytes * 4 <= 10240 ? 4 : kStageBytes * 3 <= 10752 ? 3 : 2;
  static constexpr int kSmemBytes = kWarps * kStages * kStageBytes;  // dynamic shared memory per CTA
};

// 16-byte asynchronous global -> shared copy (sm_80+); src_bytes = 0 fills zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

struct MvArgs {
  const uint8_t* w;
  int64_t row_bytes, rows, cols;
  const float* x;
  float* y;
  int batch, lpr, ks;
  bool accumulate;
};

// v = the unit's activations in unit order; s[r] = their sum over run r (if the type needs it).
template <class QT, bool kSums>
__device__ __forceinline__ void load_x(const float* __restrict__ xb, int k, float (&v)[QT::kE],
                                       float (&s)[QT::kRuns]) {
#pragma unroll
  for (int r = 0; r < QT::kRuns; r++) {
    const float4* p = reinterpret_cast<const float4*>(xb + QT::run_start(k, r));
    float sum = 0;
#pragma unroll
    for (int i = 0; i < QT::kRunLen / 4; i++) {
      const float4 f = __ldg(p + i);
      v[r * QT::kRunLen + 4 * i + 0] = f.x;
      v[r * QT::kRunLen + 4 * i + 1] = f.y;
      v[r * QT::kRunLen + 4 * i + 2] = f.z;
      v[r * QT::kRunLen + 4 * i + 3] = f.w;
      if constexpr (kSums) sum += (f.x + f.y) + (f.z + f.w);
    }
    s[r] = sum;
  }
}

__device__ __forceinline__ float group_sum(float v, int lpr) {
  for (int o = lpr / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class QT, bool kBatched>
__global__ void __launch_bounds__(kThreads, 2) matvec_kernel(const MvArgs a) {
  using TL = Tile<QT>;
  constexpr int kRowBytes = TL::kSlots * 16;
  extern __shared__ __align__(16) uint8_t s_dyn[];  // [kWarps][kStages][kR][kRowBytes]
  __shared__ float s_out[kWarps][kR][kBatched ? kMatvecMaxBatch : 1];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ks = a.ks, lpr = a.lpr;
  const int groups = 32 / lpr;  // lane groups, each on its own rows
  const int rpl = kR / groups;  // rows per lane: 1, 2 or 4
  const int g = lane / lpr, li = lane % lpr;
  const int64_t row0 = ((int64_t)blockIdx.x * (kWarps / ks) + warp / ks) * kR;
  const int kslice = warp % ks;

  const int64_t blocks_row = a.cols / QT::kBlockElems;
  const int64_t units_row = blocks_row * QT::kUnits;
  const int tile_blocks = lpr / QT::kUnits;
  const int64_t n_tiles = (units_row + lpr - 1) / lpr;
  // Rows past the end re-read the last row (valid memory); their results are never stored.
  auto row_ptr = [&](int r) { const int64_t row = row0 + r < a.rows ? row0 + r : a.rows - 1;
    return a.w + row * a.row_bytes; };

  float acc[kR];
#pragma unroll
  for (int j = 0; j < kR; j++) acc[j] = 0.f;
  if constexpr (kBatched) {
    for (int i = lane; i < kR * kMatvecMaxBatch; i += 32) (&s_out[warp][0][0])[i] = 0.f;
  }

  // Pipeline: tiles kslice, kslice + ks, ... of this warp go through a ring of kStages shared-memory
  // stages filled by cp.async; while tile i is decoded, tiles i+1 .. i+kStages-1 are in flight.
  uint8_t* ring = s_dyn + (size_t)warp * TL::kStages * TL::kStageBytes;
  // Copy mapping: 8 lanes per row (kR = 4 rows), lane copies slots cj, cj + 8, ... of row cr.
  static_assert(kR == 4, "the copy mapping assumes 4 rows x 8 lanes");
  const int cr = lane >> 3, cj = lane & 7;
  const uint8_t* copy_row = row_ptr(cr);
  auto issue = [&](int64_t i) {  // i-th tile of this warp; one commit group per call, even if empty
    const int64_t t = kslice + i * ks;
    if (t < n_tiles) {
      const int64_t b0 = t * tile_blocks;
      const int tile_bytes =
          (int)(blocks_row - b0 < tile_blocks ? blocks_row - b0 : (int64_t)tile_blocks) * QT::kBlockBytes;
      const uint8_t* start = copy_row + b0 * QT::kBlockBytes;
      const uint8_t* a0 = (const uint8_t*)((uintptr_t)start & ~(uintptr_t)15);
      uint8_t* dst = ring + (int)(i % TL::kStages) * TL::kStageBytes + cr * kRowBytes;
#pragma unroll
      for (int c = 0; c < (TL::kSlots + 7) / 8; c++) {
        const int j = cj + 8 * c;
        if (j < TL::kSlots) {
          const bool in = a0 + 16 * j < start + tile_bytes;
          cp_async16(dst + 16 * j, in ? a0 + 16 * j : a0, in ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < TL::kStages - 1; i++) issue(i);

  for (int64_t it = 0;; it++) {
    const int64_t t = kslice + it * ks;
    if (t >= n_tiles) break;
    issue(it + TL::kStages - 1);  // into the stage decoded in the previous iteration
    cp_async_wait<TL::kStages - 1>();  // this lane's copies of tile `it` have landed
    __syncwarp();                      // ... and every other lane's
    const int64_t b0 = t * tile_blocks;
    const uint8_t* stage = ring + (int)(it % TL::kStages) * TL::kStageBytes;

    const int64_t u = t * lpr + li;
    const bool active = u < units_row;
    const int64_t blk = u / QT::kUnits;
    const int k = (int)(u % QT::kUnits);
    const int lb = (int)(blk - b0);
    auto tile_ptr = [&](int r) {
      const int mis = (int)((uintptr_t)(row_ptr(r) + b0 * QT::kBlockBytes) & 15);
      return stage + r * kRowBytes + mis + lb * QT::kBlockBytes;
    };

    if constexpr (!kBatched) {
      if (active) {
        float v[QT::kE], s[QT::kRuns];
        load_x<QT, QT::kNeedsSums>(a.x + blk * QT::kBlockElems, k, v, s);
#pragma unroll
        for (int j = 0; j < kR; j++)
          if (j < rpl) acc[j] += QT::dot(tile_ptr(g + groups * j), k, v, s);
      }
    } else {
      for (int bc = 0; bc < a.batch; bc += kBT) {
        float pacc[kBT][kR];
#pragma unroll
        for (int b = 0; b < kBT; b++)
#pragma unroll
          for (int j = 0; j < kR; j++) pacc[b][j] = 0.f;
        if (active) {
#pragma unroll
          for (int j = 0; j < kR; j++) {
            if (j >= rpl) continue;
            float w[QT::kE];
            QT::dequant(tile_ptr(g + groups * j), k, w);
#pragma unroll
            for (int b = 0; b < kBT; b++) {
              if (bc + b >= a.batch) continue;
              float v[QT::kE], s[QT::kRuns];
              load_x<QT, false>(a.x + (int64_t)(bc + b) * a.cols + blk * QT::kBlockElems, k, v, s);
              float d = 0.f;
#pragma unroll
              for (int i = 0; i < QT::kE; i++) d += w[i] * v[i];
              pacc[b][j] += d;
            }
          }
        }
#pragma unroll
        for (int b = 0; b < kBT; b++)
#pragma unroll
          for (int j = 0; j < kR; j++)
            if (bc + b < a.batch && j < rpl) {  // warp-uniform: the shuffles see every lane
              const float val = group_sum(pacc[b][j], lpr);
              if (li == 0) s_out[warp][g + groups * j][bc + b] += val;
            }
      }
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
  }
  cp_async_wait<0>();

  if constexpr (!kBatched) {
#pragma unroll
    for (int j = 0; j < kR; j++)
      if (j < rpl) {
        const float val = group_sum(acc[j], lpr);
        if (li == 0) s_out[warp][g + groups * j][0] = val;
      }
  }
  __syncthreads();
  if (kslice == 0) {
    const int nb = kBatched ? a.batch : 1;
    for (int i = lane; i < kR * nb; i += 32) {
      const int r = i % kR, b = i / kR;
      const int64_t row = row0 + r;
      if (row >= a.rows) continue;
      float sum = 0.f;
      for (int w2 = 0; w2 < ks; w2++) sum += s_out[warp + w2][r][b];
      float* yp = a.y + (int64_t)b * a.rows + row;
      *yp = a.accumulate ? *yp + sum : sum;
    }
  }
}

template <class QT, bool kBatched>
Status launch(GgmlType type, MvArgs a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cu_err("cuda matvec: empty matrix [{}, {}]", a.rows, a.cols);
  if (a.cols % QT::kBlockElems != 0)
    return cu_err("cuda matvec: {} weights need cols to be a multiple of {}, got {}", type_cstr(type),
               QT::kBlockElems, a.cols);
  if ((uintptr_t)a.w % 16 != 0) return cu_err("cuda matvec: weights {} are not 16-byte aligned", (const void*)a.w);
  if ((uintptr_t)a.x % 16 != 0) return cu_err("cuda matvec: x {} is not 16-byte aligned", (const void*)a.x);
  if ((uintptr_t)a.y % 4 != 0) return cu_err("cuda matvec: y {} is not 4-byte aligned", (const void*)a.y);
  a.row_bytes = a.cols / QT::kBlockElems * QT::kBlockBytes;
  const int64_t units = a.cols / QT::kBlockElems * QT::kUnits;
  a.lpr = units >= 32 ? 32 : units >= 16 ? 16 : 8;
  const int64_t n_tiles = (units + a.lpr - 1) / a.lpr;
  const int64_t n_groups = (a.rows + kR - 1) / kR;
  // Split the columns over more warps while there are too few row groups to fill the GPU.
  const int64_t want_warps = (int64_t)sm_count() * 32;
  a.ks = 1;
  while (a.ks < kWarps && n_groups * a.ks < want_warps && n_tiles >= 2 * a.ks) a.ks *= 2;
  const int64_t per_cta = kWarps / a.ks;
  const int64_t grid = (n_groups + per_cta - 1) / per_cta;
  static const cudaError_t attr = cudaFuncSetAttribute(
      matvec_kernel<QT, kBatched>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile<QT>::kSmemBytes);
  CUDA_TRY(attr);
  matvec_kernel<QT, kBatched><<<(unsigned)grid, kThreads, Tile<QT>::kSmemBytes, stream>>>(a);
  CUDA_TRY_LAUNCH("matvec", stream);
  return {};
}

}  // namespace mv
}  // namespace ds::cuda
