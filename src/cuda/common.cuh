// Device helpers shared by the op kernels: warp/block sums and the scalar activations, written with
// the accurate (not the __fast) math functions so results track the CPU reference within fp32 rounding.
#pragma once
#include <cuda_runtime.h>

namespace ds::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. `scratch`
// holds 32 floats of shared memory; the call begins and ends with a barrier so it can be reused.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < nw ? scratch[lane] : 0.f;
  r = warp_sum(r);
  return r;
}

__device__ __forceinline__ float silu(float a) { return a / (1.f + expf(-a)); }
__device__ __forceinline__ float sigmoid(float a) { return 1.f / (1.f + expf(-a)); }
__device__ __forceinline__ float softplus(float a) { return a > 20.f ? a : log1pf(expf(a)); }

inline unsigned grid_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

}  // namespace ds::cuda
