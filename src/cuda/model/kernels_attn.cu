// Gated full-attention kernels of the model (qwen35-spec.md §5).
// qk_norm_rope_store: one block per (head, token) over the nh q heads, nkv k heads and nkv v heads, one thread
//   per head dim: q/k RMSNorm (one block reduction), NEOX RoPE on the first n_rot dims, then q to a packed
//   buffer and k, v to the sequence's caches at row pos[t].
// attention: flash-decoding. attn_partial: one block per (position split, kv head, token), 4 warps taking
//   positions in turn; a lane holds hd/32 dims of every q head of the kv group (G <= 8) and keeps an online
//   softmax per head; the warps merge in shared memory and the block writes (max, sum, weighted V) per head.
//   attn_combine: one block per (q head, token), one thread per dim: merges the splits, applies the sigmoid
//   output gate.
#include <cmath>

#include "cuda/cuda_util.h"
#include "cuda/model/device_util.cuh"

namespace ds::cuda::mk {
namespace {

constexpr int kAttnWarps = 4;

__global__ void __launch_bounds__(1024) qk_kernel(const QkArgs a, const StepIO* __restrict__ io) {
  extern __shared__ float xs[];  // head_dim floats
  __shared__ float red[32];
  const int t = blockIdx.y, hb = blockIdx.x, d = threadIdx.x;
  const int hd = a.head_dim, nh = a.n_head, nkv = a.n_head_kv;
  pdl_wait();
  pdl_trigger();
  const int s = io->seq[t], p = io->pos[t];
  if (hb >= nh + nkv) {  // a v head: store only (uniform over the block)
    const int g = hb - nh - nkv;
    float* vc = state_ptr(io, s, a.v_off);
    vc[((int64_t)p * nkv + g) * hd + d] = a.v[(int64_t)t * a.ldv + (int64_t)g * hd + d];
    return;
  }
  const bool is_q = hb < nh;
  const int h = is_q ? hb : hb - nh;
  const float x = is_q ? a.q[(int64_t)t * a.ldq + (int64_t)h * 2 * hd + d] : a.k[(int64_t)t * a.ldk + (int64_t)h * hd + d];
  const float ss = block_sum(x * x, red);
  const float scale = 1.0f / sqrtf(ss / (float)hd + a.eps);
  const float y = x * scale * (is_q ? a.q_norm[d] : a.k_norm[d]);
  if (is_q && a.dbg_qn) a.dbg_qn[((int64_t)t * nh + h) * hd + d] = y;
  if (!is_q && a.dbg_kn) a.dbg_kn[((int64_t)t * nkv + h) * hd + d] = y;
  xs[d] = y;
  __syncthreads();
  const int half = a.n_rot / 2;
  float r = y;
  if (d < half) {
    const float th = (float)p * a.inv_freq[d];
    r = xs[d] * cosf(th) - xs[d + half] * sinf(th);
  } else if (d < a.n_rot) {
    const int i = d - half;
    const float th = (float)p * a.inv_freq[i];
    r = xs[i] * sinf(th) + xs[d] * cosf(th);
  }
  if (is_q) {
    a.q_out[((int64_t)t * nh + h) * hd + d] = r;
  } else {
    float* kc = state_ptr(io, s, a.k_off);
    kc[((int64_t)p * nkv + h) * hd + d] = r;
    if (a.dbg_kr) a.dbg_kr[((int64_t)t * nkv + h) * hd + d] = r;
  }
}

template <int HPL>  // head dims per lane: hd = 32 * HPL
__global__ void __launch_bounds__(32 * kAttnWarps) attn_partial_kernel(const AttnArgs a, const StepIO* __restrict__ io) {
  constexpr int HD = 32 * HPL, kG = kMaxAttnGroup;
  __shared__ float sm_m[kAttnWarps][kG], sm_l[kAttnWarps][kG];
  __shared__ float sm_acc[kAttnWarps][kG][HD];
  const int sp = blockIdx.x, g = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = a.n_head, nkv = a.n_head_kv, G = nh / nkv;
  pdl_wait();
  pdl_trigger();
  const int s = io->seq[t], n_keys = io->pos[t] + 1;
  const int chunk = (n_keys + a.n_splits - 1) / a.n_splits;
  const int k0 = sp * chunk, k1 = min(k0 + chunk, n_keys);
  const float* Kc = state_ptr(io, s, a.k_off);
  const float* Vc = state_ptr(io, s, a.v_off);

  float qv[kG][HPL], acc[kG][HPL], mx[kG], l[kG];
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {
    mx[gi] = -INFINITY;
    l[gi] = 0.f;
#pragma unroll
    for (int i = 0; i < HPL; i++) {
      qv[gi][i] = gi < G ? a.q[((int64_t)t * nh + g * G + gi) * HD + lane + 32 * i] : 0.f;
      acc[gi][i] = 0.f;
    }
  }
  for (int p = k0 + warp; p < k1; p += kAttnWarps) {
    const float* kr = Kc + ((int64_t)p * nkv + g) * HD;
    const float* vr = Vc + ((int64_t)p * nkv + g) * HD;
    float kx[HPL], vx[HPL];
#pragma unroll
    for (int i = 0; i < HPL; i++) {
      kx[i] = kr[lane + 32 * i];
      vx[i] = vr[lane + 32 * i];
    }
#pragma unroll
    for (int gi = 0; gi < kG; gi++) {
      if (gi >= G) continue;  // uniform over the warp
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < HPL; i++) dot += qv[gi][i] * kx[i];
      const float sc = warp_sum(dot) * a.scale;
      const float mn = fmaxf(mx[gi], sc);
      const float corr = expf(mx[gi] - mn);  // 0 while mx is -inf
      const float pe = expf(sc - mn);
      l[gi] = l[gi] * corr + pe;
#pragma unroll
      for (int i = 0; i < HPL; i++) acc[gi][i] = acc[gi][i] * corr + pe * vx[i];
      mx[gi] = mn;
    }
  }
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {
    if (gi >= G) continue;
    if (lane == 0) {
      sm_m[warp][gi] = mx[gi];
      sm_l[warp][gi] = l[gi];
    }
#pragma unroll
    for (int i = 0; i < HPL; i++) sm_acc[warp][gi][lane + 32 * i] = acc[gi][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * HD; idx += blockDim.x) {
    const int gi = idx / HD, d = idx % HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kAttnWarps; w++) M = fmaxf(M, sm_m[w][gi]);
    float* out = a.part + (((int64_t)t * nh + g * G + gi) * a.n_splits + sp) * (HD + 2);
    if (M == -INFINITY) {  // an empty split
      out[d] = 0.f;
      if (d == 0) {
        out[HD] = -INFINITY;
        out[HD + 1] = 0.f;
      }
      continue;
    }
    float L = 0.f, A = 0.f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; w++) {
      const float e = expf(sm_m[w][gi] - M);
      L += sm_l[w][gi] * e;
      A += sm_acc[w][gi][d] * e;
    }
    out[d] = A;
    if (d == 0) {
      out[HD] = M;
      out[HD + 1] = L;
    }
  }
}

