// Gated RMSNorm of the Gated DeltaNet output (qwen35-spec.md §1.3 Qwen3_5RMSNormGated, §4.5):
//   y[r, :] = x[r, :] * 1/sqrt(mean(x[r, :]^2) + eps) * w * silu(z[r, :]),   silu(a) = a / (1 + exp(-a))
// per row r = (token, value head), n_cols = dv. x, z, y packed [n_rows, n_cols] fp32; w [n_cols] is shared
// by all heads and is a plain multiplier (NO +1: ssm_norm is not shifted by the converter).
// y may equal x.
// Call: ds::cpu::rms_norm_gated(p, x, z, w, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct RmsNormGatedParams {
  int64_t n_rows = 0;  // n_tokens * nv
  int64_t n_cols = 0;  // dv
  float eps = 1e-6f;
};

}  // namespace ds::ops
