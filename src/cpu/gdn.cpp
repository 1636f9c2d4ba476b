// Gated delta rule, both forms (qwen35-spec.md §4.4, §4.6). Work is split over (sequence, value head):
// each head's state is independent. q is scaled by 1/sqrt(dk) before use, as in HF (same function).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu.h"

namespace ds::cpu {
namespace {

// Heads run in parallel only when there is enough work to pay for the fork (see matmul.cpp).
constexpr int64_t kParallelWork = int64_t(1) << 16;

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

struct SeqRange {
  int64_t t0, t1;
  float* state;
};

SeqRange seq_range(const ops::GdnParams& p, float* state, const int32_t* seq_starts,
                   const int32_t* state_slots, int64_t s) {
  return {seq_starts ? seq_starts[s] : 0, seq_starts ? seq_starts[s + 1] : p.n_tokens,
          state + (state_slots ? state_slots[s] : s) * p.state_floats()};
}

}  // namespace

void gdn_recurrent(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                   const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                   float* out) {
  const int64_t nk = p.n_k_heads, nv = p.n_v_heads, dk = p.d_k, dv = p.d_v;
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const SeqRange r = seq_range(p, state, seq_starts, state_slots, s);
#pragma omp parallel for schedule(static) if ((r.t1 - r.t0) * nv * dk * dv >= kParallelWork)
    for (int64_t h = 0; h < nv; h++) {
      const int64_t kh = h % nk;  // GGUF tiled V-head order (§2.5)
      float* M = r.state + h * dv * dk;  // [dv][dk] = S^T
      std::vector<float> qs(dk);
      for (int64_t t = r.t0; t < r.t1; t++) {
        const float* qt = q + t * p.q_stride + kh * dk;
        const float* kt = k + t * p.k_stride + kh * dk;
        const float* vt = v + t * p.v_stride + h * dv;
        for (int64_t i = 0; i < dk; i++) qs[i] = qt[i] * p.scale;
        const float decay = std::exp(g[t * nv + h]);
        const float b = beta[t * nv + h];
        float* o = out + (t * nv + h) * dv;
        for (int64_t j = 0; j < dv; j++) {  // rows of M are independent
          float* row = M + j * dk;
          for (int64_t i = 0; i < dk; i++) row[i] *= decay;
          const float delta = (vt[j] - dot(row, kt, dk)) * b;
          for (int64_t i = 0; i < dk; i++) row[i] += delta * kt[i];
          o[j] = dot(row, qs.data(), dk);
        }
      }
    }
  }
}

