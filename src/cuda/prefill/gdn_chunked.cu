// cuda::prefill::gdn_chunked: the chunked gated delta rule (qwen35-spec.md §4.6) as separate stages, each a
// __global__ function over (chunk, head) tiles, fp32 throughout. Every stage sums in the same order as
// cpu::gdn_chunked (src/cpu/gdn.cpp), so the two differ only by fused multiply-adds and expf rounding.
// Thread mappings (C = 64, D = dk = dv):
//   cumsum  one thread per (chunk, head), sequential sum over the chunk (coalesced across heads)
//   kkt     one block per (chunk, key head): K·Kᵀ and Q·Kᵀ once, then A and Aqk for each value head of the
//           group (nv/nk heads share one key head, §2.5); 256 threads, 4x4 entries each
//   solve   one block per (chunk, head), one thread per column of (I + A)⁻¹ (forward substitution; a column
//           depends only on itself, so no barriers)
//   wu      one block per (chunk, head); a warp owns 8 rows, a lane every 32nd column
//   recur   one block per (sequence, head, BV = 8/16/32 value columns, narrower when there are few heads): the
//           state slice S[:, j0..j0+BV) lives in shared memory across the sequence's chunks (columns of S evolve
//           independently); per chunk it writes S_c, V' = U - W S_c, then S = exp(G_last) S + (diag(exp(G_last - G)) K)ᵀ V'
//   output  one block per (chunk, head, 64 value columns): O = diag(exp(G)) Q S_c + Aqk V'
#include <algorithm>
#include <cmath>

#include "cuda/prefill/common.cuh"
#include "cuda/prefill/prefill.cuh"

