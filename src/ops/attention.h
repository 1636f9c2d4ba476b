// Causal GQA attention with a KV cache (qwen35-spec.md §5), fp32.
// Tokens are packed by sequence (sequence s = tokens seq_starts[s] .. seq_starts[s+1]-1), token t sits at
// position pos[t] (< max_ctx, increasing within a sequence). First every token's k, v rows are stored in its
// sequence's cache at row pos[t]; then, with g = h / (n_head / n_head_kv) (HF repeat_kv order):
//   out[t,h] = sum_{p <= pos[t]} softmax_p( scale * q[t,h]·Kc[p,g] ) * Vc[p,g]
// so a prefill attends causally within itself and to cache rows 0..pos[t]-1 written by earlier calls.
// q [n_tokens, n_head, hd] packed (after q_norm + RoPE); k, v [n_tokens, n_head_kv, hd] packed (k after
// k_norm + RoPE, v raw); out [n_tokens, n_head, hd] packed. K and V caches of sequence s: [max_ctx, n_head_kv,
// hd] fp32 each, at cache + slot(s)*max_ctx*n_head_kv*hd, slot(s) = slots ? slots[s] : s. scale = 1/sqrt(hd).
// Call: ds::cpu::attention(p, q, k, v, k_cache, v_cache, pos, seq_starts, slots, out) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct AttentionParams {
  int64_t n_tokens = 0;
  int64_t n_seqs = 1;
  int64_t n_head = 0;     // nh
  int64_t n_head_kv = 0;  // nkv (divides nh)
  int64_t head_dim = 0;   // hd
  int64_t max_ctx = 0;    // cache rows per sequence
  float scale = 0;        // 1/sqrt(hd)

  int64_t cache_floats() const { return max_ctx * n_head_kv * head_dim; }  // per sequence, K or V
};

}  // namespace ds::ops
