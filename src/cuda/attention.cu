// Decode/prefill attention over the KV cache (ops/attention.h) and partial NEOX RoPE (ops/rope.h).
// attention: (1) a store kernel writes each token's k, v rows at its position (positions outside the
// cache are skipped: the host validates them); (2) the attend kernel: a 128-thread block takes one
// token, one kv head and ALL the q heads sharing it (GQA: each K/V row is read once per group), and a
// split of the positions; its 4 warps take positions round-robin, a lane holds head_dim/32 dims, and
// each warp keeps an online softmax (max, sum, acc) per q head; the warps then merge in shared memory.
// For decode the token's keys are split over up to kMaxSplits blocks per (token, kv head) (sized so the
// GPU has ~4 blocks per SM), whose partials a third kernel merges.
#include <algorithm>
#include <cmath>
#include <mutex>

#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {
constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;     // q heads per kv head
constexpr int64_t kMaxSplits = 256;
constexpr int kSplitTokens = 64;  // above this many tokens per call, no split (prefill)

__device__ __forceinline__ int64_t seq_of(int64_t t, const int32_t* seq_starts, int64_t n_seqs) {
  if (!seq_starts) return 0;
  int64_t lo = 0, hi = n_seqs - 1;  // last s with seq_starts[s] <= t
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (seq_starts[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__global__ void kv_store_kernel(const ops::AttentionParams p, const float* k, const float* v, float* k_cache,
                                float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots) {
  const int64_t row = p.n_head_kv * p.head_dim;
  const int64_t t = blockIdx.x;  // tokens on x: up to 2^31 (y is limited to 65535)
  const int32_t ps = pos[t];
  if (ps < 0 || ps >= p.max_ctx) return;
  const int64_t s = seq_of(t, seq_starts, p.n_seqs);
  const int64_t base = (int64_t)(slots ? slots[s] : s) * (p.max_ctx * p.n_head_kv * p.head_dim) + (int64_t)ps * row;
  for (int64_t i = (int64_t)blockIdx.y * blockDim.x + threadIdx.x; i < row; i += (int64_t)gridDim.y * blockDim.x) {
    k_cache[base + i] = k[t * row + i];
    v_cache[base + i] = v[t * row + i];
  }
}

// grid (n_tokens, n_head_kv, n_splits); kDpl = head_dim / 32 dims per lane.
template <int kDpl>
__global__ void __launch_bounds__(32 * kWarps)
    attend_kernel(const ops::AttentionParams p, const float* __restrict__ q,
                  const float* __restrict__ k_cache, const float* __restrict__ v_cache, const int32_t* pos,
                  const int32_t* seq_starts, const int32_t* slots, float* out, float* part) {
  __shared__ float s_m[kWarps][kMaxGroup], s_l[kWarps][kMaxGroup];
  __shared__ float s_acc[kWarps][kMaxGroup][32 * kDpl];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = blockIdx.x, g = blockIdx.y;
  const int split = blockIdx.z, n_splits = gridDim.z;
  const int64_t hd = p.head_dim, row = p.n_head_kv * hd;
  const int group = (int)(p.n_head / p.n_head_kv);
  const int64_t n_keys = min((int64_t)pos[t] + 1, p.max_ctx);  // a bad position must not read past the cache
  // Splits divide this token's own keys (not the cache size), so every split has work.
  const int64_t len = (n_keys + n_splits - 1) / n_splits;
  const int64_t p0 = (int64_t)split * len, p1 = min(n_keys, p0 + len);
  const int64_t s = seq_of(t, seq_starts, p.n_seqs);
  const int64_t cbase = (int64_t)(slots ? slots[s] : s) * (p.max_ctx * p.n_head_kv * p.head_dim) + g * hd;

  float qr[kMaxGroup][kDpl], acc[kMaxGroup][kDpl], m[kMaxGroup], l[kMaxGroup];
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; hh++) {
    m[hh] = -INFINITY;
    l[hh] = 0.f;
#pragma unroll
    for (int d = 0; d < kDpl; d++) {
      acc[hh][d] = 0.f;
      qr[hh][d] = hh < group ? q[(t * p.n_head + g * group + hh) * hd + lane * kDpl + d] * p.scale : 0.f;
    }
  }
  for (int64_t ps = p0 + warp; ps < p1; ps += kWarps) {
    float kr[kDpl], vr[kDpl];
#pragma unroll
    for (int d = 0; d < kDpl; d++) {
      kr[d] = k_cache[cbase + ps * row + lane * kDpl + d];
      vr[d] = v_cache[cbase + ps * row + lane * kDpl + d];
    }
#pragma unroll
    for (int hh = 0; hh < kMaxGroup; hh++) {
      if (hh >= group) continue;
      float sc = 0.f;
#pragma unroll
      for (int d = 0; d < kDpl; d++) sc += qr[hh][d] * kr[d];
      sc = warp_sum(sc);
      const float mn = fmaxf(m[hh], sc);
      const float corr = expf(m[hh] - mn), e = expf(sc - mn);
      l[hh] = l[hh] * corr + e;
#pragma unroll
      for (int d = 0; d < kDpl; d++) acc[hh][d] = acc[hh][d] * corr + e * vr[d];
      m[hh] = mn;
    }
  }
  // Merge the warps.
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; hh++) {
    if (hh >= group) continue;
    if (lane == 0) { s_m[warp][hh] = m[hh]; s_l[warp][hh] = l[hh]; }
#pragma unroll
    for (int d = 0; d < kDpl; d++) s_acc[warp][hh][lane * kDpl + d] = acc[hh][d];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    const int hh = i / (int)hd, d = i % (int)hd;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; w++) mx = fmaxf(mx, s_m[w][hh]);
    float ls = 0.f, a = 0.f;
    if (mx > -INFINITY) {
      for (int w = 0; w < kWarps; w++) {
        const float c = expf(s_m[w][hh] - mx);  // exp(-inf) = 0 for empty warps
        ls += s_l[w][hh] * c;
        a += s_acc[w][hh][d] * c;
      }
    }
    const int64_t h = g * group + hh;
    if (n_splits == 1) {
      out[(t * p.n_head + h) * hd + d] = a / ls;
    } else {
      float* pp = part + ((t * p.n_head + h) * n_splits + split) * (hd + 2);
      pp[2 + d] = a;
      if (d == 0) { pp[0] = mx; pp[1] = ls; }
    }
  }
}