namespace ds::cuda::prefill {
namespace {

constexpr int C = kGdnChunk;
static_assert(kGdnChunk == ops::kGdnChunk, "chunk size must match the CPU reference");
constexpr int kThreads = 256;
constexpr int kOutCols = 64;    // value columns per output block

struct Args {
  const float *q, *k, *v, *g, *beta;
  float* state;
  const int32_t* state_slots;
  float* out;
  int64_t q_stride, k_stride, v_stride;
  int nk, nv;
  float scale;
  const int4* tiles;
  const int32_t* seq_first;
  float *gcum, *a, *aqk, *w, *u, *hs;
};

__global__ void __launch_bounds__(64) cumsum_kernel(Args A) {
  const int c = blockIdx.x;
  const int4 tl = A.tiles[c];
  const int t0 = tl.y, n = tl.z;
  if (n == 0) return;
  for (int h = threadIdx.x; h < A.nv; h += blockDim.x) {
    float* G = A.gcum + ((size_t)c * A.nv + h) * C;
    float acc = 0.f;
    for (int tau = 0; tau < C; tau++) {
      if (tau < n) acc += A.g[(size_t)(t0 + tau) * A.nv + h];
      G[tau] = tau < n ? acc : 0.f;
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) kkt_kernel(Args A) {
  constexpr int P = D + 1;  // padded rows: column reads hit distinct banks
  extern __shared__ float sm[];
  float* Ks = sm;
  float* Qs = Ks + C * P;
  float* Gs = Qs + C * P;
  float* Bs = Gs + C;
  const int c = blockIdx.x, kh = blockIdx.y, tid = threadIdx.x;
  const int4 tl = A.tiles[c];
  const int t0 = tl.y, n = tl.z;
  if (n == 0) return;
  for (int idx = tid; idx < C * D; idx += kThreads) {
    const int tau = idx / D, i = idx % D;
    float kv = 0.f, qv = 0.f;
    if (tau < n) {
      const size_t t = (size_t)(t0 + tau);
      kv = A.k[t * A.k_stride + (size_t)kh * D + i];
      qv = A.q[t * A.q_stride + (size_t)kh * D + i] * A.scale;
    }
    Ks[tau * P + i] = kv;
    Qs[tau * P + i] = qv;
  }
  __syncthreads();
  const int ty = tid / 16, tx = tid % 16;  // rows ty + 16a, columns tx + 16b
  float kk[4][4], qk[4][4];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int b = 0; b < 4; b++) kk[a][b] = qk[a][b] = 0.f;
  for (int i = 0; i < D; i++) {
    float kr[4], qr[4], kc[4];
#pragma unroll
    for (int a = 0; a < 4; a++) {
      kr[a] = Ks[(ty + 16 * a) * P + i];
      qr[a] = Qs[(ty + 16 * a) * P + i];
      kc[a] = Ks[(tx + 16 * a) * P + i];
    }
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int b = 0; b < 4; b++) {
        kk[a][b] += kr[a] * kc[b];
        qk[a][b] += qr[a] * kc[b];
      }
  }
  for (int h = kh; h < A.nv; h += A.nk) {
    __syncthreads();  // the previous head's Gs, Bs are no longer read
    if (tid < C) {
      Gs[tid] = tid < n ? A.gcum[((size_t)c * A.nv + h) * C + tid] : 0.f;
      Bs[tid] = tid < n ? A.beta[(size_t)(t0 + tid) * A.nv + h] : 0.f;
    }
    __syncthreads();
    float* Ah = A.a + ((size_t)c * A.nv + h) * C * C;
    float* Qh = A.aqk + ((size_t)c * A.nv + h) * C * C;
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int b = 0; b < 4; b++) {
        const int tau = ty + 16 * a, sig = tx + 16 * b;
        float av = 0.f, qv = 0.f;
        if (tau < n && sig <= tau) {  // exp only where G_τ - G_σ <= 0 (no overflow on the masked side)
          const float decay = expf(Gs[tau] - Gs[sig]);
          if (sig < tau) av = (Bs[tau] * kk[a][b]) * decay;
          qv = qk[a][b] * decay;
        }
        Ah[tau * C + sig] = av;
        Qh[tau * C + sig] = qv;
      }
  }
}

__global__ void __launch_bounds__(C) solve_kernel(Args A) {
  __shared__ float Ns[C][C + 1];  // N = -A
  __shared__ float Xs[C][C + 1];  // X = Tm - I, column u written and read by thread u only
  const int c = blockIdx.x, h = blockIdx.y, u = threadIdx.x;
  const int n = A.tiles[c].z;
  if (n == 0) return;
  float* Ah = A.a + ((size_t)c * A.nv + h) * C * C;
  for (int r = 0; r < C; r++) Ns[r][u] = -Ah[r * C + u];
  __syncthreads();
  // Row t of X: X[t][u] = N[t][u] + sum_{u<m<t} N[t][m] X[m][u] (cpu::gdn_chunked's loop, same order).
  for (int t = u + 1; t < n; t++) {
    float x = Ns[t][u];
    for (int m = u + 1; m < t; m++) x += Ns[t][m] * Xs[m][u];
    Xs[t][u] = x;
  }
  for (int t = 0; t < C; t++) Ah[t * C + u] = (t < n && u <= t) ? (t == u ? 1.f : Xs[t][u]) : 0.f;
}

// out[τ][:] = sum_{u <= τ} Ts[τ][u] Bs[u][:] for the 8 rows of this warp; Ts is zero above the diagonal,
// so running u to the warp's last row adds exact zeros and keeps cpu's order u = 0..τ.
template <int D>
__device__ __forceinline__ void tri_product(const float* Ts, const float* Bs, float* out, int n) {
  constexpr int NB = D / 32;
  const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
  float acc[8][NB];
#pragma unroll
  for (int r = 0; r < 8; r++)
#pragma unroll
    for (int b = 0; b < NB; b++) acc[r][b] = 0.f;
  const int umax = wid * 8 + 8;
  for (int u = 0; u < umax; u++) {
    float bv[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) bv[b] = Bs[u * D + lane + 32 * b];
#pragma unroll
    for (int r = 0; r < 8; r++) {
      const float t = Ts[(wid * 8 + r) * C + u];
#pragma unroll
      for (int b = 0; b < NB; b++) acc[r][b] += t * bv[b];
    }
  }
#pragma unroll
  for (int r = 0; r < 8; r++) {
    const int tau = wid * 8 + r;
#pragma unroll
    for (int b = 0; b < NB; b++) out[tau * D + lane + 32 * b] = tau < n ? acc[r][b] : 0.f;
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) wu_kernel(Args A) {
  extern __shared__ float sm[];
  float* Ts = sm;
  float* Bs = Ts + C * C;
  float* Gs = Bs + C * D;
  float* Bt = Gs + C;
  const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int4 tl = A.tiles[c];
  const int t0 = tl.y, n = tl.z;
  if (n == 0) return;
  const int kh = h % A.nk;
  const size_t ch = (size_t)c * A.nv + h;
  for (int idx = tid; idx < C * C; idx += kThreads) Ts[idx] = A.a[ch * C * C + idx];
  if (tid < C) {
    Gs[tid] = tid < n ? A.gcum[ch * C + tid] : 0.f;
    Bt[tid] = tid < n ? A.beta[(size_t)(t0 + tid) * A.nv + h] : 0.f;
  }
  __syncthreads();
  for (int idx = tid; idx < C * D; idx += kThreads) {  // diag(β exp(G)) K
    const int tau = idx / D, i = idx % D;
    Bs[idx] = tau < n ? (A.k[(size_t)(t0 + tau) * A.k_stride + (size_t)kh * D + i] * Bt[tau]) * expf(Gs[tau]) : 0.f;
  }
  __syncthreads();
  tri_product<D>(Ts, Bs, A.w + ch * C * D, n);
  __syncthreads();
  for (int idx = tid; idx < C * D; idx += kThreads) {  // diag(β) V
    const int tau = idx / D, i = idx % D;
    Bs[idx] = tau < n ? A.v[(size_t)(t0 + tau) * A.v_stride + (size_t)h * D + i] * Bt[tau] : 0.f;
  }
  __syncthreads();
  tri_product<D>(Ts, Bs, A.u + ch * C * D, n);
}

// BV value columns per block; the block's 256 threads are BV columns x NRG = 256/BV row groups.
template <int D, int BV>
__global__ void __launch_bounds__(kThreads) recur_kernel(Args A) {
  constexpr int NRG = kThreads / BV;  // row groups
  constexpr int RA = C / NRG;         // rows of V' per thread
  constexpr int RB = D / NRG;         // rows of S per thread in the update
  constexpr int WP = D + 1;           // W rows padded: the row groups of one warp read different rows
  constexpr int SP = BV + 1;
  static_assert(RA >= 1 && RB >= 1, "column split too fine");
  extern __shared__ float sm[];
  float* Ws = sm;            // [C][WP]
  float* Kd = Ws + C * WP;   // [C][D]: diag(exp(G_last - G)) K
  float* Ss = Kd + C * D;    // [D][SP]: S[i][j0 + jj]
  float* Us = Ss + D * SP;   // [C][BV]: U, then V'
  float* Gs = Us + C * BV;
  const int s = blockIdx.x, h = blockIdx.y, j0 = blockIdx.z * BV, tid = threadIdx.x;
  const int col = tid % BV, rg = tid / BV;
  const int kh = h % A.nk;
  const int slot = A.state_slots ? A.state_slots[s] : s;
  float* M = A.state + ((size_t)slot * A.nv + h) * D * D;  // [dv][dk], M[j][i] = S[i][j]
  for (int idx = tid; idx < BV * D; idx += kThreads) {
    const int jj = idx / D, i = idx % D;
    Ss[i * SP + jj] = M[(size_t)(j0 + jj) * D + i];
  }
  const int c_begin = A.seq_first[s], c_end = A.seq_first[s + 1];
  __syncthreads();
  for (int c = c_begin; c < c_end; c++) {
    const int4 tl = A.tiles[c];
    const int t0 = tl.y, n = tl.z;
    const size_t ch = (size_t)c * A.nv + h;
    float* Hc = A.hs + ch * D * D;
    for (int idx = tid; idx < BV * D; idx += kThreads) {
      const int jj = idx / D, i = idx % D;
      Hc[(size_t)(j0 + jj) * D + i] = Ss[i * SP + jj];
    }
    if (tid < C) Gs[tid] = tid < n ? A.gcum[ch * C + tid] : 0.f;
    for (int idx = tid; idx < C * D; idx += kThreads) Ws[(idx / D) * WP + idx % D] = A.w[ch * C * D + idx];
    for (int idx = tid; idx < C * BV; idx += kThreads) {
      const int tau = idx / BV, jj = idx % BV;
      Us[idx] = A.u[ch * C * D + (size_t)tau * D + j0 + jj];
    }
    __syncthreads();
    const float g_last = Gs[n - 1];
    for (int idx = tid; idx < C * D; idx += kThreads) {
      const int tau = idx / D, i = idx % D;
      Kd[idx] = tau < n ? A.k[(size_t)(t0 + tau) * A.k_stride + (size_t)kh * D + i] * expf(g_last - Gs[tau]) : 0.f;
    }
    {  // V' = U - W S_c: rows rg*RA .. +RA, column col
      float acc[RA];
#pragma unroll
      for (int r = 0; r < RA; r++) acc[r] = 0.f;
      for (int i = 0; i < D; i++) {
        const float sv = Ss[i * SP + col];
#pragma unroll
        for (int r = 0; r < RA; r++) acc[r] += Ws[(rg * RA + r) * WP + i] * sv;
      }
#pragma unroll
      for (int r = 0; r < RA; r++) {
        const int tau = rg * RA + r;
        const float vp = tau < n ? Us[tau * BV + col] - acc[r] : 0.f;
        Us[tau * BV + col] = vp;
        if (tau < n) A.u[ch * C * D + (size_t)tau * D + j0 + col] = vp;
      }
    }
    __syncthreads();
    {  // S = exp(G_last) S + Kdᵀ V': rows rg*RB .. +RB, column col
      const float e_last = expf(g_last);
      float sv[RB];
#pragma unroll
      for (int a = 0; a < RB; a++) sv[a] = Ss[(rg * RB + a) * SP + col] * e_last;
      for (int tau = 0; tau < n; tau++) {
        const float vp = Us[tau * BV + col];
#pragma unroll
        for (int a = 0; a < RB; a++) sv[a] += Kd[tau * D + rg * RB + a] * vp;
      }
#pragma unroll
      for (int a = 0; a < RB; a++) Ss[(rg * RB + a) * SP + col] = sv[a];
    }
    __syncthreads();
  }
  for (int idx = tid; idx < BV * D; idx += kThreads) {
    const int jj = idx / D, i = idx % D;
    M[(size_t)(j0 + jj) * D + i] = Ss[i * SP + jj];
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) output_kernel(Args A) {
  constexpr int P = D + 1, BJ = kOutCols, AP = C + 1;
  extern __shared__ float sm[];
  float* Qs = sm;            // [C][P] scaled q
  float* Hs = Qs + C * P;    // [BJ][P] rows j0.. of M_c (= columns of S_c)
  float* As = Hs + BJ * P;   // [C][AP] Aqk
  float* Vs = As + C * AP;   // [C][BJ] V'
  float* Gs = Vs + C * BJ;
  const int c = blockIdx.x, h = blockIdx.y, j0 = blockIdx.z * BJ, tid = threadIdx.x;
  const int4 tl = A.tiles[c];
  const int t0 = tl.y, n = tl.z;
  if (n == 0) return;
  const int kh = h % A.nk;
  const size_t ch = (size_t)c * A.nv + h;
  for (int idx = tid; idx < C * D; idx += kThreads) {
    const int tau = idx / D, i = idx % D;
    Qs[tau * P + i] = tau < n ? A.q[(size_t)(t0 + tau) * A.q_stride + (size_t)kh * D + i] * A.scale : 0.f;
  }
  for (int idx = tid; idx < BJ * D; idx += kThreads) {
    const int jj = idx / D, i = idx % D;
    Hs[jj * P + i] = A.hs[ch * D * D + (size_t)(j0 + jj) * D + i];
  }
  for (int idx = tid; idx < C * C; idx += kThreads) As[(idx / C) * AP + idx % C] = A.aqk[ch * C * C + idx];
  for (int idx = tid; idx < C * BJ; idx += kThreads) {
    const int tau = idx / BJ, jj = idx % BJ;
    Vs[idx] = tau < n ? A.u[ch * C * D + (size_t)tau * D + j0 + jj] : 0.f;
  }
  if (tid < C) Gs[tid] = tid < n ? A.gcum[ch * C + tid] : 0.f;
  __syncthreads();
  const int ty = tid / 16, tx = tid % 16;  // rows ty*4 + a, columns tx + 16b
  float acc[4][4];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int b = 0; b < 4; b++) acc[a][b] = 0.f;
  for (int i = 0; i < D; i++) {
    float qv[4], hv[4];
#pragma unroll
    for (int a = 0; a < 4; a++) {
      qv[a] = Qs[(ty * 4 + a) * P + i];
      hv[a] = Hs[(tx + 16 * a) * P + i];
    }
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int b = 0; b < 4; b++) acc[a][b] += qv[a] * hv[b];
  }
#pragma unroll
  for (int a = 0; a < 4; a++) {
    const float eg = expf(Gs[ty * 4 + a]);
#pragma unroll
    for (int b = 0; b < 4; b++) acc[a][b] *= eg;
  }
  const int umax = ty * 4 + 4;  // Aqk is zero above the diagonal: exact zeros, cpu order u = 0..τ
  for (int u = 0; u < umax; u++) {
    float av[4], vv[4];
#pragma unroll
    for (int a = 0; a < 4; a++) {
      av[a] = As[(ty * 4 + a) * AP + u];
      vv[a] = Vs[u * BJ + tx + 16 * a];
    }
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int b = 0; b < 4; b++) acc[a][b] += av[a] * vv[b];
  }
#pragma unroll
  for (int a = 0; a < 4; a++) {
    const int tau = ty * 4 + a;
    if (tau >= n) continue;
    float* o = A.out + ((size_t)(t0 + tau) * A.nv + h) * D + j0;
#pragma unroll
    for (int b = 0; b < 4; b++) o[tx + 16 * b] = acc[a][b];
  }
}

