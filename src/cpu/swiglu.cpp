#include "cpu/cpu.h"
#include "cpu/scalar.h"

namespace ds::cpu {

void swiglu(const ops::SwigluParams& p, const float* gate, const float* up, float* y) {
  const int64_t n = p.n_tokens * p.n_ff;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) y[i] = silu(gate[i]) * up[i];
}

}  // namespace ds::cpu
