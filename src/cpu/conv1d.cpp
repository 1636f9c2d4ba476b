#include <vector>

#include "core/check.h"
#include "cpu/cpu.h"
#include "cpu/scalar.h"

namespace ds::cpu {

void conv1d_silu(const ops::ConvParams& p, const float* x, const float* w, float* state,
                 const int32_t* seq_starts, const int32_t* state_slots, float* y) {
  const int64_t Cc = p.n_channels, Kc = p.kernel, W = Kc - 1;  // W: rows of the rolling window
  DS_CHECK(Kc >= 1, "conv kernel {}", Kc);
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const int64_t t0 = seq_starts ? seq_starts[s] : 0;
    const int64_t t1 = seq_starts ? seq_starts[s + 1] : p.n_tokens;
    const int64_t T = t1 - t0;
    float* st = state + (state_slots ? state_slots[s] : s) * W * Cc;
#pragma omp parallel for schedule(static) if (T * Cc > 32768)
    for (int64_t c = 0; c < Cc; c++) {
      // E[e] for e in [0, W + T): state rows first (oldest first), then the sequence's inputs.
      auto E = [&](int64_t e) { return e < W ? st[e * Cc + c] : x[(t0 + e - W) * Cc + c]; };
      for (int64_t t = 0; t < T; t++) {
        float sum = 0;
        for (int64_t j = 0; j < Kc; j++) sum += w[c * Kc + j] * E(t + j);
        y[(t0 + t) * Cc + c] = silu(sum);
      }
      // New window = the last W rows of E; read them all before writing (they may come from st itself).
      float last[16];
      DS_CHECK(W <= 16, "conv kernel {} too large", Kc);
      for (int64_t r = 0; r < W; r++) last[r] = E(T + r);
      for (int64_t r = 0; r < W; r++) st[r * Cc + c] = last[r];
    }
  }
}

}  // namespace ds::cpu