template <int D> constexpr size_t kkt_smem() { return sizeof(float) * (2 * C * (D + 1) + 2 * C); }
template <int D> constexpr size_t wu_smem() { return sizeof(float) * (C * C + C * D + 2 * C); }
template <int D, int BV> constexpr size_t recur_smem() {
  return sizeof(float) * (C * (D + 1) + C * D + D * (BV + 1) + C * BV + C);
}
template <int D> constexpr size_t output_smem() {
  return sizeof(float) * (C * (D + 1) + kOutCols * (D + 1) + C * (C + 1) + C * kOutCols + C);
}

Args make_args(const GdnStages& S) {
  const auto& p = S.p;
  Args A{};
  A.q = S.q; A.k = S.k; A.v = S.v; A.g = S.g; A.beta = S.beta;
  A.state = S.state;
  A.state_slots = S.state_slots;
  A.out = S.out;
  A.q_stride = p.q_stride; A.k_stride = p.k_stride; A.v_stride = p.v_stride;
  A.nk = (int)p.n_k_heads; A.nv = (int)p.n_v_heads;
  A.scale = p.scale;
  A.tiles = reinterpret_cast<const int4*>(S.ws + S.L.tiles);
  A.seq_first = reinterpret_cast<const int32_t*>(S.ws + S.L.seq_first);
  A.gcum = reinterpret_cast<float*>(S.ws + S.L.gcum);
  A.a = reinterpret_cast<float*>(S.ws + S.L.a);
  A.aqk = reinterpret_cast<float*>(S.ws + S.L.aqk);
  A.w = reinterpret_cast<float*>(S.ws + S.L.w);
  A.u = reinterpret_cast<float*>(S.ws + S.L.u);
  A.hs = reinterpret_cast<float*>(S.ws + S.L.hs);
  return A;
}

