// Vector building blocks of the fast CPU paths (internal to src/cpu), one table per instruction set:
// simd_avx512.cpp and simd_avx2.cpp compile the same templates (simd_impl.h) for their vector width.
// vec_ops() returns the table isa() selects, or nullptr on CPUs without AVX2 (callers then run the
// references). All sums are fp32; exp is a vectorized expf accurate to about 2 ulp.
#pragma once
#include <cstdint>

namespace ds::cpu {

struct VecOps {
  int width;  // floats per vector register (16 or 8)

  // c[0..n) = init[0..n) (or 0 when init is null; init may alias c) + sum_{u < ku} a[u] * B[u * ldb + 0..n).
  void (*row_times_matrix)(const float* a, int64_t ku, const float* B, int64_t ldb, int64_t n, const float* init,
                           float* c);
  // y[i] = exp(x[i]) (y may alias x).
  void (*exp)(const float* x, int64_t n, float* y);
  // y[i] = exp(x[i] - sub), returns the sum of the y[i] (softmax; y may alias x).
  float (*exp_sum)(const float* x, int64_t n, float sub, float* y);
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] = a * x[i] (y may alias x)
  void (*scale)(float a, const float* x, int64_t n, float* y);

  // One token of the recurrent delta rule on one head (ops/gdn.h): M [dv][dk] in place, qs = q * scale.
  void (*gdn_step)(float* M, int64_t dv, int64_t dk, float decay, float beta, const float* k, const float* qs,
                   const float* v, float* out);

  // Attention for G query heads sharing one KV head: s[g * n_keys + j] = scale * q[g*hd..]·K[j*ld..];
  // and o[g*hd..] = sum_j p[g * n_keys + j] * V[j*ld..] (o overwritten).
  void (*attn_scores)(const float* q, int64_t G, int64_t hd, const float* K, int64_t ld, int64_t n_keys, float scale,
                      float* s);
  void (*attn_values)(const float* p, int64_t G, int64_t n_keys, const float* V, int64_t ld, int64_t hd, float* o);

  // Prefill GEMM micro-kernels (gemm.cpp): panel [K][nr_panel] fp32, or [K/2][nr_panel][2] bf16 (nullptr
  // without AVX-512 BF16). y[m * ldy + n] = sum_k panel[k][n] * x[m * ldx + k], m < M (index M-1), n < nr.
  int gemm_nr, gemm_mr;
  void (*const* gemm_f32)(int64_t K, const float* panel, const float* x, int64_t ldx, float* y, int64_t ldy, int nr);
  void (*const* gemm_bf16)(int64_t K, const uint16_t* panel, const uint16_t* x, int64_t ldx, float* y, int64_t ldy,
                           int nr);
  // n floats -> bf16 (round to nearest even); nullptr without AVX-512 BF16.
  void (*to_bf16)(const float* x, int64_t n, uint16_t* y);

  // C[r][0..n) = init[r] + sum_{u < ku} A[r][u] * B[u][0..n) for r < rows (row strides lda, ldi, ldc, ldb;
  // init may be null or alias C). lower: A is lower triangular (row r uses A[r][0..r] only).
  void (*rows_times_matrix)(const float* A, int64_t lda, int64_t rows, int64_t ku, bool lower, const float* B,
                            int64_t ldb, int64_t n, const float* init, int64_t ldi, float* C, int64_t ldc);

  // The GEMM panel from nr <= gemm_nr rows of K floats (row stride ld): panel[k][n] = rows[n][k], rows
  // nr .. gemm_nr - 1 zero. Register transposes of width x width tiles.
  void (*pack_panel)(const float* rows, int64_t ld, int nr, int64_t K, float* panel);
};

const VecOps* vec_ops();

// The tables (nullptr when not compiled for this platform).
const VecOps* vec_ops_avx512();
const VecOps* vec_ops_avx2();

}  // namespace ds::cpu
