// gdn_chunked_fast and gdn_recurrent_fast (fast.h): the gated delta rule of ops/gdn.h, computed as in
// gdn.cpp but with every within-chunk product written as "rows times a matrix" (simd.h), whose
// register-blocked kernel loads each row of the right-hand matrix once for several left-hand rows.
// Per (sequence, value head) the state is transposed once to S = M^T [dk][dv] so that all products
// take contiguous rows; a chunk shorter than C is zero-padded (beta = 0, g = 0), which leaves the state
// and the real rows unchanged (the padded rows add exact zeros). Heads run in parallel.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast.h"
#include "cpu/simd.h"

namespace ds::cpu {
namespace {

constexpr int64_t kParallelWork = int64_t(1) << 16;  // as gdn.cpp
constexpr int64_t C = ops::kGdnChunk;

struct SeqRange {
  int64_t t0, t1;
  float* state;
};

SeqRange seq_range(const ops::GdnParams& p, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                   int64_t s) {
  return {seq_starts ? seq_starts[s] : 0, seq_starts ? seq_starts[s + 1] : p.n_tokens,
          state + (state_slots ? state_slots[s] : s) * p.state_floats()};
}

void transpose(const float* a, int64_t rows, int64_t cols, float* b) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) b[c * rows + r] = a[r * cols + c];
}

// Per-thread working set of one head's chunk (about 12 * C * 128 floats), kept between calls.
struct ChunkBuf {
  std::vector<float> S, Q, K, V, gc, bc, G, eg, ed, d, KT, Kbgn, BV, Qg, KK, N, Tm, Unew, Wkn, Vp, Aqk, O;
  void size(int64_t dk, int64_t dv) {
    for (auto* v : {&Q, &K, &Kbgn, &Qg, &Wkn, &KT}) v->resize(C * dk);
    for (auto* v : {&V, &BV, &Unew, &Vp, &O}) v->resize(C * dv);
    for (auto* v : {&gc, &bc, &G, &eg, &ed, &d}) v->resize(C);
    for (auto* v : {&KK, &N, &Tm, &Aqk}) v->resize(C * C);
    S.resize(dk * dv);
  }
};

// row[u] *= mult * exp(G[t] - G[u]) for u < lim, 0 for lim <= u < C.
void gate_row(const VecOps& o, const float* G, int64_t t, int64_t lim, float mult, float* d, float* row) {
  for (int64_t u = 0; u < lim; u++) d[u] = G[t] - G[u];
  o.exp(d, lim, d);
  for (int64_t u = 0; u < lim; u++) row[u] *= mult * d[u];
  for (int64_t u = lim; u < C; u++) row[u] = 0.0f;
}

// One chunk (§4.6) of one head: b.Q (scaled), b.K [C][dk], b.V [C][dv], b.gc, b.bc filled and padded;
// b.S [dk][dv] in/out; b.O [C][dv] out. Names follow gdn.cpp's gdn_chunk.
void chunk(const VecOps& o, int64_t dk, int64_t dv, ChunkBuf& b) {
  const auto rxm = o.rows_times_matrix;
  float acc = 0;
  for (int64_t t = 0; t < C; t++) b.G[t] = acc += b.gc[t];
  const float g_last = b.G[C - 1];
  for (int64_t t = 0; t < C; t++) b.ed[t] = g_last - b.G[t];
  o.exp(b.G.data(), C, b.eg.data());
  o.exp(b.ed.data(), C, b.ed.data());
  transpose(b.K.data(), C, dk, b.KT.data());
  for (int64_t t = 0; t < C; t++) {
    o.scale(-b.bc[t] * b.eg[t], &b.K[t * dk], dk, &b.Kbgn[t * dk]);  // -diag(β exp(G)) K
    o.scale(b.bc[t], &b.V[t * dv], dv, &b.BV[t * dv]);               // diag(β) V
    o.scale(b.eg[t], &b.Q[t * dk], dk, &b.Qg[t * dk]);               // diag(exp(G)) Q
  }
  // N = -strictly_lower((diag(β) K Kᵀ) ∘ Γ); Tm = (I - N)^-1 row by row: Tm[t] = N[t][0..t) · Tm[0..t), Tm[t][t] = 1.
  rxm(b.K.data(), dk, C, dk, false, b.KT.data(), C, C, nullptr, 0, b.KK.data(), C);
  for (int64_t t = 0; t < C; t++) {
    float* row = &b.N[t * C];
    std::copy(&b.KK[t * C], &b.KK[t * C] + C, row);
    gate_row(o, b.G.data(), t, t, -b.bc[t], b.d.data(), row);
  }
  std::fill(b.Tm.begin(), b.Tm.end(), 0.0f);
  for (int64_t t = 0; t < C; t++) {
    if (t > 0) o.row_times_matrix(&b.N[t * C], t, b.Tm.data(), C, t, nullptr, &b.Tm[t * C]);
    b.Tm[t * C + t] = 1.0f;
  }
  // Unew = Tm diag(β) V;  -Wk = Tm (-diag(β exp(G)) K);  V' = Unew - Wk S.
  rxm(b.Tm.data(), C, C, C, true, b.BV.data(), dv, dv, nullptr, 0, b.Unew.data(), dv);
  rxm(b.Tm.data(), C, C, C, true, b.Kbgn.data(), dk, dk, nullptr, 0, b.Wkn.data(), dk);
  rxm(b.Wkn.data(), dk, C, dk, false, b.S.data(), dv, dv, b.Unew.data(), dv, b.Vp.data(), dv);
  // O = diag(exp(G)) Q S + ((Q Kᵀ) ∘ Γ incl. diagonal) V'.
  rxm(b.Q.data(), dk, C, dk, false, b.KT.data(), C, C, nullptr, 0, b.Aqk.data(), C);
  for (int64_t t = 0; t < C; t++) gate_row(o, b.G.data(), t, t + 1, 1.0f, b.d.data(), &b.Aqk[t * C]);
  rxm(b.Qg.data(), dk, C, dk, false, b.S.data(), dv, dv, nullptr, 0, b.O.data(), dv);
  rxm(b.Aqk.data(), C, C, C, true, b.Vp.data(), dv, dv, b.O.data(), dv, b.O.data(), dv);
  // S := exp(G_last) S + (diag(exp(G_last - G)) K)ᵀ V'  (KT's columns scaled in place: K is not needed again).
  for (int64_t i = 0; i < dk; i++)
    for (int64_t t = 0; t < C; t++) b.KT[i * C + t] *= b.ed[t];
  o.scale(std::exp(g_last), b.S.data(), dk * dv, b.S.data());
  rxm(b.KT.data(), C, dk, C, false, b.Vp.data(), dv, dv, b.S.data(), dv, b.S.data(), dv);
}

}  // namespace