template <int D>
Status launch_kkt(const GdnStages& S) {
  auto kern = kkt_kernel<D>;
  DS_TRY(allow_smem((const void*)kern, kkt_smem<D>()));
  kern<<<dim3((unsigned)S.L.max_chunks, (unsigned)S.p.n_k_heads), kThreads, kkt_smem<D>(), S.stream>>>(make_args(S));
  CUDA_TRY_LAUNCH("gdn_chunked kkt", S.stream);
  return {};
}

template <int D>
Status launch_wu(const GdnStages& S) {
  auto kern = wu_kernel<D>;
  DS_TRY(allow_smem((const void*)kern, wu_smem<D>()));
  kern<<<dim3((unsigned)S.L.max_chunks, (unsigned)S.p.n_v_heads), kThreads, wu_smem<D>(), S.stream>>>(make_args(S));
  CUDA_TRY_LAUNCH("gdn_chunked wu", S.stream);
  return {};
}

template <int D, int BV>
Status launch_recur_cols(const GdnStages& S) {
  auto kern = recur_kernel<D, BV>;
  DS_TRY(allow_smem((const void*)kern, recur_smem<D, BV>()));
  kern<<<dim3((unsigned)S.p.n_seqs, (unsigned)S.p.n_v_heads, D / BV), kThreads, recur_smem<D, BV>(), S.stream>>>(
      make_args(S));
  CUDA_TRY_LAUNCH("gdn_chunked recur", S.stream);
  return {};
}

