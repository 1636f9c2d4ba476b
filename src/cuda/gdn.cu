// Gated delta rule, recurrent form (ops/gdn.h), for decode. Thread mapping: 8 lanes own one value
// row j of a head's state M = S^T [dv][dk] (each lane dk/8 keys, as float4 chunks p, p+8, ... so the
// 8 lanes of a row read 128 contiguous bytes per load); a 128-thread block owns 16 rows of one
// (sequence, head); grid = (ceil(dv/16), nv, n_seqs). The state stays in registers over all the
// sequence's tokens in this call: read once, written once. Dot products reduce over the 8 lanes with
// three shuffles. gdn_recurrent_gated: one block of 8 x dv threads per (sequence, head).
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {
constexpr int kLanesPerRow = 8;
constexpr int kRowsPerBlock = 16;

__device__ __forceinline__ float row_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v;
}

// Gated form: the block holds all dv rows of the head, so the gated RMSNorm of the output row
// (ops/rms_norm_gated.h) is one block reduction per token.
struct GateArgs {
  const float* z;       // [n_tokens, nv, dv]
  const float* norm_w;  // [dv]
  float eps;
};

template <int kDk, bool kGated>
__global__ void __launch_bounds__(kGated ? 1024 : kLanesPerRow * kRowsPerBlock)
    gdn_recurrent_kernel(const ops::GdnParams p, const float* __restrict__ q, const float* __restrict__ k,
                         const float* __restrict__ v, const float* __restrict__ g, const float* __restrict__ beta,
                         float* state, const int32_t* seq_starts, const int32_t* slots, float* out,
                         const GateArgs ga) {
  __shared__ float scratch[32];
  constexpr int kChunks = kDk / 4 / kLanesPerRow;  // float4 chunks per lane
  const int lp = threadIdx.x % kLanesPerRow;
  const int64_t j = (int64_t)blockIdx.x * (blockDim.x / kLanesPerRow) + threadIdx.x / kLanesPerRow;
  const int64_t h = blockIdx.y, s = blockIdx.z;
  const int64_t nv = p.n_v_heads, dv = p.d_v, kh = h % p.n_k_heads;  // GGUF tiled V-head order
  const bool live = j < dv;
  const int64_t t0 = seq_starts ? seq_starts[s] : 0;
  const int64_t t1 = seq_starts ? seq_starts[s + 1] : p.n_tokens;
  float4* row = reinterpret_cast<float4*>(state + ((int64_t)(slots ? slots[s] : s) * nv + h) * dv * kDk +
                                          (live ? j : 0) * kDk);
  float4 m[kChunks];
#pragma unroll
  for (int i = 0; i < kChunks; i++) m[i] = live ? row[lp + kLanesPerRow * i] : make_float4(0, 0, 0, 0);

  for (int64_t t = t0; t < t1; t++) {
    const float4* qt = reinterpret_cast<const float4*>(q + t * p.q_stride + kh * kDk);
    const float4* kt = reinterpret_cast<const float4*>(k + t * p.k_stride + kh * kDk);
    const float decay = expf(g[t * nv + h]);
    const float b = beta[t * nv + h];
    const float vj = live ? v[t * p.v_stride + h * dv + j] : 0.f;
    float4 kk[kChunks];
    float kv = 0.f;
#pragma unroll
    for (int i = 0; i < kChunks; i++) {
      kk[i] = __ldg(kt + lp + kLanesPerRow * i);
      m[i].x *= decay; m[i].y *= decay; m[i].z *= decay; m[i].w *= decay;
      kv += m[i].x * kk[i].x + m[i].y * kk[i].y + m[i].z * kk[i].z + m[i].w * kk[i].w;
    }
    const float delta = (vj - row_sum(kv)) * b;
    float o = 0.f;
#pragma unroll
    for (int i = 0; i < kChunks; i++) {
      const float4 qq = __ldg(qt + lp + kLanesPerRow * i);
      m[i].x += delta * kk[i].x; m[i].y += delta * kk[i].y; m[i].z += delta * kk[i].z; m[i].w += delta * kk[i].w;
      o += m[i].x * qq.x + m[i].y * qq.y + m[i].z * qq.z + m[i].w * qq.w;
    }
    o = row_sum(o) * p.scale;
    if constexpr (kGated) {
      const float ss = block_sum(live && lp == 0 ? o * o : 0.f, scratch);
      if (live && lp == 0) {
        const int64_t i = (t * nv + h) * dv + j;
        out[i] = o * (1.0f / sqrtf(ss / (float)dv + ga.eps)) * ga.norm_w[j] * silu(ga.z[i]);
      }
    } else {
      if (live && lp == 0) out[(t * nv + h) * dv + j] = o;
    }
  }
  if (live) {
#pragma unroll
    for (int i = 0; i < kChunks; i++) row[lp + kLanesPerRow * i] = m[i];
  }
}

