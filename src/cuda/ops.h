// The CUDA twins of the CPU reference ops (src/cpu/cpu.h): same names, same params structs
// (src/ops/<op>.h), same pointer arguments, but every pointer (index arrays too: seq_starts,
// state_slots, pos, ids) is device memory, and each call is enqueued on `stream` with no host
// synchronization, so a whole token's forward can be captured in a CUDA graph.
// Bad parameters return an Error naming the op; nothing is launched then.
// Fused variants (not in ds::cpu) are documented at their declarations with their CPU equivalent.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/error.h"
#include "ops/add.h"
#include "ops/attention.h"
#include "ops/conv1d.h"
#include "ops/gdn.h"
#include "ops/gdn_gates.h"
#include "ops/get_rows.h"
#include "ops/l2_norm.h"
#include "ops/matmul.h"
#include "ops/output_gate.h"
#include "ops/rms_norm.h"
#include "ops/rms_norm_gated.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace ds::cuda {

Status rms_norm(const ops::RmsNormParams& p, const float* x, const float* w, float* y, cudaStream_t stream);

// Fused residual add + RMSNorm (packed rows, n_heads = 1): sum = a + b (written to `sum`, which may
// equal a or b), y = rms_norm(sum) * w. CPU equivalent: cpu::add then cpu::rms_norm.
Status add_rms_norm(const ops::RmsNormParams& p, const float* a, const float* b, float* sum, const float* w,
                    float* y, cudaStream_t stream);

Status rms_norm_gated(const ops::RmsNormGatedParams& p, const float* x, const float* z, const float* w, float* y,
                      cudaStream_t stream);

Status l2_norm(const ops::L2NormParams& p, const float* x, float* y, cudaStream_t stream);

Status conv1d_silu(const ops::ConvParams& p, const float* x, const float* w, float* state,
                   const int32_t* seq_starts, const int32_t* state_slots, float* y, cudaStream_t stream);

// Fused conv1d + SiLU + split + q/k L2 norm: conv1d_silu, then the first n_norm_channels channels of
// each output row (q and k: 2*Kd) are L2-normalized per head of head_dim channels (ops/l2_norm.h
// semantics, eps). CPU equivalent: cpu::conv1d_silu then cpu::l2_norm(n_heads = n_norm_channels /
// head_dim, strides Cc / head_dim). n_channels and n_norm_channels must be multiples of head_dim
// (head_dim <= 1024).
Status conv1d_silu_l2(const ops::ConvParams& p, int64_t n_norm_channels, int64_t head_dim, float eps,
                      const float* x, const float* w, float* state, const int32_t* seq_starts,
                      const int32_t* state_slots, float* y, cudaStream_t stream);

Status gdn_gates(const ops::GdnGatesParams& p, const float* a, const float* b, const float* ssm_a,
                 const float* dt_bias, float* g, float* beta, cudaStream_t stream);

// The recurrent rule, token by token (decode, and a correct if slow prefill). Each (sequence, head)
// state is read once and written once per call. d_k must be 64, 128 or 256.
Status gdn_recurrent(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                     const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                     float* out, cudaStream_t stream);

// Fused gated delta rule + gated RMSNorm of its output (one block per head): out = rms_norm_gated(
// gdn_recurrent(...), z, norm_w, eps), z [n_tokens, nv, dv]. CPU equivalent: cpu::gdn_recurrent then
// cpu::rms_norm_gated(n_rows = n_tokens * nv, n_cols = dv). d_k, d_v <= 128.
Status gdn_recurrent_gated(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                           const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                           const float* z, const float* norm_w, float eps, float* out, cudaStream_t stream);

Status rope_neox(const ops::RopeParams& p, float* x, const int32_t* pos, cudaStream_t stream);

// Stores k, v in the caches, then attends (online softmax; long contexts are split over blocks and
// merged). head_dim must be a multiple of 32 and <= 512; n_head / n_head_kv <= 8.
Status attention(const ops::AttentionParams& p, const float* q, const float* k, const float* v, float* k_cache,
                 float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots, float* out,
                 cudaStream_t stream);

Status output_gate(const ops::OutputGateParams& p, float* x, const float* gate, cudaStream_t stream);

Status swiglu(const ops::SwigluParams& p, const float* gate, const float* up, float* y, cudaStream_t stream);

Status add(const ops::AddParams& p, const float* a, const float* b, float* y, cudaStream_t stream);

// n_tokens <= 64: one pass over the weights (matvec.h). Larger n_tokens run in batches of 64 (the
// weights are read once per batch; a tensor-core prefill GEMM is future work).
Status matmul(const ops::MatmulParams& p, const void* w, const float* x, float* y, cudaStream_t stream);

Status get_rows(const ops::GetRowsParams& p, const void* w, const int32_t* ids, float* y, cudaStream_t stream);

}  // namespace ds::cuda
