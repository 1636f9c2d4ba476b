// Kernels of the CUDA forward pass (qwen35_cuda.cuh) that are not plain matrix-vector products: the fused
// per-layer ops, written against a packed step of T tokens of S sequences whose per-token facts (token id,
// position, sequence) and per-sequence state address live in device memory (StepIO), so a step can be
// captured once in a CUDA graph and replayed with new inputs. Each launcher checks its shapes and enqueues on
// `stream` with no synchronisation. CPU equivalents (src/cpu) are named at each declaration; the optional
// dbg_* outputs hold the intermediates the fusion skips, for the named dumps.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/error.h"
#include "core/ggml_type.h"
#include "cuda/model/qwen35_cuda.cuh"

namespace ds::cuda::mk {

// A switch from the environment (kernels_basic.cu): unset or empty gives dflt, else on unless it starts with '0'.
bool env_on(const char* name, bool dflt);

// Inputs of one step, copied to the device at its start. Tokens are packed by sequence.
struct StepIO {
  int32_t tok[kMaxStepTokens];        // token ids
  int32_t pos[kMaxStepTokens];        // positions
  int32_t seq[kMaxStepTokens];        // sequence (0 .. S-1) of each token
  int32_t start[kMaxStepTokens + 1];  // tokens start[s] .. start[s+1]-1 belong to sequence s
  alignas(8) unsigned long long base[kMaxStepTokens];  // device address of each sequence's state allocation
};

// cpu::get_rows: y[t, :] = row tok[t] of w (GGUF type, ne {n_cols, V}) as floats, t < n_tokens.
Status embed(GgmlType type, const void* w, int64_t n_cols, const StepIO* io, int n_tokens, float* y,
             cudaStream_t stream);

// cpu::rms_norm over n_rows rows: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w.
Status rms_norm(const float* x, int64_t ldx, const float* w, float* y, int64_t ldy, int n_rows, int64_t n_cols,
                float eps, cudaStream_t stream);

// Tests: which rms_norm kernel runs (0 the plain loop, 1 float4 x 8 per thread, -1 the
// environment's choice: DS_RMS_V4) and which swiglu (0 scalar, 1 float4, -1 DS_SWIGLU_V4).
void rms_force_kernel(int k);
void swiglu_force_kernel(int k);

// cpu::add: y[i] += x[i].
Status add(float* y, const float* x, int64_t n, cudaStream_t stream);

// cpu::swiglu: y[r, i] = silu(g[r, i]) * u[r, i], y packed [n_rows, n_cols].
Status swiglu(const float* g, int64_t ldg, const float* u, int64_t ldu, float* y, int n_rows, int64_t n_cols,
              cudaStream_t stream);

// cpu::conv1d_silu then cpu::l2_norm of the q and k heads, per sequence in token order, the window of each
// sequence at base + state_off ([Kc-1][Cc] fp32, oldest row first).
struct ConvArgs {
  const float* x = nullptr;  // qkv projection, token t at x + t*ldx
  int64_t ldx = 0;
  const float* w = nullptr;  // [Cc][Kc]
  int64_t state_off = 0;     // bytes
  float* u = nullptr;        // output, token t at u + t*ldu
  int64_t ldu = 0;
  float* dbg_pre = nullptr;  // optional [T][Cc]: the SiLU output before the L2 norm
  int64_t n_channels = 0;       // Cc
  int64_t n_norm_channels = 0;  // 2*Kd: channels normalized per head
  int head_dim = 0;             // dk (= dv); Cc and 2*Kd are multiples of it
  int kernel = 4;               // Kc <= kMaxConvKernel
  float eps = 1e-6f;
};
inline constexpr int kMaxConvKernel = 8;
Status conv_silu_l2(const ConvArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream);
// Tests and benches: sequences per conv_silu_l2 block from now on (1, 2, 4: the same bits; 0: DS_CONV_SEQS); while
// conv_force_warp is -1, k > 0 also selects that block kernel over conv_warp_kernel.
void conv_force_seqs(int k);
// Tests and benches: conv_warp_kernel with k (1, 2, 4) sequences per warp, 0 the block kernel, -1 DS_CONV_WARP (conv14;
// 1 by default).
void conv_force_warp(int k);

// The same for the piece prefill: n_tokens tokens of one sequence, in parallel over tokens (one block per
// (token, head of head_dim channels)), the window `win` ([Kc-1][Cc], oldest row first; a.state_off unused)
// read but not changed; conv_window_advance then moves the window past those tokens (run it after).
Status conv_silu_l2_piece(const ConvArgs& a, const float* win, int n_tokens, cudaStream_t stream);
Status conv_window_advance(const ConvArgs& a, float* win, int n_tokens, cudaStream_t stream);

// cpu::gdn_gates + cpu::gdn_recurrent + cpu::rms_norm_gated, per sequence in token order; each value head's
// state [dv][dk] (at base + state_off + h*dv*dk elements) is read once and written once per step. state_half
// (st20, --state-f16): the states are f16; each is read into float registers, updated in float arithmetic (the
// same operations as with float states) and rounded to f16 once, when written back.
struct GdnArgs {
  const float* u = nullptr;  // conv output: q head kh at u + t*ldu + kh*dk, k at + Kd, v head h at + 2*Kd + h*dv
  int64_t ldu = 0;
  const float* a = nullptr;  // ssm_alpha projection [t*lda + h]
  int64_t lda = 0;
  const float* b = nullptr;  // ssm_beta projection [t*ldb + h]
  int64_t ldb = 0;
  const float* z = nullptr;  // attn_gate projection [t*ldz + h*dv + j]
  int64_t ldz = 0;
  const float* ssm_a = nullptr;
  const float* dt_bias = nullptr;
  const float* norm_w = nullptr;  // ssm_norm [dv]
  int64_t state_off = 0;          // bytes
  int n_k_heads = 0, n_v_heads = 0, d_k = 0;
  float scale = 0, eps = 1e-6f;
  float* out = nullptr;  // [t*ldo + h*dv + j]
  int64_t ldo = 0;
  float* dbg_core = nullptr;  // optional [T][nv][dv]: the rule's output before the gated norm
  float* dbg_g = nullptr;     // optional [T][nv]
  float* dbg_beta = nullptr;  // optional [T][nv]
  bool state_half = false;    // the states are f16 (st20)
  int lazy = 0;               // lz23: 0 = the state read and written every step; T in [2, kMaxGdnLazy]: the lazy rule
  int64_t hist_off = 0;       // lz23: bytes into a sequence state: the history (gdn_hist_floats per value head)
};
bool gdn_supports(int d_k);
// The delta-rule step; with a.lazy the lazy rule (gdn_lazy_step), at every batch.
Status gdn_step(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream);

// lz23, the lazy delta rule (kernels_gdn_lazy.cu, see there): the state is written every a.lazy-th token; between,
// each head keeps a history of its tokens (floats per value head: gdn_hist_floats). gdn_flush applies one sequence's
// history (base: its allocation) to its state and empties it: before anything but the step reads the state.
constexpr int kMaxGdnLazy = 16;
__host__ __device__ constexpr int64_t gdn_hist_floats(int d_k, int lazy) {
  return 4 + (int64_t)(lazy - 1) * (2 * d_k + 4);
}
Status gdn_lazy_step(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream);
Status gdn_flush(const GdnArgs& a, uint8_t* base, cudaStream_t stream);
// f16 states (st20) around the prefill's float delta rule: n values of an f16 state into float (widen) and back
// (narrow, round to nearest even).
Status state_widen(const void* h, float* f, int64_t n, cudaStream_t stream);
Status state_narrow(const float* f, void* h, int64_t n, cudaStream_t stream);
// Tests and benches: the kernel gdn_step takes from now on (0 gdn_kernel, 1 gdn_tma_out_kernel, 2 its form with the
// next item's inputs in shared memory (gdn12, the default from 16 sequences); -1: by the environment and the
// batch, as in the model). All give the same bits.
void gdn_force_kernel(int k);
// Bench only: every state of gdn_step's shape read and written back unchanged with the access pattern of a
// kernel, as its roofline: mode 0 gdn_kernel's CTAs and per-thread pattern, 1 CTAs of a quarter head (128 threads
// at d_k 128) with each warp instruction on 512 contiguous bytes (the register path's best), 2 gdn_tma_out_kernel's
// persistent bulk copies through shared memory (load slots refilled once read into registers, stores through one
// out slot).
Status gdn_state_copy(int mode, const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream);

// cg18: conv_silu_l2 (c) + gdn_step (a) in one kernel (gdn_conv_kernel; a.u unused, c.u not written), the same bits,
// where gdn_conv_fused says so: DS_GDN_CONV_FUSE not 0 (default on) or gdn_force_conv_fuse(1), gdn_step's batch on
// gdn_kernel (below DS_GDN_TMA_MIN sequences), conv kernel 4, d_k = head dim 64 / 128, nv a multiple (<= 8) of nk,
// no debug outputs.
bool gdn_conv_fused(const ConvArgs& c, const GdnArgs& a, int n_seqs);
Status gdn_conv_step(const ConvArgs& c, const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream);
// Tests and benches: 1 / 0 = fused or not from now on, -1 = DS_GDN_CONV_FUSE.
void gdn_force_conv_fuse(int on);
// gs18: the split gdn_conv_step takes (gdn_conv_kernel's kS, each value head's rows over 2 / 4 CTAs of a cluster;
// the same bits), 0 = kS 1: DS_GDN_SPLIT_B1 (0, 2, 4; unset: 4 where nv = nk, else 0) or
// gdn_force_split_b1, where gdn_conv_fused holds, below 16 sequences, and the cluster (nv / nk) * split <= 8 CTAs.
int gdn_conv_split(const ConvArgs& c, const GdnArgs& a, int n_seqs);
// Tests and benches: 0 / 2 / 4 from now on, -1 = DS_GDN_SPLIT_B1.
void gdn_force_split_b1(int k);

// cpu::rms_norm of the q and k heads + cpu::rope_neox + the cache store of cpu::attention: q -> q_out packed
// [T][nh][hd]; k -> K cache row pos[t], v -> V cache row pos[t] (caches [max_ctx][nkv][hd] at base + k_off /
// base + v_off).
struct QkArgs {
  const float* q = nullptr;  // q projection: head h's q at q + t*ldq + h*2*hd (the [q | gate] layout)
  int64_t ldq = 0;
  const float* k = nullptr;
  int64_t ldk = 0;
  const float* v = nullptr;
  int64_t ldv = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* inv_freq = nullptr;  // [n_rot/2], computed on the host as the CPU reference does
  int64_t k_off = 0, v_off = 0;     // bytes
  bool kv_half = false;             // kv19: the caches hold f16 rows (else f32)
  int n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
  float eps = 1e-6f;
  float* q_out = nullptr;
  float* dbg_qn = nullptr;  // optional [T][nh][hd] before RoPE
  float* dbg_kn = nullptr;  // optional [T][nkv][hd] before RoPE
  float* dbg_kr = nullptr;  // optional [T][nkv][hd] after RoPE
};
Status qk_norm_rope_store(const QkArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream);

// cpu::attention (reading the caches, rows 0 .. pos[t]) + cpu::output_gate, split over n_splits position
// ranges and merged.
struct AttnArgs {
  const float* q = nullptr;     // [T][nh][hd]
  const float* gate = nullptr;  // head h's gate at gate + t*ld_gate + h*2*hd
  int64_t ld_gate = 0;
  int64_t k_off = 0, v_off = 0;  // bytes
  bool kv_half = false;          // kv19: the caches hold f16 rows (else f32); must match QkArgs' for attention_qk
  int n_head = 0, n_head_kv = 0, head_dim = 0, n_splits = 1;
  float scale = 0;
  float* part = nullptr;      // scratch [T][nh][n_splits][hd + 2]
  float* out = nullptr;       // [T][nh*hd], gated
  float* dbg_core = nullptr;  // optional [T][nh*hd] before the gate
  // [T][nkv] zeros: the fused combine's arrival counters (attn_fused() >= 1 with n_splits > 1); every launch
  // leaves them zero. Without them (or at level 0) attention runs the partial and combine kernels.
  unsigned* counters = nullptr;
};
inline constexpr int kMaxAttnSplits = 16;
inline constexpr int kMaxAttnGroup = 8;  // nh / nkv
bool attention_supports(int head_dim, int group);
Status attention(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream);

// qk_norm_rope_store + attention in one kernel (attn9): q from q.q (a.q unused; q.q_out written if set, for the
// q_rope dump), the K / V rows at pos[t] stored as qk_norm_rope_store stores them, the q.dbg_* outputs as it
// writes them. The tokens of a sequence must have consecutive positions (as a step gives them). q and a must
// agree on the heads, head dim and cache offsets; n_splits > 1 needs a.counters.
Status attention_qk(const QkArgs& q, const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream);

// Kernels of a full-attention layer's step (DS_ATTN_FUSED, attn9): 0 (default): qk_norm_rope_store, the
// partial and the combine kernel; 1: the combine folded into the partial kernel (2 kernels); 2: the forward
// runs attention_qk (1 kernel). Read once from the environment; the setter is for tests and A/B runs (a
// model's captured decode graphs keep the kernels they were captured with).
int attn_fused();
void set_attn_fused(int level);  // clamped to 0 .. 2
// attn13: the decode attention's cached rows through a cp.async ring of 2 or 4 rows per warp at fused levels 0
// and 1 (default: 4 from 32 tokens per step, else the register loops; DS_ATTN_RING = 0 / 2 / 4 at every batch);
// the same bits either way. attn_ring: the rows per warp a step of n_tokens uses (0 = the register loops);
// attn_force_ring (tests, benches; -1 = the environment's / default) and attn_force_prefetch (1 or 2 rows ahead
// in the register loop of level 0, 0 = DS_ATTN_PREFETCH) apply to the launches after them (not to captured graphs).
int attn_ring(int n_tokens);
void attn_force_ring(int rows);
void attn_force_prefetch(int rows);
// attn17: blocks of empty splits write only (M, L) and the combine skips their A (DS_ATTN_SKIP_EMPTY, default
// on, =0 off; the same bits either way); attn_force_skip_empty(0 / 1; -1 = the environment's) for tests and benches.
void attn_force_skip_empty(int on);
// tca33: f16 caches (kv_half) with <= 4 q heads per kv head through the tensor-core kernel (attn_mma.cuh) at every
// batch (DS_ATTN_MMA=0 off); attn_force_mma(0 / 1; -1 = the environment's) for tests and benches.
void attn_force_mma(int on);
// attn_force_mma_rows(R; -1 = DS_ATTN_MMA_ROWS / DS_ATTN_MMA_ALIGN (R = 16), default 0): R > 0 gives the mma
// kernel's splits at least R rows in whole 16-row tiles (other bits, a function of the sequence's length only).
void attn_force_mma_rows(int rows);
// attn18: the ring kernel's cached rows with L2 evict_first (DS_ATTN_EVICT, default on, =0 off; the same bits);
// attn_force_evict(0 / 1; -1 = the environment's) for tests and benches.
void attn_force_evict(int on);

}  // namespace ds::cuda::mk
