// CPU reference of every op (one .cpp per op in this folder): plain fp32 loops written to be read beside
// qwen35-spec.md, multi-threaded with OpenMP over rows / heads. The contracts (shapes, layouts, semantics)
// are in src/ops/<op>.h; ds::cuda::<op> takes the same params struct and the same pointers (device memory).
// Index arrays (seq_starts, state_slots, pos, ids) live in the same memory as the data.
// seq_starts == nullptr means one sequence of all n_tokens; state_slots == nullptr means slot s = s.
#pragma once
#include <cstdint>

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

namespace ds::cpu {

// ops/rms_norm.h: w [n_cols] (+1 already baked in).
void rms_norm(const ops::RmsNormParams& p, const float* x, const float* w, float* y);

// ops/rms_norm_gated.h: w [n_cols], z like x.
void rms_norm_gated(const ops::RmsNormGatedParams& p, const float* x, const float* z, const float* w, float* y);

// ops/l2_norm.h
void l2_norm(const ops::L2NormParams& p, const float* x, float* y);

// ops/conv1d.h: x [T, Cc], w [Cc, Kc], state pool, y [T, Cc].
void conv1d_silu(const ops::ConvParams& p, const float* x, const float* w, float* state,
                 const int32_t* seq_starts, const int32_t* state_slots, float* y);

// ops/gdn_gates.h
void gdn_gates(const ops::GdnGatesParams& p, const float* a, const float* b, const float* ssm_a,
               const float* dt_bias, float* g, float* beta);

// ops/gdn.h: the recurrent rule (the truth, token by token) and the chunked rule (prefill, C = 64).
void gdn_recurrent(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                   const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                   float* out);
void gdn_chunked(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                 float* out);

// ops/rope.h: in place; pos [n_tokens].
void rope_neox(const ops::RopeParams& p, float* x, const int32_t* pos);

// ops/attention.h: stores k, v in the caches, then attends.
void attention(const ops::AttentionParams& p, const float* q, const float* k, const float* v, float* k_cache,
               float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots, float* out);

// ops/output_gate.h: x in place.
void output_gate(const ops::OutputGateParams& p, float* x, const float* gate);

// ops/swiglu.h
void swiglu(const ops::SwigluParams& p, const float* gate, const float* up, float* y);

// ops/add.h
void add(const ops::AddParams& p, const float* a, const float* b, float* y);

// ops/matmul.h: w = the weight's bytes (GGUF blocks).
void matmul(const ops::MatmulParams& p, const void* w, const float* x, float* y);

// ops/get_rows.h: ids [n_ids].
void get_rows(const ops::GetRowsParams& p, const void* w, const int32_t* ids, float* y);

}  // namespace ds::cpu