namespace {

// One chunk of n <= C tokens of one head, per §4.6 (the end-of-sequence chunk is simply shorter, which is
// what zero padding amounts to). Q (already scaled), K: [n][dk]; V: [n][dv]; gc, bc: [n]; M: [dv][dk] in/out;
// O: [n][dv] out.
void gdn_chunk(int64_t n, int64_t dk, int64_t dv, const float* Q, const float* K, const float* V,
               const float* gc, const float* bc, float* M, float* O) {
  std::vector<float> G(n), Tm(n * n, 0.0f), Unew(n * dv), Wk(n * dk), Vp(n * dv), Aqk(n * n, 0.0f);
  std::vector<float> Kbg(n * dk), Kd(n * dk);
  float acc = 0;
  for (int64_t t = 0; t < n; t++) G[t] = acc += gc[t];  // cumulative log-decay within the chunk
  const float g_last = G[n - 1];
  for (int64_t t = 0; t < n; t++) {
    const float eg = std::exp(G[t]), ed = std::exp(g_last - G[t]);
    for (int64_t i = 0; i < dk; i++) {
      Kbg[t * dk + i] = K[t * dk + i] * bc[t] * eg;  // diag(β exp(G)) K
      Kd[t * dk + i] = K[t * dk + i] * ed;           // diag(exp(G_last - G)) K
    }
  }
  // N = -strictly_lower((Kβ Kᵀ) ∘ Γ), Γ_tu = exp(G_t - G_u). Tm = (I + A)^-1 = (I - N)^-1 = I + X with
  // X = N + N X, solved row by row (forward substitution, as HF's loop).
  std::vector<float> N(n * n, 0.0f);
  for (int64_t t = 0; t < n; t++)
    for (int64_t u = 0; u < t; u++) N[t * n + u] = -(bc[t] * dot(K + t * dk, K + u * dk, dk)) * std::exp(G[t] - G[u]);
  for (int64_t t = 0; t < n; t++) {
    for (int64_t u = 0; u < t; u++) {
      float x = N[t * n + u];
      for (int64_t m = u + 1; m < t; m++) x += N[t * n + m] * Tm[m * n + u];
      Tm[t * n + u] = x;
    }
    Tm[t * n + t] = 1.0f;
  }
  // Unew = Tm · diag(β) V;  Wk = Tm · diag(β exp(G)) K.
  for (int64_t t = 0; t < n; t++) {
    for (int64_t j = 0; j < dv; j++) {
      float x = 0;
      for (int64_t u = 0; u <= t; u++) x += Tm[t * n + u] * (V[u * dv + j] * bc[u]);
      Unew[t * dv + j] = x;
    }
    for (int64_t i = 0; i < dk; i++) {
      float x = 0;
      for (int64_t u = 0; u <= t; u++) x += Tm[t * n + u] * Kbg[u * dk + i];
      Wk[t * dk + i] = x;
    }
  }
  // V' = Unew - Wk · S  (S = Mᵀ, so (Wk · S)[t][j] = Wk[t]·M[j]).
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < dv; j++) Vp[t * dv + j] = Unew[t * dv + j] - dot(Wk.data() + t * dk, M + j * dk, dk);
  // O = diag(exp(G)) Q · S + ((Q Kᵀ) ∘ Γ incl. diagonal) · V'.
  for (int64_t t = 0; t < n; t++)
    for (int64_t u = 0; u <= t; u++) Aqk[t * n + u] = dot(Q + t * dk, K + u * dk, dk) * std::exp(G[t] - G[u]);
  for (int64_t t = 0; t < n; t++) {
    const float eg = std::exp(G[t]);
    for (int64_t j = 0; j < dv; j++) {
      float x = dot(Q + t * dk, M + j * dk, dk) * eg;
      for (int64_t u = 0; u <= t; u++) x += Aqk[t * n + u] * Vp[u * dv + j];
      O[t * dv + j] = x;
    }
  }
  // S := exp(G_last) S + (diag(exp(G_last - G)) K)ᵀ V'   (M[j][i] = S[i][j]).
  const float e_last = std::exp(g_last);
  for (int64_t j = 0; j < dv; j++) {
    float* row = M + j * dk;
    for (int64_t i = 0; i < dk; i++) row[i] *= e_last;
    for (int64_t t = 0; t < n; t++) {
      const float vj = Vp[t * dv + j];
      for (int64_t i = 0; i < dk; i++) row[i] += Kd[t * dk + i] * vj;
    }
  }
}

}  // namespace

void gdn_chunked(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                 float* out) {
  const int64_t nk = p.n_k_heads, nv = p.n_v_heads, dk = p.d_k, dv = p.d_v, C = ops::kGdnChunk;
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const SeqRange r = seq_range(p, state, seq_starts, state_slots, s);
#pragma omp parallel for schedule(static) if ((r.t1 - r.t0) * nv * dk * dv >= kParallelWork)
    for (int64_t h = 0; h < nv; h++) {
      const int64_t kh = h % nk;
      float* M = r.state + h * dv * dk;
      std::vector<float> Q(C * dk), K(C * dk), V(C * dv), gc(C), bc(C), O(C * dv);
      for (int64_t c0 = r.t0; c0 < r.t1; c0 += C) {
        const int64_t n = std::min(C, r.t1 - c0);
        for (int64_t t = 0; t < n; t++) {  // gather the chunk's rows of this head
          const int64_t tt = c0 + t;
          for (int64_t i = 0; i < dk; i++) {
            Q[t * dk + i] = q[tt * p.q_stride + kh * dk + i] * p.scale;
            K[t * dk + i] = k[tt * p.k_stride + kh * dk + i];
          }
          for (int64_t j = 0; j < dv; j++) V[t * dv + j] = v[tt * p.v_stride + h * dv + j];
          gc[t] = g[tt * nv + h];
          bc[t] = beta[tt * nv + h];
        }
        gdn_chunk(n, dk, dv, Q.data(), K.data(), V.data(), gc.data(), bc.data(), M, O.data());
        for (int64_t t = 0; t < n; t++)
          for (int64_t j = 0; j < dv; j++) out[((c0 + t) * nv + h) * dv + j] = O[t * dv + j];
      }
    }
  }
}

}  // namespace ds::cpu
