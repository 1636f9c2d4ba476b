// Certified greedy selection (cg38; CudaModel::decode_select when every row wants only its argmax): the output head
// runs in its hi-only bound form (matvec_batched_hi: a third of the tensor work), and the exact argmax is recovered
// from those approximate logits L' with a bound:
//   |L'_r − (W x)_r| <= eps_r = ||w_r||_1 · max|x| · 2^-9   (2^-10 from the dropped terms, see matvec.h, and fp32
//                                                            rounding, which stays below 2^-14: a 2x margin)
// so a row whose L' + eps is below the best L' − eps cannot be the argmax of W x. Those that can (the candidates:
// a few per row on real and random weights) get their logit computed exactly, in double from the dequantized row
// (every product exact, ~1e-16 relative), and the argmax is the best of those (ties: the lowest id, as
// sampler::argmax). So the token is the argmax of W x itself, not of an approximation: batch-independent, and at
// least as exact as the fp32 head's (whose rounding could flip a near-tie).
// Four kernels, after the head: (1) max|x| per row of x; (2) per (row, chunk): the chunk's best lower bound
// L' − eps (rounded down), its best upper bound L' + eps (rounded up) and its NaN / inf count; (3) per (row, chunk):
// a chunk whose best upper bound is below the row's best lower bound holds no candidate and is left unread (all but
// ~1 of a row's 61 chunks on the 9B); in the others the candidates, L' + eps >= the row's best lower bound, are each
// computed exactly by one warp; the chunk's best (value, id); (4) per row: the best chunk.
// A row with eps = 0 (a zero weight row, or x = 0) is exact as computed (L' = 0 = W x): no dot product for it.
#include <cmath>
#include <cstdint>

#include "cuda/cuda_util.h"
#include "cuda/model/qwen35_cuda.cuh"
#include "cuda/quant_traits.cuh"

namespace ds::cuda {
namespace {

using QT = qt::QuantTraits<GgmlType::Q6_K>;
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kPer = 16, kChunk = kThreads * kPer;  // logits per thread / per (row, chunk) block
constexpr float kEpsScale = 0x1p-9f;  // eps_r = ||w_r||_1 · max|x| · kEpsScale

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ||w_r||_1 of rows [8 blockIdx.x, + 8), one warp each: |dequantized weights| summed in double, rounded up.
__global__ void __launch_bounds__(kThreads) row_l1_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                                          float* __restrict__ l1) {
  const int64_t r = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const int64_t nblk = cols / QT::kBlockElems, units = nblk * QT::kUnits;
  const uint8_t* row = w + r * nblk * QT::kBlockBytes;
  double s = 0;
  for (int64_t u = lane; u < units; u += 32) {
    float v[QT::kE];
    QT::dequant(row + (u / QT::kUnits) * QT::kBlockBytes, (int)(u % QT::kUnits), v);
#pragma unroll
    for (int i = 0; i < QT::kE; i++) s += fabs((double)v[i]);
  }
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) l1[r] = __double2float_ru(s);
}

// (1) max|x| of row b of x ([B][H]).
__global__ void __launch_bounds__(kThreads) cert_xmax(const float* __restrict__ x, int64_t H, float* __restrict__ xmax) {
  __shared__ float red[kWarps];
  const int b = blockIdx.x;
  float m = 0.f;
  for (int64_t i = threadIdx.x; i < H; i += kThreads) m = fmaxf(m, fabsf(x[b * H + i]));
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < kWarps; i++) m = fmaxf(m, red[i]);
    xmax[b] = m;
  }
}

__device__ __forceinline__ float eps_of(float l1, float xm) { return __fmul_ru(__fmul_ru(l1, xm), kEpsScale); }

// (2) per (chunk, row): max over the chunk of L' − eps (rounded down) and of L' + eps (rounded up), NaN logits
// skipped, and the NaN / inf count.
__global__ void __launch_bounds__(kThreads) cert_lower(const float* __restrict__ L, const float* __restrict__ l1,
                                                       const float* __restrict__ xmax, int V, int n_chunks,
                                                       float* __restrict__ part_lo, float* __restrict__ part_hi,
                                                       int* __restrict__ part_bad) {
  __shared__ float red[kWarps], redh[kWarps];
  __shared__ int redb[kWarps];
  const int c = blockIdx.x, b = blockIdx.y;
  const float xm = xmax[b];
  const float* Lb = L + (int64_t)b * V;
  float lo = -INFINITY, hi = -INFINITY;
  int bad = 0;
  for (int i = c * kChunk + threadIdx.x; i < min(V, (c + 1) * kChunk); i += kThreads) {
    const float v = Lb[i], e = eps_of(l1[i], xm);
    bad += !isfinite(v);
    lo = fmaxf(lo, __fsub_rd(v, e));  // fmaxf: a NaN operand leaves the other
    hi = fmaxf(hi, __fadd_ru(v, e));
  }
  lo = warp_max(lo);
  hi = warp_max(hi);
  for (int o = 16; o; o >>= 1) bad += __shfl_xor_sync(0xffffffffu, bad, o);
  if (threadIdx.x % 32 == 0) {
    red[threadIdx.x / 32] = lo;
    redh[threadIdx.x / 32] = hi;
    redb[threadIdx.x / 32] = bad;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < kWarps; i++) {
      lo = fmaxf(lo, red[i]);
      hi = fmaxf(hi, redh[i]);
      bad += redb[i];
    }
    part_lo[b * n_chunks + c] = lo;
    part_hi[b * n_chunks + c] = hi;
    part_bad[b * n_chunks + c] = bad;
  }
}

