// The delta rule's per-row pieces every GDN decode kernel shares (kernels_gdn.cu, kernels_gdn_lazy.cu): state
// chunks in either element type, a sequence's state pointer, and one token of the rule on a state row.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/model/device_util.cuh"

namespace ds::cuda::mk {

// The recurrent state's element type St: float (the default, the CPU reference's) or __half (st20: GdnArgs::
// state_half, --state-f16): a head's state is read into float registers, every token's update is float arithmetic
// (rule_row), and it is rounded to f16 once, when written back at the end of the step. ld_chunk / st_chunk move
// elements 4c .. 4c + 3 of a state row (16 bytes as float, 8 as f16); with St = float they are the float4 loads
// and stores the kernels made before.
__device__ __forceinline__ float4 ld_chunk(const float* row, int c) { return reinterpret_cast<const float4*>(row)[c]; }
__device__ __forceinline__ float4 ld_chunk(const __half* row, int c) {
  const uint2 u = reinterpret_cast<const uint2*>(row)[c];
  const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
  const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
// v by value: a call with `odd ? m[p + 1] : m[p]` (gdn_tma_out_kernel) must not bind a reference to a register array
// element chosen at run time, which puts the whole array in local memory (st20's first build: a 128-byte stack frame
// in the bulk-copy kernels and 2x their time).
__device__ __forceinline__ void st_chunk(float* row, int c, float4 v) { reinterpret_cast<float4*>(row)[c] = v; }
// f16's largest finite value: a state value beyond it is stored as +-65504 rather than an infinity (which would
// turn the sequence's outputs into NaN from the next step on). Delta-rule states stay near the scale of v (keys
// are L2-normalized), far below it; the clamp is a guard, not a range the model uses.
__device__ __forceinline__ float f16_sat(float x) { return fminf(fmaxf(x, -65504.f), 65504.f); }
__device__ __forceinline__ void st_chunk(__half* row, int c, float4 v) {
  const __half2 lo = __floats2half2_rn(f16_sat(v.x), f16_sat(v.y));
  const __half2 hi = __floats2half2_rn(f16_sat(v.z), f16_sat(v.w));
  uint2 u;
  u.x = *reinterpret_cast<const unsigned*>(&lo);
  u.y = *reinterpret_cast<const unsigned*>(&hi);
  reinterpret_cast<uint2*>(row)[c] = u;
}
// Sequence s's allocation plus a byte offset, as St.
template <typename St>
__device__ __forceinline__ St* state_at(const StepIO* io, int s, int64_t off) {
  return reinterpret_cast<St*>(static_cast<uintptr_t>(io->base[s]) + static_cast<uintptr_t>(off));
}

// One token of the delta rule on state row j (spec §4.4, M = S^T, key index fastest) for lane r of the row's
// 4 lanes, which holds the float4 chunks r, r + 4, ... of the row in m; k4 / q4: the token's k and q (shared
// memory). Returns o[j] (scaled), the same in the 4 lanes. Every GDN decode kernel calls this one function, so
// they all make the same roundings (a sequence's output does not depend on the kernel its batch takes).
template <int DK>
__device__ __forceinline__ float rule_row(float4 (&m)[DK / 16], const float4* k4, const float4* q4, int r,
                                          float decay, float beta, float vj, float scale) {
  constexpr int kL = 4, kC = DK / 16;
  float kv = 0.f;
#pragma unroll
  for (int c = 0; c < kC; c++) {
    m[c].x *= decay; m[c].y *= decay; m[c].z *= decay; m[c].w *= decay;
    const float4 kk = k4[r + kL * c];
    kv += m[c].x * kk.x + m[c].y * kk.y + m[c].z * kk.z + m[c].w * kk.w;
  }
  kv += __shfl_xor_sync(0xffffffffu, kv, 1);
  kv += __shfl_xor_sync(0xffffffffu, kv, 2);
  const float delta = (vj - kv) * beta;
  float o = 0.f;
#pragma unroll
  for (int c = 0; c < kC; c++) {
    const float4 kk = k4[r + kL * c], qq = q4[r + kL * c];
    m[c].x += delta * kk.x; m[c].y += delta * kk.y; m[c].z += delta * kk.z; m[c].w += delta * kk.w;
    o += m[c].x * qq.x + m[c].y * qq.y + m[c].z * qq.z + m[c].w * qq.w;
  }
  o += __shfl_xor_sync(0xffffffffu, o, 1);
  o += __shfl_xor_sync(0xffffffffu, o, 2);
  return o * scale;
}

}  // namespace ds::cuda::mk