__global__ void __launch_bounds__(1024) attn_combine_kernel(const AttnArgs a) {
  const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
  const int HD = a.head_dim, ns = a.n_splits, nh = a.n_head;
  pdl_wait();
  pdl_trigger();
  const float* part = a.part + ((int64_t)t * nh + h) * ns * (HD + 2);
  float M = -INFINITY;
  for (int sp = 0; sp < ns; sp++) M = fmaxf(M, part[sp * (HD + 2) + HD]);
  float L = 0.f, O = 0.f;
  for (int sp = 0; sp < ns; sp++) {
    const float m = part[sp * (HD + 2) + HD];
    if (m == -INFINITY) continue;
    const float e = expf(m - M);
    L += part[sp * (HD + 2) + HD + 1] * e;
    O += part[sp * (HD + 2) + d] * e;
  }
  O /= L;
  const int64_t oi = (int64_t)t * nh * HD + (int64_t)h * HD + d;
  if (a.dbg_core) a.dbg_core[oi] = O;
  a.out[oi] = O * sigmoid_f(a.gate[(int64_t)t * a.ld_gate + (int64_t)h * 2 * HD + d]);
}

template <int HPL>
Status launch_attention(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  DS_TRY(launch_step(attn_partial_kernel<HPL>, dim3(a.n_splits, a.n_head_kv, n_tokens), dim3(32 * kAttnWarps), 0,
                     stream, "attention (partial)", a, io));
  return launch_step(attn_combine_kernel, dim3(a.n_head, n_tokens), dim3(a.head_dim), 0, stream,
                     "attention (combine)", a);
}

}  // namespace

Status qk_norm_rope_store(const QkArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  if (a.head_dim < 32 || a.head_dim > 1024 || a.head_dim % 32 != 0)
    return cu_err("cuda qk_norm_rope_store: head dim {} must be a multiple of 32 <= 1024", a.head_dim);
  if (a.n_rot % 2 != 0 || a.n_rot > a.head_dim)
    return cu_err("cuda qk_norm_rope_store: n_rot {} for head dim {}", a.n_rot, a.head_dim);
  if (n_tokens < 1 || n_tokens > kMaxStepTokens) return cu_err("cuda qk_norm_rope_store: {} tokens", n_tokens);
  return launch_step(qk_kernel, dim3(a.n_head + 2 * a.n_head_kv, n_tokens), dim3(a.head_dim),
                     a.head_dim * sizeof(float), stream, "qk_norm_rope_store", a, io);
}

bool attention_supports(int head_dim, int group) {
  const bool hd_ok = head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
  return hd_ok && group >= 1 && group <= kMaxAttnGroup;
}

Status attention(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  if (a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0 || !attention_supports(a.head_dim, a.n_head / a.n_head_kv))
    return cu_err("cuda attention: head dim {} with {} q heads per kv head (supported: 32, 64, 128, 256; <= {})",
                  a.head_dim, a.n_head_kv ? a.n_head / a.n_head_kv : 0, kMaxAttnGroup);
  if (a.n_splits < 1 || a.n_splits > kMaxAttnSplits) return cu_err("cuda attention: {} splits", a.n_splits);
  if (n_tokens < 1 || n_tokens > kMaxStepTokens) return cu_err("cuda attention: {} tokens", n_tokens);
  switch (a.head_dim / 32) {
    case 1: return launch_attention<1>(a, io, n_tokens, stream);
    case 2: return launch_attention<2>(a, io, n_tokens, stream);
    case 4: return launch_attention<4>(a, io, n_tokens, stream);
    default: return launch_attention<8>(a, io, n_tokens, stream);
  }
}

}  // namespace ds::cuda::mk