// The recurrence is sequential over a sequence's chunks; its parallelism is sequences x heads x column
// slices. Narrower slices when that would leave multiprocessors idle (one block per SM runs at its latency).
int auto_recur_cols(const GdnStages& S) {
  int sms = 132;
  if (auto info = device_info(); info.ok()) sms = info->sm_count;
  const int64_t blocks32 = S.p.n_seqs * S.p.n_v_heads * (S.p.d_v / 32);
  if (blocks32 >= 2 * sms) return 32;
  if (2 * blocks32 >= sms) return 16;
  return 8;
}

template <int D>
Status launch_recur(const GdnStages& S) {
  const int bv = S.recur_cols ? S.recur_cols : auto_recur_cols(S);
  switch (bv) {
    case 8: return launch_recur_cols<D, 8>(S);
    case 16: return launch_recur_cols<D, 16>(S);
    case 32: return launch_recur_cols<D, 32>(S);
    default: return cu_err("cuda gdn_chunked: recur column split {}: need 8, 16 or 32", bv);
  }
}

template <int D>
Status launch_output(const GdnStages& S) {
  auto kern = output_kernel<D>;
  DS_TRY(allow_smem((const void*)kern, output_smem<D>()));
  kern<<<dim3((unsigned)S.L.max_chunks, (unsigned)S.p.n_v_heads, D / kOutCols), kThreads, output_smem<D>(),
         S.stream>>>(make_args(S));
  CUDA_TRY_LAUNCH("gdn_chunked output", S.stream);
  return {};
}

}  // namespace

