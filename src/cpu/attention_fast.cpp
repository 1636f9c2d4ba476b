// attention_fast (fast.h): ops/attention.h as attention.cpp computes it, with the G = nh / nkv query heads
// that share a KV head handled together, so each cached key and value row is read once for all of them
// (vectorized dot products for the scores, a register-blocked rows-times-matrix for the weighted values,
// vectorized exp for the softmax). Work items are (token, KV head), run in parallel.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/fast.h"
#include "cpu/simd.h"

namespace ds::cpu {

void attention_fast(const ops::AttentionParams& p, const float* q, const float* k, const float* v, float* k_cache,
                    float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots, float* out) {
  const VecOps* ops = vec_ops();
  if (!ops) return attention(p, q, k, v, k_cache, v_cache, pos, seq_starts, slots, out);
  const int64_t nh = p.n_head, nkv = p.n_head_kv, hd = p.head_dim, row = nkv * hd;
  const int64_t G = nh / nkv;  // q heads per kv head (HF repeat_kv: kv head = h / G)
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
    const int64_t work = t1 > t0 ? (t1 - t0) * nh * (pos[t1 - 1] + 1) * hd : 0;
    const int64_t n_items = (t1 - t0) * nkv;
#pragma omp parallel for schedule(dynamic) if (work >= (1 << 16))
    for (int64_t it = 0; it < n_items; it++) {
      const int64_t t = t0 + it / nkv, g = it % nkv, n_keys = pos[t] + 1;
      thread_local std::vector<float> w;
      if ((int64_t)w.size() < G * n_keys) w.resize(G * n_keys);
      ops->attn_scores(q + (t * nh + g * G) * hd, G, hd, kc + g * hd, row, n_keys, p.scale, w.data());
      for (int64_t i = 0; i < G; i++) {  // softmax of each head's row, as attention.cpp: exp(s - max) / sum
        float* wi = w.data() + i * n_keys;
        const float mx = *std::max_element(wi, wi + n_keys);
        const float sum = ops->exp_sum(wi, n_keys, mx, wi);
        ops->scale(1.0f / sum, wi, n_keys, wi);
      }
      ops->attn_values(w.data(), G, n_keys, vc + g * hd, row, hd, out + (t * nh + g * G) * hd);
    }
  }
}

}  // namespace ds::cpu