__global__ void combine_kernel(const ops::AttentionParams p, int n_splits, const float* part, float* out) {
  const int64_t th = blockIdx.x;  // token * n_head + head
  const int64_t hd = p.head_dim;
  const float* pp = part + th * n_splits * (hd + 2);
  float mx = -INFINITY;
  for (int sp = 0; sp < n_splits; sp++) mx = fmaxf(mx, pp[sp * (hd + 2)]);
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float ls = 0.f, a = 0.f;
    for (int sp = 0; sp < n_splits; sp++) {
      const float* q = pp + sp * (hd + 2);
      if (q[0] == -INFINITY) continue;
      const float c = expf(q[0] - mx);
      ls += q[1] * c;
      a += q[2 + d] * c;
    }
    out[th * hd + d] = a / ls;
  }
}

// Partials buffer, grown on demand (never while a graph is being captured).
std::mutex g_mu;
DeviceBuffer g_part;

template <int kDpl>
void launch_attend(dim3 grid, cudaStream_t st, const ops::AttentionParams& p, const float* q,
                   const float* kc, const float* vc, const int32_t* pos, const int32_t* ss, const int32_t* sl,
                   float* out, float* part) {
  attend_kernel<kDpl><<<grid, 32 * kWarps, 0, st>>>(p, q, kc, vc, pos, ss, sl, out, part);
}

struct RopeTable {
  float inv_freq[256];
};

__global__ void rope_kernel(const ops::RopeParams p, const RopeTable tab, float* x, const int32_t* pos) {
  const int64_t half = p.n_rot / 2;
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n_tokens * p.n_heads * half) return;
  const int64_t t = i / (p.n_heads * half), h = (i / half) % p.n_heads, d = i % half;
  const float theta = (float)pos[t] * tab.inv_freq[d];
  float sn, cs;
  sincosf(theta, &sn, &cs);
  float* xr = x + t * p.token_stride + h * p.head_stride;
  const float x0 = xr[d], x1 = xr[d + half];
  xr[d] = x0 * cs - x1 * sn;
  xr[d + half] = x0 * sn + x1 * cs;
}

}  // namespace

