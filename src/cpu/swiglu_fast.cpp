// swiglu_fast (fast.h): y = silu(gate) * up as swiglu.cpp, with the vectorized exp of simd.h instead of
// libm's scalar expf (which was ~3% of a 0.8B prefill: T * n_ff exponentials per layer).
#include <algorithm>

#include "cpu/fast.h"
#include "cpu/simd.h"

namespace ds::cpu {

void swiglu_fast(const ops::SwigluParams& p, const float* gate, const float* up, float* y) {
  const VecOps* ops = vec_ops();
  const int64_t n = p.n_tokens * p.n_ff;
  if (!ops) return swiglu(p, gate, up, y);
  constexpr int64_t kPiece = 1024;  // elements per exp call (the e buffer stays in L1)
  const int64_t pieces = (n + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < pieces; i++) {
    const int64_t i0 = i * kPiece, m = std::min(kPiece, n - i0);
    float e[kPiece];
    for (int64_t j = 0; j < m; j++) e[j] = -gate[i0 + j];
    ops->exp(e, m, e);
    for (int64_t j = 0; j < m; j++) y[i0 + j] = gate[i0 + j] / (1.0f + e[j]) * up[i0 + j];
  }
}

}  // namespace ds::cpu
