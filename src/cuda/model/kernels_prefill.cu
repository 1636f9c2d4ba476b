// Conv kernels of the piece prefill (model_kernels.cuh): the causal conv + SiLU + q/k L2 norm of a whole
// piece at once. Token t's output reads the rows t-Kc+1 .. t of E = [window; x], so every token is
// independent: one block per (token, head), one thread per channel, taps in the CPU reference's order (tap 0
// on the oldest sample). The window is moved past the piece by a second kernel, after every reader is done.
#include "cuda/cuda_util.h"
#include "cuda/model/device_util.cuh"

namespace ds::cuda::mk {
namespace {

__global__ void __launch_bounds__(1024) conv_piece_kernel(const ConvArgs a, const float* __restrict__ win) {
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const int64_t c = (int64_t)blockIdx.y * a.head_dim + threadIdx.x;
  const bool norm = (int64_t)blockIdx.y * a.head_dim < a.n_norm_channels;  // uniform over the block
  const int kc = a.kernel, W = kc - 1;
  const int64_t Cc = a.n_channels;
  float sum = 0.f;
  for (int j = 0; j < kc; j++) {
    const int64_t r = t - W + j;  // row of x (< 0: row W + r of the window)
    const float e = r >= 0 ? a.x[r * a.ldx + c] : win[(W + r) * Cc + c];
    sum += a.w[c * kc + j] * e;
  }
  float y = silu_f(sum);
  if (norm) {
    const float ss = block_sum(y * y, red);
    y *= 1.0f / sqrtf(ss + a.eps);
  }
  a.u[t * a.ldu + c] = y;
}

// New window row j = E[T + j] with E = [old window (W rows); x (T rows)].
__global__ void conv_window_kernel(const ConvArgs a, float* __restrict__ win, int T) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t Cc = a.n_channels;
  if (c >= Cc) return;
  const int W = a.kernel - 1;
  float old[kMaxConvKernel];
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; j++) old[j] = j < W ? win[j * Cc + c] : 0.f;
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; j++) {
    if (j >= W) break;
    const int64_t i = (int64_t)T + j;  // index into E
    win[j * Cc + c] = i < W ? old[i < kMaxConvKernel ? i : 0] : a.x[(i - W) * a.ldx + c];
  }
}

Status check(const ConvArgs& a, int n_tokens) {
  if (n_tokens < 0 || a.kernel < 1 || a.kernel > kMaxConvKernel || a.head_dim < 32 || a.head_dim > 1024 ||
      a.head_dim % 32 != 0 || a.n_channels % a.head_dim != 0 || a.n_norm_channels % a.head_dim != 0)
    return cu_err("cuda conv (prefill): bad shape: {} tokens, {} channels, head dim {}, kernel {}", n_tokens,
                  a.n_channels, a.head_dim, a.kernel);
  return {};
}

}  // namespace

Status conv_silu_l2_piece(const ConvArgs& a, const float* win, int n_tokens, cudaStream_t stream) {
  DS_TRY(check(a, n_tokens));
  if (n_tokens == 0) return {};
  const dim3 grid((unsigned)n_tokens, (unsigned)(a.n_channels / a.head_dim));
  conv_piece_kernel<<<grid, (unsigned)a.head_dim, 0, stream>>>(a, win);
  CUDA_TRY_LAUNCH("conv_silu_l2_piece", stream);
  return {};
}

Status conv_window_advance(const ConvArgs& a, float* win, int n_tokens, cudaStream_t stream) {
  DS_TRY(check(a, n_tokens));
  if (n_tokens == 0 || a.kernel < 2) return {};
  constexpr int kT = 256;
  conv_window_kernel<<<(unsigned)((a.n_channels + kT - 1) / kT), kT, 0, stream>>>(a, win, n_tokens);
  CUDA_TRY_LAUNCH("conv_window_advance", stream);
  return {};
}

}  // namespace ds::cuda::mk
