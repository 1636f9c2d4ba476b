#include <cmath>
#include <vector>

#include "cpu/cpu.h"

namespace ds::cpu {

void rope_neox(const ops::RopeParams& p, float* x, const int32_t* pos) {
  const int64_t half = p.n_rot / 2;
  // HF: inv_freq = 1 / base^(arange(0, n_rot, 2) / n_rot) in fp32; theta = inv_freq * p in fp32.
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; i++)
    inv_freq[i] = 1.0f / std::pow(p.base, (float)(2 * i) / (float)p.n_rot);
  for (int64_t t = 0; t < p.n_tokens; t++) {
    for (int64_t i = 0; i < half; i++) {
      const float theta = (float)pos[t] * inv_freq[i];
      const float c = std::cos(theta), s = std::sin(theta);
      for (int64_t h = 0; h < p.n_heads; h++) {
        float* xr = x + t * p.token_stride + h * p.head_stride;
        const float x0 = xr[i], x1 = xr[i + half];
        xr[i] = x0 * c - x1 * s;
        xr[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace ds::cpu
