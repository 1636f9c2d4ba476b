// SwiGLU activation of the dense MLP (qwen35-spec.md §6), fp32:
//   y[i] = silu(gate[i]) * up[i],  silu(a) = a / (1 + exp(-a)),  i in [0, n_tokens * n_ff)
// gate, up, y packed [n_tokens, n_ff] (ffn_gate and ffn_up projections); y may equal gate or up.
// Call: ds::cpu::swiglu(p, gate, up, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct SwigluParams {
  int64_t n_tokens = 0;
  int64_t n_ff = 0;  // I
};

}  // namespace ds::ops
