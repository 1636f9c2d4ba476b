// Gated RMSNorm of the GDN output (ops/rms_norm_gated.h): one warp per row (dv = 128 in every model).
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {

__global__ void rms_norm_gated_kernel(const ops::RmsNormGatedParams p, const float* x, const float* z,
                                      const float* w, float* y) {
  const int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= p.n_rows) return;
  const int lane = threadIdx.x & 31;
  const float* xr = x + r * p.n_cols;
  float ss = 0.f;
  for (int64_t i = lane; i < p.n_cols; i += 32) ss += xr[i] * xr[i];
  ss = warp_sum(ss);
  const float scale = 1.0f / sqrtf(ss / (float)p.n_cols + p.eps);
  for (int64_t i = lane; i < p.n_cols; i += 32) y[r * p.n_cols + i] = xr[i] * scale * w[i] * silu(z[r * p.n_cols + i]);
}

}  // namespace

Status rms_norm_gated(const ops::RmsNormGatedParams& p, const float* x, const float* z, const float* w, float* y,
                      cudaStream_t stream) {
  if (p.n_rows < 0 || p.n_cols < 1) return cu_err("cuda rms_norm_gated: bad shape rows {} cols {}", p.n_rows, p.n_cols);
  if (p.n_rows == 0) return {};
  rms_norm_gated_kernel<<<grid_for(p.n_rows, 4), 128, 0, stream>>>(p, x, z, w, y);
  CUDA_TRY_LAUNCH("rms_norm_gated", stream);
  return {};
}

}  // namespace ds::cuda
