// Partial rotary embedding, NEOX (rotate_half) pairing (qwen35-spec.md §5.1), in place, fp32.
// For each row (token t, head h) at x + t*token_stride + h*head_stride, with p = pos[t] and half = n_rot/2:
//   inv_i = 1 / base^(2i/n_rot)  (float),  theta_i = p * inv_i (float),  i in [0, half)
//   x'[i]        = x[i] cos(theta_i) - x[i+half] sin(theta_i)
//   x'[i + half] = x[i] sin(theta_i) + x[i+half] cos(theta_i)
// Dims [n_rot, head_dim) are untouched. Text-only M-RoPE gives every section the same position, so this
// is exactly the standard NEOX rope (the dimension_sections key is accepted and ignored). pos [n_tokens] int32.
// Call: ds::cpu::rope_neox(p, x, pos) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct RopeParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;  // rotated dims (even, <= head_dim)
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  float base = 1e7f;
};

}  // namespace ds::ops