GdnLayout GdnLayout::make(const ops::GdnParams& p) {
  GdnLayout L;
  L.n_seqs = std::max<int64_t>(p.n_seqs, 1);
  L.max_chunks = max_tiles(std::max<int64_t>(p.n_tokens, 0), L.n_seqs, C);
  L.nv = p.n_v_heads;
  L.dk = p.d_k;
  L.dv = p.d_v;
  const size_t nc = (size_t)L.max_chunks, nv = (size_t)std::max<int64_t>(L.nv, 0);
  const size_t dk = (size_t)std::max<int64_t>(L.dk, 0), dv = (size_t)std::max<int64_t>(L.dv, 0);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t o = off;
    off += align256(bytes);
    return o;
  };
  L.tiles = take(nc * sizeof(int4));
  L.seq_first = take(((size_t)L.n_seqs + 1) * sizeof(int32_t));
  L.gcum = take(nc * nv * C * sizeof(float));
  L.a = take(nc * nv * C * C * sizeof(float));
  L.aqk = take(nc * nv * C * C * sizeof(float));
  L.w = take(nc * nv * C * dk * sizeof(float));
  L.u = take(nc * nv * C * dv * sizeof(float));
  L.hs = take(nc * nv * dv * dk * sizeof(float));
  L.total = off;
  return L;
}

