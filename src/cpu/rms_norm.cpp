#include <cmath>

#include "cpu/cpu.h"

namespace ds::cpu {

void rms_norm(const ops::RmsNormParams& p, const float* x, const float* w, float* y) {
  const int64_t n_rows = p.n_tokens * p.n_heads;
#pragma omp parallel for schedule(static) if (n_rows * p.n_cols > 32768)
  for (int64_t r = 0; r < n_rows; r++) {
    const int64_t t = r / p.n_heads, h = r % p.n_heads;
    const float* xr = x + t * p.x_token_stride + h * p.x_head_stride;
    float* yr = y + t * p.y_token_stride + h * p.y_head_stride;
    double sum = 0;
    for (int64_t i = 0; i < p.n_cols; i++) sum += (double)xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt((float)(sum / (double)p.n_cols) + p.eps);
    for (int64_t i = 0; i < p.n_cols; i++) yr[i] = xr[i] * scale * w[i];
  }
}

}  // namespace ds::cpu
