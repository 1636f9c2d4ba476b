// Per-head L2 norm (ops/l2_norm.h): one warp per row (token, head); dk = 128 in every model.
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {

__global__ void l2_norm_kernel(const ops::L2NormParams p, const float* x, float* y) {
  const int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= p.n_tokens * p.n_heads) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = r / p.n_heads, h = r % p.n_heads;
  const float* xr = x + t * p.x_token_stride + h * p.x_head_stride;
  float* yr = y + t * p.y_token_stride + h * p.y_head_stride;
  float ss = 0.f;
  for (int64_t i = lane; i < p.n_cols; i += 32) ss += xr[i] * xr[i];
  ss = warp_sum(ss);
  const float scale = 1.0f / sqrtf(ss + p.eps);
  for (int64_t i = lane; i < p.n_cols; i += 32) yr[i] = xr[i] * scale;
}

}  // namespace

Status l2_norm(const ops::L2NormParams& p, const float* x, float* y, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_heads < 1 || p.n_cols < 1)
    return cu_err("cuda l2_norm: bad shape tokens {} heads {} cols {}", p.n_tokens, p.n_heads, p.n_cols);
  const int64_t rows = p.n_tokens * p.n_heads;
  if (rows == 0) return {};
  l2_norm_kernel<<<grid_for(rows, 4), 128, 0, stream>>>(p, x, y);
  CUDA_TRY_LAUNCH("l2_norm", stream);
  return {};
}

}  // namespace ds::cuda