size_t gdn_chunked_workspace_bytes(const ops::GdnParams& p) { return GdnLayout::make(p).total; }

Status GdnStages::check() const {
  if (p.n_tokens < 0 || p.n_tokens > INT32_MAX || p.n_seqs < 1 || p.n_seqs > 65535)
    return cu_err("cuda gdn_chunked: {} tokens in {} sequences (need 0 <= tokens < 2^31, 1 <= sequences <= 65535)",
                  p.n_tokens, p.n_seqs);
  if (p.d_k != p.d_v || (p.d_k != 64 && p.d_k != 128))
    return cu_err("cuda gdn_chunked: head dims dk {} dv {}: need dk == dv, 64 or 128", p.d_k, p.d_v);
  if (p.n_k_heads < 1 || p.n_v_heads < 1 || p.n_v_heads % p.n_k_heads != 0 || p.n_v_heads > 65535)
    return cu_err("cuda gdn_chunked: {} key heads, {} value heads: need nv a multiple of nk", p.n_k_heads,
                  p.n_v_heads);
  if (p.q_stride < p.n_k_heads * p.d_k || p.k_stride < p.n_k_heads * p.d_k || p.v_stride < p.n_v_heads * p.d_v)
    return cu_err("cuda gdn_chunked: row strides q {} k {} v {} shorter than a row ({}, {})", p.q_stride, p.k_stride,
                  p.v_stride, p.n_k_heads * p.d_k, p.n_v_heads * p.d_v);
  if (!ws || (uintptr_t)ws % 16 != 0)
    return cu_err("cuda gdn_chunked: workspace {} missing or not 16-byte aligned", (const void*)ws);
  if (p.n_tokens > 0 && (!q || !k || !v || !g || !beta || !state || !out))
    return cu_err("cuda gdn_chunked: a data pointer is null");
  return {};
}

Status GdnStages::table() const {
  return launch_tile_table(seq_starts, p.n_seqs, p.n_tokens, C, L.max_chunks, reinterpret_cast<int4*>(ws + L.tiles),
                           reinterpret_cast<int32_t*>(ws + L.seq_first), stream);
}

Status GdnStages::cumsum() const {
  cumsum_kernel<<<(unsigned)L.max_chunks, 64, 0, stream>>>(make_args(*this));
  CUDA_TRY_LAUNCH("gdn_chunked cumsum", stream);
  return {};
}

Status GdnStages::kkt() const { return p.d_k == 64 ? launch_kkt<64>(*this) : launch_kkt<128>(*this); }

Status GdnStages::solve() const {
  solve_kernel<<<dim3((unsigned)L.max_chunks, (unsigned)p.n_v_heads), C, 0, stream>>>(make_args(*this));
  CUDA_TRY_LAUNCH("gdn_chunked solve", stream);
  return {};
}

Status GdnStages::wu() const { return p.d_k == 64 ? launch_wu<64>(*this) : launch_wu<128>(*this); }

Status GdnStages::recur() const { return p.d_k == 64 ? launch_recur<64>(*this) : launch_recur<128>(*this); }

Status GdnStages::output() const { return p.d_k == 64 ? launch_output<64>(*this) : launch_output<128>(*this); }

Status gdn_chunked(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                   const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                   float* out, void* workspace, size_t workspace_bytes, cudaStream_t stream, Mode mode) {
  (void)mode;  // both modes run the fp32 stages (see prefill.cuh)
  GdnStages S{p, q, k, v, g, beta, state, seq_starts, state_slots, out, static_cast<uint8_t*>(workspace),
              GdnLayout::make(p), stream};
  DS_TRY(S.check());
  if (workspace_bytes < S.L.total)
    return cu_err("cuda gdn_chunked: workspace of {} bytes, need {}", workspace_bytes, S.L.total);
  if (p.n_tokens == 0) return {};
  DS_TRY(S.table());
  DS_TRY(S.cumsum());
  DS_TRY(S.kkt());
  DS_TRY(S.solve());
  DS_TRY(S.wu());
  DS_TRY(S.recur());
  DS_TRY(S.output());
  return {};
}

}  // namespace ds::cuda::prefill
