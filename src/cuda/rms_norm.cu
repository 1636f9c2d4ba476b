// RMSNorm (ops/rms_norm.h) and the fused residual add + RMSNorm. One block per row (token, head):
// the block sums squares in fp32 (tree order), then scales. Rows of hd = 256 or H = 1024..5120.
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {

__global__ void rms_norm_kernel(const ops::RmsNormParams p, const float* x, const float* w, float* y) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, t = r / p.n_heads, h = r % p.n_heads;
  const float* xr = x + t * p.x_token_stride + h * p.x_head_stride;
  float* yr = y + t * p.y_token_stride + h * p.y_head_stride;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < p.n_cols; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / (float)p.n_cols + p.eps);
  for (int64_t i = threadIdx.x; i < p.n_cols; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

__global__ void add_rms_norm_kernel(const ops::RmsNormParams p, const float* a, const float* b, float* sum,
                                    const float* w, float* y) {
  __shared__ float scratch[32];
  const int64_t off = (int64_t)blockIdx.x * p.n_cols;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < p.n_cols; i += blockDim.x) {
    const float s = a[off + i] + b[off + i];
    sum[off + i] = s;
    ss += s * s;
  }
  ss = block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / (float)p.n_cols + p.eps);
  for (int64_t i = threadIdx.x; i < p.n_cols; i += blockDim.x) y[off + i] = sum[off + i] * scale * w[i];
}

int threads_for(int64_t n_cols) { return n_cols >= 2048 ? 512 : n_cols >= 512 ? 256 : n_cols >= 128 ? 128 : 32; }

}  // namespace

Status rms_norm(const ops::RmsNormParams& p, const float* x, const float* w, float* y, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_heads < 1 || p.n_cols < 1)
    return cu_err("cuda rms_norm: bad shape tokens {} heads {} cols {}", p.n_tokens, p.n_heads, p.n_cols);
  const int64_t rows = p.n_tokens * p.n_heads;
  if (rows == 0) return {};
  rms_norm_kernel<<<(unsigned)rows, threads_for(p.n_cols), 0, stream>>>(p, x, w, y);
  CUDA_TRY_LAUNCH("rms_norm", stream);
  return {};
}

Status add_rms_norm(const ops::RmsNormParams& p, const float* a, const float* b, float* sum, const float* w,
                    float* y, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_heads != 1 || p.n_cols < 1 || p.x_token_stride != p.n_cols ||
      p.y_token_stride != p.n_cols)
    return cu_err("cuda add_rms_norm: needs packed rows (n_heads 1, strides = n_cols {})", p.n_cols);
  if (p.n_tokens == 0) return {};
  add_rms_norm_kernel<<<(unsigned)p.n_tokens, threads_for(p.n_cols), 0, stream>>>(p, a, b, sum, w, y);
  CUDA_TRY_LAUNCH("add_rms_norm", stream);
  return {};
}

}  // namespace ds::cuda
