#include <cmath>

#include "cpu/cpu.h"
#include "cpu/scalar.h"

namespace ds::cpu {

void rms_norm_gated(const ops::RmsNormGatedParams& p, const float* x, const float* z, const float* w, float* y) {
#pragma omp parallel for schedule(static) if (p.n_rows * p.n_cols > 32768)
  for (int64_t r = 0; r < p.n_rows; r++) {
    const float* xr = x + r * p.n_cols;
    const float* zr = z + r * p.n_cols;
    float* yr = y + r * p.n_cols;
    double sum = 0;
    for (int64_t i = 0; i < p.n_cols; i++) sum += (double)xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt((float)(sum / (double)p.n_cols) + p.eps);
    for (int64_t i = 0; i < p.n_cols; i++) yr[i] = xr[i] * scale * w[i] * silu(zr[i]);
  }
}

}  // namespace ds::cpu