// W x of row r for column x (H floats) in double, by one warp (every lane gets it; a fixed order: run to run the same).
__device__ double exact_dot(const uint8_t* __restrict__ w, int64_t r, int64_t H, const float* __restrict__ x) {
  const int lane = threadIdx.x % 32;
  const int64_t nblk = H / QT::kBlockElems, units = nblk * QT::kUnits;
  const uint8_t* row = w + r * nblk * QT::kBlockBytes;
  double s = 0;
  for (int64_t u = lane; u < units; u += 32) {
    const int64_t blk = u / QT::kUnits;
    const int k = (int)(u % QT::kUnits);
    float v[QT::kE];
    QT::dequant(row + blk * QT::kBlockBytes, k, v);
    const float* xb = x + blk * QT::kBlockElems;
#pragma unroll
    for (int t = 0; t < QT::kRuns; t++)
#pragma unroll
      for (int i = 0; i < QT::kRunLen; i++)
        s += (double)v[t * QT::kRunLen + i] * (double)xb[QT::run_start(k, t) + i];
  }
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// (value, id) better than (bv, bid): larger value, ties the lower id; a NaN value is never better.
__device__ __forceinline__ bool better(double v, int id, double bv, int bid) {
  return v > bv || (v == bv && id < bid);
}

// (3) per (chunk, row): the candidates of the chunk computed exactly; the best (value, id), id -1 if none. A chunk whose
// best upper bound is below the row's best lower bound (part_hi < m) has none: the block writes "none" and leaves
// without reading its logits. Otherwise each thread loads its kPer logits and row norms at once (all in flight),
// then the warp walks its candidates (few) by ballot.
__global__ void __launch_bounds__(kThreads) cert_pick(const float* __restrict__ L, const float* __restrict__ l1,
                                                      const float* __restrict__ xmax, const float* __restrict__ x,
                                                      const uint8_t* __restrict__ w, int V, int64_t H, int n_chunks,
                                                      const float* __restrict__ part_lo,
                                                      const float* __restrict__ part_hi, double* __restrict__ part_val,
                                                      int* __restrict__ part_id) {
  __shared__ double sv[kWarps];
  __shared__ int sid[kWarps];
  const int c = blockIdx.x, b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m = -INFINITY;  // the row's best lower bound: every warp reduces the same values in the same order
  for (int i = lane; i < n_chunks; i += 32) m = fmaxf(m, part_lo[b * n_chunks + i]);
  m = warp_max(m);
  if (part_hi[b * n_chunks + c] < m) {  // the same for the whole block: no candidate here
    if (threadIdx.x == 0) {
      part_val[b * n_chunks + c] = -INFINITY;
      part_id[b * n_chunks + c] = -1;
    }
    return;
  }
  const float xm = xmax[b];
  const float* Lb = L + (int64_t)b * V;
  const int begin = c * kChunk, end = min(V, begin + kChunk);
  float v[kPer], e[kPer];
#pragma unroll
  for (int j = 0; j < kPer; j++) {
    const int i = begin + j * kThreads + (int)threadIdx.x;
    v[j] = i < end ? Lb[i] : NAN;
    e[j] = i < end ? eps_of(l1[i], xm) : 0.f;
  }
  const float* xb = x + (int64_t)b * H;
  double best = -INFINITY;
  int bid = -1;
#pragma unroll 1
  for (int j = 0; j < kPer; j++) {
    unsigned mask = __ballot_sync(0xffffffffu, __fadd_ru(v[j], e[j]) >= m);  // false for NaN and past the end
    while (mask) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const int id = begin + j * kThreads + warp * 32 + src;
      const float ej = __shfl_sync(0xffffffffu, e[j], src), vj = __shfl_sync(0xffffffffu, v[j], src);
      const double val = ej == 0.f ? (double)vj : exact_dot(w, id, H, xb);
      if (!isnan(val) && (bid < 0 || better(val, id, best, bid))) {
        best = val;
        bid = id;
      }
    }
  }
  if (lane == 0) {
    sv[warp] = best;
    sid[warp] = bid;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < kWarps; i++)
      if (sid[i] >= 0 && (bid < 0 || better(sv[i], sid[i], best, bid))) {
        best = sv[i];
        bid = sid[i];
      }
    part_val[b * n_chunks + c] = best;
    part_id[b * n_chunks + c] = bid;
  }
}

