// Gated DeltaNet gates (qwen35-spec.md §4.3), per token t and value head h, fp32:
//   g[t, h]    = ssm_a[h] * softplus(a[t, h] + dt_bias[h])     (ssm_a = -exp(A_log), pre-baked in GGUF; g <= 0)
//   beta[t, h] = sigmoid(b[t, h]) = 1 / (1 + exp(-b))
// softplus(x) = x > 20 ? x : log1p(exp(x))   (torch threshold form; the references are HF).
// a, b, g, beta packed [n_tokens, nv] (a = ssm_alpha projection, b = ssm_beta projection); ssm_a, dt_bias [nv].
// g may equal a and beta may equal b.
// Call: ds::cpu::gdn_gates(p, a, b, ssm_a, dt_bias, g, beta) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct GdnGatesParams {
  int64_t n_tokens = 0;
  int64_t n_v_heads = 0;
};

}  // namespace ds::ops
