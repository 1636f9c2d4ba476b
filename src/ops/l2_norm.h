// Per-head L2 normalization of the GDN query and key (qwen35-spec.md §4.3), Hugging Face form:
//   y = x * 1/sqrt(sum(x^2) + eps),  eps = 1e-6 (HF's fixed l2norm eps; ggml's max(||x||, eps) form differs
//   by ~1e-6 relative, and the references are HF).
// A row is (token t, head h): n_cols contiguous floats at x + t*x_token_stride + h*x_head_stride, written to
// y with y's strides. Typical use: in place on the conv output U [T, Cc], q and k heads at once
// (n_heads = 2*nk, n_cols = dk, token stride Cc, head stride dk). Sum in double in the CPU reference.
// Call: ds::cpu::l2_norm(p, x, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

inline constexpr float kL2NormEps = 1e-6f;

struct L2NormParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 1;
  int64_t n_cols = 0;
  int64_t x_token_stride = 0;
  int64_t x_head_stride = 0;
  int64_t y_token_stride = 0;
  int64_t y_head_stride = 0;
  float eps = kL2NormEps;
};

}  // namespace ds::ops