Status attention(const ops::AttentionParams& p, const float* q, const float* k, const float* v, float* k_cache,
                 float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots, float* out,
                 cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_seqs < 1 || p.n_head_kv < 1 || p.n_head % p.n_head_kv != 0 ||
      p.n_head / p.n_head_kv > kMaxGroup || p.head_dim % 32 != 0 || p.head_dim < 32 || p.head_dim > 512 ||
      p.max_ctx < 1)
    return cu_err("cuda attention: unsupported shape heads {} kv heads {} head_dim {} max_ctx {} (group <= {}, "
                  "head_dim a multiple of 32 <= 512)", p.n_head, p.n_head_kv, p.head_dim, p.max_ctx, kMaxGroup);
  if (p.n_tokens == 0) return {};
  const int64_t row = p.n_head_kv * p.head_dim;
  kv_store_kernel<<<dim3((unsigned)p.n_tokens, grid_for(row, 256)), 256, 0, stream>>>(p, k, v, k_cache, v_cache, pos,
                                                                                      seq_starts, slots);
  CUDA_TRY_LAUNCH("attention (kv store)", stream);

  // Decode: enough splits that about 4 blocks per SM work on the keys (each split takes an equal share
  // of the token's keys, at least ~64 of the cache's); prefill (many tokens) needs none.
  int n_splits = 1;
  if (p.n_tokens <= kSplitTokens) {
    int sms = 132;
    if (int dev = 0; cudaGetDevice(&dev) == cudaSuccess)
      (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int64_t want = std::max<int64_t>(1, 4 * sms / (p.n_tokens * p.n_head_kv));
    n_splits = (int)std::min<int64_t>({want, kMaxSplits, (p.max_ctx + 63) / 64});
  }
  float* part = nullptr;
  if (n_splits > 1) {
    const size_t need = (size_t)p.n_tokens * p.n_head * n_splits * (p.head_dim + 2) * sizeof(float);
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_part.size() < need) {
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      CUDA_TRY(cudaStreamIsCapturing(stream, &cs));
      if (cs != cudaStreamCaptureStatusNone)
        return cu_err("cuda attention: the split buffer ({} bytes) must grow, which cannot happen during graph "
                      "capture: run the same shape once before capturing", need);
      CUDA_TRY(cudaStreamSynchronize(stream));  // the old buffer may still be in use
      g_part.reset();
      DS_ASSIGN(g_part, DeviceBuffer::alloc(need));
    }
    part = g_part.as<float>();
  }
  const dim3 grid((unsigned)p.n_tokens, (unsigned)p.n_head_kv, (unsigned)n_splits);
  switch (p.head_dim / 32) {
    case 2: launch_attend<2>(grid, stream, p, q, k_cache, v_cache, pos, seq_starts, slots, out, part); break;
    case 4: launch_attend<4>(grid, stream, p, q, k_cache, v_cache, pos, seq_starts, slots, out, part); break;
    case 8: launch_attend<8>(grid, stream, p, q, k_cache, v_cache, pos, seq_starts, slots, out, part); break;
    default:
      return cu_err("cuda attention: head_dim {} not supported (64, 128 or 256)", p.head_dim);
  }
  CUDA_TRY_LAUNCH("attention", stream);
  if (n_splits > 1) {
    combine_kernel<<<(unsigned)(p.n_tokens * p.n_head), 128, 0, stream>>>(p, n_splits, part, out);
    CUDA_TRY_LAUNCH("attention (combine)", stream);
  }
  return {};
}

Status rope_neox(const ops::RopeParams& p, float* x, const int32_t* pos, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_heads < 1 || p.n_rot < 0 || p.n_rot % 2 || p.n_rot > p.head_dim || p.n_rot > 512)
    return cu_err("cuda rope_neox: bad shape heads {} head_dim {} n_rot {}", p.n_heads, p.head_dim, p.n_rot);
  const int64_t half = p.n_rot / 2, n = p.n_tokens * p.n_heads * half;
  if (n == 0) return {};
  // The frequencies exactly as the CPU reference computes them (host float pow), so theta = pos * inv
  // rounds identically on both sides even at large positions.
  RopeTable tab{};
  for (int64_t i = 0; i < half; i++) tab.inv_freq[i] = 1.0f / std::pow(p.base, (float)(2 * i) / (float)p.n_rot);
  rope_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, tab, x, pos);
  CUDA_TRY_LAUNCH("rope_neox", stream);
  return {};
}

}  // namespace ds::cuda
