// conv1d_silu_fast (fast.h): ops/conv1d.h as conv1d.cpp computes it, reorganised for prefill: tokens are
// independent given the rolling window, so threads split the tokens and each token's row of Cc channels is
// one contiguous vector loop over the Kc taps (the reference walks one channel through all tokens, a
// strided walk), then SiLU with the vectorized exp. Sequences shorter than 2 Kc tokens (decode) run the
// reference.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "cpu/fast.h"
#include "cpu/simd.h"

namespace ds::cpu {

void conv1d_silu_fast(const ops::ConvParams& p, const float* x, const float* w, float* state,
                      const int32_t* seq_starts, const int32_t* state_slots, float* y) {
  const VecOps* ops = vec_ops();
  const int64_t Cc = p.n_channels, Kc = p.kernel, W = Kc - 1;
  if (!ops || p.n_tokens < 2 * Kc) return conv1d_silu(p, x, w, state, seq_starts, state_slots, y);
  DS_CHECK(Kc >= 1 && W <= 16, "conv kernel {}", Kc);
  // Taps transposed, wt[j][c], and (below) each thread's SiLU scratch: per-thread buffers kept between
  // calls (grown, never shrunk; a few rows of Cc floats), so a prefill allocates nothing here once warm.
  thread_local std::vector<float> wt_buf;
  wt_buf.resize(Kc * Cc);
  float* const wt = wt_buf.data();  // a plain pointer: inside the parallel region the name wt_buf would be each thread's own
  for (int64_t c = 0; c < Cc; c++)
    for (int64_t j = 0; j < Kc; j++) wt[j * Cc + c] = w[c * Kc + j];
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const int64_t t0 = seq_starts ? seq_starts[s] : 0;
    const int64_t t1 = seq_starts ? seq_starts[s + 1] : p.n_tokens;
    const int64_t T = t1 - t0;
    float* st = state + (state_slots ? state_slots[s] : s) * W * Cc;
    if (T < 2 * Kc) {  // a short sequence of a packed batch: the reference on it alone
      conv1d_silu({T, 1, Cc, Kc}, x + t0 * Cc, w, st, nullptr, nullptr, y + t0 * Cc);
      continue;
    }
    // Row e of the extended input E = [window rows (oldest first); the sequence's tokens].
    auto row = [&](int64_t e) { return e < W ? st + e * Cc : x + (t0 + e - W) * Cc; };
#pragma omp parallel if (T * Cc > 32768)
    {
      thread_local std::vector<float> e;
      e.resize(Cc);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; t++) {
        float* yr = y + (t0 + t) * Cc;
        const float* r0 = row(t);
        for (int64_t c = 0; c < Cc; c++) yr[c] = wt[c] * r0[c];
        for (int64_t j = 1; j < Kc; j++) {
          const float* rj = row(t + j);
          const float* wj = wt + j * Cc;
          for (int64_t c = 0; c < Cc; c++) yr[c] += wj[c] * rj[c];
        }
        for (int64_t c = 0; c < Cc; c++) e[c] = -yr[c];
        ops->exp(e.data(), Cc, e.data());
        for (int64_t c = 0; c < Cc; c++) yr[c] = yr[c] / (1.0f + e[c]);  // silu(v) = v / (1 + exp(-v))
      }
    }
    // New window = the last W rows of E (T >= 2 Kc > W: all of them are inputs of this call).
    for (int64_t r = 0; r < W; r++) std::copy_n(x + (t0 + T - W + r) * Cc, Cc, st + r * Cc);
  }
}

}  // namespace ds::cpu
