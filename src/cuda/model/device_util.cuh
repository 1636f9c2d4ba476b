// Device helpers shared by the model kernels (CUDA sources only): reductions and the scalar activations in
// the forms of the CPU reference (src/cpu/scalar.h). No fast-math: expf/log1pf/sqrtf as the reference.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/model/model_kernels.cuh"

namespace ds::cuda::mk {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, <= 1024), returned to every thread. `sh` is 32
// floats of shared memory; every thread adds the warp sums in the same order, so all get the same value.
// Must be reached by every thread of the block; safe to call repeatedly with the same `sh`.
__device__ __forceinline__ float block_sum(float v, float* sh) {
  v = warp_sum(v);
  const int w = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  __syncthreads();  // earlier readers of sh are done
  if ((threadIdx.x & 31) == 0) sh[w] = v;
  __syncthreads();
  float r = 0.f;
  for (int i = 0; i < n_warps; i++) r += sh[i];
  return r;
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// A sequence's state allocation plus a byte offset, as floats.
__device__ __forceinline__ float* state_ptr(const StepIO* io, int s, int64_t off) {
  return reinterpret_cast<float*>(static_cast<uintptr_t>(io->base[s]) + static_cast<uintptr_t>(off));
}

}  // namespace ds::cuda::mk
