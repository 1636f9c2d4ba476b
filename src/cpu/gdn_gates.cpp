#include "cpu/cpu.h"
#include "cpu/scalar.h"

namespace ds::cpu {

void gdn_gates(const ops::GdnGatesParams& p, const float* a, const float* b, const float* ssm_a,
               const float* dt_bias, float* g, float* beta) {
  for (int64_t t = 0; t < p.n_tokens; t++) {
    for (int64_t h = 0; h < p.n_v_heads; h++) {
      const int64_t i = t * p.n_v_heads + h;
      g[i] = ssm_a[h] * softplus(a[i] + dt_bias[h]);
      beta[i] = sigmoid(b[i]);
    }
  }
}

}  // namespace ds::cpu
