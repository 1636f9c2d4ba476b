// RMSNorm over rows (qwen35-spec.md §1.3): y = x * 1/sqrt(mean(x^2) + eps) * w, all fp32.
// The GGUF weight already holds the +1 of Qwen3_5RMSNorm (converter bakes it in), so this is the
// plain rms_norm(x) * w. A row is (token t, head h): n_cols contiguous floats at
// x + t*x_token_stride + h*x_head_stride, written to y + t*y_token_stride + h*y_head_stride.
// Layer norms: n_heads = 1, n_cols = H. q_norm/k_norm (§5): per head over hd, e.g. reading q out of the
// interleaved [q | gate] projection (x_head_stride = 2*hd) into a packed [T, nh, hd] buffer.
// Sum of squares: double in the CPU reference (as ggml); y may equal x when the layouts match.
// Call: ds::cpu::rms_norm(p, x, w, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct RmsNormParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 1;
  int64_t n_cols = 0;          // elements normalized together (H or hd)
  int64_t x_token_stride = 0;  // elements between tokens in x
  int64_t x_head_stride = 0;   // elements between heads in x
  int64_t y_token_stride = 0;
  int64_t y_head_stride = 0;
  float eps = 1e-6f;

  // x and y both packed [n_rows, n_cols] (one head per row).
  static RmsNormParams packed(int64_t n_rows, int64_t n_cols, float eps) {
    return {n_rows, 1, n_cols, n_cols, n_cols, n_cols, n_cols, eps};
  }
};

}  // namespace ds::ops