// (4) per row, one warp: the best chunk's (value, id) (lanes take chunks in turn, then a butterfly) and the NaN / inf
// count, as select_rows reports them.
__global__ void cert_merge(int n_chunks, const double* __restrict__ part_val, const int* __restrict__ part_id,
                           const int* __restrict__ part_bad, SelectResultDev out) {
  const int b = blockIdx.x, lane = threadIdx.x;
  double best = -INFINITY;
  int bid = -1, bad = 0;
  for (int c = lane; c < n_chunks; c += 32) {
    const int id = part_id[b * n_chunks + c];
    bad += part_bad[b * n_chunks + c];
    if (id >= 0 && (bid < 0 || better(part_val[b * n_chunks + c], id, best, bid))) {
      best = part_val[b * n_chunks + c];
      bid = id;
    }
  }
  for (int o = 16; o; o >>= 1) {
    const double ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oid = __shfl_xor_sync(0xffffffffu, bid, o);
    bad += __shfl_xor_sync(0xffffffffu, bad, o);
    if (oid >= 0 && (bid < 0 || better(ov, oid, best, bid))) {
      best = ov;
      bid = oid;
    }
  }
  if (lane != 0) return;
  out.argmax[b] = bid < 0 ? 0 : bid;  // none only when every logit is NaN: nonfinite says so
  out.max[b] = bid < 0 ? NAN : (float)best;
  out.nonfinite[b] = bad;
}

int chunks_of(int64_t V) { return (int)((V + kChunk - 1) / kChunk); }

}  // namespace

bool certify_supported(GgmlType type, int64_t V, int64_t H) {
  return type == GgmlType::Q6_K && V >= 1 && V <= (1 << 30) && H % QT::kBlockElems == 0 && H > 0;
}

size_t certify_scratch_bytes(int B, int64_t V) {
  return (size_t)B * (4 + (size_t)chunks_of(V) * (8 + 4 + 4 + 4 + 4));
}

Status row_l1_norms(GgmlType type, const void* w, int64_t rows, int64_t cols, float* l1, cudaStream_t st) {
  if (!certify_supported(type, rows, cols))
    return cu_err("cuda row_l1_norms: {} [{}, {}] not supported", type_cstr(type), rows, cols);
  row_l1_kernel<<<(unsigned)((rows + kWarps - 1) / kWarps), kThreads, 0, st>>>(static_cast<const uint8_t*>(w), rows,
                                                                               cols, l1);
  CUDA_TRY_LAUNCH("row_l1_norms", st);
  return {};
}

Status certified_argmax(GgmlType type, const float* approx, const float* x, const void* w, const float* l1, int B,
                        int64_t V, int64_t H, void* scratch, size_t scratch_bytes, const SelectResultDev& out,
                        cudaStream_t st) {
  if (!certify_supported(type, V, H) || B < 1)
    return cu_err("cuda certified_argmax: {} [{}, {}] at batch {} not supported", type_cstr(type), V, H, B);
  if (scratch_bytes < certify_scratch_bytes(B, V)) return cu_err("cuda certified_argmax: scratch too small");
  const int n = chunks_of(V);
  char* p = static_cast<char*>(scratch);
  double* part_val = reinterpret_cast<double*>(p);
  p += (size_t)B * n * 8;
  float* part_lo = reinterpret_cast<float*>(p);
  p += (size_t)B * n * 4;
  float* part_hi = reinterpret_cast<float*>(p);
  p += (size_t)B * n * 4;
  int* part_bad = reinterpret_cast<int*>(p);
  p += (size_t)B * n * 4;
  int* part_id = reinterpret_cast<int*>(p);
  p += (size_t)B * n * 4;
  float* xmax = reinterpret_cast<float*>(p);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  cert_xmax<<<B, kThreads, 0, st>>>(x, H, xmax);
  CUDA_TRY_LAUNCH("certified_argmax (max |x|)", st);
  cert_lower<<<dim3(n, B), kThreads, 0, st>>>(approx, l1, xmax, (int)V, n, part_lo, part_hi, part_bad);
  CUDA_TRY_LAUNCH("certified_argmax (lower bounds)", st);
  cert_pick<<<dim3(n, B), kThreads, 0, st>>>(approx, l1, xmax, x, wb, (int)V, H, n, part_lo, part_hi, part_val,
                                              part_id);
  CUDA_TRY_LAUNCH("certified_argmax (candidates)", st);
  cert_merge<<<B, 32, 0, st>>>(n, part_val, part_id, part_bad, out);
  CUDA_TRY_LAUNCH("certified_argmax (merge)", st);
  return {};
}

}  // namespace ds::cuda