void gdn_chunked_fast(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                      float* out) {
  const VecOps* ops = vec_ops();
  if (!ops) return gdn_chunked(p, q, k, v, g, beta, state, seq_starts, state_slots, out);
  const int64_t nk = p.n_k_heads, nv = p.n_v_heads, dk = p.d_k, dv = p.d_v;
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const SeqRange r = seq_range(p, state, seq_starts, state_slots, s);
#pragma omp parallel for schedule(dynamic) if ((r.t1 - r.t0) * nv * dk * dv >= kParallelWork)
    for (int64_t h = 0; h < nv; h++) {
      thread_local ChunkBuf b;
      b.size(dk, dv);
      const int64_t kh = h % nk;  // GGUF tiled V-head order (§2.5)
      float* M = r.state + h * dv * dk;
      transpose(M, dv, dk, b.S.data());
      for (int64_t c0 = r.t0; c0 < r.t1; c0 += C) {
        const int64_t n = std::min(C, r.t1 - c0);
        for (int64_t t = 0; t < C; t++) {  // gather this head's rows of the chunk, zero past the end
          const int64_t tt = c0 + t;
          float* Qt = &b.Q[t * dk];
          float* Kt = &b.K[t * dk];
          float* Vt = &b.V[t * dv];
          if (t >= n) {
            std::fill(Qt, Qt + dk, 0.0f);
            std::fill(Kt, Kt + dk, 0.0f);
            std::fill(Vt, Vt + dv, 0.0f);
            b.gc[t] = b.bc[t] = 0.0f;
            continue;
          }
          ops->scale(p.scale, q + tt * p.q_stride + kh * dk, dk, Qt);
          std::copy(k + tt * p.k_stride + kh * dk, k + tt * p.k_stride + kh * dk + dk, Kt);
          std::copy(v + tt * p.v_stride + h * dv, v + tt * p.v_stride + h * dv + dv, Vt);
          b.gc[t] = g[tt * nv + h];
          b.bc[t] = beta[tt * nv + h];
        }
        chunk(*ops, dk, dv, b);
        for (int64_t t = 0; t < n; t++) std::copy(&b.O[t * dv], &b.O[t * dv] + dv, out + ((c0 + t) * nv + h) * dv);
      }
      transpose(b.S.data(), dk, dv, M);
    }
  }
}

void gdn_recurrent_fast(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                        const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                        float* out) {
  const VecOps* ops = vec_ops();
  if (!ops) return gdn_recurrent(p, q, k, v, g, beta, state, seq_starts, state_slots, out);
  const int64_t nk = p.n_k_heads, nv = p.n_v_heads, dk = p.d_k, dv = p.d_v;
  for (int64_t s = 0; s < p.n_seqs; s++) {
    const SeqRange r = seq_range(p, state, seq_starts, state_slots, s);
#pragma omp parallel for schedule(static) if ((r.t1 - r.t0) * nv * dk * dv >= kParallelWork)
    for (int64_t h = 0; h < nv; h++) {
      thread_local std::vector<float> qs;
      qs.resize(dk);
      const int64_t kh = h % nk;
      float* M = r.state + h * dv * dk;  // [dv][dk] = S^T
      for (int64_t t = r.t0; t < r.t1; t++) {
        ops->scale(p.scale, q + t * p.q_stride + kh * dk, dk, qs.data());
        ops->gdn_step(M, dv, dk, std::exp(g[t * nv + h]), beta[t * nv + h], k + t * p.k_stride + kh * dk, qs.data(),
                      v + t * p.v_stride + h * dv, out + (t * nv + h) * dv);
      }
    }
  }
}

}  // namespace ds::cpu
