// Elementwise ops: gdn_gates (ops/gdn_gates.h), output_gate (ops/output_gate.h), swiglu
// (ops/swiglu.h), add (ops/add.h). One thread per element.
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"

namespace ds::cuda {
namespace {
constexpr int kThreads = 256;

__global__ void gdn_gates_kernel(int64_t n, int64_t nv, const float* a, const float* b, const float* ssm_a,
                                 const float* dt_bias, float* g, float* beta) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t h = i % nv;
  const float av = a[i], bv = b[i];
  g[i] = ssm_a[h] * softplus(av + dt_bias[h]);
  beta[i] = sigmoid(bv);
}

__global__ void output_gate_kernel(const ops::OutputGateParams p, float* x, const float* gate) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t row = p.n_head * p.head_dim;
  if (i >= p.n_tokens * row) return;
  const int64_t t = i / row, h = (i % row) / p.head_dim, j = i % p.head_dim;
  x[i] *= sigmoid(gate[t * p.gate_token_stride + h * p.gate_head_stride + j]);
}

__global__ void swiglu_kernel(int64_t n, const float* gate, const float* up, float* y) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = silu(gate[i]) * up[i];
}

__global__ void add_kernel(int64_t n, const float* a, const float* b, float* y) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

}  // namespace

Status gdn_gates(const ops::GdnGatesParams& p, const float* a, const float* b, const float* ssm_a,
                 const float* dt_bias, float* g, float* beta, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_v_heads < 1)
    return cu_err("cuda gdn_gates: bad shape tokens {} heads {}", p.n_tokens, p.n_v_heads);
  const int64_t n = p.n_tokens * p.n_v_heads;
  if (n == 0) return {};
  gdn_gates_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(n, p.n_v_heads, a, b, ssm_a, dt_bias, g, beta);
  CUDA_TRY_LAUNCH("gdn_gates", stream);
  return {};
}

Status output_gate(const ops::OutputGateParams& p, float* x, const float* gate, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_head < 1 || p.head_dim < 1)
    return cu_err("cuda output_gate: bad shape tokens {} heads {} dim {}", p.n_tokens, p.n_head, p.head_dim);
  const int64_t n = p.n_tokens * p.n_head * p.head_dim;
  if (n == 0) return {};
  output_gate_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(p, x, gate);
  CUDA_TRY_LAUNCH("output_gate", stream);
  return {};
}

Status swiglu(const ops::SwigluParams& p, const float* gate, const float* up, float* y, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_ff < 1) return cu_err("cuda swiglu: bad shape tokens {} n_ff {}", p.n_tokens, p.n_ff);
  const int64_t n = p.n_tokens * p.n_ff;
  if (n == 0) return {};
  swiglu_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(n, gate, up, y);
  CUDA_TRY_LAUNCH("swiglu", stream);
  return {};
}

Status add(const ops::AddParams& p, const float* a, const float* b, float* y, cudaStream_t stream) {
  if (p.n < 0) return cu_err("cuda add: bad length {}", p.n);
  if (p.n == 0) return {};
  add_kernel<<<grid_for(p.n, kThreads), kThreads, 0, stream>>>(p.n, a, b, y);
  CUDA_TRY_LAUNCH("add", stream);
  return {};
}

}  // namespace ds::cuda
