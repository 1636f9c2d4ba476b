#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/cpu.h"

namespace ds::cpu {

void attention(const ops::AttentionParams& p, const float* q, const float* k, const float* v, float* k_cache,
               float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots, float* out) {
  const int64_t nh = p.n_head, nkv = p.n_head_kv, hd = p.head_dim, row = nkv * hd;
  const int64_t group = nh / nkv;  // q heads per kv head (HF repeat_kv: kv head = h / group)
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const int64_t t0 = seq_starts ? seq_starts[s] : 0;
    const int64_t t1 = seq_starts ? seq_starts[s + 1] : p.n_tokens;
    const int64_t slot = slots ? slots[s] : s;
    float* kc = k_cache + slot * p.cache_floats();
    float* vc = v_cache + slot * p.cache_floats();
    for (int64_t t = t0; t < t1; t++) {  // store first: a prefill attends to its own earlier tokens
      DS_CHECK(pos[t] >= 0 && pos[t] < p.max_ctx, "attention: position {} outside the cache [0, {})", pos[t],
               p.max_ctx);
      std::memcpy(kc + pos[t] * row, k + t * row, row * sizeof(float));
      std::memcpy(vc + pos[t] * row, v + t * row, row * sizeof(float));
    }
    const int64_t work = t1 > t0 ? (t1 - t0) * nh * (pos[t1 - 1] + 1) * hd : 0;  // fork only when it pays
#pragma omp parallel for collapse(2) schedule(dynamic) if (work >= (1 << 16))
    for (int64_t t = t0; t < t1; t++) {
      for (int64_t h = 0; h < nh; h++) {
        const int64_t g = h / group, n_keys = pos[t] + 1;
        const float* qr = q + (t * nh + h) * hd;
        std::vector<float> w(n_keys);
        float mx = -INFINITY;
        for (int64_t j = 0; j < n_keys; j++) {
          const float* kr = kc + j * row + g * hd;
          float d = 0;
          for (int64_t i = 0; i < hd; i++) d += qr[i] * kr[i];
          w[j] = d * p.scale;
          mx = std::max(mx, w[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j < n_keys; j++) sum += w[j] = std::exp(w[j] - mx);
        float* o = out + (t * nh + h) * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t j = 0; j < n_keys; j++) {
          const float pj = w[j] / sum;
          const float* vr = vc + j * row + g * hd;
          for (int64_t i = 0; i < hd; i++) o[i] += pj * vr[i];
        }
      }
    }
  }
}

}  // namespace ds::cpu
