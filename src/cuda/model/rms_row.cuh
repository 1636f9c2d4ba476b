// The RMSNorm factor of one row, shared by mk::rms_norm's float4 kernel (kernels_basic.cu) and the batched products'
// x preparation with the norm folded in (wg::SrcNorm, matvec_wgmma.cuh, fold17): one piece of code, so both get the
// same bits.
#pragma once
#include "cuda/model/device_util.cuh"

namespace ds::cuda::mk {

constexpr int kRmsV4 = 8;  // float4 per thread of a 256-thread block: rows of up to 8192 elements

// 1 / sqrt(mean(x^2) + eps) of a row of n elements whose float4 i = threadIdx.x + 256·j is v[j] (zeros past the row):
// per-thread sums in index order, then block_sum (every thread of the block; red: 32 floats of shared memory).
__device__ __forceinline__ float rms_row_scale(const float4 (&v)[kRmsV4], int64_t n, float eps, float* red) {
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < kRmsV4; j++) ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  ss = block_sum(ss, red);
  return 1.0f / sqrtf(ss / (float)n + eps);
}

}  // namespace ds::cuda::mk
