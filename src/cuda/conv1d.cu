// Causal depthwise conv1d + SiLU with a rolling window (ops/conv1d.h), plain and fused with the
// q/k L2 norm. One thread per (sequence, channel) walks the sequence's tokens in order, the window in
// registers; the state is read once and written once per call. Fused form: a block is one head of
// head_dim channels, so the per-head sum of squares is one block reduction per token.
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {
constexpr int kMaxKernel = 8;

template <bool kNorm>
__global__ void conv1d_kernel(const ops::ConvParams p, int64_t n_norm, float eps, const float* x, const float* w,
                              float* state, const int32_t* seq_starts, const int32_t* slots, float* y) {
  __shared__ float scratch[32];
  const int64_t Cc = p.n_channels;
  const int W = (int)p.kernel - 1;
  const int64_t s = blockIdx.y;
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = c < Cc;  // always true in the fused kernel (Cc % head_dim == 0)
  const bool norm = kNorm && (int64_t)blockIdx.x * blockDim.x < n_norm;
  const int64_t t0 = seq_starts ? seq_starts[s] : 0;
  const int64_t t1 = seq_starts ? seq_starts[s + 1] : p.n_tokens;
  float* st = state + (int64_t)(slots ? slots[s] : s) * W * Cc;

  float win[kMaxKernel], wc[kMaxKernel];
#pragma unroll
  for (int j = 0; j < kMaxKernel; j++) {
    win[j] = (live && j < W) ? st[j * Cc + c] : 0.f;
    wc[j] = (live && j <= W) ? w[c * p.kernel + j] : 0.f;
  }
  for (int64_t t = t0; t < t1; t++) {
    const float xt = live ? x[t * Cc + c] : 0.f;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxKernel; j++)
      if (j < W) sum += wc[j] * win[j];
#pragma unroll
    for (int j = 0; j < kMaxKernel; j++)
      if (j == W) sum += wc[j] * xt;
#pragma unroll
    for (int j = 0; j + 1 < kMaxKernel; j++)
      if (j + 1 < W) win[j] = win[j + 1];
#pragma unroll
    for (int j = 0; j < kMaxKernel; j++)
      if (j == W - 1) win[j] = xt;
    float yv = silu(sum);
    if constexpr (kNorm) {
      if (norm) {  // block-uniform
        const float ss = block_sum(yv * yv, scratch);
        yv *= 1.0f / sqrtf(ss + eps);
      }
    }
    if (live) y[t * Cc + c] = yv;
  }
  if (live) {
#pragma unroll
    for (int j = 0; j < kMaxKernel; j++)
      if (j < W) st[j * Cc + c] = win[j];
  }
}

Status check(const ops::ConvParams& p, const char* op) {
  if (p.n_tokens < 0 || p.n_seqs < 1 || p.n_channels < 1 || p.kernel < 1 || p.kernel > kMaxKernel)
    return cu_err("cuda {}: bad shape tokens {} seqs {} channels {} kernel {} (kernel <= {})", op, p.n_tokens,
                  p.n_seqs, p.n_channels, p.kernel, kMaxKernel);
  return {};
}

}  // namespace

Status conv1d_silu(const ops::ConvParams& p, const float* x, const float* w, float* state,
                   const int32_t* seq_starts, const int32_t* state_slots, float* y, cudaStream_t stream) {
  DS_TRY(check(p, "conv1d_silu"));
  const dim3 grid(grid_for(p.n_channels, 128), (unsigned)p.n_seqs);
  conv1d_kernel<false><<<grid, 128, 0, stream>>>(p, 0, 0.f, x, w, state, seq_starts, state_slots, y);
  CUDA_TRY_LAUNCH("conv1d_silu", stream);
  return {};
}

Status conv1d_silu_l2(const ops::ConvParams& p, int64_t n_norm_channels, int64_t head_dim, float eps,
                      const float* x, const float* w, float* state, const int32_t* seq_starts,
                      const int32_t* state_slots, float* y, cudaStream_t stream) {
  DS_TRY(check(p, "conv1d_silu_l2"));
  if (head_dim < 32 || head_dim > 1024 || head_dim % 32 != 0 || p.n_channels % head_dim != 0 ||
      n_norm_channels % head_dim != 0 || n_norm_channels > p.n_channels || n_norm_channels < 0)
    return cu_err("cuda conv1d_silu_l2: channels {} and normalized channels {} must be multiples of head_dim {} "
                  "(a multiple of 32, <= 1024)", p.n_channels, n_norm_channels, head_dim);
  const dim3 grid((unsigned)(p.n_channels / head_dim), (unsigned)p.n_seqs);
  conv1d_kernel<true><<<grid, (unsigned)head_dim, 0, stream>>>(p, n_norm_channels, eps, x, w, state, seq_starts,
                                                                state_slots, y);
  CUDA_TRY_LAUNCH("conv1d_silu_l2", stream);
  return {};
}

}  // namespace ds::cuda
