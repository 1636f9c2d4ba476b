// The vector building blocks of simd.h written once over a vector type V; included (inside an anonymous
// namespace, after V is defined, within a `#pragma GCC target` region) by simd_avx512.cpp and
// simd_avx2.cpp. V provides: R (register type), W (floats per register), kNG/kNV (register blocking of
// the row-times-matrix kernel), kMr (tokens per GEMM micro-kernel call), zero, set1, load, store (both
// unaligned), fma(a, b, c) = a*b + c, mul, add, sub, min, max, sum (horizontal), round (to nearest) and
// scale2(p, n) = p * 2^n.
// Not a normal header: no include guard on purpose.

// ---- exp ----------------------------------------------------------------------------------------
// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), exp(r) by its degree-7
// Taylor polynomial (|r| <= ln2/2: truncation error below 1e-8 relative). Inputs below -86 give
// exp(-86) ~ 4e-38 on AVX2 (where scale2 cannot build denormals), 0-ish on AVX-512.
inline V::R vexp(V::R x) {
  x = V::max(V::min(x, V::set1(88.3f)), V::set1(V::kExpMin));
  const V::R n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  V::R r = V::fma(n, V::set1(-0.693359375f), x);
  r = V::fma(n, V::set1(2.12194440e-4f), r);
  V::R p = V::set1(1.0f / 5040);
  p = V::fma(p, r, V::set1(1.0f / 720));
  p = V::fma(p, r, V::set1(1.0f / 120));
  p = V::fma(p, r, V::set1(1.0f / 24));
  p = V::fma(p, r, V::set1(1.0f / 6));
  p = V::fma(p, r, V::set1(0.5f));
  p = V::fma(p, r, V::set1(1.0f));
  p = V::fma(p, r, V::set1(1.0f));
  return V::scale2(p, n);
}

void exp_rows(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(y + i, vexp(V::load(x + i)));
  if (i < n) {
    alignas(64) float buf[V::W] = {};
    for (int64_t j = i; j < n; j++) buf[j - i] = x[j];
    V::store(buf, vexp(V::load(buf)));
    for (int64_t j = i; j < n; j++) y[j] = buf[j - i];
  }
}

float exp_sum(const float* x, int64_t n, float sub, float* y) {
  const V::R vs = V::set1(sub);
  V::R acc = V::zero();
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) {
    const V::R e = vexp(V::sub(V::load(x + i), vs));
    V::store(y + i, e);
    acc = V::add(acc, e);
  }
  float s = V::sum(acc);
  if (i < n) {
    alignas(64) float buf[V::W];
    for (int64_t j = i; j < n; j++) buf[j - i] = x[j] - sub;
    for (int64_t j = n; j < i + V::W; j++) buf[j - i] = 0.0f;
    V::store(buf, vexp(V::load(buf)));
    for (int64_t j = i; j < n; j++) s += y[j] = buf[j - i];
  }
  return s;
}

float dot(const float* a, const float* b, int64_t n) {
  V::R s0 = V::zero(), s1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * V::W <= n; i += 2 * V::W) {
    s0 = V::fma(V::load(a + i), V::load(b + i), s0);
    s1 = V::fma(V::load(a + i + V::W), V::load(b + i + V::W), s1);
  }
  for (; i + V::W <= n; i += V::W) s0 = V::fma(V::load(a + i), V::load(b + i), s0);
  float s = V::sum(V::add(s0, s1));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

void scale(float a, const float* x, int64_t n, float* y) {
  const V::R va = V::set1(a);
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(y + i, V::mul(va, V::load(x + i)));
  for (; i < n; i++) y[i] = a * x[i];
}