Status check(const ops::GdnParams& p, const float* q, const float* k, const float* state, const char* op) {
  if (p.n_tokens < 0 || p.n_seqs < 1 || p.n_k_heads < 1 || p.n_v_heads < 1 || p.n_v_heads % p.n_k_heads != 0 ||
      p.d_v < 1)
    return cu_err("cuda {}: bad shape tokens {} seqs {} nk {} nv {} dv {}", op, p.n_tokens, p.n_seqs, p.n_k_heads,
                  p.n_v_heads, p.d_v);
  if (p.d_k != 64 && p.d_k != 128 && p.d_k != 256)
    return cu_err("cuda {}: d_k {} not supported (64, 128 or 256)", op, p.d_k);
  if (p.q_stride % 4 || p.k_stride % 4 || (uintptr_t)q % 16 || (uintptr_t)k % 16 || (uintptr_t)state % 16)
    return cu_err("cuda {}: q, k and state must be 16-byte aligned with strides a multiple of 4 (q_stride {}, "
                  "k_stride {})", op, p.q_stride, p.k_stride);
  return {};
}

template <bool kGated>
void launch(dim3 grid, dim3 block, cudaStream_t st, const ops::GdnParams& p, const float* q, const float* k,
            const float* v, const float* g, const float* beta, float* state, const int32_t* ss, const int32_t* sl,
            float* out, const GateArgs& ga) {
  switch (p.d_k) {
    case 64: gdn_recurrent_kernel<64, kGated><<<grid, block, 0, st>>>(p, q, k, v, g, beta, state, ss, sl, out, ga); break;
    case 128: gdn_recurrent_kernel<128, kGated><<<grid, block, 0, st>>>(p, q, k, v, g, beta, state, ss, sl, out, ga); break;
    default:  // 256; the gated kernel (1024 threads, 64 registers) does not fit it and refuses it earlier
      if constexpr (!kGated)
        gdn_recurrent_kernel<256, false><<<grid, block, 0, st>>>(p, q, k, v, g, beta, state, ss, sl, out, ga);
      break;
  }
}

}  // namespace

Status gdn_recurrent(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                     const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                     float* out, cudaStream_t stream) {
  DS_TRY(check(p, q, k, state, "gdn_recurrent"));
  const dim3 grid(grid_for(p.d_v, kRowsPerBlock), (unsigned)p.n_v_heads, (unsigned)p.n_seqs);
  launch<false>(grid, dim3(kLanesPerRow * kRowsPerBlock), stream, p, q, k, v, g, beta, state, seq_starts, state_slots,
                out, GateArgs{});
  CUDA_TRY_LAUNCH("gdn_recurrent", stream);
  return {};
}

Status gdn_recurrent_gated(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                           const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                           const float* z, const float* norm_w, float eps, float* out, cudaStream_t stream) {
  DS_TRY(check(p, q, k, state, "gdn_recurrent_gated"));
  if (p.d_v > 128 || p.d_k > 128)
    return cu_err("cuda gdn_recurrent_gated: d_k {} and d_v {} must be <= 128 (one 8 x d_v thread block per head)",
                  p.d_k, p.d_v);
  const int rows = (int)((p.d_v + 3) / 4 * 4);  // whole warps
  const dim3 grid(1, (unsigned)p.n_v_heads, (unsigned)p.n_seqs);
  launch<true>(grid, dim3(kLanesPerRow * rows), stream, p, q, k, v, g, beta, state, seq_starts, state_slots, out,
               GateArgs{z, norm_w, eps});
  CUDA_TRY_LAUNCH("gdn_recurrent_gated", stream);
  return {};
}

}  // namespace ds::cuda
