// Gated delta rule (qwen35-spec.md §4.4 recurrent, §4.6 chunked), fp32 throughout.
// Per sequence s, value head h (key/query head kh = h % nk: GGUF tiled order, §2.5), token t in order:
//   M   = exp(g[t,h]) * M                       M = S^T: [dv, dk], row j = value index, keys contiguous
//   d_j = (v[t,h][j] - M[j,:]·k[t,kh]) * beta[t,h]
//   M[j,:] += d_j * k[t,kh]
//   out[t,h][j] = (M[j,:]·q[t,kh]) * scale      scale = 1/sqrt(dk)
// q, k must already be L2-normalized (l2_norm.h). Layouts: q row (t, kh) at q + t*q_stride + kh*dk, same for k
// with k_stride; v row (t, h) at v + t*v_stride + h*dv (so q, k, v can be views into the conv output U
// [T, Cc]: strides Cc, offsets 0, Kd, 2*Kd); g, beta packed [n_tokens, nv]; out packed [n_tokens, nv, dv].
// State of sequence s: [nv, dv, dk] fp32 at state + slot(s)*nv*dv*dk, slot(s) = state_slots ? state_slots[s] : s
// (the llama.cpp layout); read as the initial state, overwritten with the final one. Zero = fresh sequence.
// gdn_chunked computes the same function with the chunked (WY) algorithm, chunk kGdnChunk, per §4.6.
// Call: ds::cpu::gdn_recurrent / gdn_chunked(p, q, k, v, g, beta, state, seq_starts, state_slots, out) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

inline constexpr int64_t kGdnChunk = 64;

struct GdnParams {
  int64_t n_tokens = 0;   // total tokens in the packed batch
  int64_t n_seqs = 1;     // seq_starts has n_seqs + 1 entries
  int64_t n_k_heads = 0;  // nk
  int64_t n_v_heads = 0;  // nv (multiple of nk)
  int64_t d_k = 0;        // dk
  int64_t d_v = 0;        // dv
  int64_t q_stride = 0;   // elements between tokens in q
  int64_t k_stride = 0;   // elements between tokens in k
  int64_t v_stride = 0;   // elements between tokens in v
  float scale = 0;        // 1/sqrt(dk)

  int64_t state_floats() const { return n_v_heads * d_v * d_k; }  // per sequence
};

}  // namespace ds::ops
