// Causal depthwise conv1d over time followed by SiLU, with a rolling window (qwen35-spec.md §4.2).
// Per sequence s (tokens seq_starts[s] .. seq_starts[s+1]-1 of the packed batch) and channel c, with
// E = [state rows (Kc-1 of them, oldest first); x rows of the sequence]:
//   y[t, c] = silu( sum_{j=0..Kc-1} w[c, j] * E[t + j, c] )      (tap 0 multiplies the OLDEST sample)
//   state   := the last Kc-1 rows of E                            (works for any T >= 0, also T < Kc-1)
// x [n_tokens, Cc] packed fp32 (the attn_qkv projection), w [Cc, Kc] (GGUF ssm_conv1d {Kc, Cc}),
// y [n_tokens, Cc] packed. State of sequence s: [Kc-1, Cc] fp32 (time-major: row r is one sample of all
// channels) at state + slot(s)*(Kc-1)*Cc, slot(s) = state_slots ? state_slots[s] : s. No conv bias.
// Call: ds::cpu::conv1d_silu(p, x, w, state, seq_starts, state_slots, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct ConvParams {
  int64_t n_tokens = 0;    // total tokens in the packed batch
  int64_t n_seqs = 1;      // sequences in the batch (seq_starts has n_seqs + 1 entries)
  int64_t n_channels = 0;  // Cc = 2*Kd + Vd
  int64_t kernel = 4;      // Kc
};

}  // namespace ds::ops