// ---- rows times a matrix -----------------------------------------------------------------------
// C[r][0..NV*W) = init[r] + sum_{u < ku} A[r][u] * B[u][..] for NG rows at once: NG*NV accumulators, B
// loaded once per u for all rows.
template <int NG, int NV>
inline void rxm_block(const float* A, int64_t lda, int64_t ku, const float* B, int64_t ldb, const float* init,
                      int64_t ldi, float* C, int64_t ldc) {
  V::R acc[NG][NV];
#pragma GCC unroll 8
  for (int g = 0; g < NG; g++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[g][v] = init ? V::load(init + g * ldi + v * V::W) : V::zero();
  for (int64_t u = 0; u < ku; u++) {
    const float* b = B + u * ldb;
    V::R bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) bv[v] = V::load(b + v * V::W);
#pragma GCC unroll 8
    for (int g = 0; g < NG; g++) {
      const V::R a = V::set1(A[g * lda + u]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) acc[g][v] = V::fma(a, bv[v], acc[g][v]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < NG; g++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) V::store(C + g * ldc + v * V::W, acc[g][v]);
}

template <int NG>
void rxm_rows(const float* A, int64_t lda, int64_t ku, const float* B, int64_t ldb, int64_t n, const float* init,
              int64_t ldi, float* C, int64_t ldc) {
  int64_t j = 0;
  for (; j + V::kNV * V::W <= n; j += V::kNV * V::W)
    rxm_block<NG, V::kNV>(A, lda, ku, B + j, ldb, init ? init + j : nullptr, ldi, C + j, ldc);
  for (; j + V::W <= n; j += V::W) rxm_block<NG, 1>(A, lda, ku, B + j, ldb, init ? init + j : nullptr, ldi, C + j, ldc);
  for (; j < n; j++)  // columns past the last full vector
    for (int g = 0; g < NG; g++) {
      float s = init ? init[g * ldi + j] : 0.0f;
      for (int64_t u = 0; u < ku; u++) s += A[g * lda + u] * B[u * ldb + j];
      C[g * ldc + j] = s;
    }
}

// The general form: rows [0, rows) of C; when `lower`, row r only needs A[r][0..r] (A is lower
// triangular), so a block of rows stops at its last row's diagonal.
void rows_times_matrix(const float* A, int64_t lda, int64_t rows, int64_t ku, bool lower, const float* B, int64_t ldb,
                       int64_t n, const float* init, int64_t ldi, float* C, int64_t ldc) {
  int64_t r = 0;
  for (; r + V::kNG <= rows; r += V::kNG) {
    const int64_t k = lower ? std::min(ku, r + V::kNG) : ku;
    rxm_rows<V::kNG>(A + r * lda, lda, k, B, ldb, n, init ? init + r * ldi : nullptr, ldi, C + r * ldc, ldc);
  }
  for (; r < rows; r++) {
    const int64_t k = lower ? std::min(ku, r + 1) : ku;
    rxm_rows<1>(A + r * lda, lda, k, B, ldb, n, init ? init + r * ldi : nullptr, ldi, C + r * ldc, ldc);
  }
}

void row_times_matrix(const float* a, int64_t ku, const float* B, int64_t ldb, int64_t n, const float* init, float* c) {
  rxm_rows<1>(a, 0, ku, B, ldb, n, init, 0, c, 0);
}

// ---- recurrent delta rule, one token of one head ------------------------------------------------
void gdn_step(float* M, int64_t dv, int64_t dk, float decay, float beta, const float* k, const float* qs,
              const float* v, float* out) {
  const V::R vd = V::set1(decay);
  const int64_t dkv = dk - dk % V::W;
  for (int64_t j = 0; j < dv; j++) {
    float* row = M + j * dk;
    V::R a0 = V::zero(), a1 = V::zero();
    int64_t i = 0;
    for (; i + 2 * V::W <= dkv; i += 2 * V::W) {
      const V::R r0 = V::mul(V::load(row + i), vd), r1 = V::mul(V::load(row + i + V::W), vd);
      V::store(row + i, r0);
      V::store(row + i + V::W, r1);
      a0 = V::fma(r0, V::load(k + i), a0);
      a1 = V::fma(r1, V::load(k + i + V::W), a1);
    }
    for (; i < dkv; i += V::W) {
      const V::R r0 = V::mul(V::load(row + i), vd);
      V::store(row + i, r0);
      a0 = V::fma(r0, V::load(k + i), a0);
    }
    float kv = V::sum(V::add(a0, a1));
    for (; i < dk; i++) kv += (row[i] *= decay) * k[i];
    const float delta = (v[j] - kv) * beta;
    const V::R vdl = V::set1(delta);
    a0 = a1 = V::zero();
    for (i = 0; i + 2 * V::W <= dkv; i += 2 * V::W) {
      const V::R r0 = V::fma(vdl, V::load(k + i), V::load(row + i));
      const V::R r1 = V::fma(vdl, V::load(k + i + V::W), V::load(row + i + V::W));
      V::store(row + i, r0);
      V::store(row + i + V::W, r1);
      a0 = V::fma(r0, V::load(qs + i), a0);
      a1 = V::fma(r1, V::load(qs + i + V::W), a1);
    }
    for (; i < dkv; i += V::W) {
      const V::R r0 = V::fma(vdl, V::load(k + i), V::load(row + i));
      V::store(row + i, r0);
      a0 = V::fma(r0, V::load(qs + i), a0);
    }
    float o = V::sum(V::add(a0, a1));
    for (; i < dk; i++) o += (row[i] += delta * k[i]) * qs[i];
    out[j] = o;
  }
}

// ---- attention ------------------------------------------------------------------------------------
template <int NG>
void scores_block(const float* q, int64_t hd, const float* K, int64_t ld, int64_t n_keys, float sc, float* s,
                  int64_t lds) {
  const int64_t hv = hd - hd % V::W;
  for (int64_t j = 0; j < n_keys; j++) {
    const float* kr = K + j * ld;
    V::R acc[NG];
#pragma GCC unroll 8
    for (int g = 0; g < NG; g++) acc[g] = V::zero();
    for (int64_t i = 0; i < hv; i += V::W) {
      const V::R kv = V::load(kr + i);
#pragma GCC unroll 8
      for (int g = 0; g < NG; g++) acc[g] = V::fma(V::load(q + g * hd + i), kv, acc[g]);
    }
#pragma GCC unroll 8
    for (int g = 0; g < NG; g++) {
      float d = V::sum(acc[g]);
      for (int64_t i = hv; i < hd; i++) d += q[g * hd + i] * kr[i];
      s[g * lds + j] = d * sc;
    }
  }
}

void attn_scores(const float* q, int64_t G, int64_t hd, const float* K, int64_t ld, int64_t n_keys, float sc,
                 float* s) {
  int64_t g = 0;
  for (; g + 4 <= G; g += 4) scores_block<4>(q + g * hd, hd, K, ld, n_keys, sc, s + g * n_keys, n_keys);
  for (; g < G; g++) scores_block<1>(q + g * hd, hd, K, ld, n_keys, sc, s + g * n_keys, n_keys);
}

void attn_values(const float* p, int64_t G, int64_t n_keys, const float* Vm, int64_t ld, int64_t hd, float* o) {
  rows_times_matrix(p, n_keys, G, n_keys, false, Vm, ld, hd, nullptr, 0, o, hd);
}

// ---- prefill GEMM micro-kernel ----------------------------------------------------------------------
// y[m][0..nr) = sum_k x[m][k] * panel[k][0..2W): M*2 accumulators; the panel row is loaded once per k.
template <int M>
void gemm_f32(int64_t K, const float* pw, const float* x, int64_t ldx, float* y, int64_t ldy, int nr) {
  V::R c0[M], c1[M];
#pragma GCC unroll 16
  for (int m = 0; m < M; m++) c0[m] = c1[m] = V::zero();
  for (int64_t k = 0; k < K; k++, pw += 2 * V::W) {
    const V::R w0 = V::load(pw), w1 = V::load(pw + V::W);
#pragma GCC unroll 16
    for (int m = 0; m < M; m++) {
      const V::R b = V::set1(x[m * ldx + k]);
      c0[m] = V::fma(w0, b, c0[m]);
      c1[m] = V::fma(w1, b, c1[m]);
    }
  }
  for (int m = 0; m < M; m++) {
    if (nr == 2 * V::W) {
      V::store(y + m * ldy, c0[m]);
      V::store(y + m * ldy + V::W, c1[m]);
    } else {
      alignas(64) float buf[2 * V::W];
      V::store(buf, c0[m]);
      V::store(buf + V::W, c1[m]);
      for (int n = 0; n < nr; n++) y[m * ldy + n] = buf[n];
    }
  }
}

// ---- GEMM panel packing ---------------------------------------------------------------------------
// panel[k][n] = rows[n][k] for n < nr, 0 for nr <= n < 2W (the fp32 GEMM's panel width): W x W tiles
// transposed in registers, one full-vector store per panel row and half.
void pack_panel(const float* rows, int64_t ld, int nr, int64_t K, float* panel) {
  constexpr int W = V::W, NR = 2 * V::W;
  int64_t k = 0;
  for (; k + W <= K; k += W)
    for (int h = 0; h < 2; h++) {
      V::R t[W];
#pragma GCC unroll 16
      for (int i = 0; i < W; i++) t[i] = h * W + i < nr ? V::load(rows + (h * W + i) * ld + k) : V::zero();
      V::transpose(t);
#pragma GCC unroll 16
      for (int i = 0; i < W; i++) V::store(panel + (k + i) * NR + h * W, t[i]);
    }
  for (; k < K; k++)
    for (int n = 0; n < NR; n++) panel[k * NR + n] = n < nr ? rows[n * ld + k] : 0.0f;
}
