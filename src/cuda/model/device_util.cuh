// Device helpers shared by the model kernels (CUDA sources only): reductions and the scalar activations in
// the forms of the CPU reference (src/cpu/scalar.h). No fast-math: expf/log1pf/sqrtf as the reference.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "cuda/cuda_util.h"
#include "cuda/launch.cuh"
#include "cuda/model/model_kernels.cuh"

namespace ds::cuda::mk {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// kv19: a KV cache element (float, or __half for the f16 caches) to / from float; kv_round: v as the cache keeps it.
__device__ __forceinline__ float kv_ld(const float* p) { return *p; }
__device__ __forceinline__ float kv_ld(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void kv_st(float* p, float v) { *p = v; }
__device__ __forceinline__ void kv_st(__half* p, float v) { *p = __float2half_rn(v); }
template <class KV>
__device__ __forceinline__ float kv_round(float v) {
  if constexpr (sizeof(KV) == 2) return __half2float(__float2half_rn(v));
  else return v;
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


// Programmatic dependent launch of the step kernels (decode8). A kernel launched by launch_step may start
// while the previous kernel runs: before pdl_wait it reads only what no kernel of the step writes before
// it (weights, its own recurrent state, StepIO); pdl_wait returns once the previous kernel has completed
// and its writes are visible. pdl_trigger (after pdl_wait) lets the next kernel start early: its CTAs
// become resident beside this kernel's where resources allow (the streamed matvecs then issue their
// first weight copies). Both are no-ops when the kernel was launched without the attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

// DS_STEP_PDL=0: the step kernels launched plainly (A/B); DS_STEP_CARVEOUT=1: they prefer the largest
// shared-memory carveout (as the streamed matvecs need), so an SM need not change its L1 / shared split
// between them (A/B only: no effect measured, 9B tg128 358.1 vs 357.9 tok/s). Read once (kernels_basic.cu).
// Step PDL on vs off (H200 tg128, decode8): 9B 357.9 / 358.6 vs 353.5 / 353.6, 27B 123.5 vs 122.4,
// 0.8B 1131.5 vs 1077.5 tok/s.
bool step_pdl();
bool step_carveout();

// k<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch unless DS_STEP_PDL=0.
template <class... P, class... A>
Status launch_step(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* what,
                   A&&... args) {
  if (step_carveout()) cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
  const cudaError_t e = launch_pdl(k, grid, block, smem, stream, step_pdl(), std::forward<A>(args)...);
  if (e != cudaSuccess) return cu_err("cuda {}: launch: {}", what, cudaGetErrorString(e));
  const cudaError_t st = launch_status(stream);
  if (st != cudaSuccess) return cu_err("cuda {}: after launch: {}", what, cudaGetErrorString(st));
  return {};
}

}  // namespace ds::cuda::mk
